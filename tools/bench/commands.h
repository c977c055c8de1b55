// The bench subcommands. Each takes the arguments after its name; bad arguments throw UsageError.
#pragma once

#include <string>
#include <vector>

namespace tessera::bench {

// `bench kernels`: GPT-2 124M op timings, Tessera vs PyTorch eager. argv0 locates torch_peer.py.
int run_kernels_command(const std::vector<std::string>& args, const std::string& argv0);
// `bench train`: GPT training step tokens/s and peak memory, Tessera vs PyTorch.
int run_train_command(const std::vector<std::string>& args, const std::string& argv0);
// `bench cuda`: GEMMs, fused attention and the GPT training step on one GPU, Tessera vs PyTorch on
// the same GPU. Without a usable GPU: a one-line message and exit status 2.
int run_cuda_command(const std::vector<std::string>& args, const std::string& argv0);
// `bench adam`: an AdamW step over a GPT's f32 parameters, Tessera's CPU Adam vs PyTorch's
// foreach AdamW in the same run. argv0 locates adam_torch_peer.py.
int run_adam_command(const std::vector<std::string>& args, const std::string& argv0);
// `bench gemm`: Tessera's SGEMM per micro-kernel ISA beside OpenBLAS's cblas_sgemm (loaded at run
// time) on the GPT-2 124M products and their tensor-parallel shards.
int run_gemm_command(const std::vector<std::string>& args);
// `bench comm` (under mpirun): collectives and data-parallel scaling. argc/argv are the whole
// command line (MPI_Init may read it); options start at argv[first].
int run_comm_command(int argc, char** argv, int first);
// `bench tp` (under mpirun): tensor parallelism per scheme beside serial on a block and a GPT
// step: time, bytes per rank against the documented formula, memory per rank. As comm, argc/argv
// are the whole command line.
int run_tp_command(int argc, char** argv, int first);
// `bench zero` (under mpirun): ZeRO stages 0-3 on the data ranks, model-state bytes per rank by the
// allocator beside the ZeRO formulas, step time, bytes per rank beside the 2 Psi ring. As comm.
int run_zero_command(int argc, char** argv, int first);
// `bench pp` (under mpirun): pipeline schedules over the P ranks on a small GPT, the measured
// bubble fraction beside the theory's and the simulator's, step time, activation memory per rank.
// As comm.
int run_pp_command(int argc, char** argv, int first);
// `bench sp` (under mpirun): sequence parallelism on a small GPT, activation memory per rank
// against the sequence length per mode beside tp 1d and one rank, and the longest sequence each
// trains under a per-rank activation budget. As comm.
int run_sp_command(int argc, char** argv, int first);

extern const char* const kKernelsUsage;
extern const char* const kTrainUsage;
extern const char* const kCommUsage;
extern const char* const kCudaUsage;
extern const char* const kAdamUsage;
extern const char* const kGemmUsage;
extern const char* const kTpUsage;
extern const char* const kZeroUsage;
extern const char* const kPpUsage;
extern const char* const kSpUsage;

}  // namespace tessera::bench
