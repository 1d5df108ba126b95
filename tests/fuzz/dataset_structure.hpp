// The fuzz target of io::read_dataset_info (the structure check of dataset files), shared by
// the libFuzzer build (build-fuzz/, clang) and the replay driver that every build runs over the
// seed corpus and deterministic pseudo-random inputs. See dataset_structure.cpp for what is
// checked, and dataset_input.cpp for what an input means.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// libFuzzer's entry point: checks one input, aborts with a report on stderr if the property
// fails (libFuzzer then keeps the input as a crash file).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace gridlm::fuzz {

using Bytes = std::vector<std::uint8_t>;

// What the reader said about one input (the property held, or the process has aborted).
struct Outcome {
  bool accepted = false;
  std::string error; // the gridlm::Error when refused
};
Outcome check_dataset_structure(const std::uint8_t* data, std::size_t size);

// Inputs that describe valid files of the shapes gridlm prepare-data writes (with and without
// a validation split, uint16 and uint32 tokens, a vocabulary at the uint16 limit), named
// "valid-*": the seed corpus, so that fuzzing starts past the attribute checks.
std::vector<std::pair<std::string, Bytes>> seed_inputs();
// Every operation an input can apply to a file, one at a time, each argument choice once
// (without the bytes of raw values and texts, read as zeros): appended to a seed, each makes a
// file one step from it. The replay driver checks them all on every seed.
std::vector<Bytes> single_operations();
// The input that describes the structure of an existing dataset file (its sizes, attributes
// and token width), for seeds taken from files prepare-data really wrote.
Bytes input_describing(const std::string& dataset_path);
// The HDF5 file an input decodes to, as a file image (to inspect with h5dump), and the
// decoded description in words.
std::vector<char> file_image(const std::uint8_t* data, std::size_t size);
std::string describe_input(const std::uint8_t* data, std::size_t size);

} // namespace gridlm::fuzz
