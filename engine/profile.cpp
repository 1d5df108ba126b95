// Profiles and machine files as JSON, the ring cost formulas and the fit of a link's cost.
#include "engine/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/statistics.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;
// The slowest and fastest link a profile or machine file may hold (a reader refuses values past
// them; a measured fit is clamped to them).
constexpr double kMaxLatency = 60, kMinBandwidth = 1e3, kMaxBandwidth = 1e15;

// Reads fields of one JSON object, naming the file and the path of every field it refuses.
class Reader {
public:
  Reader(const json& j, std::string what, std::string path)
      : j_(j), what_(std::move(what)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", "is not a JSON object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    const std::string field = path_.empty() ? key : key.empty() ? path_ : path_ + "." + key;
    throw Error(fmt::format("{}: {} {}; fix the file, or measure a new one with gridlm profile",
                            what_, field.empty() ? "the file" : "field '" + field + "'", why));
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json& at(const std::string& key) const {
    if (!j_.contains(key)) fail(key, "is missing");
    return j_.at(key);
  }
  // `max`: past it a value is no machine's (a link of 1e300 s a message priced every layout at
  // 300-digit step times and still named a best).
  double number(const std::string& key, double min, bool allow_equal = true,
                double max = HUGE_VAL) const {
    const json& v = at(key);
    if (!v.is_number()) fail(key, "is not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || (!allow_equal && x == min)) {
      fail(key, fmt::format("= {} must be {} {}", x, allow_equal ? "at least" : "above", min));
    }
    if (x > max) fail(key, fmt::format("= {:g} is more than {:g}, which no machine has", x, max));
    return x;
  }
  int integer(const std::string& key, int min) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, "is not an integer");
    if (v.is_number_unsigned() && v.get<unsigned long long>() > (1u << 30)) {
      fail(key,
           fmt::format("= {} must be from {} to {}", v.get<unsigned long long>(), min, 1 << 30));
    }
    const long long x = v.get<long long>();
    if (x < min || x > 1 << 30) {
      fail(key, fmt::format("= {} must be from {} to {}", x, min, 1 << 30));
    }
    return int(x);
  }
  std::string text(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(key, "is not a string");
    return v.get<std::string>();
  }
  Reader child(const std::string& key) const {
    return Reader(at(key), what_, path_.empty() ? key : path_ + "." + key);
  }
  Reader element(const std::string& key, std::size_t i) const {
    return Reader(at(key).at(i), what_,
                  fmt::format("{}{}[{}]", path_.empty() ? "" : path_ + ".", key, i));
  }

private:
  const json& j_;
  std::string what_, path_;
};

json link_json(const LinkCost& l) {
  return {{"latency_s", l.latency}, {"bandwidth_Bps", l.bandwidth}};
}
LinkCost read_link(const Reader& r) {
  return LinkCost{r.number("latency_s", 0, true, kMaxLatency),
                  r.number("bandwidth_Bps", kMinBandwidth, true, kMaxBandwidth)};
}

json comm_json(const CommCosts& c) {
  return {{"all_reduce", link_json(c.all_reduce)},
          {"reduce_scatter", link_json(c.reduce_scatter)},
          {"all_gather", link_json(c.all_gather)},
          {"send_recv", link_json(c.send_recv)}};
}
CommCosts read_comm(const Reader& r) {
  return CommCosts{read_link(r.child("all_reduce")), read_link(r.child("reduce_scatter")),
                   read_link(r.child("all_gather")), read_link(r.child("send_recv"))};
}

json op_json(const OpTimes& t) {
  return {{"forward_s", t.forward},
          {"backward_s", t.backward},
          {"backward_input_s", t.backward_input},
          {"backward_weight_s", t.backward_weight}};
}
// The text of `key`, one of `choices`; `absent` when the file has no such field.
std::string read_choice(const Reader& r, const std::string& key, const std::string& absent,
                        const std::vector<std::string>& choices) {
  const std::string value = r.has(key) ? r.text(key) : absent;
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    r.fail(key, fmt::format("= '{}' is none of '{}'", value, fmt::join(choices, "', '")));
  }
  return value;
}

// `costs`: a block's forward and backward, which take time on every machine (0 in a file would
// price a layout at no time at all). No op takes a day: past that a file is broken.
OpTimes read_op(const Reader& r, bool costs) {
  auto seconds = [&](const char* key, bool above_zero) {
    const double s = r.number(key, 0, !above_zero);
    if (s > 86400) r.fail(key, fmt::format("= {} s is more than a day", s));
    return s;
  };
  // A block's split backward (zb-h1's B and W) takes time too: halves of 0 priced zero-bubble
  // schedules as free. (How close their sum is to backward_s is not checked: one timing of a
  // loaded machine can be far off, and gridlm reads back the profiles it measures.)
  return OpTimes{seconds("forward_s", costs), seconds("backward_s", costs),
                 seconds("backward_input_s", costs), seconds("backward_weight_s", costs)};
}

