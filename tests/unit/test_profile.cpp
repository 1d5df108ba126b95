// Profile and machine files (engine/profile.hpp): the round trip through JSON, the errors that
// name the field, and the ring cost formulas with the fit that recovers a link's cost.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/profile.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

Profile sample_profile() {
  Profile p;
  p.source = "profile";
  p.name = "node17";
  p.gridlm_version = "0.9.0";
  p.ranks = 4;
  p.ranks_per_node = 2;
  p.memory_per_rank = 3e9;
  p.optimizer_per_param = 2.5e-9;
  p.cores_per_node = 1;
  p.threads_per_rank = 1;
  p.core_share = 0.5;
  p.wake = 4e-4;
  p.model.n_layer = 6;
  p.model.vocab_size = 1000;
  p.ops.push_back(
      OpEntry{1, 2, {1e-3, 2e-3, 1.1e-3, 0.9e-3}, {1e-5, 2e-5, 2e-5, 0}, {4e-3, 8e-3, 5e-3, 3e-3}});
  p.ops.push_back(
      OpEntry{2, 2, {6e-4, 1.2e-3, 7e-4, 5e-4}, {1e-5, 2e-5, 2e-5, 0}, {2e-3, 4e-3, 3e-3, 1e-3}});
  p.intra = CommCosts{{1e-5, 5e9}, {6e-6, 4e9}, {7e-6, 4.5e9}, {3e-6, 8e9}};
  p.inter = CommCosts{{2e-5, 1e9}, {1e-5, 1e9}, {1e-5, 1e9}, {5e-6, 2e9}};
  return p;
}

