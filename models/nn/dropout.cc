// Dropout module (see dropout.h).
#include "models/nn/dropout.h"

#include "autograd/ops.h"

namespace tessera::nn {

Dropout::Dropout(double p) : p_(p) {
  TS_CHECK(p >= 0.0 && p < 1.0, "Dropout", "expected p in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, /*training=*/true);
}

}  // namespace tessera::nn
