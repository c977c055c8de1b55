// `bench cuda`: on one GPU, Tessera's cuBLASLt GEMMs, fused attention and GPT training step beside
// PyTorch on the same GPU in the same run, one table per section, each printed as soon as it is
// measured (a run stopped by a time limit keeps the sections already done).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/cuda_cases.h"
#include "tools/bench/table.h"
#include "tools/bench/torch_peer_client.h"

#ifdef TESSERA_CUDA
#include "core/cuda/runtime.h"
#include "tools/bench/cuda_bench.h"
#endif

namespace tessera::bench {

const char* const kCudaUsage =
    "usage: bench cuda [--sections LIST] [--warmup N] [--reps N] [--steps N] [--gemm-dtypes LIST]\n"
    "                  [--gemm-sizes MxKxN,...] [--attention BxHxTxD,...] [--model PRESET]\n"
    "                  [--shapes BxT,...] [--precisions LIST] [--peak-tflops X] [--device N]\n"
    "                  [--no-peer] [--python PATH] [--peer-script PATH]\n"
    "  One GPU: GEMM TFLOP/s (kernels::matmul, cuBLASLt), fused attention forward and\n"
    "  forward+backward TFLOP/s, and the GPT training step (tokens/s, MFU, peak device memory),\n"
    "  each beside PyTorch on the same GPU (torch.matmul, flash scaled_dot_product_attention,\n"
    "  eager GPT with AdamW); ratio = Tessera / PyTorch throughput (> 1: Tessera is faster).\n"
    "  Exit status 2 when no CUDA GPU is usable.\n"
    "  --sections LIST     any of gemm,attention,train (default all three)\n"
    "  --warmup N          untimed calls per kernel case and steps per training case (default 2)\n"
    "  --reps N            event-timed repetitions per kernel case; the median (default 20)\n"
    "  --steps N           timed training steps per case; the median (default 5)\n"
    "  --gemm-dtypes LIST  of bf16,f16,f32 (default all three; f32 without TF32 on both sides)\n"
    "  --gemm-sizes LIST   (default 4096x768x2304,4096x768x768,4096x768x3072,4096x3072x768,\n"
    "                      8192x8192x8192: GPT-2 124M at B*T = 4096 tokens, and 8192^3)\n"
    "  --attention LIST    causal bf16 shapes (default 8x12x1024x64,4x16x2048x128)\n"
    "  --model PRESET      GPT for the training step (default gpt2-124m)\n"
    "  --shapes LIST       training batch x sequence length (default 8x1024)\n"
    "  --precisions LIST   of f32,bf16 (default both; bf16: Tessera's model in bf16 with f32\n"
    "                      master weights, PyTorch's autocast bf16)\n"
    "  --peak-tflops X     dense bf16 peak for MFU (default 989: H100/H200 SXM)\n"
    "  --device N          CUDA device index (default 0)\n"
    "  --no-peer           skip PyTorch\n"
    "  --python PATH       interpreter with a CUDA PyTorch for the peer (default python3 on PATH)\n"
    "  --peer-script PATH  torch_peer.py (default: found beside the binary)\n";

namespace {

struct Args {
  CudaPlan plan;
  bool gemm = true, attention = true, train = true;
  double peak_tflops = 989.0;
  int device = 0;
  bool peer = true;
  std::string python = "python3", peer_script;
};

void parse_sections(const std::string& text, Args& a) {
  a.gemm = a.attention = a.train = false;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string s = text.substr(start, comma - start);
    if (s == "gemm") {
      a.gemm = true;
    } else if (s == "attention") {
      a.attention = true;
    } else if (s == "train") {
      a.train = true;
    } else {
      throw UsageError("expected --sections to list gemm, attention or train, got '" + s + "'");
    }
    start = comma + 1;
  }
}

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  std::vector<DType> gemm_dtypes = {DType::bf16, DType::f16, DType::f32};
  std::vector<DType> precisions = {DType::f32, DType::bf16};
  std::vector<std::vector<int64_t>> gemm_sizes = default_gemm_sizes();
  std::vector<std::vector<int64_t>> attention = default_attention_shapes();
  std::vector<std::pair<int64_t, int64_t>> shapes = {{8, 1024}};
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& arg = args.flag();
    if (arg == "--sections") {
      parse_sections(args.value(), a);
    } else if (arg == "--warmup") {
      a.plan.warmup = int(parse_int(arg, args.value(), 0, 1000));
    } else if (arg == "--reps") {
      a.plan.reps = int(parse_int(arg, args.value(), 1, 10000));
    } else if (arg == "--steps") {
      a.plan.steps = int(parse_int(arg, args.value(), 1, 1000));
    } else if (arg == "--gemm-dtypes") {
      gemm_dtypes = parse_dtypes(arg, args.value(), {DType::bf16, DType::f16, DType::f32});
    } else if (arg == "--gemm-sizes") {
      gemm_sizes = parse_dim_lists(arg, args.value(), 3);
    } else if (arg == "--attention") {
      attention = parse_dim_lists(arg, args.value(), 4);
    } else if (arg == "--model") {
      a.plan.model = args.value();
    } else if (arg == "--shapes") {
      shapes = parse_shapes(arg, args.value());
    } else if (arg == "--precisions") {
      precisions = parse_dtypes(arg, args.value(), {DType::f32, DType::bf16});
    } else if (arg == "--peak-tflops") {
      a.peak_tflops = parse_double(arg, args.value(), 1e-3, 1e6);
    } else if (arg == "--device") {
      a.device = int(parse_int(arg, args.value(), 0, 1023));
    } else if (arg == "--no-peer") {
      a.peer = false;
    } else if (arg == "--python") {
      a.python = args.value();
    } else if (arg == "--peer-script") {
      a.peer_script = args.value();
    } else {
      throw UsageError("expected an option of bench cuda, got '" + arg + "'");
    }
  }
  for (const auto& s : attention) {
    if (s[3] != 32 && s[3] != 64 && s[3] != 128) {
      throw UsageError("expected --attention head sizes D in {32, 64, 128}, got " +
                       std::to_string(s[3]));
    }
  }
  try {
    a.plan.config = gpt::gpt_preset(a.plan.model);
  } catch (const std::exception& e) {
    throw UsageError(std::string("expected --model to name a preset: ") + e.what());
  }
  for (const auto& [b, t] : shapes) {
    if (t > a.plan.config.context_length) {
      throw UsageError("expected --shapes lengths <= the context length " +
                       std::to_string(a.plan.config.context_length) + " of " + a.plan.model +
                       ", got " + std::to_string(b) + "x" + std::to_string(t));
    }
  }
  if (a.gemm) add_gemm_cases(a.plan, gemm_dtypes, gemm_sizes);
  if (a.attention) add_attention_cases(a.plan, attention);
  if (a.train) add_train_cases(a.plan, precisions, shapes);
  return a;
}

