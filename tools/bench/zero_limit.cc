#include "tools/bench/zero_limit.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "models/nn/build_context.h"
#include "models/train/update_engine.h"
#include "models/train/zero_build.h"
#include "parallel/zero/offload.h"
#include "tools/bench/table.h"
#include "tools/bench/zero_bench_util.h"

namespace tessera::bench {
namespace {

using parallel::Communicator;

constexpr int kSteps = 2;  // the first step creates the optimizer state; the second is steady

struct Fit {
  int64_t layers = 0;
  int64_t psi = 0;          // parameters
  int64_t device_peak = 0;  // bytes, busiest rank: the build and the steps
  int64_t build_peak = 0;   // bytes, busiest rank: the build alone
};

// The parameter count of `layers` blocks (attention 4 C^2 + 4 C, MLP 8 C^2 + 5 C, two norms 4 C)
// with the embeddings and the final norm, for the host-memory guard before anything is built.
int64_t psi_of(const gpt::GPTConfig& c, int64_t layers) {
  const int64_t C = c.d_model;
  return layers * (12 * C * C + 13 * C) + (c.vocab_size + c.context_length) * C + 2 * C;
}

// MemAvailable of /proc/meminfo, bytes; 0 when it cannot be read.
int64_t host_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// Builds the GPT with `layers` blocks by ZeRO stage 3's sharded build (no rank holds it whole),
// trains kSteps f32 AdamW steps under stage 3 (with offload and every parameter chunk on the host
// when `offload`) and returns the device's peak from before the build to the last step's end.
Fit measure(const DeviceLimitSearch& s, int64_t layers, bool offload,
            const std::shared_ptr<Communicator>& world) {
  gpt::GPTConfig config = s.config;
  config.n_layers = layers;
  const int64_t start = memory_stats(kCPU).current_bytes;
  reset_peak_memory(kCPU);
  Fit fit{.layers = layers};
  {
    std::unique_ptr<gpt::GPT> model;
    const std::vector<Tensor> masters = train::build_sharded(
        {.groups = [](const nn::Module& m) { return zero_adamw_groups(m); },
         .ranks = world->size(),
         .rank = world->rank(),
         .shard_device = offload ? parallel::zero::offload_host_device(kCPU) : kCPU},
        [&]() -> const nn::Module& {
          model.reset();
          Generator gen(1234);
          model = std::make_unique<gpt::GPT>(config, nn::BuildContext(gen));
          return *model;
        });
    fit.build_peak = memory_stats(kCPU).peak_bytes - start;
    for (const Tensor& p : model->parameters()) fit.psi += p.numel();
    Generator data(100 + uint64_t(world->rank()));
    const Tensor ids =
        randint(0, config.vocab_size, {s.batch, s.seq + 1}, {.dtype = DType::i64}, &data);
    const Tensor x = ids.narrow(1, 0, s.seq).contiguous();
    const Tensor y = ids.narrow(1, 1, s.seq).contiguous();
    train::UpdateEngineSpec spec = zero_adamw_spec(*model, world, 3);
    spec.zero3_masters = masters;
    spec.zero_offload = offload;
    if (offload)
      spec.zero3.placement = {.policy = parallel::zero::PlacementPolicy::static_share,
                              .host_fraction = 1.0};
    std::unique_ptr<train::UpdateEngine> engine = train::make_update_engine(spec);
    fit.device_peak = fit.build_peak;
    for (int i = 0; i < kSteps; ++i) {
      reset_peak_memory(kCPU);
      engine->set_grad_sync(true);
      {
        const auto gathers = engine->gather_window();  // stage 3 gathers on every rank
        Tensor loss = model->loss(x, y);
        autograd::backward({loss});
      }
      engine->finish_gradients();
      engine->step();
      engine->finish_step();
      fit.device_peak = std::max(fit.device_peak, memory_stats(kCPU).peak_bytes - start);
    }
  }
  fit.device_peak = int64_t(max_over(*world, double(fit.device_peak)));
  fit.build_peak = int64_t(max_over(*world, double(fit.build_peak)));
  if (world->rank() == 0) {  // progress: a large candidate takes a while to build and train
    std::printf("  %s, %lld layers (%.1fM parameters): device peak %.1f MB\n",
                offload ? "stage 3 + offload + offload_params" : "stage 3",
                static_cast<long long>(layers), double(fit.psi) / 1e6,
                double(fit.device_peak) / (1 << 20));
    std::fflush(stdout);
  }
  return fit;
}

struct Largest {
  std::optional<Fit> fit;        // the largest that stays under the limit
  std::optional<Fit> too_large;  // the smallest measured above it (none when bounded)
  std::string bound;             // why the search stopped below too_large, if it did
};

Largest search_largest(const DeviceLimitSearch& s, bool offload,
                       const std::shared_ptr<Communicator>& world, int64_t host_budget) {
  Largest out;
  // The host keeps the 16 bytes per parameter of model state (f32 AdamW) across the ranks; the
  // sharded build adds one parameter per rank, not the whole model.
  auto host_fits = [&](int64_t layers) { return psi_of(s.config, layers) * 16 <= host_budget; };
  auto under = [&](int64_t layers) {
    const Fit f = measure(s, layers, offload, world);
    (f.device_peak <= s.device_limit ? out.fit : out.too_large) = f;
    return f.device_peak <= s.device_limit;
  };
  // Doubling until a size does not fit (or passes a bound), then bisecting: lo fits (0: none
  // yet), hi does not or may not be tried.
  int64_t lo = 0, hi = 0;
  std::string bound;
  for (int64_t layers = 1;; layers = std::min(2 * layers, s.max_layers)) {
    if (!host_fits(layers)) {
      bound = "this host's memory";
      hi = layers;
      break;
    }
    if (!under(layers)) {
      hi = layers;
      break;
    }
    lo = layers;
    if (layers == s.max_layers) {
      bound = "--max-layers";
      hi = layers + 1;
      break;
    }
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (host_fits(mid) && under(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  // A size measured above the limit means the device, not the bound, stopped the search.
  if (!out.too_large || out.too_large->layers > lo + 1) out.bound = bound;
  return out;
}

std::string mb(int64_t bytes) { return format_number(double(bytes) / (1 << 20), 1); }

}  // namespace

void print_largest_under_limit(const DeviceLimitSearch& s,
                               const std::shared_ptr<Communicator>& world) {
  // Half of what the host has free, agreed over the ranks (they share it on one host).
  const int64_t host_budget =
      int64_t(-max_over(*world, -double(host_available()))) / 2;
  Table table({"placement", "N", "largest layers", "parameters (M)", "whole f32 model (MB)",
               "build peak (MB)", "device peak (MB)", "next measured: layers, peak (MB)",
               "stopped by", "parameters / stage 3"});
  for (size_t c = 1; c < 10; ++c) table.align_right(c);
  double base = 0;
  for (bool offload : {false, true}) {
    const Largest l = search_largest(s, offload, world, host_budget);
    const double psi = l.fit ? double(l.fit->psi) : 0.0;
    if (!offload) base = psi;
    table.add_row(
        {offload ? "stage 3 + offload + offload_params" : "stage 3",
         std::to_string(world->size()), l.fit ? std::to_string(l.fit->layers) : "none",
         format_number(psi / 1e6, 1), mb(int64_t(psi) * 4), l.fit ? mb(l.fit->build_peak) : "-",
         l.fit ? mb(l.fit->device_peak) : "-",
         l.too_large ? std::to_string(l.too_large->layers) + ", " + mb(l.too_large->device_peak)
                     : "-",
         l.bound.empty() ? "the device limit" : l.bound,
         base > 0 ? format_number(psi / base, 2) + (l.bound.empty() ? "" : " (at least)") : "-"});
  }
  if (world->rank() != 0) return;
  std::printf(
      "\n## The largest GPT under a device limit of %s MB: f32 AdamW, C=%lld, %lld heads, "
      "vocabulary %lld; B=%lld, T=%lld per rank\n\n%s\n"
      "- Each candidate (its layer count doubled, then bisected) is built and trains %d steps; "
      "device peak: the most the device held from before the model's build to the end of the "
      "steps, busiest rank, by the allocator. Stage 3 keeps 16 / N bytes of model state per "
      "parameter on the device; with offload and offload_params the device holds only the step's "
      "working set (gathered parameters, activations, gradients in flight), so the layers' "
      "activations bound it.\n"
      "- The model is built by ZeRO stage 3's sharded build (zero.sharded_init): each parameter "
      "leaves this rank's pieces in its shards as it is drawn, so the build peak (busiest rank's "
      "device, the build alone) stays near one parameter plus the shards, far below the whole "
      "f32 model.\n"
      "- The search also stops where the 16 B/Psi of model state would pass half of this host's "
      "free memory; the ratio is then a lower bound.\n",
      mb(s.device_limit).c_str(), static_cast<long long>(s.config.d_model),
      static_cast<long long>(s.config.n_heads), static_cast<long long>(s.config.vocab_size),
      static_cast<long long>(s.batch), static_cast<long long>(s.seq), table.render().c_str(),
      kSteps);
}

}  // namespace tessera::bench
