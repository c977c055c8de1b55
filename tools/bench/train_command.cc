// `bench train`: tokens/s and peak memory of a GPT training step (forward, backward, AdamW; f32)
// on Tessera beside PyTorch eager on the CPU, measured in the same run, one row per batch shape.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/gemm.h"
#include "models/gpt/gpt_config.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/peer_rounds.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/bench/timer.h"
#include "tools/bench/torch_peer_client.h"
#include "tools/bench/train_bench.h"

namespace tessera::bench {

const char* const kTrainUsage =
    "usage: bench train [--model PRESET] [--shapes BxT,...] [--warmup N] [--steps N]\n"
    "                   [--threads N] [--no-peer] [--python PATH] [--peer-script PATH]\n"
    "                   [--profile PATH] [--rounds N]\n"
    "  GPT training step (forward, backward, AdamW; f32): tokens/s and peak memory, Tessera vs\n"
    "  PyTorch eager on the CPU, with the ratio (> 1: Tessera is faster)\n"
    "  --model PRESET  gpt2-124m (default), gpt-tiny, gpt-mini, ... (models/gpt presets)\n"
    "  --shapes LIST   batch x sequence length per row (default 4x64,4x256)\n"
    "  --warmup N      untimed steps per shape (default 2)\n"
    "  --steps N       timed steps per shape; the median is reported (default 5)\n"
    "  --threads N     CPU threads for both (default: TESSERA_NUM_THREADS or all cores)\n"
    "  --no-peer       skip PyTorch\n"
    "  --python PATH   interpreter for the peer (default /usr/bin/python3)\n"
    "  --peer-script PATH  torch_peer.py (default: found beside the binary)\n"
    "  --profile PATH  after each shape's timed steps, profile one more step: a Chrome trace\n"
    "                  (PATH with the shape before its extension) and a table of time per op family\n"
    "  --rounds N      measure both sides N times, alternating Tessera and PyTorch, and report\n"
    "                  the median of each and every round's ratio (default 1): on a shared host\n"
    "                  one round can catch a slow spell the other side missed\n";

namespace {

struct Args {
  std::string model = "gpt2-124m";
  std::vector<std::pair<int64_t, int64_t>> shapes{{4, 64}, {4, 256}};
  TrainBenchOptions bench;
  int threads = 0;  // 0: keep the default
  int rounds = 1;
  bool peer = true;
  std::string python = "/usr/bin/python3", peer_script;
};

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& arg = args.flag();
    if (arg == "--model") {
      a.model = args.value();
    } else if (arg == "--shapes") {
      a.shapes = parse_shapes(arg, args.value());
    } else if (arg == "--warmup") {
      a.bench.warmup = int(parse_int(arg, args.value(), 0, 1000));
    } else if (arg == "--steps") {
      a.bench.steps = int(parse_int(arg, args.value(), 1, 1000));
    } else if (arg == "--threads") {
      a.threads = int(parse_int(arg, args.value(), 1, 4096));
    } else if (arg == "--no-peer") {
      a.peer = false;
    } else if (arg == "--python") {
      a.python = args.value();
    } else if (arg == "--profile") {
      a.bench.profile_path = args.value();
    } else if (arg == "--peer-script") {
      a.peer_script = args.value();
    } else if (arg == "--rounds") {
      a.rounds = int(parse_int(arg, args.value(), 1, 100));
    } else {
      throw UsageError("expected an option of bench train, got '" + arg + "'");
    }
  }
  return a;
}

std::string mib(int64_t bytes) { return format_number(double(bytes) / (1 << 20), 0) + " MB"; }

// The peer's input: the model config and one entry per shape (see torch_peer.py).
std::string train_spec_json(const gpt::GPTConfig& config, const Args& a) {
  nlohmann::json shapes = nlohmann::json::array();
  for (size_t i = 0; i < a.shapes.size(); ++i) {
    shapes.push_back({{"id", i}, {"batch", a.shapes[i].first}, {"seq", a.shapes[i].second}});
  }
  return nlohmann::json{{"config", config.to_json()},
                        {"shapes", shapes},
                        {"warmup", a.bench.warmup},
                        {"steps", a.bench.steps},
                        {"lr", a.bench.lr},
                        {"weight_decay", a.bench.weight_decay}}
      .dump();
}

