// Tests for the bench's case list, work counts, table layout, timing protocol, command-line
// readers, peak-RSS and steal readings, the merging of --rounds, the OpenBLAS peer and the PyTorch
// peer's JSON protocol (and the peer script itself, in both modes, when PyTorch is installed).
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/system_info.h"
#include "tools/bench/cases.h"
#include "tools/bench/openblas_peer.h"
#include "tools/bench/peer_rounds.h"
#include "tools/bench/table.h"
#include "tools/bench/timer.h"
#include "tools/bench/torch_peer_client.h"

using namespace tessera::bench;

TEST_CASE("gpt2_cases covers every op at both sizes with unique ids") {
  const auto cases = gpt2_cases();
  std::multiset<std::string> ops;
  std::set<int> ids;
  for (const auto& c : cases) {
    ops.insert(c.op);
    ids.insert(c.id);
    CHECK(c.work > 0.0);
  }
  CHECK(ids.size() == cases.size());
  // 8 full linears and 9 distinct tensor-parallel shards, forward and backward.
  CHECK(ops.count("linear") == 17);
  CHECK(ops.count("linear_bwd") == 17);
  std::set<std::vector<int64_t>> linear_dims;
  for (const auto& c : cases) {
    if (c.op == "linear") linear_dims.insert(c.dims);
  }
  CHECK(linear_dims.size() == 17);
  for (const char* op : {"layer_norm", "layer_norm_bwd", "softmax", "softmax_bwd", "gelu_tanh",
                         "gelu_tanh_bwd", "attention", "attention_fwd_bwd"}) {
    CHECK(ops.count(op) == 2);
  }
}

TEST_CASE("work counts: GEMM flops, causal attention flops, memory-bound bytes") {
  const auto cases = gpt2_cases();
  auto find = [&](const std::string& op, const std::vector<int64_t>& dims) {
    for (const auto& c : cases)
      if (c.op == op && c.dims == dims) return c;
    FAIL("no case " << op);
    return BenchCase{};
  };
  const BenchCase fc = find("linear", {1024, 768, 3072});
  CHECK(fc.metric == Metric::gflops);
  CHECK(fc.work == 2.0 * 1024 * 768 * 3072);
  CHECK(fc.shape == "(1024, 768) -> (1024, 3072)");
  CHECK(find("linear_bwd", {1024, 768, 3072}).work == 2 * fc.work);  // dX and dW
  // The attention output's input split 8 ways; fc2 split 8 ways is tp2's attention output shard.
  CHECK(find("linear", {1024, 96, 768}).shape == "tp8 (1024, 96) -> (1024, 768)");
  CHECK(find("linear", {1024, 384, 768}).shape == "tp2 (1024, 384) -> (1024, 768)");
  CHECK(find("linear", {1024, 768, 1152}).shape == "tp2 (1024, 768) -> (1024, 1152)");

  const BenchCase attn = find("attention", {1, 12, 1024, 64});
  CHECK(attn.work == 4.0 * 12 * 1024 * 1024 * 64 / 2);
  CHECK(find("attention_fwd_bwd", {1, 12, 1024, 64}).work == 3.5 * attn.work);
  CHECK(find("attention", {4, 12, 256, 64}).shape == "B4 H12 T256 D64 causal");

  const BenchCase sm = find("softmax", {4 * 12 * 256, 256});
  CHECK(sm.metric == Metric::gbps);
  CHECK(sm.work == 4.0 * 2 * 4 * 12 * 256 * 256);
  CHECK(find("gelu_tanh_bwd", {256, 3072}).work == 4.0 * 3 * 256 * 3072);
  CHECK(find("layer_norm", {256, 768}).work == 4.0 * (2 * 256 * 768 + 2 * 768 + 2 * 256));

  // 1 GFLOP in 0.5 s is 2 GFLOP/s.
  BenchCase one_gflop;
  one_gflop.work = 1e9;
  CHECK(throughput(one_gflop, 0.5) == Approx(2.0));
  CHECK(throughput(one_gflop, 0.0) == 0.0);
  CHECK(std::string(metric_unit(Metric::gbps)) == "GB/s");
}