#ifdef TESSERA_CUDA

std::string gib(int64_t bytes) {
  return format_number(double(bytes) / double(int64_t(1) << 30), 2) + " GiB";
}

// The peer's line under a table: what ran, or why it did not.
void print_peer_note(const Args& a, const PeerResult& peer, const char* what) {
  if (peer.available) {
    std::printf("PyTorch %s on %s: %s.\n", peer.torch_version.c_str(), peer.device.c_str(), what);
  } else if (a.peer) {
    std::printf("PyTorch peer unavailable: %s\n", peer.reason.c_str());
  } else {
    std::printf("PyTorch peer skipped (--no-peer)\n");
  }
}

// A kernel-section row: label cells, then TFLOP/s, ratio and milliseconds of both sides.
// ours == 0: the case failed.
void add_kernel_row(Table& table, std::vector<std::string> row, double flops, double ours,
                    const PeerResult& peer, int id) {
  const auto it = peer.seconds.find(id);
  const bool theirs = peer.available && it != peer.seconds.end() && it->second > 0.0;
  row.push_back(ours > 0 ? format_number(flops / ours / 1e12, 1) : "failed");
  if (peer.available) {
    row.push_back(theirs ? format_number(flops / it->second / 1e12, 1) : "-");
    row.push_back(ours > 0 && theirs ? format_number(it->second / ours, 2) + "x" : "-");
  }
  row.push_back(ours > 0 ? format_number(ours * 1e3, 3) : "-");
  if (peer.available) row.push_back(theirs ? format_number(it->second * 1e3, 3) : "-");
  table.add_row(std::move(row));
}

Table kernel_table(std::vector<std::string> labels, const PeerResult& peer) {
  const size_t first = labels.size();
  labels.push_back("Tessera TFLOP/s");
  if (peer.available) labels.insert(labels.end(), {"PyTorch TFLOP/s", "ratio"});
  labels.push_back("Tessera ms");
  if (peer.available) labels.push_back("PyTorch ms");
  Table table(labels);
  for (size_t col = first; col < labels.size(); ++col) table.align_right(col);
  return table;
}

PeerResult run_section_peer(const Args& a, const std::string& argv0, const std::string& section) {
  if (!a.peer) return {};
  PeerOptions po;
  po.python = a.python;
  po.script = a.peer_script.empty() ? find_peer_script(argv0) : a.peer_script;
  po.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::fprintf(stderr, "[bench] running the PyTorch peer (%s) ...\n", section.c_str());
  return run_torch_cuda_peer(cuda_spec_json(a.plan, section), a.device, po);
}

