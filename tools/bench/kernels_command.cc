// `bench kernels`: times Tessera's kernels on the GPT-2 124M shapes and prints them beside
// PyTorch (CPU, eager) measured in the same run, case by case in alternation, with the ratio
// Tessera/PyTorch (> 1: Tessera is faster).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/gemm.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/cases.h"
#include "tools/bench/commands.h"
#include "tools/bench/kernel_bench.h"
#include "tools/bench/peer_rounds.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/bench/timer.h"
#include "tools/bench/torch_peer_client.h"

namespace tessera::bench {

const char* const kKernelsUsage =
    "usage: bench kernels [--threads N] [--quick] [--filter SUBSTRING] [--no-peer]\n"
    "                     [--rounds N] [--python PATH] [--peer-script PATH]\n"
    "  GPT-2 124M op timings, Tessera vs PyTorch eager, with the ratio (> 1: Tessera is faster)\n"
    "  --threads N    CPU threads for both (default: TESSERA_NUM_THREADS or all cores)\n"
    "  --quick        few repetitions (smoke tests); numbers are rough\n"
    "  --filter S     only cases whose \"op shape\" contains S (e.g. layer_norm, attention)\n"
    "  --no-peer      skip PyTorch\n"
    "  --rounds N     time every case N times on both sides and report the medians over rounds\n"
    "                 and each round's ratio (default 1)\n"
    "  --python PATH  interpreter for the peer (default /usr/bin/python3)\n"
    "  --peer-script PATH  torch_peer.py (default: found beside the binary)\n";

namespace {

struct Args {
  int threads = 0;  // 0: keep the default
  int rounds = 1;
  bool quick = false, peer = true;
  std::string filter, python = "/usr/bin/python3", peer_script;
};

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& arg = args.flag();
    if (arg == "--quick") {
      a.quick = true;
    } else if (arg == "--no-peer") {
      a.peer = false;
    } else if (arg == "--threads") {
      a.threads = int(parse_int(arg, args.value(), 1, 4096));
    } else if (arg == "--filter") {
      a.filter = args.value();
    } else if (arg == "--rounds") {
      a.rounds = int(parse_int(arg, args.value(), 1, 100));
    } else if (arg == "--python") {
      a.python = args.value();
    } else if (arg == "--peer-script") {
      a.peer_script = args.value();
    } else {
      throw UsageError("expected an option of bench kernels, got '" + arg + "'");
    }
  }
  return a;
}

std::string cell(const BenchCase& c, double seconds) {
  return format_number(throughput(c, seconds), 1) + " " + metric_unit(c.metric);
}

// One row per case; the PyTorch columns only when the peer answered. ours[i] == 0: case failed.
// With several rounds, round_ratios (one string per case) fills a last column.
Table results_table(const std::vector<BenchCase>& cases, const std::vector<double>& ours,
                    const PeerResult& peer, int rounds_run,
                    const std::vector<std::string>& round_ratios) {
  const bool rounds = peer.available && rounds_run > 1;
  std::vector<std::string> headers = {"op", "shape", "Tessera"};
  if (peer.available) headers.insert(headers.end(), {"PyTorch", "ratio"});
  headers.push_back("Tessera ms");
  if (peer.available) headers.push_back("PyTorch ms");
  if (rounds) headers.push_back("ratio per round");
  Table table(headers);
  for (size_t col = 2; col < headers.size(); ++col) table.align_right(col);
  for (size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    const bool ok = ours[i] > 0.0;
    std::vector<std::string> row = {c.op, c.shape, ok ? cell(c, ours[i]) : "failed"};
    const auto it = peer.seconds.find(c.id);
    const bool theirs = peer.available && it != peer.seconds.end() && it->second > 0.0;
    if (peer.available) {
      row.push_back(theirs ? cell(c, it->second) : "-");
      row.push_back(ok && theirs ? format_number(it->second / ours[i], 2) + "x" : "-");
    }
    row.push_back(ok ? format_number(ours[i] * 1e3, 3) : "-");
    if (peer.available) row.push_back(theirs ? format_number(it->second * 1e3, 3) : "-");
    if (rounds) row.push_back(round_ratios[i].empty() ? "-" : round_ratios[i]);
    table.add_row(std::move(row));
  }
  return table;
}

}  // namespace