TEST_CASE("filter_cases matches op names and shapes") {
  const auto all = gpt2_cases();
  const auto ln = filter_cases(all, "layer_norm");
  REQUIRE(ln.size() == 4);
  for (const auto& c : ln) CHECK(c.op.rfind("layer_norm", 0) == 0);
  CHECK(filter_cases(all, "T1024").size() == 2);          // attention fwd and fwd+bwd
  // 768->768 and 3072->768 at 256 tokens, forward and backward.
  CHECK(filter_cases(all, "-> (256, 768)").size() == 4);
  CHECK(filter_cases(all, "linear (").size() == 8);  // the full linears' forward; "tp" shards follow
  CHECK(filter_cases(all, "").size() == all.size());
  CHECK(filter_cases(all, "nothing like this").empty());
  // Ids survive filtering, so the peer's answers still line up.
  CHECK(ln.front().id == all[ln.front().id].id);
}

TEST_CASE("cases_to_json lists id, op and dims") {
  const auto cases = filter_cases(gpt2_cases(), "gelu_tanh_bwd");
  const std::string json = cases_to_json(cases);
  CHECK(json.find("\"op\":\"gelu_tanh_bwd\"") != std::string::npos);
  CHECK(json.find("\"dims\":[256,3072]") != std::string::npos);
  CHECK(json.find("\"id\":" + std::to_string(cases[0].id)) != std::string::npos);
}

TEST_CASE("Table pads columns and marks right alignment") {
  Table t({"op", "GB/s"});
  t.align_right(1);
  t.add_row({"layer_norm", "12.5"});
  t.add_row({"gelu", "1234"});
  CHECK(t.rows() == 2);
  CHECK(t.render() ==
        "| op         | GB/s |\n"
        "| ---------- | ---: |\n"
        "| layer_norm | 12.5 |\n"
        "| gelu       | 1234 |\n");
  CHECK_THROWS_AS(t.add_row({"only one"}), tessera::ValueError);
  CHECK_THROWS_AS(t.align_right(2), tessera::ValueError);
}

TEST_CASE("format_number: at least three significant digits, no decimals from 1000") {
  CHECK(format_number(12.345, 2) == "12.35");
  CHECK(format_number(17.46, 1) == "17.5");
  CHECK(format_number(5.5, 1) == "5.50");
  CHECK(format_number(0.5, 1) == "0.500");
  CHECK(format_number(1234.56, 1) == "1235");
  CHECK(format_number(0.01234, 1) == "0.0123");
  CHECK(format_number(0.0, 1) == "0.0");
}

TEST_CASE("median_seconds runs warm-up plus at least min_reps calls") {
  int calls = 0;
  TimingOptions t{3, 0.0, 7, 100};
  const double s = median_seconds([&] { ++calls; }, t);
  CHECK(calls == 3 + 7);
  CHECK(s >= 0.0);
  calls = 0;
  TimingOptions capped{0, 10.0, 1, 4};  // the time budget is never met: max_reps stops it
  median_seconds([&] { ++calls; }, capped);
  CHECK(calls == 4);
}

TEST_CASE("paired_median_seconds alternates the two and gives each its own median") {
  std::string order;
  TimingOptions t{1, 0.0, 3, 100};
  const auto [a, b] = paired_median_seconds(
      [&] { order += 'a'; },
      [&] {
        order += 'b';
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
        while (std::chrono::steady_clock::now() < until) {
        }
      },
      t);
  CHECK(order == "abababab");  // one warm-up pair, then three timed pairs
  CHECK(a >= 0.0);
  CHECK(b >= 0.002);
  CHECK(b > a);
}

