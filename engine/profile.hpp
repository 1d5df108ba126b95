// What the layout planner knows about a machine: either a profile that `gridlm profile` measured
// here (seconds of each op of one model at each micro-batch size and tp degree, the
// communication costs inside and across nodes, the optimizer's cost per parameter, the memory a
// rank may use), or a machine file describing hardware that is not here (matmul throughput,
// memory, links), from which the same op costs follow by counting FLOPs. Both are small JSON
// files a user can save, reuse and edit (docs/formats/profile.md); reading one checks every
// field and names the file, the field and the fix.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "layers/model_config.hpp"

namespace gridlm::engine {

// Seconds of one op of one micro-batch on one rank.
struct OpTimes {
  double forward = 0;         // F
  double backward = 0;        // B of a fused backward (input and weight gradients)
  double backward_input = 0;  // B of a split backward (zb-h1): the input gradients
  double backward_weight = 0; // W of a split backward: the weight gradients
};

// The ops of one (tp, micro-batch size): one transformer block, the embedding (first stage) and
// the head with its loss (last stage). Tensor-parallel all-reduces are inside these times.
struct OpEntry {
  int tp = 1;
  int micro_batch = 1;
  OpTimes block, embedding, head;
};

// A link's cost under a ring algorithm: an all-reduce of n bytes over g ranks takes
// 2(g-1) latency + 2(g-1)/g n / bandwidth; a reduce-scatter or all-gather half of that; a
// send/receive latency + n / bandwidth.
struct LinkCost {
  double latency = 0;   // seconds per ring step
  double bandwidth = 0; // bytes per second
};

// Costs of each collective over one kind of link (fitted separately: MPI picks different
// algorithms for each).
struct CommCosts {
  LinkCost all_reduce, reduce_scatter, all_gather, send_recv;
};

// One point of a device's GEMM throughput curve: a GEMM of `gemm_flops` FLOPs (2 m n k) runs at
// `flop_per_s`.
struct MatmulPoint {
  double gemm_flops = 0;
  double flop_per_s = 0;
};

struct Profile {
  std::string source;             // "profile" (measured) or "machine" (a machine file)
  std::string name;               // the host, or the machine's name
  std::string gridlm_version;     // of the build that measured it ("" for a machine file)
  int ranks = 1;                  // ranks that ran at once while measuring
  int ranks_per_node = 1;         // devices (ranks) per node
  double memory_per_rank = 0;     // bytes a rank may use (0: not limited)
  double optimizer_per_param = 0; // seconds of one AdamW update of one parameter
  layers::ModelConfig model;      // the model the ops were measured for (profile only)
  std::string precision = "fp32"; // of the products its ops timed (profile only)
  // profile only: the backend whose collectives the links timed ("mpi", "mpi-staged", "nccl")
  std::string comm_backend = "mpi";
  std::vector<OpEntry> ops; // measured ops (profile only)
  // profile only: the cores of the most crowded node (core_share x ranks_per_node x
  // threads_per_rank), 0 when unknown (a file from before the field, a GPU build): a core per
  // thread assumed
  double cores_per_node = 0;
  int threads_per_rank = 1; // profile only: compute threads of each rank
  double core_share = 1;    // profile only: the share of a core each compute thread had while
                            // the ops were timed (below 1 on an oversubscribed node)
  // profile only: seconds after its sending that a small message reaches a rank of the node that
  // has waited for it longer than parallel.wait's yield window (under yield it then sleeps
  // between polls); 0 when not measured (one rank a node, a file from before the field)
  double wake = 0;
  CommCosts intra;                // links inside a node
  std::optional<CommCosts> inter; // links across nodes (absent: not measured)
  double matmul_flops = 0;        // machine file: sustained FLOP/s of one device's GEMMs
  // machine file: GEMM throughput by size for "fp32" and "bf16", sizes ascending; a precision
  // without a curve runs every GEMM at matmul_flops
  std::map<std::string, std::vector<MatmulPoint>> matmul_curves;
  double peak_flops = 0;       // machine file: the device's peak, for % of peak
  double memory_bandwidth = 0; // machine file: bytes/s, for the element-wise work
  double activation_bytes = 4; // bytes per activation value sent or kept (2: bf16 runs)
};

// Seconds of one GEMM of `flops` FLOPs in `precision` on a machine file's device: at the rate
// its curve for that precision gives (interpolated linearly in log size and log rate, flat past
// either end), else at matmul_flops. Throws naming the fix when the file gives neither.
double matmul_seconds(const Profile& machine, const std::string& precision, double flops);

// Seconds of a collective over g ranks of n bytes (0 for g = 1).
double all_reduce_seconds(const LinkCost& link, double bytes, int g);
double reduce_scatter_seconds(const LinkCost& link, double bytes, int g);
double all_gather_seconds(const LinkCost& link, double bytes, int g);
double send_recv_seconds(const LinkCost& link, double bytes);

// The file's JSON, and back. Parsing throws gridlm::Error naming `what` (the file) and the field.
std::string profile_to_json(const Profile& p);
Profile profile_from_json(const std::string& text, const std::string& what);
// Reads a profile (`"format": "gridlm-profile"`) or a machine file (`"gridlm-machine"`).
Profile read_profile(const std::string& path);
// Writes atomically (a temporary file renamed into place).
void write_profile(const std::string& path, const Profile& p);

// Per op and field, the median over passes that timed the same (tp, micro-batch) entries in the
// same order: a burst of the machine's noise (seconds long on a shared host) spoils a pass, not
// the profile. Throws when the passes' entries differ.
std::vector<OpEntry> median_over_passes(const std::vector<std::vector<OpEntry>>& passes);

// Least-squares fit of latency and bandwidth to (g, bytes, seconds) measurements of a collective
// whose ring factors are (a, b): seconds = a(g) latency + b(g) bytes / bandwidth.
struct CommSample {
  int g = 2;
  double bytes = 0, seconds = 0;
};
LinkCost fit_link(const std::vector<CommSample>& samples, double (*latency_steps)(int g),
                  double (*bandwidth_share)(int g));
double all_reduce_latency_steps(int g);
double all_reduce_bandwidth_share(int g);
double half_latency_steps(int g);
double half_bandwidth_share(int g);
double one_step(int g);

} // namespace gridlm::engine