// Runs one case, turning an exception into a failure line (0 seconds: failed).
template <typename Fn>
double guarded(const std::string& what, std::vector<std::string>& failures, Fn&& fn) {
  std::fprintf(stderr, "[bench] tessera %s ... ", what.c_str());
  try {
    const double s = fn();
    std::fprintf(stderr, "%.3f ms\n", s * 1e3);
    return s;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "failed\n");
    failures.push_back(what + ": " + e.what());
    return 0.0;
  }
}

void gemm_section(const Args& a, const std::string& argv0, std::vector<std::string>& failures) {
  std::vector<double> ours;
  for (const GemmCase& c : a.plan.gemms) {
    const std::string shape =
        std::to_string(c.m) + " x " + std::to_string(c.k) + " x " + std::to_string(c.n);
    ours.push_back(guarded(std::string("matmul ") + dtype_name(c.dtype) + " " + shape, failures,
                           [&] { return time_gemm(c, a.device, a.plan.warmup, a.plan.reps); }));
  }
  release_cached_device_memory();
  const PeerResult peer = run_section_peer(a, argv0, "gemm");
  std::printf("\n## GEMM: kernels::matmul (cuBLASLt) vs torch.matmul (cuBLAS)\n");
  Table table = kernel_table({"dtype", "M x K x N"}, peer);
  for (size_t i = 0; i < a.plan.gemms.size(); ++i) {
    const GemmCase& c = a.plan.gemms[i];
    add_kernel_row(table,
                   {dtype_name(c.dtype), std::to_string(c.m) + " x " + std::to_string(c.k) +
                                             " x " + std::to_string(c.n)},
                   c.flops(), ours[i], peer, c.id);
  }
  std::printf("%s", table.render().c_str());
  print_peer_note(a, peer, "torch.matmul into a preallocated output, TF32 off");
  std::printf(
      "TFLOP/s = 2 M K N / time per call: the median of %d CUDA-event-timed repetitions (each of "
      "enough back-to-back calls to span ~50 GFLOP) after %d warm-up calls; f32 runs without "
      "TF32 on both sides.\n",
      a.plan.reps, a.plan.warmup);
  std::fflush(stdout);
}

void attention_section(const Args& a, const std::string& argv0,
                       std::vector<std::string>& failures) {
  std::vector<double> ours;
  for (const AttentionCase& c : a.plan.attention) {
    const std::string shape = std::to_string(c.b) + " x " + std::to_string(c.h) + " x " +
                              std::to_string(c.t) + " x " + std::to_string(c.d);
    ours.push_back(guarded(std::string("attention ") + (c.backward ? "fwd+bwd " : "fwd ") + shape,
                           failures,
                           [&] { return time_attention(c, a.device, a.plan.warmup, a.plan.reps); }));
  }
  release_cached_device_memory();
  const PeerResult peer = run_section_peer(a, argv0, "attention");
  std::printf(
      "\n## Fused causal attention, bf16: kernels::attention_forward/backward vs "
      "scaled_dot_product_attention (flash)\n");
  Table table = kernel_table({"pass", "B x H x T x D"}, peer);
  for (size_t i = 0; i < a.plan.attention.size(); ++i) {
    const AttentionCase& c = a.plan.attention[i];
    add_kernel_row(table,
                   {c.backward ? "fwd+bwd" : "fwd",
                    std::to_string(c.b) + " x " + std::to_string(c.h) + " x " +
                        std::to_string(c.t) + " x " + std::to_string(c.d)},
                   c.flops(), ours[i], peer, c.id);
  }
  std::printf("%s", table.render().c_str());
  print_peer_note(a, peer, "F.scaled_dot_product_attention(is_causal=True) on the flash backend");
  std::printf(
      "FLOPs as flash-attention counts them: forward 4 B H T^2 D / 2 (causal), forward+backward "
      "3.5x that; time per call as in the GEMM table (%d repetitions, %d warm-up calls).\n",
      a.plan.reps, a.plan.warmup);
  std::fflush(stdout);
}