std::string error_of(const std::string& text) {
  try {
    profile_from_json(text, "profile 'p.json'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Profile, RoundTripKeepsEveryField) {
  const Profile p = sample_profile();
  const Profile q = profile_from_json(profile_to_json(p), "test");
  EXPECT_EQ(q.source, "profile");
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.ranks, 4);
  EXPECT_EQ(q.ranks_per_node, 2);
  EXPECT_DOUBLE_EQ(q.optimizer_per_param, p.optimizer_per_param);
  EXPECT_EQ(q.model.n_layer, 6);
  EXPECT_EQ(q.model.vocab_size, 1000);
  ASSERT_EQ(q.ops.size(), 2u);
  EXPECT_EQ(q.ops[1].tp, 2);
  EXPECT_DOUBLE_EQ(q.ops[1].head.backward_weight, 1e-3);
  EXPECT_DOUBLE_EQ(q.ops[0].block.backward_input, 1.1e-3);
  EXPECT_DOUBLE_EQ(q.intra.all_gather.bandwidth, 4.5e9);
  ASSERT_TRUE(q.inter.has_value());
  EXPECT_DOUBLE_EQ(q.inter->send_recv.latency, 5e-6);
  EXPECT_EQ(q.precision, "fp32");
  EXPECT_DOUBLE_EQ(q.cores_per_node, 1);
  EXPECT_EQ(q.threads_per_rank, 1);
  EXPECT_DOUBLE_EQ(q.core_share, 0.5);
  EXPECT_DOUBLE_EQ(q.wake, 4e-4);
  // Files from before the cores were recorded: a core per thread, no waking measured.
  nlohmann::json before = nlohmann::json::parse(profile_to_json(p));
  before.erase("cores_per_node"), before.erase("threads_per_rank"), before.erase("core_share");
  before.erase("wake_s");
  const Profile b = profile_from_json(before.dump(), "test");
  EXPECT_DOUBLE_EQ(b.cores_per_node, 0);
  EXPECT_DOUBLE_EQ(b.core_share, 1);
  EXPECT_DOUBLE_EQ(b.wake, 0);
  // Without inter-node costs, none come back.
  Profile one = p;
  one.inter.reset();
  EXPECT_FALSE(profile_from_json(profile_to_json(one), "test").inter.has_value());
  // The precision its products were timed in; files from before the field timed fp32.
  Profile bf16 = p;
  bf16.precision = "bf16";
  EXPECT_EQ(profile_from_json(profile_to_json(bf16), "test").precision, "bf16");
  nlohmann::json old = nlohmann::json::parse(profile_to_json(p));
  old.erase("precision");
  EXPECT_EQ(profile_from_json(old.dump(), "test").precision, "fp32");
  old["precision"] = "fp16";
  try {
    profile_from_json(old.dump(), "test");
    ADD_FAILURE() << "fp16 accepted";
  } catch (const gridlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision"), std::string::npos) << e.what();
  }
  // The backend whose collectives the links timed; files from before the field timed MPI.
  Profile nccl = p;
  nccl.comm_backend = "nccl";
  EXPECT_EQ(profile_from_json(profile_to_json(nccl), "test").comm_backend, "nccl");
  nlohmann::json no_backend = nlohmann::json::parse(profile_to_json(nccl));
  no_backend.erase("comm_backend");
  EXPECT_EQ(profile_from_json(no_backend.dump(), "test").comm_backend, "mpi");
  no_backend["comm_backend"] = "gloo";
  EXPECT_NE(error_of(no_backend.dump()).find("comm_backend"), std::string::npos);
}

// A machine file's fields, its links' all-reduce costs set by the caller.
Profile machine(const std::string& name, double matmul_flops, double peak_flops,
                double memory_bandwidth) {
  Profile m;
  m.source = "machine";
  m.name = name;
  m.matmul_flops = matmul_flops;
  m.peak_flops = peak_flops;
  m.memory_bandwidth = memory_bandwidth;
  return m;
}

TEST(Profile, MachineFileRoundTrip) {
  Profile m = machine("dgx-a100", 250e12, 312e12, 1.5e12);
  m.ranks_per_node = 8;
  m.memory_per_rank = 80e9;
  m.intra.all_reduce = {5e-6, 250e9};
  m.inter = CommCosts{};
  m.inter->all_reduce = {1e-5, 100e9};
  const Profile q = profile_from_json(profile_to_json(m), "test");
  EXPECT_EQ(q.source, "machine");
  EXPECT_DOUBLE_EQ(q.matmul_flops, 250e12);
  EXPECT_DOUBLE_EQ(q.intra.send_recv.bandwidth, 250e9); // one link for every collective
  EXPECT_DOUBLE_EQ(q.inter->reduce_scatter.latency, 1e-5);
  EXPECT_TRUE(q.matmul_curves.empty());
}

// GEMM throughput by size and precision: kept through the file; with curves, matmul_flops may
// go; bad curves are named.
TEST(Profile, MachineFileMatmulCurves) {
  Profile m = machine("h100", 0, 989e12, 3e12);
  m.intra.all_reduce = {5e-6, 400e9};
  m.matmul_curves["bf16"] = {{1e9, 300e12}, {1e12, 700e12}};
  m.matmul_curves["fp32"] = {{1e12, 50e12}};
  const nlohmann::json j = nlohmann::json::parse(profile_to_json(m));
  EXPECT_FALSE(j.contains("matmul_flops") && j["matmul_flops"].get<double>() > 0);
  nlohmann::json without = j;
  without.erase("matmul_flops");
  const Profile q = profile_from_json(without.dump(), "m.json");
  ASSERT_EQ(q.matmul_curves.size(), 2u);
  ASSERT_EQ(q.matmul_curves.at("bf16").size(), 2u);
  EXPECT_DOUBLE_EQ(q.matmul_curves.at("bf16")[1].gemm_flops, 1e12);
  EXPECT_DOUBLE_EQ(q.matmul_curves.at("bf16")[1].flop_per_s, 700e12);
  EXPECT_DOUBLE_EQ(q.matmul_curves.at("fp32")[0].flop_per_s, 50e12);
  // Interpolated in log size and log rate, flat past the ends.
  EXPECT_DOUBLE_EQ(matmul_seconds(q, "bf16", 1e6), 1e6 / 300e12);
  EXPECT_DOUBLE_EQ(matmul_seconds(q, "bf16", 1e13), 1e13 / 700e12);
  EXPECT_NEAR(matmul_seconds(q, "bf16", std::sqrt(1e9 * 1e12)),
              std::sqrt(1e9 * 1e12) / std::sqrt(300e12 * 700e12), 1e-18);
  const auto error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json bad = without;
    edit(bad);
    return error_of(bad.dump());
  };
  EXPECT_NE(error([](auto& b) {
              b["matmul"]["fp16"] = b["matmul"]["fp32"];
            }).find("field 'matmul.fp16' is not a precision gridlm trains in (fp32, bf16)"),
            std::string::npos);
  EXPECT_NE(error([](auto& b) {
              b["matmul"]["bf16"] = nlohmann::json::array();
            }).find("field 'matmul.bf16' is not a non-empty list"),
            std::string::npos);
  EXPECT_NE(error([](auto& b) { b["matmul"]["bf16"][1]["gemm_flops"] = 1e8; })
                .find("field 'matmul.bf16[1].gemm_flops' = 1e+08 is not above the point before "
                      "it (1e+09): list the sizes in ascending order"),
            std::string::npos);
  EXPECT_NE(error([](auto& b) {
              b["matmul"]["fp32"][0]["flop_per_s"] = 0;
            }).find("field 'matmul.fp32[0].flop_per_s' = 0 must be at least 1000000"),
            std::string::npos);
  // Values no machine has gave 300-digit step times (and still a best layout): refused, with
  // the file named as a machine file.
  const std::string slow_link = error([](auto& b) { b["inter_node"]["latency_s"] = 1e300; });
  EXPECT_NE(slow_link.find("machine file 'p.json': field 'inter_node.latency_s' = 1e+300 is more "
                           "than 60, which no machine has"),
            std::string::npos)
      << slow_link;
  EXPECT_NE(error([](auto& b) {
              b["memory_bandwidth_Bps"] = 1e-300;
            }).find("field 'memory_bandwidth_Bps' = 1e-300 must be at least 1000000"),
            std::string::npos);
  EXPECT_NE(error([](auto& b) {
              b["bytes_per_activation"] = 1e300;
            }).find("field 'bytes_per_activation' = 1e+300 is more than 16"),
            std::string::npos);
  // Without curves, matmul_flops is what prices the products: required.
  EXPECT_NE(error([](auto& b) { b.erase("matmul"); }).find("field 'matmul_flops' is missing"),
            std::string::npos);
}

