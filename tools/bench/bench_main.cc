// `bench [kernels | gemm | train | comm | cuda | adam] [options]`, `mpirun -np N bench tp | zero |
// pp | sp`: benchmarks. kernels (the default), train, cuda and adam print Tessera beside PyTorch
// measured in the same run, gemm beside OpenBLAS; comm, tp, zero, pp and sp run under mpirun.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"

namespace tessera::bench {
namespace {

constexpr const char* kUsage =
    "usage: bench [kernels | gemm | train | comm | cuda | adam] [options]   (bench <subcommand> --help for "
    "its options)\n"
    "       mpirun -np N bench tp [options]\n"
    "       mpirun -np N bench zero [options]\n"
    "       mpirun -np P bench pp [options]\n"
    "       mpirun -np N bench sp [options]\n"
    "  kernels   GPT-2 124M op timings, Tessera vs PyTorch eager (the default subcommand)\n"
    "  gemm      SGEMM per micro-kernel ISA on the GPT-2 124M products and their tensor-\n"
    "            parallel shards, Tessera vs OpenBLAS's cblas_sgemm with the same ISA's kernels\n"
    "  train     GPT-2 124M training step: tokens/s and peak memory, Tessera vs PyTorch\n"
    "  comm      collectives (time, algbw, busbw) and data-parallel scaling; mpirun -np N\n"
    "  cuda      one GPU: GEMM and fused-attention TFLOP/s, GPT-2 124M training tokens/s, MFU\n"
    "            and peak memory, Tessera vs PyTorch on the same GPU\n"
    "  adam      an AdamW step over GPT-2 124M's f32 parameters: step time and GB/s, Tessera's\n"
    "            CPU Adam vs torch.optim.AdamW(foreach=True)\n"
    "  tp        tensor parallelism per scheme beside serial (a gpt2-124m-wide block, a GPT\n"
    "            step): time, bytes per rank vs the documented formula, memory; mpirun -np N\n"
    "  zero      ZeRO stages 0-3 on the data ranks (a GPT, f32 and bf16): model-state bytes per\n"
    "            rank vs the ZeRO formulas, step time, bytes per rank vs 2 Psi; mpirun -np N\n"
    "  pp        pipeline schedules (gpipe, 1f1b, interleaved, zero_bubble) on a small GPT over P\n"
    "            stages: measured bubble vs theory and simulator, step time, activation memory\n"
    "            per rank; mpirun -np P\n"
    "  sp        sequence parallelism (ring, all_to_all, ring_flash) on a small GPT beside tp 1d\n"
    "            and one rank: activation memory per rank against T, the longest T under a\n"
    "            per-rank budget; mpirun -np N\n";

int print_help(const char* text) {
  std::fputs(text, stdout);
  return 0;
}

bool wants_help(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

int run(int argc, char** argv) {
  std::string sub = "kernels";
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    sub = argv[1];
    first = 2;
  }
  const std::vector<std::string> args(argv + first, argv + argc);
  const std::string argv0 = argc > 0 ? argv[0] : "";
  if (first == 1 && wants_help(args)) return print_help(kUsage);
  if (sub == "kernels") {
    if (wants_help(args)) return print_help(kKernelsUsage);
    return run_kernels_command(args, argv0);
  }
  if (sub == "gemm") {
    if (wants_help(args)) return print_help(kGemmUsage);
    return run_gemm_command(args);
  }
  if (sub == "train") {
    if (wants_help(args)) return print_help(kTrainUsage);
    return run_train_command(args, argv0);
  }
  if (sub == "comm") {
    if (wants_help(args)) return print_help(kCommUsage);
    return run_comm_command(argc, argv, first);
  }
  if (sub == "cuda") {
    if (wants_help(args)) return print_help(kCudaUsage);
    return run_cuda_command(args, argv0);
  }
  if (sub == "adam") {
    if (wants_help(args)) return print_help(kAdamUsage);
    return run_adam_command(args, argv0);
  }
  if (sub == "tp") {
    if (wants_help(args)) return print_help(kTpUsage);
    return run_tp_command(argc, argv, first);
  }
  if (sub == "zero") {
    if (wants_help(args)) return print_help(kZeroUsage);
    return run_zero_command(argc, argv, first);
  }
  if (sub == "pp") {
    if (wants_help(args)) return print_help(kPpUsage);
    return run_pp_command(argc, argv, first);
  }
  if (sub == "sp") {
    if (wants_help(args)) return print_help(kSpUsage);
    return run_sp_command(argc, argv, first);
  }
  // The subcommands before tp are named as they always were: scripts match this message.
  throw UsageError(
      "expected the subcommand kernels, train, comm or cuda (or gemm, adam, tp, zero, pp, sp), "
      "got '" + sub + "'");
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  try {
    return tessera::bench::run(argc, argv);
  } catch (const tessera::bench::UsageError& e) {
    std::fprintf(stderr, "%s\n(bench --help lists the subcommands)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[bench] %s\n", e.what());
    return 1;
  }
}
