// `bench cuda`'s GPU-free parts: FLOP counts, MFU, case numbering, the peer spec, option readers
// and the peer client's cuda mode (its protocol, and the script answering without a GPU).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>

#include "tools/bench/bench_args.h"
#include "tools/bench/cuda_cases.h"
#include "tools/bench/torch_peer_client.h"

using namespace tessera;
using namespace tessera::bench;

TEST_CASE("GEMM and attention FLOPs count as cuBLAS and flash-attention report them") {
  const GemmCase g{.m = 4096, .k = 768, .n = 2304};
  CHECK(g.flops() == Approx(2.0 * 4096 * 768 * 2304));
  // GPT-2 small: 4 * 8 * 12 * 1024^2 * 64 / 2 (causal) forward.
  AttentionCase a{.backward = false, .b = 8, .h = 12, .t = 1024, .d = 64};
  const double forward = 4.0 * 8 * 12 * 1024.0 * 1024.0 * 64 / 2;
  CHECK(a.flops() == Approx(forward));
  a.backward = true;
  CHECK(a.flops() == Approx(3.5 * forward));
}

TEST_CASE("MFU is 6 N tokens/s over the peak") {
  // 124M params at 100k tokens/s: 7.44e16 FLOP/s = 7.52% of 989 TFLOP/s.
  CHECK(mfu(124'000'000, 100'000.0, 989.0) == Approx(6.0 * 124e6 * 1e5 / 989e12));
  CHECK(mfu(124'000'000, 100'000.0, 989.0) == Approx(0.0752).epsilon(1e-3));
  CHECK(mfu(1, 1.0, 0.0) == 0.0);
}

TEST_CASE("short kernels are timed over several calls per repetition") {
  CHECK(calls_per_rep(2.0 * 8192.0 * 8192.0 * 8192.0) == 1);
  CHECK(calls_per_rep(2.0 * 4096 * 768 * 768) == 11);  // 4.83 GFLOP -> ceil(50 / 4.83)
  CHECK(calls_per_rep(1.0) == 64);
  CHECK(calls_per_rep(0.0) == 1);
}

TEST_CASE("cases get one id sequence across sections") {
  CudaPlan plan;
  add_gemm_cases(plan, {DType::bf16, DType::f32}, default_gemm_sizes());
  add_attention_cases(plan, default_attention_shapes());
  add_train_cases(plan, {DType::f32, DType::bf16}, {{8, 1024}});
  REQUIRE(plan.gemms.size() == 10);
  REQUIRE(plan.attention.size() == 4);
  REQUIRE(plan.train.size() == 2);
  std::set<int> ids;
  for (const auto& c : plan.gemms) ids.insert(c.id);
  for (const auto& c : plan.attention) ids.insert(c.id);
  for (const auto& c : plan.train) ids.insert(c.id);
  CHECK(ids.size() == 16);
  CHECK(*ids.rbegin() == 15);
  // dtype-major GEMMs; forward before forward+backward per attention shape.
  CHECK(plan.gemms[0].dtype == DType::bf16);
  CHECK(plan.gemms[5].dtype == DType::f32);
  CHECK(plan.gemms[4].m == 8192);
  CHECK_FALSE(plan.attention[0].backward);
  CHECK(plan.attention[1].backward);
  CHECK(plan.attention[2].d == 128);
  CHECK(plan.train[1].precision == DType::bf16);
}

TEST_CASE("the peer spec carries each section's cases") {
  CudaPlan plan;
  plan.config = gpt::gpt_preset("gpt-tiny");
  plan.steps = 3;
  add_gemm_cases(plan, {DType::f16}, {{64, 32, 48}});
  add_attention_cases(plan, {{1, 2, 64, 32}});
  add_train_cases(plan, {DType::bf16}, {{2, 16}});
  const auto gemm = nlohmann::json::parse(cuda_spec_json(plan, "gemm"));
  CHECK(gemm["section"] == "gemm");
  REQUIRE(gemm["cases"].size() == 1);
  CHECK(gemm["cases"][0]["dtype"] == "f16");
  CHECK(gemm["cases"][0]["n"] == 48);
  CHECK(gemm["cases"][0]["calls"] == 64);
  CHECK(gemm["reps"] == plan.reps);
  const auto attn = nlohmann::json::parse(cuda_spec_json(plan, "attention"));
  REQUIRE(attn["cases"].size() == 2);
  CHECK(attn["cases"][0]["pass"] == "fwd");
  CHECK(attn["cases"][1]["pass"] == "fwd_bwd");
  CHECK(attn["cases"][1]["id"] == 2);
  const auto train = nlohmann::json::parse(cuda_spec_json(plan, "train"));
  REQUIRE(train["cases"].size() == 1);
  CHECK(train["cases"][0]["precision"] == "bf16");
  CHECK(train["cases"][0]["id"] == 3);
  CHECK(train["steps"] == 3);
  CHECK(train["config"]["d_model"] == plan.config.d_model);
  CHECK_THROWS_AS(cuda_spec_json(plan, "conv"), UsageError);
}

TEST_CASE("bench cuda option readers accept their forms and name the flag otherwise") {
  const auto sizes = parse_dim_lists("--gemm-sizes", "4096x768x2304,8x8x8", 3);
  REQUIRE(sizes.size() == 2);
  CHECK(sizes[0] == std::vector<int64_t>{4096, 768, 2304});
  CHECK(sizes[1] == std::vector<int64_t>{8, 8, 8});
  CHECK_THROWS_WITH(parse_dim_lists("--attention", "8x12x1024", 4),
                    Catch::Contains("--attention") && Catch::Contains("8x12x1024"));
  CHECK_THROWS_AS(parse_dim_lists("--gemm-sizes", "8x0x8", 3), UsageError);
  CHECK_THROWS_AS(parse_dim_lists("--gemm-sizes", "8x8x8,", 3), UsageError);
  const auto dts = parse_dtypes("--gemm-dtypes", "f32,bf16", {DType::bf16, DType::f16, DType::f32});
  CHECK(dts == std::vector<DType>{DType::f32, DType::bf16});
  CHECK_THROWS_WITH(parse_dtypes("--precisions", "f16", {DType::f32, DType::bf16}),
                    Catch::Contains("f32, bf16") && Catch::Contains("'f16'"));
  CHECK(parse_double("--peak-tflops", "989", 1e-3, 1e6) == 989.0);
  CHECK(parse_double("--peak-tflops", "312.5", 1e-3, 1e6) == 312.5);
  CHECK_THROWS_AS(parse_double("--peak-tflops", "0", 1e-3, 1e6), UsageError);
  CHECK_THROWS_AS(parse_double("--peak-tflops", "12x", 1e-3, 1e6), UsageError);
  CHECK_THROWS_AS(parse_double("--peak-tflops", "nan", 1e-3, 1e6), UsageError);
}

TEST_CASE("parse_peer_output reads the cuda mode's device and peak device memory") {
  const PeerResult r = parse_peer_output(
      "{\"torch_version\": \"2.11.0\", \"threads\": 16, \"blas\": \"cuBLAS\", \"device\": "
      "\"NVIDIA H200\", \"results\": [{\"id\": 3, \"seconds\": 0.25, \"peak_device_bytes\": "
      "4096}, {\"id\": 4, \"seconds\": 0.0}]}");
  REQUIRE(r.available);
  CHECK(r.device == "NVIDIA H200");
  CHECK(r.seconds.at(3) == 0.25);
  CHECK(r.peak_device_bytes.at(3) == 4096);
  CHECK(r.seconds.at(4) == 0.0);  // a case the peer could not run
  CHECK(r.peak_device_bytes.count(4) == 0);
}

TEST_CASE("run_torch_cuda_peer finds the interpreter on PATH and answers with a reason") {
  CudaPlan plan;
  add_gemm_cases(plan, {DType::bf16}, {{64, 32, 48}});
  PeerOptions po;
  po.script = find_peer_script("");
  REQUIRE_FALSE(po.script.empty());
  po.python = "no-such-python-for-tessera";
  const PeerResult missing = run_torch_cuda_peer(cuda_spec_json(plan, "gemm"), 0, po);
  CHECK_FALSE(missing.available);
  CHECK(missing.reason == "no-such-python-for-tessera not found");
  // `true` is on every PATH: found by name, it runs, prints nothing and so answers nothing.
  po.python = "true";
  const PeerResult not_python = run_torch_cuda_peer(cuda_spec_json(plan, "gemm"), 0, po);
  CHECK_FALSE(not_python.available);
  CHECK(not_python.reason == "the peer printed nothing");
  // Debian's CPU PyTorch has no GPU: the script itself says so (this machine), or a CUDA torch
  // times the case (a GPU machine).
  po.python = "/usr/bin/python3";
  const PeerResult r = run_torch_cuda_peer(cuda_spec_json(plan, "gemm"), 0, po);
  if (r.available) {
    REQUIRE(r.seconds.count(plan.gemms[0].id) == 1);
    CHECK(r.seconds.at(plan.gemms[0].id) > 0.0);
    CHECK_FALSE(r.device.empty());
  } else {
    WARN("PyTorch CUDA peer unavailable: " << r.reason);
    CHECK_FALSE(r.reason.empty());
  }
}