// One row per shape; the PyTorch columns only when the peer answered. ours[i].step_seconds == 0:
// the shape failed.
Table results_table(const Args& a, const std::vector<TrainStepResult>& ours,
                    const PeerResult& peer, const std::vector<std::string>& round_ratios) {
  const bool rounds = a.rounds > 1 && peer.available;
  std::vector<std::string> headers = {"model", "B x T", "Tessera tok/s"};
  if (peer.available) headers.insert(headers.end(), {"PyTorch tok/s", "ratio"});
  if (rounds) headers.push_back("ratio per round");
  headers.push_back("Tessera step (s)");
  if (peer.available) headers.push_back("PyTorch step (s)");
  headers.insert(headers.end(), {"Tessera peak alloc", "Tessera peak RSS"});
  if (peer.available) headers.push_back("PyTorch peak RSS");
  Table table(headers);
  for (size_t col = 2; col < headers.size(); ++col) table.align_right(col);
  for (size_t i = 0; i < a.shapes.size(); ++i) {
    const auto [b, t] = a.shapes[i];
    const double tokens = double(b * t);
    const TrainStepResult& r = ours[i];
    const bool ok = r.step_seconds > 0.0;
    const auto it = peer.seconds.find(int(i));
    const bool theirs = peer.available && it != peer.seconds.end() && it->second > 0.0;
    std::vector<std::string> row = {a.model, std::to_string(b) + " x " + std::to_string(t),
                                    ok ? format_number(tokens / r.step_seconds, 1) : "failed"};
    if (peer.available) {
      row.push_back(theirs ? format_number(tokens / it->second, 1) : "-");
      row.push_back(ok && theirs ? format_number(it->second / r.step_seconds, 2) + "x" : "-");
    }
    if (rounds) row.push_back(round_ratios[i].empty() ? "-" : round_ratios[i]);
    row.push_back(ok ? format_number(r.step_seconds, 3) : "-");
    if (peer.available) row.push_back(theirs ? format_number(it->second, 3) : "-");
    row.push_back(ok ? mib(r.peak_alloc_bytes) : "-");
    row.push_back(ok ? mib(r.peak_rss_bytes) : "-");
    if (peer.available) {
      const auto rss = peer.peak_rss_bytes.find(int(i));
      row.push_back(rss != peer.peak_rss_bytes.end() && rss->second > 0 ? mib(rss->second) : "-");
    }
    table.add_row(std::move(row));
  }
  return table;
}

}  // namespace

