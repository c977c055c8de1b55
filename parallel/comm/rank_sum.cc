#include "parallel/comm/rank_sum.h"

#include <cstring>

#include "core/factory.h"

namespace tessera::parallel {

std::vector<double> sum_over_ranks(Communicator* comm, const std::vector<double>& values) {
  if (!comm || comm->size() == 1) return values;
  const int64_t n = int64_t(values.size());
  Tensor local = empty({n}, {.dtype = DType::i64});
  std::memcpy(local.data_ptr(), values.data(), size_t(n) * sizeof(double));
  Tensor all = empty({n * comm->size()}, {.dtype = DType::i64});
  comm->all_gather(local, all)->wait();
  std::vector<double> out(values.size(), 0.0);
  const auto* bits = static_cast<const double*>(all.data_ptr());
  for (int r = 0; r < comm->size(); ++r)
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] += bits[r * n + i];
  return out;
}

}  // namespace tessera::parallel
