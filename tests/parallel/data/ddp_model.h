// The small model and data of the data-parallel tests: a 3-layer GELU MLP (16 -> 32 -> 32 -> 8)
// built from models/nn Linear layers, regressing random targets with a mean squared error, and a
// deterministic global batch per step that every rank draws identically.
#pragma once

#include <cstdint>
#include <memory>

#include "autograd/ops.h"
#include "core/factory.h"
#include "core/generator.h"
#include "models/nn/linear.h"
#include "models/nn/module.h"

namespace tessera::parallel::ddp_testing {

inline constexpr int64_t kIn = 16, kHidden = 32, kOut = 8;

class Mlp : public nn::Module {
 public:
  // Weights from seed: ranks given different seeds start with different parameters.
  explicit Mlp(uint64_t seed) {
    Generator gen(seed);
    auto spec = [](int64_t in, int64_t out) {
      return nn::LinearSpec{
          .in_features = in, .out_features = out, .init = nn::LinearInit::uniform};
    };
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(spec(kIn, kHidden), gen));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(spec(kHidden, kHidden), gen));
    fc3_ = register_module("fc3", std::make_shared<nn::Linear>(spec(kHidden, kOut), gen));
  }
  std::string type_name() const override { return "Mlp"; }

  // (B, kIn) -> (B, kOut)
  Tensor forward(const Tensor& x) {
    return fc3_->forward(gelu(fc2_->forward(gelu(fc1_->forward(x)))));
  }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_, fc3_;
};

// Mean squared error of model(x) against y: the mean over this batch's elements.
inline Tensor mse_loss(Mlp& model, const Tensor& x, const Tensor& y) {
  return mean(square(sub(model.forward(x), y)));
}

// The global batch of `step`: x (B, kIn), y (B, kOut), the same on every rank.
struct Batch {
  Tensor x, y;
};
inline Batch global_batch(int64_t step, int64_t batch) {
  Generator gen(1000 + uint64_t(step));
  Tensor x = randn({batch, kIn}, {}, &gen);
  Tensor y = randn({batch, kOut}, {}, &gen);
  return Batch{x, y};
}

// Rows [begin, begin + size) of a batch, contiguous.
inline Batch rows(const Batch& b, int64_t begin, int64_t size) {
  return Batch{b.x.narrow(0, begin, size).contiguous(), b.y.narrow(0, begin, size).contiguous()};
}

}  // namespace tessera::parallel::ddp_testing