int run_train_command(const std::vector<std::string>& argv, const std::string& argv0) {
  const Args args = parse_args(argv);
  gpt::GPTConfig config;
  try {
    config = gpt::gpt_preset(args.model);
  } catch (const std::exception& e) {
    throw UsageError(std::string("expected --model to name a preset: ") + e.what());
  }
  for (const auto& [b, t] : args.shapes) {
    if (t > config.context_length) {
      throw UsageError("expected --shapes lengths <= the context length " +
                       std::to_string(config.context_length) + " of " + args.model + ", got " +
                       std::to_string(b) + "x" + std::to_string(t));
    }
  }
  if (args.threads > 0) set_num_threads(args.threads);
  const int threads = num_threads();

  std::printf(
      "Tessera GPT training step, %s (%.1fM parameters), f32, AdamW: GEMM ISA %s, %d threads, "
      "CPU %s",
      args.model.c_str(), double(gpt::gpt_num_parameters(config)) / 1e6,
      kernels::cpu::sgemm_isa(), threads, cpu_model().c_str());
  const std::string load = load_average();
  if (!load.empty()) std::printf(", load average %s", load.c_str());
  std::printf("\n");
  if (const std::string warning = overload_warning(load); !warning.empty()) {
    std::printf("%s\n", warning.c_str());
  }

  // Each round runs every shape on our side, then the peer's (see PeerRounds); the peaks are
  // each side's first measurement.
  const size_t shapes = args.shapes.size();
  std::vector<int> ids(shapes);
  for (size_t i = 0; i < shapes; ++i) ids[i] = int(i);
  PeerRounds rounds(ids, args.rounds);
  std::vector<TrainStepResult> ours(shapes);
  std::vector<std::string> failures;
  CpuTimes ours_spent, peer_spent;  // summed over the rounds
  for (int round = 0; round < args.rounds; ++round) {
    TrainBenchOptions opts = args.bench;
    if (round > 0) opts.profile_path.clear();  // one profile per shape is enough
    const CpuTimes ours_begin = cpu_times();
    for (size_t i = 0; i < shapes; ++i) {
      const auto [b, t] = args.shapes[i];
      std::fprintf(stderr, "[bench] tessera train %s %lld x %lld (round %d) ... ",
                   args.model.c_str(), static_cast<long long>(b), static_cast<long long>(t),
                   round + 1);
      try {
        const TrainStepResult r = time_train_step(config, {b, t}, opts);
        std::fprintf(stderr, "%.3f s/step, loss %.3f\n", r.step_seconds, r.last_loss);
        if (!r.profile_report.empty()) std::printf("%s\n", r.profile_report.c_str());
        rounds.add_ours(round, i, r.step_seconds);
        if (round == 0) {
          // Later rounds start with the allocator's cache of earlier shapes' blocks resident, so
          // only the first round's peaks compare with a single run's.
          ours[i].peak_alloc_bytes = r.peak_alloc_bytes;
          ours[i].peak_rss_bytes = r.peak_rss_bytes;
        }
        ours[i].last_loss = r.last_loss;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "failed\n");
        failures.push_back(std::to_string(b) + "x" + std::to_string(t) + ": " + e.what());
      }
    }
    ours_spent.add(cpu_times().since(ours_begin));

    if (!args.peer) continue;
    PeerOptions po;
    po.python = args.python;
    po.script = args.peer_script.empty() ? find_peer_script(argv0) : args.peer_script;
    po.threads = threads;
    std::fprintf(stderr, "[bench] running the PyTorch peer (%zu shapes, round %d) ...\n", shapes,
                 round + 1);
    const CpuTimes peer_begin = cpu_times();
    const PeerResult answer = run_torch_train_peer(train_spec_json(config, args), po);
    peer_spent.add(cpu_times().since(peer_begin));
    if (!answer.available) {
      std::fprintf(stderr, "[bench] the peer failed in round %d: %s\n", round + 1,
                   answer.reason.c_str());
    }
    rounds.add_peer(round, answer);
  }
  // A shape that failed in any round is reported failed (step_seconds 0).
  for (size_t i = 0; i < shapes; ++i) ours[i].step_seconds = rounds.ours_median(i);
  const PeerResult peer = rounds.peer();
  const double ours_steal = ours_spent.steal_share(), peer_steal = peer_spent.steal_share();

  std::printf("%s", results_table(args, ours, peer, rounds.round_ratios()).render().c_str());
  if (peer.available) {
    std::printf(
        "PyTorch %s eager, %d threads, BLAS %s. ratio = Tessera / PyTorch tokens/s "
        "(> 1: Tessera is faster).\n",
        peer.torch_version.c_str(), peer.threads, peer.blas.c_str());
  } else if (args.peer) {
    std::printf("PyTorch peer unavailable: %s\n", peer.reason.c_str());
  } else {
    std::printf("PyTorch peer skipped (--no-peer)\n");
  }
  if (const std::string steal = steal_report(ours_steal, peer_steal); !steal.empty()) {
    std::printf("%s\n", steal.c_str());
  }
  std::printf(
      "tok/s = B*T / median step time of %d steps after %d warm-up steps; each shape builds a "
      "fresh model and AdamW (lr %g, weight decay %g). Peak alloc: Tessera's CPU allocator "
      "(tensors only); peak RSS: the process's VmHWM, reset before each shape (1 MB = 2^20 "
      "bytes).\n",
      args.bench.steps, args.bench.warmup, args.bench.lr, args.bench.weight_decay);
  if (args.rounds > 1) {
    std::printf(
        "%d rounds, Tessera then PyTorch in each: step times are the medians over rounds, peaks "
        "those of each side's first round.\n",
        args.rounds);
  }
  for (const std::string& f : failures) std::printf("FAILED %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace tessera::bench
