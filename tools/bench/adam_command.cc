// `bench adam`: one AdamW step over a GPT's parameters (f32 parameters, gradients and states):
// Tessera's optim::AdamW (the tiled SIMD CPU kernel) beside torch.optim.AdamW(foreach=True) on the
// same shapes and thread count, measured in the same run, with the memory bandwidth each reaches.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/cpu_features.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.h"
#include "optim/adam.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/bench/timer.h"
#include "tools/bench/torch_peer_client.h"

namespace tessera::bench {

const char* const kAdamUsage =
    "usage: bench adam [--models LIST] [--warmup N] [--steps N] [--threads N] [--no-peer]\n"
    "                  [--python PATH] [--peer-script PATH]\n"
    "  One AdamW step over a GPT's parameters (f32 params, grads, states): Tessera's CPU Adam vs\n"
    "  torch.optim.AdamW(foreach=True), step time, memory bandwidth and the ratio (> 1: Tessera\n"
    "  is faster)\n"
    "  --models LIST   comma-separated models/gpt presets, one row each (default gpt2-124m)\n"
    "  --warmup N      untimed steps per row (default 2)\n"
    "  --steps N       timed steps per row; the median is reported (default 7)\n"
    "  --threads N     CPU threads for both (default: TESSERA_NUM_THREADS or all cores)\n"
    "  --no-peer       skip PyTorch\n"
    "  --python PATH   interpreter for the peer (default /usr/bin/python3)\n"
    "  --peer-script PATH  adam_torch_peer.py (default: found beside the binary)\n";

namespace {

// AdamW's traffic per f32 parameter: reads param, grad, exp_avg, exp_avg_sq; writes param,
// exp_avg, exp_avg_sq.
constexpr double kBytesPerParam = 4.0 * 4 + 4.0 * 3;

struct Args {
  std::vector<std::string> models{"gpt2-124m"};
  int warmup = 2, steps = 7, threads = 0;
  bool peer = true;
  std::string python = "/usr/bin/python3", peer_script;
};

std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw UsageError("expected " + flag + " as NAME,NAME,..., got '" + text + "'");
    out.push_back(item);
  }
  if (out.empty()) throw UsageError("expected " + flag + " to name at least one preset");
  return out;
}

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& arg = args.flag();
    if (arg == "--models") {
      a.models = split_list(arg, args.value());
    } else if (arg == "--warmup") {
      a.warmup = int(parse_int(arg, args.value(), 0, 1000));
    } else if (arg == "--steps") {
      a.steps = int(parse_int(arg, args.value(), 1, 1000));
    } else if (arg == "--threads") {
      a.threads = int(parse_int(arg, args.value(), 1, 4096));
    } else if (arg == "--no-peer") {
      a.peer = false;
    } else if (arg == "--python") {
      a.python = args.value();
    } else if (arg == "--peer-script") {
      a.peer_script = args.value();
    } else {
      throw UsageError("expected an option of bench adam, got '" + arg + "'");
    }
  }
  for (const std::string& m : a.models) {
    try {
      gpt::gpt_preset(m);
    } catch (const std::exception& e) {
      throw UsageError("expected --models to name presets: " + std::string(e.what()));
    }
  }
  return a;
}

// The AdamW hyper-parameters both sides use (GPT-2 practice; lr does not change the cost).
constexpr double kLr = 6e-4, kBeta1 = 0.9, kBeta2 = 0.95, kEps = 1e-8, kWeightDecay = 0.1;

struct Row {
  std::string model;
  std::vector<Shape> shapes;
  int64_t params = 0;
  double seconds = 0;  // Tessera's median step; 0: failed
};

// The model's parameters (its initialisation, random gradients) stepped by optim::AdamW.
double time_tessera_step(const gpt::GPTConfig& config, const Args& a, Row& row) {
  Generator init(1234);
  gpt::GPT model(config, init);
  const std::vector<Tensor> params = model.parameters();
  Generator gen(99);
  for (const Tensor& p : params) {
    p.set_grad(randn(p.shape(), {}, &gen));
    row.shapes.push_back(p.shape());
    row.params += p.numel();
  }
  optim::AdamW opt(params, optim::AdamWOptions{.lr = kLr,
                                               .beta1 = kBeta1,
                                               .beta2 = kBeta2,
                                               .eps = kEps,
                                               .weight_decay = kWeightDecay});
  return median_seconds([&] { opt.step(); },
                        {.warmup = a.warmup, .min_seconds = 0.0, .min_reps = a.steps,
                         .max_reps = a.steps});
}

