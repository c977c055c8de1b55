// Shard initialisation by global index (see shard_init.h).
#include "models/nn/parallel/shard_init.h"

#include <algorithm>
#include <cmath>

#include "core/factory.h"

namespace tessera::nn {
namespace {

using parallel::tensor::Placement;

template <typename DrawSlice_>
Tensor draw_shard(const Placement& p, Generator& gen, DrawSlice_ draw) {
  const int64_t whole = shape_numel(p.global_shape);
  const uint64_t seed = gen.seed(), first = gen.reserve(uint64_t(whole));
  Tensor local = empty(p.local_view());
  draw(local, DrawSlice{.seed = seed, .first = first, .whole = p.view_shape(),
                        .start = p.view_offsets()});
  if (p.padded()) {
    // Rows (or columns) past the serial tensor's extent are padding: zero, never drawn for real.
    const std::vector<int64_t> start = p.view_offsets();
    for (int64_t d = 0; d < local.dim(); ++d) {
      const int64_t valid = std::clamp<int64_t>(p.global_shape[d] - start[d], 0, local.size(d));
      if (valid < local.size(d)) local.narrow(d, valid, local.size(d) - valid).zero_();
    }
  }
  return local.reshape(p.local_shape()).contiguous();
}

}  // namespace

Tensor normal_shard(const Placement& placement, double mean, double std, Generator& gen) {
  return draw_shard(placement, gen, [&](const Tensor& t, const DrawSlice& at) {
    normal_slice_(t, mean, std, at);
  });
}

Tensor uniform_shard(const Placement& placement, double low, double high, Generator& gen) {
  return draw_shard(placement, gen, [&](const Tensor& t, const DrawSlice& at) {
    uniform_slice_(t, low, high, at);
  });
}

Tensor zeros_shard(const Placement& placement) { return zeros(placement.local_shape()); }

void draw_linear_shards(const LinearSpec& spec, Generator& gen, const Placement& wp,
                        const Placement& bp, Tensor& w, Tensor& b) {
  switch (spec.init) {
    case LinearInit::normal:
      w = normal_shard(wp, 0.0, spec.init_std, gen);
      if (spec.bias) b = zeros_shard(bp);
      return;
    case LinearInit::uniform: {
      const double bound = 1.0 / std::sqrt(double(spec.in_features));
      w = uniform_shard(wp, -bound, bound, gen);
      if (spec.bias) b = uniform_shard(bp, -bound, bound, gen);
      return;
    }
    case LinearInit::zeros:
      w = zeros_shard(wp);
      if (spec.bias) b = zeros_shard(bp);
      return;
  }
}

}  // namespace tessera::nn
