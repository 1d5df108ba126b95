// Replay driver of the dataset-structure fuzz target (dataset_structure.cpp): checks its
// property over input files (the seed corpus, a crash file libFuzzer saved) and over
// deterministic pseudo-random inputs, so that every build checks it, with or without clang's
// libFuzzer. Also the tool for the corpus itself.
//
//   fuzz_dataset_structure_replay [--random N] [PATH...]  check files and directories of
//       inputs (an input named valid-* must be accepted, refused-* refused), every single
//       operation appended to each of them, then N pseudo-random inputs
//   fuzz_dataset_structure_replay --write-seeds DIR        write the seed corpus
//   fuzz_dataset_structure_replay --seed-from DATASET.h5 OUT   an input describing a real file
//   fuzz_dataset_structure_replay --describe INPUT [IMAGE.h5]  the file an input decodes to,
//       in words, and written out as HDF5 to look at with h5dump
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/fuzz/dataset_structure.hpp"

namespace fs = std::filesystem;
using gridlm::fuzz::Bytes;

namespace {

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, const void* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// SplitMix64: the same inputs on every machine and every run.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return std::size_t(next() % n); }
};

struct Tally {
  long accepted = 0, refused = 0;
};

// A quarter of the inputs are random bytes; the rest are seeds with two to five changes, most
// of them whole operations, some random bytes appended, a byte flipped or the input cut.
Bytes generated(Random& rng, const std::vector<Bytes>& seeds, const std::vector<Bytes>& ops,
                int i) {
  Bytes in;
  if (i % 4 == 0 || seeds.empty()) {
    in.resize(rng.below(160));
    for (auto& b : in)
      b = std::uint8_t(rng.next());
    return in;
  }
  in = seeds[rng.below(seeds.size())];
  for (std::size_t k = 0, n = 2 + rng.below(4); k < n; ++k) {
    switch (rng.below(8)) {
    case 0:
      if (!in.empty()) in[rng.below(in.size())] ^= std::uint8_t(1 + rng.below(255));
      break;
    case 1:
      if (!in.empty()) in.resize(rng.below(in.size()));
      break;
    case 2:
      for (std::size_t j = 0, m = 1 + rng.below(12); j < m; ++j)
        in.push_back(std::uint8_t(rng.next()));
      break;
    default: {
      const Bytes& op = ops[rng.below(ops.size())];
      in.insert(in.end(), op.begin(), op.end());
    }
    }
  }
  return in;
}

int check_all(const std::vector<std::string>& paths, int random) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Bytes> seeds;
  Tally given, stepped, made;
  for (const fs::path& f : files) {
    const Bytes in = read_file(f);
    const auto out = gridlm::fuzz::check_dataset_structure(in.data(), in.size());
    ++(out.accepted ? given.accepted : given.refused);
    const std::string name = f.filename().string();
    const bool want_accept = name.rfind("valid-", 0) == 0;
    const bool want_refuse = name.rfind("refused-", 0) == 0;
    if ((want_accept && !out.accepted) || (want_refuse && out.accepted)) {
      std::cerr << f << ": " << (out.accepted ? "accepted" : "refused: " + out.error)
                << ", where its name says otherwise\n";
      return 1;
    }
    seeds.push_back(in);
  }
  // Every file one step from a seed: a reader that skipped one check accepts one of them.
  const std::vector<Bytes> ops = gridlm::fuzz::single_operations();
  for (const Bytes& seed : seeds) {
    for (const Bytes& op : ops) {
      Bytes in = seed;
      in.insert(in.end(), op.begin(), op.end());
      const auto out = gridlm::fuzz::check_dataset_structure(in.data(), in.size());
      ++(out.accepted ? stepped.accepted : stepped.refused);
    }
  }
  Random rng{20240601};
  for (int i = 0; i < random; ++i) {
    const Bytes in = generated(rng, seeds, ops, i);
    const auto out = gridlm::fuzz::check_dataset_structure(in.data(), in.size());
    ++(out.accepted ? made.accepted : made.refused);
  }
  const auto tally = [](const Tally& t) {
    return std::to_string(t.accepted) + " accepted, " + std::to_string(t.refused) + " refused";
  };
  std::cout << files.size() << " input files: " << tally(given) << "; " << seeds.size() * ops.size()
            << " with one operation more: " << tally(stepped) << "; " << random
            << " pseudo-random: " << tally(made) << "; the property held for all\n";
  // Inputs that are all refused (or all accepted) would test little: say so.
  if (!seeds.empty() && (stepped.accepted == 0 || stepped.refused == 0)) {
    std::cerr << "the inputs one step from the seeds do not reach both verdicts: the seeds "
                 "are wrong or the input decoder has changed\n";
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[0] == "--write-seeds") {
      fs::create_directories(args[1]);
      for (const auto& [name, bytes] : gridlm::fuzz::seed_inputs())
        write_file(fs::path(args[1]) / name, bytes.data(), bytes.size());
      return 0;
    }
    if (args.size() == 3 && args[0] == "--seed-from") {
      const Bytes in = gridlm::fuzz::input_describing(args[1]);
      write_file(args[2], in.data(), in.size());
      return 0;
    }
    if ((args.size() == 2 || args.size() == 3) && args[0] == "--describe") {
      const Bytes in = read_file(args[1]);
      std::cout << gridlm::fuzz::describe_input(in.data(), in.size());
      if (args.size() == 3) {
        const std::vector<char> image = gridlm::fuzz::file_image(in.data(), in.size());
        write_file(args[2], image.data(), image.size());
      }
      return 0;
    }
    int random = 0;
    std::vector<std::string> paths;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--random" && i + 1 < args.size()) {
        random = std::stoi(args[++i]);
      } else if (args[i].rfind("--", 0) == 0) {
        std::cerr << "usage: see the top of tests/fuzz/replay_main.cpp\n";
        return 2;
      } else {
        paths.push_back(args[i]);
      }
    }
    return check_all(paths, random);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_dataset_structure_replay: " << e.what() << "\n";
    return 1;
  }
}