std::string peer_spec_json(const std::vector<Row>& rows, const Args& a) {
  nlohmann::json cases = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const Shape& s : rows[i].shapes) shapes.push_back(s);
    cases.push_back({{"id", i}, {"shapes", shapes}});
  }
  return nlohmann::json{{"cases", cases},     {"warmup", a.warmup},
                        {"steps", a.steps},   {"lr", kLr},
                        {"betas", {kBeta1, kBeta2}}, {"eps", kEps},
                        {"weight_decay", kWeightDecay}}
      .dump();
}

// adam_torch_peer.py: beside torch_peer.py wherever find_peer_script finds that.
std::string find_adam_peer_script(const std::string& argv0) {
  const std::string torch_peer = find_peer_script(argv0);
  if (torch_peer.empty()) return "";
  const std::filesystem::path p = std::filesystem::path(torch_peer).parent_path() / "adam_torch_peer.py";
  return std::filesystem::exists(p) ? p.string() : "";
}

std::string gb_per_s(int64_t params, double seconds) {
  return format_number(kBytesPerParam * double(params) / seconds / 1e9, 1);
}

Table results_table(const std::vector<Row>& rows, const PeerResult& peer) {
  std::vector<std::string> headers = {"model", "params", "tensors", "Tessera step (ms)",
                                      "Tessera GB/s"};
  if (peer.available) headers.insert(headers.end(), {"PyTorch step (ms)", "PyTorch GB/s", "ratio"});
  Table table(headers);
  for (size_t col = 1; col < headers.size(); ++col) table.align_right(col);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const bool ok = r.seconds > 0;
    std::vector<std::string> row = {r.model, format_number(double(r.params) / 1e6, 1) + "M",
                                    std::to_string(r.shapes.size()),
                                    ok ? format_number(r.seconds * 1e3, 1) : "failed",
                                    ok ? gb_per_s(r.params, r.seconds) : "-"};
    if (peer.available) {
      const auto it = peer.seconds.find(int(i));
      const bool theirs = it != peer.seconds.end() && it->second > 0;
      row.push_back(theirs ? format_number(it->second * 1e3, 1) : "-");
      row.push_back(theirs ? gb_per_s(r.params, it->second) : "-");
      row.push_back(ok && theirs ? format_number(it->second / r.seconds, 2) + "x" : "-");
    }
    table.add_row(std::move(row));
  }
  return table;
}

}  // namespace

int run_adam_command(const std::vector<std::string>& argv, const std::string& argv0) {
  const Args args = parse_args(argv);
  if (args.threads > 0) set_num_threads(args.threads);
  const int threads = num_threads();
  std::printf("Tessera CPU AdamW step, f32: ISA %s, %d threads, CPU %s\n",
              kernels::cpu::isa_name(kernels::cpu::active_isa()), threads, cpu_model().c_str());

  std::vector<Row> rows;
  std::vector<std::string> failures;
  for (const std::string& m : args.models) {
    Row row;
    row.model = m;
    std::fprintf(stderr, "[bench] tessera adamw %s ... ", m.c_str());
    try {
      row.seconds = time_tessera_step(gpt::gpt_preset(m), args, row);
      std::fprintf(stderr, "%.1f ms/step\n", row.seconds * 1e3);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "failed\n");
      failures.push_back(m + ": " + e.what());
    }
    rows.push_back(std::move(row));
  }

  PeerResult peer;
  if (args.peer) {
    PeerOptions po;
    po.python = args.python;
    po.script = args.peer_script.empty() ? find_adam_peer_script(argv0) : args.peer_script;
    po.threads = threads;
    std::fprintf(stderr, "[bench] running the PyTorch AdamW peer (%zu rows) ...\n", rows.size());
    peer = run_torch_train_peer(peer_spec_json(rows, args), po);
  }

  std::printf("%s", results_table(rows, peer).render().c_str());
  if (peer.available) {
    std::printf("PyTorch %s torch.optim.AdamW(foreach=True), %d threads. ratio = PyTorch step / "
                "Tessera step (> 1: Tessera is faster).\n",
                peer.torch_version.c_str(), peer.threads);
  } else if (args.peer) {
    std::printf("PyTorch peer unavailable: %s\n", peer.reason.c_str());
  } else {
    std::printf("PyTorch peer skipped (--no-peer)\n");
  }
  std::printf("step = median of %d steps after %d warm-up steps (lr %g, betas (%g, %g), weight "
              "decay %g); GB/s = %g bytes per parameter (read param, grad, exp_avg, exp_avg_sq; "
              "write param, exp_avg, exp_avg_sq) / step time.\n",
              args.steps, args.warmup, kLr, kBeta1, kBeta2, kWeightDecay, kBytesPerParam);
  for (const std::string& f : failures) std::printf("FAILED %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace tessera::bench