int run_kernels_command(const std::vector<std::string>& argv, const std::string& argv0) {
  const Args args = parse_args(argv);
  if (args.threads > 0) set_num_threads(args.threads);
  const int threads = num_threads();
  const TimingOptions timing = args.quick ? quick_timing() : TimingOptions{};
  const std::vector<BenchCase> cases = filter_cases(gpt2_cases(), args.filter);
  if (cases.empty()) {
    throw UsageError("expected --filter '" + args.filter + "' to match an op or shape, got no case");
  }

  std::printf("Tessera kernels, GPT-2 124M shapes, f32: GEMM ISA %s, %d threads, CPU %s",
              kernels::cpu::sgemm_isa(), threads, cpu_model().c_str());
  const std::string load = load_average();
  if (!load.empty()) std::printf(", load average %s", load.c_str());
  std::printf("%s\n", args.quick ? " (quick: few repetitions)" : "");
  if (const std::string warning = overload_warning(load); !warning.empty()) {
    std::printf("%s\n", warning.c_str());
  }

  // Each case is timed on our side, then by the peer, in turn; --rounds repeats that for every
  // case, and PeerRounds takes the medians.
  std::vector<int> ids;
  for (const BenchCase& c : cases) ids.push_back(c.id);
  PeerRounds rounds(ids, args.rounds);
  std::vector<std::string> failures;
  CpuTimes ours_spent, peer_spent;  // summed over the calls
  std::optional<TorchPeerSession> peer_session;
  if (args.peer) {
    PeerOptions po;
    po.python = args.python;
    po.script = args.peer_script.empty() ? find_peer_script(argv0) : args.peer_script;
    po.threads = threads;
    po.timing = timing;
    std::fprintf(stderr, "[bench] starting the PyTorch peer ...\n");
    peer_session.emplace(po);
  }
  for (int round = 0; round < args.rounds; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const BenchCase& c = cases[i];
      std::fprintf(stderr, "[bench] %s %s (round %d): tessera ", c.op.c_str(), c.shape.c_str(),
                   round + 1);
      const CpuTimes ours_begin = cpu_times();
      try {
        const double seconds = time_tessera(c, timing);
        rounds.add_ours(round, i, seconds);
        std::fprintf(stderr, "%.3f ms", seconds * 1e3);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "failed");
        const std::string failure = c.op + " " + c.shape + ": " + e.what();
        if (std::find(failures.begin(), failures.end(), failure) == failures.end()) {
          failures.push_back(failure);
        }
      }
      ours_spent.add(cpu_times().since(ours_begin));
      if (peer_session) {
        const CpuTimes peer_begin = cpu_times();
        const PeerResult answer = peer_session->time({c});
        peer_spent.add(cpu_times().since(peer_begin));
        const auto it = answer.seconds.find(c.id);
        if (it != answer.seconds.end()) std::fprintf(stderr, ", pytorch %.3f ms", it->second * 1e3);
        rounds.add_peer(round, answer);
      }
      std::fprintf(stderr, "\n");
    }
  }
  std::vector<double> ours(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) ours[i] = rounds.ours_median(i);
  const PeerResult peer = rounds.peer();
  const double ours_steal = ours_spent.steal_share();
  const double peer_steal = args.peer ? peer_spent.steal_share() : -1.0;

  std::printf("%s",
              results_table(cases, ours, peer, args.rounds, rounds.round_ratios()).render().c_str());

  if (peer.available) {
    std::printf(
        "PyTorch %s eager, %d threads, BLAS %s. ratio = Tessera / PyTorch throughput "
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
      "GFLOP/s count 2*M*N*K per GEMM; attention 4*B*H*T*T*D halved for the causal mask, "
      "fwd+bwd 3.5x that. GB/s count bytes read + written once. Times are medians.\n");
  if (args.rounds > 1) {
    std::printf(
        "%d rounds of every case, Tessera then PyTorch in turn: times are the medians over "
        "rounds.\n",
        args.rounds);
  }
  for (const std::string& f : failures) std::printf("FAILED %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace tessera::bench