json model_json(const layers::ModelConfig& m) {
  return {{"vocab_size", m.vocab_size}, {"seq_len", m.seq_len},
          {"n_layer", m.n_layer},       {"n_head", m.n_head},
          {"d_model", m.d_model},       {"tied_embeddings", m.tied_embeddings}};
}
layers::ModelConfig read_model(const Reader& r) {
  layers::ModelConfig m;
  m.vocab_size = r.integer("vocab_size", 1);
  m.seq_len = r.integer("seq_len", 1);
  m.n_layer = r.integer("n_layer", 1);
  m.n_head = r.integer("n_head", 1);
  m.d_model = r.integer("d_model", 1);
  const json& tied = r.at("tied_embeddings");
  if (!tied.is_boolean()) r.fail("tied_embeddings", "is not true or false");
  m.tied_embeddings = tied.get<bool>();
  return m;
}

} // namespace

double all_reduce_latency_steps(int g) { return 2.0 * (g - 1); }
double all_reduce_bandwidth_share(int g) { return 2.0 * (g - 1) / g; }
double half_latency_steps(int g) { return g - 1.0; }
double half_bandwidth_share(int g) { return (g - 1.0) / g; }
double one_step(int) { return 1.0; }

double matmul_seconds(const Profile& machine, const std::string& precision, double flops) {
  const auto curve = machine.matmul_curves.find(precision);
  if (curve == machine.matmul_curves.end()) {
    if (machine.matmul_flops <= 0) {
      throw Error(fmt::format("machine file '{}' gives no GEMM throughput for {}: add a "
                              "'matmul.{}' curve or 'matmul_flops' to it",
                              machine.name, precision, precision));
    }
    return flops / machine.matmul_flops;
  }
  const std::vector<MatmulPoint>& q = curve->second;
  if (flops <= q.front().gemm_flops) return flops / q.front().flop_per_s;
  if (flops >= q.back().gemm_flops) return flops / q.back().flop_per_s;
  std::size_t i = 1;
  while (q[i].gemm_flops < flops)
    ++i;
  const double f =
      std::log(flops / q[i - 1].gemm_flops) / std::log(q[i].gemm_flops / q[i - 1].gemm_flops);
  const double rate = q[i - 1].flop_per_s * std::pow(q[i].flop_per_s / q[i - 1].flop_per_s, f);
  return flops / rate;
}

double all_reduce_seconds(const LinkCost& l, double bytes, int g) {
  if (g <= 1) return 0;
  return all_reduce_latency_steps(g) * l.latency +
         all_reduce_bandwidth_share(g) * bytes / l.bandwidth;
}
double reduce_scatter_seconds(const LinkCost& l, double bytes, int g) {
  if (g <= 1) return 0;
  return half_latency_steps(g) * l.latency + half_bandwidth_share(g) * bytes / l.bandwidth;
}
double all_gather_seconds(const LinkCost& l, double bytes, int g) {
  return reduce_scatter_seconds(l, bytes, g);
}
double send_recv_seconds(const LinkCost& l, double bytes) {
  return l.latency + bytes / l.bandwidth;
}

LinkCost fit_link(const std::vector<CommSample>& samples, double (*latency_steps)(int),
                  double (*bandwidth_share)(int)) {
  // seconds = a x + b y with x = latency, y = 1/bandwidth, each row weighted by 1/seconds (a
  // relative fit: the largest messages must not drown the latency): the 2 x 2 normal equations.
  double aa = 0, ab = 0, bb = 0, at = 0, bt = 0;
  for (const CommSample& s : samples) {
    if (s.seconds <= 0) continue;
    const double w = 1.0 / s.seconds;
    const double a = w * latency_steps(s.g), b = w * bandwidth_share(s.g) * s.bytes,
                 t = w * s.seconds;
    aa += a * a, ab += a * b, bb += b * b, at += a * t, bt += b * t;
  }
  const double det = aa * bb - ab * ab;
  double latency = 0, inv_bw = 0;
  if (det > 0) {
    latency = (at * bb - bt * ab) / det;
    inv_bw = (aa * bt - ab * at) / det;
  }
  // A negative latency (noise at small sizes) or bandwidth: refit the other term alone.
  if (latency < 0 || det <= 0) latency = 0, inv_bw = bb > 0 ? bt / bb : 0;
  if (inv_bw <= 0) inv_bw = 1e-12, latency = aa > 0 ? std::max(0.0, at / aa) : 0;
  // Within what a profile may hold (read_link): a fit of a noisy, flat curve can give a bandwidth
  // past any link's, and gridlm would refuse its own file.
  return LinkCost{std::min(latency, kMaxLatency), 1.0 / std::max(inv_bw, 1.0 / kMaxBandwidth)};
}