TEST(Profile, BadFieldsAreNamed) {
  const nlohmann::json good = nlohmann::json::parse(profile_to_json(sample_profile()));
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return error_of(j.dump());
  };
  EXPECT_NE(error_of("{ not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["format"] = "gridlm-weights"; }).find("field 'format'"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["version"] = 7; }).find("field 'version' = 7"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j.erase("ops"); }).find("field 'ops' is missing"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["ops"] = nlohmann::json::array(); }).find("field 'ops'"),
            std::string::npos);
  const std::string negative = with([](auto& j) { j["ops"][1]["block"]["forward_s"] = -1.0; });
  EXPECT_NE(negative.find("field 'ops[1].block.forward_s' = -1"), std::string::npos) << negative;
  EXPECT_NE(negative.find("profile 'p.json'"), std::string::npos);
  EXPECT_NE(with([](auto& j) {
              j["intra_node"]["send_recv"]["bandwidth_Bps"] = 0;
            }).find("field 'intra_node.send_recv.bandwidth_Bps' = 0 must be at least 1000"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["ops"][1]["tp"] = 1; }).find("repeats tp 1 and micro_batch 2"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) {
              j["model"]["n_layer"] = "six";
            }).find("field 'model.n_layer' is not an integer"),
            std::string::npos);
  EXPECT_NE(
      with([](auto& j) { j["core_share"] = 1.5; }).find("field 'core_share' = 1.5 is above 1"),
      std::string::npos);
  EXPECT_NE(
      with([](auto& j) { j["core_share"] = 0; }).find("field 'core_share' = 0 must be above 0"),
      std::string::npos);
  EXPECT_NE(
      with([](auto& j) { j["wake_s"] = -1e-3; }).find("field 'wake_s' = -0.001 must be at least 0"),
      std::string::npos);
  EXPECT_NE(with([](auto& j) { j["threads_per_rank"] = 0; }).find("field 'threads_per_rank' = 0"),
            std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("is not a JSON object"), std::string::npos);
  // A number past double's range is nlohmann's out_of_range, not a parse error: still named.
  EXPECT_NE(error_of(R"({"format": "gridlm-profile", "version": 1e400})")
                .find("profile 'p.json': not valid JSON"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) {
              j["model"]["tied_embeddings"] = 1;
            }).find("field 'model.tied_embeddings' is not true or false"),
            std::string::npos);
  // A block that takes no time prices every layout at none; one that takes a day is a broken
  // file (1e308 s priced layouts at inf). The embedding may be free (it is a lookup).
  EXPECT_NE(with([](auto& j) {
              j["ops"][0]["block"]["backward_s"] = 0;
            }).find("field 'ops[0].block.backward_s' = 0 must be above 0"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) {
              j["ops"][0]["block"]["forward_s"] = 1e308;
            }).find("field 'ops[0].block.forward_s' = 1e+308 s is more than a day"),
            std::string::npos);
  EXPECT_EQ(with([](auto& j) { j["ops"][0]["embedding"]["backward_s"] = 0; }), "");
  // A block's split backward (zb-h1's B and W) of no time priced zero-bubble schedules as free.
  EXPECT_NE(with([](auto& j) {
              j["ops"][0]["block"]["backward_input_s"] = 0;
            }).find("field 'ops[0].block.backward_input_s' = 0 must be above 0"),
            std::string::npos);

  // An integer past int64 (2^64 - 1) was read as -1.
  EXPECT_NE(with([](auto& j) {
              j["ranks_per_node"] = 18446744073709551615ull;
            }).find("field 'ranks_per_node' = 18446744073709551615 must be from 1 to"),
            std::string::npos);
}