TEST_CASE("paired_median_seconds with a handover alternates settled blocks") {
  std::string order;
  TimingOptions t{1, 0.0, 3, 100};
  auto wait_ms = [](int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  // No block length: each block is one untimed call and one timed call after the pause.
  const auto start = std::chrono::steady_clock::now();
  paired_median_seconds([&] { order += 'a'; }, [&] { order += 'b'; }, t, Handover{0.005, 0.0});
  CHECK(order == "ab" "aabb" "aabb" "aabb");
  // Six pauses of 5 ms.
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(30));

  // A block runs timed calls until it has spent block_seconds (a's calls, 1 ms each, take
  // several) or until max_reps timed calls.
  order.clear();
  const auto [a, b] = paired_median_seconds(
      [&] {
        order += 'a';
        wait_ms(1);
      },
      [&] {
        order += 'b';
        wait_ms(2);
      },
      TimingOptions{0, 0.0, 2, 6}, Handover{0.001, 0.1});
  // max_reps = 6 ends each side's only block: one untimed call and six timed ones.
  CHECK(order == "aaaaaaabbbbbbb");
  CHECK(a >= 0.001);
  CHECK(b >= 0.002);
  CHECK(b > a);
}

TEST_CASE("CpuTimes and steal_report read the hypervisor's share of CPU time") {
  const CpuTimes begin{.steal = 100, .total = 1000}, end{.steal = 130, .total = 1200};
  CHECK(end.since(begin).steal_share() == Approx(0.15));
  CHECK(end.since(CpuTimes{}).steal_share() == -1.0);  // unreadable
  CHECK(end.since(end).steal_share() == -1.0);         // no time passed
  CpuTimes rounds;  // two spans of one side add up
  rounds.add(end.since(begin));
  rounds.add(CpuTimes{.steal = 0, .total = 200});
  CHECK(rounds.steal_share() == Approx(30.0 / 400.0));
  CHECK(steal_report(-1.0, -1.0).empty());
  const std::string quiet = steal_report(0.01, 0.02);
  CHECK(quiet == "CPU time stolen by the hypervisor while Tessera ran: 1%, while PyTorch ran: 2%");
  const std::string noisy = steal_report(0.22, -1.0);
  CHECK(noisy.find("while Tessera ran: 22% (above 5%") != std::string::npos);
  CHECK(noisy.find("PyTorch") == std::string::npos);
  const CpuTimes now = cpu_times();
  if (now.total > 0) CHECK(now.steal <= now.total);
}

TEST_CASE("overload_warning names the cores only when the load is above them") {
  CHECK(overload_warning("").empty());
  CHECK(overload_warning("0.00 0.10 0.20").empty());
  const std::string warning = overload_warning("100000.5 2.0 1.0");
  CHECK(warning.rfind("warning: load average above the ", 0) == 0);
  CHECK(warning.find(" cores: ") != std::string::npos);
}

namespace {

PeerResult peer_answer(std::map<int, double> seconds, std::map<int, int64_t> rss = {}) {
  PeerResult r;
  r.available = true;
  r.torch_version = "1.13";
  r.blas = "OpenBLAS";
  r.threads = 2;
  r.seconds = std::move(seconds);
  r.peak_rss_bytes = std::move(rss);
  return r;
}

PeerResult failed_answer(const std::string& reason) {
  PeerResult r;
  r.reason = reason;
  return r;
}

}  // namespace

TEST_CASE("PeerRounds reports medians over rounds and each round's ratio") {
  PeerRounds rounds({7, 9, 11}, 3);  // three rows keyed 7, 9, 11
  rounds.add_peer(0, failed_answer("no torch"));  // before any answer: the reason is kept
  CHECK_FALSE(rounds.peer().available);
  CHECK(rounds.peer().reason == "no torch");
  for (int round = 0; round < 3; ++round) {
    rounds.add_ours(round, 0, 1.0 + round);  // 1, 2, 3
    if (round != 1) rounds.add_ours(round, 1, 4.0);  // row 1 failed in round 1
    rounds.add_ours(round, 2, 2.0);
  }
  rounds.add_peer(0, peer_answer({{7, 2.0}, {9, 8.0}, {11, 1.0}}, {{7, 100}}));
  rounds.add_peer(1, peer_answer({{7, 2.0}, {9, 4.0}}, {{7, 200}, {11, 300}}));
  rounds.add_peer(2, failed_answer("crashed"));  // after an answer: a failed round only lacks times

  CHECK(rounds.ours_median(0) == 2.0);
  CHECK(rounds.ours_median(1) == 0.0);  // failed in a round: the row failed
  CHECK(rounds.ours_median(2) == 2.0);
  const PeerResult peer = rounds.peer();
  REQUIRE(peer.available);
  CHECK(peer.torch_version == "1.13");
  CHECK(peer.seconds.at(7) == 2.0);
  CHECK(peer.seconds.at(9) == 6.0);  // the median of 8 and 4
  CHECK(peer.seconds.at(11) == 1.0);  // timed in round 0 only
  CHECK(peer.peak_rss_bytes.at(7) == 100);  // the first answer's peak, as ours
  CHECK(peer.peak_rss_bytes.count(11) == 0);  // row 11 had no time in the answer giving 300
  // Ratios peer / ours, only where both sides timed the row in that round.
  CHECK(rounds.round_ratios() == std::vector<std::string>{"2.00 1.00", "2.00", "0.500"});
}