json curves_json(const std::map<std::string, std::vector<MatmulPoint>>& curves) {
  json j = json::object();
  for (const auto& [precision, points] : curves) {
    json list = json::array();
    for (const MatmulPoint& q : points)
      list.push_back({{"gemm_flops", q.gemm_flops}, {"flop_per_s", q.flop_per_s}});
    j[precision] = list;
  }
  return j;
}

// "matmul": {"bf16": [{"gemm_flops": ..., "flop_per_s": ...}, ...], "fp32": [...]}
std::map<std::string, std::vector<MatmulPoint>> read_curves(const Reader& r) {
  const Reader curves = r.child("matmul");
  std::map<std::string, std::vector<MatmulPoint>> out;
  for (const auto& [precision, list] : r.at("matmul").items()) {
    if (precision != "fp32" && precision != "bf16") {
      curves.fail(precision, "is not a precision gridlm trains in (fp32, bf16)");
    }
    if (!list.is_array() || list.empty()) curves.fail(precision, "is not a non-empty list");
    std::vector<MatmulPoint>& points = out[precision];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Reader e = curves.element(precision, i);
      points.push_back({e.number("gemm_flops", 0, false), e.number("flop_per_s", 1e6, true, 1e18)});
      if (i > 0 && points[i].gemm_flops <= points[i - 1].gemm_flops) {
        e.fail("gemm_flops", fmt::format("= {:g} is not above the point before it ({:g}): list "
                                         "the sizes in ascending order",
                                         points[i].gemm_flops, points[i - 1].gemm_flops));
      }
    }
  }
  return out;
}

std::string profile_to_json(const Profile& p) {
  json j;
  if (p.source == "machine") {
    j = {{"format", "gridlm-machine"},
         {"version", kVersion},
         {"name", p.name},
         {"ranks_per_node", p.ranks_per_node},
         {"memory_per_rank_bytes", p.memory_per_rank},
         {"matmul_flops", p.matmul_flops},
         {"peak_flops", p.peak_flops},
         {"memory_bandwidth_Bps", p.memory_bandwidth},
         {"bytes_per_activation", p.activation_bytes},
         {"intra_node", link_json(p.intra.all_reduce)}};
    if (!p.matmul_curves.empty()) j["matmul"] = curves_json(p.matmul_curves);
    if (p.inter) j["inter_node"] = link_json(p.inter->all_reduce);
    return j.dump(2) + "\n";
  }
  j = {{"format", "gridlm-profile"},
       {"version", kVersion},
       {"gridlm", p.gridlm_version},
       {"host", p.name},
       {"ranks", p.ranks},
       {"ranks_per_node", p.ranks_per_node},
       {"memory_per_rank_bytes", p.memory_per_rank},
       {"optimizer_s_per_param", p.optimizer_per_param},
       {"cores_per_node", p.cores_per_node},
       {"threads_per_rank", p.threads_per_rank},
       {"core_share", p.core_share},
       {"wake_s", p.wake},
       {"model", model_json(p.model)},
       {"precision", p.precision},
       {"comm_backend", p.comm_backend},
       {"intra_node", comm_json(p.intra)}};
  if (p.inter) j["inter_node"] = comm_json(*p.inter);
  json ops = json::array();
  for (const OpEntry& e : p.ops) {
    ops.push_back({{"tp", e.tp},
                   {"micro_batch", e.micro_batch},
                   {"block", op_json(e.block)},
                   {"embedding", op_json(e.embedding)},
                   {"head", op_json(e.head)}});
  }
  j["ops"] = ops;
  return j.dump(2) + "\n";
}