TEST(Profile, MissingFileIsNamed) {
  try {
    read_profile("/nonexistent/profile.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent/profile.json': no such file"),
              std::string::npos);
  }
  try {
    read_profile("/tmp");
    FAIL() << "a directory read as a profile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'/tmp': it is a directory"), std::string::npos)
        << e.what();
  }
}

TEST(Profile, RingFormulas) {
  const LinkCost l{1e-5, 1e9};
  // 4 ranks, 8 MB: 6 steps of latency, 2 x 3/4 of the bytes each way.
  EXPECT_DOUBLE_EQ(all_reduce_seconds(l, 8e6, 4), 6e-5 + 1.5 * 8e-3);
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(l, 8e6, 4), 3e-5 + 0.75 * 8e-3);
  EXPECT_DOUBLE_EQ(all_gather_seconds(l, 8e6, 4), reduce_scatter_seconds(l, 8e6, 4));
  EXPECT_DOUBLE_EQ(send_recv_seconds(l, 1e6), 1e-5 + 1e-3);
  EXPECT_EQ(all_reduce_seconds(l, 8e6, 1), 0.0);
}

TEST(Profile, FitRecoversLatencyAndBandwidth) {
  const LinkCost truth{2e-5, 3e9};
  std::vector<CommSample> s;
  for (const double n : {4096.0, 65536.0, 1048576.0, 8388608.0}) {
    for (const int g : {2, 4})
      s.push_back(CommSample{g, n, all_reduce_seconds(truth, n, g)});
  }
  const LinkCost fit = fit_link(s, all_reduce_latency_steps, all_reduce_bandwidth_share);
  EXPECT_NEAR(fit.latency, truth.latency, 1e-9);
  EXPECT_NEAR(fit.bandwidth, truth.bandwidth, 1e-3 * truth.bandwidth);
  // Times that fall with size (noise) give a negative bandwidth term: refitted as latency only,
  // never negative.
  const LinkCost flat = fit_link({{2, 1000, 1e-3}, {2, 1e6, 0.9e-3}}, one_step, one_step);
  EXPECT_GE(flat.latency, 0.0);
  EXPECT_GT(flat.bandwidth, 0.0);
  // Times that hardly rise with size fit a bandwidth past any link's (1e18 B/s here), which the
  // profile reader refuses: the fit stays within what a profile may hold, so that gridlm reads
  // back the profiles it measures.
  const LinkCost fast =
      fit_link({{2, 1000, 1e-3}, {2, 1e6, 1e-3 + 1e6 / 1e18}}, one_step, one_step);
  EXPECT_LE(fast.bandwidth, 1e15);
  Profile p = sample_profile();
  p.intra.all_reduce = fast;
  EXPECT_NO_THROW(profile_from_json(profile_to_json(p), "profile 'p.json'"));
}