void train_section(const Args& a, const std::string& argv0, std::vector<std::string>& failures) {
  const int64_t params = gpt::gpt_num_parameters(a.plan.config);
  std::vector<CudaTrainResult> ours(a.plan.train.size());
  for (size_t i = 0; i < a.plan.train.size(); ++i) {
    const TrainCase& c = a.plan.train[i];
    guarded(a.plan.model + " step " + dtype_name(c.precision) + " " + std::to_string(c.batch) +
                " x " + std::to_string(c.seq),
            failures, [&] {
              ours[i] = time_cuda_train_step(a.plan.config, c, a.device, a.plan);
              return ours[i].step_seconds;
            });
  }
  release_cached_device_memory();
  const PeerResult peer = run_section_peer(a, argv0, "train");
  std::printf("\n## GPT training step (forward, backward, AdamW): %s, %.1fM parameters\n",
              a.plan.model.c_str(), double(params) / 1e6);
  std::vector<std::string> headers = {"precision", "B x T", "Tessera tok/s"};
  if (peer.available) headers.insert(headers.end(), {"PyTorch tok/s", "ratio"});
  headers.push_back("Tessera MFU");
  if (peer.available) headers.push_back("PyTorch MFU");
  headers.push_back("Tessera step ms");
  if (peer.available) headers.push_back("PyTorch step ms");
  headers.push_back("Tessera peak mem");
  if (peer.available) headers.push_back("PyTorch peak mem");
  Table table(headers);
  for (size_t col = 2; col < headers.size(); ++col) table.align_right(col);
  for (size_t i = 0; i < a.plan.train.size(); ++i) {
    const TrainCase& c = a.plan.train[i];
    const CudaTrainResult& r = ours[i];
    const double tokens = double(c.batch * c.seq);
    const bool ok = r.step_seconds > 0.0;
    const auto it = peer.seconds.find(c.id);
    const bool theirs = peer.available && it != peer.seconds.end() && it->second > 0.0;
    auto pct = [&](double seconds) {
      return format_number(100.0 * mfu(params, tokens / seconds, a.peak_tflops), 1) + "%";
    };
    std::vector<std::string> row = {dtype_name(c.precision),
                                    std::to_string(c.batch) + " x " + std::to_string(c.seq),
                                    ok ? format_number(tokens / r.step_seconds, 0) : "failed"};
    if (peer.available) {
      row.push_back(theirs ? format_number(tokens / it->second, 0) : "-");
      row.push_back(ok && theirs ? format_number(it->second / r.step_seconds, 2) + "x" : "-");
    }
    row.push_back(ok ? pct(r.step_seconds) : "-");
    if (peer.available) row.push_back(theirs ? pct(it->second) : "-");
    row.push_back(ok ? format_number(r.step_seconds * 1e3, 1) : "-");
    if (peer.available) row.push_back(theirs ? format_number(it->second * 1e3, 1) : "-");
    row.push_back(ok ? gib(r.peak_device_bytes) : "-");
    if (peer.available) {
      const auto mem = peer.peak_device_bytes.find(c.id);
      row.push_back(mem != peer.peak_device_bytes.end() && mem->second > 0 ? gib(mem->second)
                                                                            : "-");
    }
    table.add_row(std::move(row));
  }
  std::printf("%s", table.render().c_str());
  print_peer_note(a, peer,
                  "eager torch_gpt.py (flash scaled_dot_product_attention), torch.optim.AdamW, bf16 "
                  "by autocast over f32 weights, TF32 off");
  std::printf(
      "tok/s = B*T / median wall time of %d steps (device synchronised after each) after %d "
      "warm-up steps; a fresh model and AdamW (lr %g, weight decay %g) per row. MFU = 6 * %lld "
      "params * tok/s / %g TFLOP/s (--peak-tflops; default 989, the dense bf16 peak of an "
      "H100/H200 SXM), the same peak for the f32 rows. Peak mem: Tessera's memory_stats(cuda) "
      "peak, PyTorch's torch.cuda.max_memory_allocated (bytes in tensors, 1 GiB = 2^30).\n",
      a.plan.steps, a.plan.warmup, a.plan.lr, a.plan.weight_decay, static_cast<long long>(params),
      a.peak_tflops);
  std::fflush(stdout);
}

#endif  // TESSERA_CUDA

}  // namespace

int run_cuda_command(const std::vector<std::string>& argv, const std::string& argv0) {
  const Args args = parse_args(argv);
#ifndef TESSERA_CUDA
  (void)argv0;
  std::fprintf(stderr, "bench cuda: no usable CUDA GPU: this binary was built without the CUDA "
                       "backend (--config=cpu)\n");
  return 2;
#else
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench cuda: no usable CUDA GPU: %s\n",
                 cuda::unavailable_reason().c_str());
    return 2;
  }
  cuda::set_device(args.device);
  std::printf("Tessera CUDA bench on device %d: %s\n", args.device,
              cuda_device_description(args.device).c_str());
  std::fflush(stdout);
  std::vector<std::string> failures;
  if (args.gemm) gemm_section(args, argv0, failures);
  if (args.attention) attention_section(args, argv0, failures);
  if (args.train) train_section(args, argv0, failures);
  for (const std::string& f : failures) std::printf("FAILED %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
#endif
}

}  // namespace tessera::bench