TEST_CASE("PeerRounds with one round gives no ratios") {
  PeerRounds rounds({0}, 1);
  rounds.add_ours(0, 0, 1.0);
  rounds.add_peer(0, peer_answer({{0, 1.5}}));
  CHECK(rounds.ours_median(0) == 1.0);
  CHECK(rounds.peer().seconds.at(0) == 1.5);
  CHECK(rounds.round_ratios() == std::vector<std::string>{""});
  CHECK_THROWS(PeerRounds({0}, 0));
}

TEST_CASE("OpenBlas runs the kernel family it is pinned to and agrees with a plain product") {
  std::string reason;
  const std::unique_ptr<OpenBlas> blas = OpenBlas::load("Haswell", 1, &reason);
  if (!blas) {
    WARN("OpenBLAS not loadable, skipping: " << reason);
    return;
  }
  CHECK(blas->corename() == "Haswell");
  CHECK(blas->config().find("OpenBLAS") != std::string::npos);
  // C (2, 3) = A^T B with A stored (4, 2): the transposed path.
  const float a[] = {1, 2, 3, 4, 5, 6, 7, 8};                   // (4, 2)
  const float b[] = {1, 0, 2, 0, 1, 0, 1, 1, 1, -1, 0, 3};      // (4, 3)
  float c[6] = {10, 10, 10, 10, 10, 10};
  blas->sgemm(true, false, 2, 3, 4, 1.0f, a, 2, b, 3, 0.5f, c, 3);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      float want = 5.0f;
      for (int k = 0; k < 4; ++k) want += a[k * 2 + i] * b[k * 3 + j];
      CHECK(c[i * 3 + j] == Approx(want));
    }
  }
  // A second copy in the same process runs another family.
  if (openblas_coretype_for_host() == "SkylakeX") {
    const std::unique_ptr<OpenBlas> wide = OpenBlas::load("SkylakeX", 1, &reason);
    REQUIRE(wide);
    CHECK(wide->corename() == "SkylakeX");
    CHECK(blas->corename() == "Haswell");
  }
}

TEST_CASE("openblas_coretype_for_host follows the ISA, and TESSERA_ISA=avx2") {
  const std::string best = openblas_coretype_for_host();
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) CHECK(best == "SkylakeX");
  ::setenv("TESSERA_ISA", "avx2", 1);
  if (__builtin_cpu_supports("avx2")) CHECK(openblas_coretype_for_host() == "Haswell");
  ::unsetenv("TESSERA_ISA");
}

TEST_CASE("parse_peer_output reads results, errors and garbage") {
  const PeerResult ok = parse_peer_output(
      "some warning\n{\"torch_version\": \"1.13.1\", \"threads\": 2, \"blas\": "
      "\"openblas-openmp\", "
      "\"results\": [{\"id\": 3, \"seconds\": 0.25}, {\"id\": 7, \"seconds\": 1e-3}]}\n");
  REQUIRE(ok.available);
  CHECK(ok.torch_version == "1.13.1");
  CHECK(ok.threads == 2);
  CHECK(ok.blas == "openblas-openmp");
  REQUIRE(ok.seconds.size() == 2);
  CHECK(ok.seconds.at(3) == 0.25);
  CHECK(ok.seconds.at(7) == 1e-3);

  const PeerResult missing = parse_peer_output("{\"error\": \"No module named 'torch'\"}\n");
  CHECK_FALSE(missing.available);
  CHECK(missing.reason == "No module named 'torch'");

  const PeerResult garbage = parse_peer_output("Traceback (most recent call last):\n  oops\n");
  CHECK_FALSE(garbage.available);
  CHECK(garbage.reason.find("not JSON") != std::string::npos);
  CHECK(ok.peak_rss_bytes.empty());
  CHECK_FALSE(parse_peer_output("").available);
  CHECK_FALSE(parse_peer_output("{\"threads\": 2}").available);
}