TEST(Profile, EachOpKeepsItsMedianPass) {
  // Three passes over two entries; the noise lands in a different pass for different ops.
  auto entry = [](int tp, double f, double b, double head_w) {
    OpEntry e;
    e.tp = tp;
    e.micro_batch = 8;
    e.block = {f, b, 0.6 * b, 0.4 * b};
    e.embedding = {1e-5, 2e-5, 2e-5, 0};
    e.head = {2e-3, 3e-3, 2e-3, head_w};
    return e;
  };
  const std::vector<std::vector<OpEntry>> passes{
      {entry(1, 6.3e-3, 11e-3, 1e-3), entry(2, 4.0e-3, 7e-3, 0.9e-3)},
      {entry(1, 8.0e-3, 10.8e-3, 1.4e-3), entry(2, 5.1e-3, 7.1e-3, 0.5e-3)},
      {entry(1, 6.4e-3, 14e-3, 1.1e-3), entry(2, 4.1e-3, 9e-3, 0.6e-3)}};
  const std::vector<OpEntry> m = median_over_passes(passes);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].tp, 1);
  EXPECT_EQ(m[1].tp, 2);
  EXPECT_EQ(m[1].micro_batch, 8);
  EXPECT_DOUBLE_EQ(m[0].block.forward, 6.4e-3);
  EXPECT_DOUBLE_EQ(m[0].block.backward, 11e-3);
  EXPECT_DOUBLE_EQ(m[0].block.backward_input, 0.6 * 11e-3);
  EXPECT_DOUBLE_EQ(m[0].block.backward_weight, 0.4 * 11e-3);
  EXPECT_DOUBLE_EQ(m[0].head.backward_weight, 1.1e-3);
  EXPECT_DOUBLE_EQ(m[1].block.forward, 4.1e-3);
  EXPECT_DOUBLE_EQ(m[1].block.backward, 7.1e-3);
  EXPECT_DOUBLE_EQ(m[1].head.backward_weight, 0.6e-3);
  EXPECT_DOUBLE_EQ(m[1].embedding.backward, 2e-5);
  // One pass is itself.
  EXPECT_DOUBLE_EQ(median_over_passes({passes[1]})[0].block.forward, 8.0e-3);
  // Passes over different ops cannot be combined.
  EXPECT_THROW(median_over_passes({passes[0], {passes[1][0]}}), Error);
  EXPECT_THROW(median_over_passes({passes[0], {passes[1][1], passes[1][0]}}), Error);
  EXPECT_THROW(median_over_passes({}), Error);
}

} // namespace
} // namespace gridlm::engine