Profile profile_from_json(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({}); fix the file, or measure a new one with "
                            "gridlm profile",
                            what, e.what()));
  }
  const std::string format = Reader(j, what, "").text("format");
  // A machine file's errors name it as one.
  const bool machine_file = format == "gridlm-machine" && what.rfind("profile ", 0) == 0;
  const Reader r(j, machine_file ? "machine file " + what.substr(8) : what, "");
  if (format != "gridlm-profile" && format != "gridlm-machine") {
    r.fail("format",
           fmt::format("= '{}' is neither 'gridlm-profile' nor 'gridlm-machine'", format));
  }
  const int version = r.integer("version", 1);
  if (version != kVersion) {
    r.fail("version",
           fmt::format("= {} is not a version this gridlm reads ({})", version, kVersion));
  }
  Profile p;
  p.ranks_per_node = r.integer("ranks_per_node", 1);
  p.memory_per_rank = r.number("memory_per_rank_bytes", 0, true, 1e15);
  if (format == "gridlm-machine") {
    p.source = "machine";
    p.name = r.text("name");
    // With curves, matmul_flops serves only the precisions they leave out.
    if (r.has("matmul")) p.matmul_curves = read_curves(r);
    if (!r.has("matmul") || r.has("matmul_flops"))
      p.matmul_flops = r.number("matmul_flops", 1e6, true, 1e18);
    p.peak_flops = r.number("peak_flops", 1e6, true, 1e18);
    p.memory_bandwidth = r.number("memory_bandwidth_Bps", 1e6, true, 1e15);
    if (r.has("bytes_per_activation"))
      p.activation_bytes = r.number("bytes_per_activation", 0, false, 16);
    const LinkCost intra = read_link(r.child("intra_node"));
    p.intra = CommCosts{intra, intra, intra, intra};
    if (r.has("inter_node")) {
      const LinkCost inter = read_link(r.child("inter_node"));
      p.inter = CommCosts{inter, inter, inter, inter};
    }
    return p;
  }
  p.source = "profile";
  p.gridlm_version = r.text("gridlm");
  p.name = r.text("host");
  p.ranks = r.integer("ranks", 1);
  p.optimizer_per_param = r.number("optimizer_s_per_param", 0);
  p.model = read_model(r.child("model"));
  // Files from before these fields: a core per thread assumed.
  if (r.has("cores_per_node")) p.cores_per_node = r.number("cores_per_node", 0);
  if (r.has("threads_per_rank")) p.threads_per_rank = r.integer("threads_per_rank", 1);
  if (r.has("core_share")) {
    p.core_share = r.number("core_share", 0, false);
    if (p.core_share > 1) r.fail("core_share", fmt::format("= {} is above 1", p.core_share));
  }
  if (r.has("wake_s")) p.wake = r.number("wake_s", 0);
  // Files from before the fields timed fp32 products whatever the run's precision, and MPI's
  // collectives on host memory.
  p.precision = read_choice(r, "precision", "fp32", {"fp32", "bf16"});
  p.comm_backend = read_choice(r, "comm_backend", "mpi", {"mpi", "mpi-staged", "nccl"});
  p.intra = read_comm(r.child("intra_node"));
  if (r.has("inter_node")) p.inter = read_comm(r.child("inter_node"));
  if (!r.at("ops").is_array() || r.at("ops").empty()) r.fail("ops", "is not a non-empty list");
  for (std::size_t i = 0; i < r.at("ops").size(); ++i) {
    const Reader e = r.element("ops", i);
    OpEntry op{e.integer("tp", 1), e.integer("micro_batch", 1), read_op(e.child("block"), true),
               read_op(e.child("embedding"), false), read_op(e.child("head"), false)};
    for (const OpEntry& o : p.ops) {
      if (o.tp == op.tp && o.micro_batch == op.micro_batch) {
        e.fail("", fmt::format("repeats tp {} and micro_batch {}", op.tp, op.micro_batch));
      }
    }
    p.ops.push_back(op);
  }
  return p;
}

std::vector<OpEntry> median_over_passes(const std::vector<std::vector<OpEntry>>& passes) {
  if (passes.empty()) throw Error("median_over_passes: no pass");
  std::vector<OpEntry> out = passes.front();
  for (const auto& pass : passes) {
    if (pass.size() != out.size()) throw Error("median_over_passes: passes of different ops");
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (pass[i].tp != out[i].tp || pass[i].micro_batch != out[i].micro_batch)
        throw Error("median_over_passes: passes of different ops");
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (OpTimes OpEntry::*part : {&OpEntry::block, &OpEntry::embedding, &OpEntry::head}) {
      for (double OpTimes::*field : {&OpTimes::forward, &OpTimes::backward,
                                     &OpTimes::backward_input, &OpTimes::backward_weight}) {
        std::vector<double> v;
        for (const auto& pass : passes)
          v.push_back(pass[i].*part.*field);
        (out[i].*part).*field = median(v);
      }
    }
  }
  return out;
}

Profile read_profile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(fmt::format("cannot read the profile '{}': it is a directory; give a file "
                            "written by gridlm profile, or a machine file",
                            path));
  }
  std::ifstream in(path);
  if (!in) {
    throw Error(fmt::format("cannot read the profile '{}': {}; give a file written by gridlm "
                            "profile, or a machine file",
                            path, std::filesystem::exists(path) ? "not readable" : "no such file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return profile_from_json(text.str(), "profile '" + path + "'");
}

void write_profile(const std::string& path, const Profile& p) {
  const std::string tmp = path + ".partial";
  std::error_code ec;
  {
    std::ofstream out(tmp);
    out << profile_to_json(p);
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      throw Error(fmt::format("cannot write the profile '{}'; give a writable path", tmp));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec); // not left beside the file it was to replace
    throw Error(
        fmt::format("cannot rename '{}' to '{}': {}; give a writable path", tmp, path, why));
  }
}

} // namespace gridlm::engine