TEST_CASE("TorchPeerSession reports a missing interpreter, script or a dead peer") {
  const auto cases = filter_cases(gpt2_cases(), "layer_norm");
  // The reason a session with this interpreter and script gives for its first request, and
  // (the same) for its second.
  auto reason = [&](const std::string& python, const std::string& script) {
    PeerOptions po;
    po.python = python;
    po.script = script;
    TorchPeerSession peer(po);
    const PeerResult first = peer.time(cases);
    CHECK_FALSE(first.available);
    CHECK(peer.time(cases).reason == first.reason);
    return first.reason;
  };
  CHECK(reason("/nonexistent/python3", "/nonexistent/torch_peer.py").find("/nonexistent/python3") !=
        std::string::npos);
  CHECK(reason("/bin/sh", "/nonexistent/torch_peer.py").find("torch_peer.py not found") !=
        std::string::npos);
  // A "peer" that exits at once: the reason names its status.
  CHECK(reason("/bin/false", "/dev/null").find("the peer exited with status 1") !=
        std::string::npos);
}

TEST_CASE("torch_peer.py --serve times the layer-norm cases, one request after another") {
  PeerOptions po;
  po.script = find_peer_script("");
  REQUIRE_FALSE(po.script.empty());  // a data dependency of this test
  po.threads = 1;
  po.timing = quick_timing();
  const auto all = gpt2_cases();
  const auto small = filter_cases(all, "layer_norm (256");
  const auto large = filter_cases(all, "layer_norm (1024");
  REQUIRE(small.size() == 1);
  REQUIRE(large.size() == 1);
  TorchPeerSession peer(po);
  const PeerResult r = peer.time(small);
  if (!r.available) {
    WARN("PyTorch peer unavailable: " << r.reason);
    CHECK_FALSE(r.reason.empty());
    return;
  }
  CHECK(r.threads == 1);
  REQUIRE(r.seconds.count(small[0].id) == 1);
  CHECK(r.seconds.at(small[0].id) > 0.0);
  CHECK(r.seconds.at(small[0].id) < 1.0);  // 0.8 MB of layer norm
  // The same process answers the next request, with that case's id only.
  const PeerResult next = peer.time(large);
  REQUIRE(next.available);
  CHECK(next.seconds.size() == 1);
  CHECK(next.seconds.at(large[0].id) > 0.0);
}

TEST_CASE("parse_peer_output reads the train mode's peak RSS") {
  const PeerResult r = parse_peer_output(
      "{\"torch_version\": \"1.13.1\", \"threads\": 1, \"blas\": \"x\", \"results\": "
      "[{\"id\": 0, \"seconds\": 1.5, \"peak_rss_bytes\": 3000000000}, {\"id\": 1, "
      "\"seconds\": 2.5}]}");
  REQUIRE(r.available);
  CHECK(r.seconds.at(1) == 2.5);
  REQUIRE(r.peak_rss_bytes.size() == 1);
  CHECK(r.peak_rss_bytes.at(0) == 3000000000LL);  // above 2^31: read as 64-bit
}

TEST_CASE("parse_int, parse_bytes and parse_shapes accept good values and name bad ones") {
  CHECK(parse_int("--steps", "12", 1, 100) == 12);
  CHECK_THROWS_WITH(parse_int("--steps", "0", 1, 100),
                    "[bench] expected --steps to be an integer in [1, 100], got '0'");
  CHECK_THROWS_AS(parse_int("--steps", "3x", 1, 100), UsageError);
  CHECK_THROWS_AS(parse_int("--steps", "", 1, 100), UsageError);
  CHECK(parse_bytes("--max-bytes", "1024") == 1024);
  CHECK(parse_bytes("--max-bytes", "64K") == 64 << 10);
  CHECK(parse_bytes("--max-bytes", "256M") == int64_t(256) << 20);
  CHECK(parse_bytes("--max-bytes", "2G") == int64_t(2) << 30);
  CHECK_THROWS_WITH(parse_bytes("--max-bytes", "64Q"),
                    "[bench] expected --max-bytes to be a size like 1024, 64K or 256M, got '64Q'");
  CHECK_THROWS_AS(parse_bytes("--max-bytes", "M"), UsageError);
  CHECK_THROWS_AS(parse_bytes("--max-bytes", "-4K"), UsageError);
  const auto shapes = parse_shapes("--shapes", "4x64,2x256");
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0] == std::make_pair(int64_t(4), int64_t(64)));
  CHECK(shapes[1] == std::make_pair(int64_t(2), int64_t(256)));
  CHECK(parse_shapes("--shapes", "1x1").size() == 1);
  CHECK_THROWS_AS(parse_shapes("--shapes", "4x64,"), UsageError);
  CHECK_THROWS_AS(parse_shapes("--shapes", "4*64"), UsageError);
  CHECK_THROWS_AS(parse_shapes("--shapes", "0x64"), UsageError);
}

TEST_CASE("ArgCursor walks flags and values") {
  ArgCursor args({"--steps", "3", "--quick", "--model"});
  REQUIRE(args.next());
  CHECK(args.flag() == "--steps");
  CHECK(args.value() == "3");
  REQUIRE(args.next());
  CHECK(args.flag() == "--quick");
  REQUIRE(args.next());
  CHECK_THROWS_WITH(args.value(), "[bench] expected a value after --model");
  CHECK_FALSE(args.next());
}

TEST_CASE("peak_rss_bytes sees touched memory; reset_peak_rss lowers the mark") {
  const int64_t before = peak_rss_bytes();
  REQUIRE(before > 0);
  constexpr size_t kBytes = size_t(64) << 20;
  {
    auto block = std::make_unique<char[]>(kBytes);
    std::memset(block.get(), 1, kBytes);  // resident only once touched
    CHECK(peak_rss_bytes() >= int64_t(kBytes));
    CHECK(peak_rss_bytes() >= before);
    volatile char sink = block[kBytes / 2];
    (void)sink;
  }
  const int64_t with_block = peak_rss_bytes();
  if (!reset_peak_rss()) {
    WARN("/proc/self/clear_refs refused the reset; the peak mark keeps the past");
    return;
  }
  // The 64 MB block went back to the system (glibc serves it with mmap), so the mark drops.
  CHECK(peak_rss_bytes() < with_block - int64_t(32 << 20));
}

TEST_CASE("torch_peer.py times a gpt-tiny training step (or says why it cannot)") {
  PeerOptions po;
  po.script = find_peer_script("");
  REQUIRE_FALSE(po.script.empty());
  po.threads = 1;
  const std::string spec =
      R"({"config": {"vocab_size": 256, "context_length": 64, "n_layers": 2, "n_heads": 4,
          "d_model": 128, "mlp_hidden": 0, "ln_eps": 1e-5, "bias": true,
          "tie_embeddings": true, "init_std": 0.02},
         "shapes": [{"id": 0, "batch": 2, "seq": 16}, {"id": 5, "batch": 1, "seq": 64}],
         "warmup": 1, "steps": 2})";
  const PeerResult r = run_torch_train_peer(spec, po);
  if (!r.available) {
    WARN("PyTorch peer unavailable: " << r.reason);
    CHECK_FALSE(r.reason.empty());
    return;
  }
  CHECK(r.threads == 1);
  for (int id : {0, 5}) {
    REQUIRE(r.seconds.count(id) == 1);
    CHECK(r.seconds.at(id) > 0.0);
    CHECK(r.seconds.at(id) < 30.0);
    REQUIRE(r.peak_rss_bytes.count(id) == 1);
    CHECK(r.peak_rss_bytes.at(id) > (int64_t(20) << 20));  // torch itself takes more than 20 MB
  }
}
