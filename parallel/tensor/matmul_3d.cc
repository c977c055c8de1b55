// The 3D linear op (see matmul_3d.h): three region ops around one local product.
#include "parallel/tensor/matmul_3d.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace tessera::parallel::tensor {

Tensor linear_3d(const Tensor& x, const Tensor& weight, const Cube3D& cube, int64_t fused_blocks) {
  cube.check("linear_3d");
  const int64_t q = cube.q(), f = fused_blocks;
  TS_CHECK(x.defined() && weight.defined(), "linear_3d", "expected a defined input and weight");
  TS_CHECK(x.dtype() == weight.dtype(), "linear_3d",
           "expected an input and a weight of one dtype, got ", x.describe(), " and ",
           weight.describe());
  TS_CHECK(f >= 1 && x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1) &&
               weight.size(0) % (f * q) == 0,
           "linear_3d", "expected this rank's input (..., K / q^2) and weight (N / q, K / q^2)",
           f > 1 ? str_cat(" with N / q divisible by ", f, " fused blocks times q = ", q) : "",
           ", got shape ", shape_str(x.shape()), " and ", shape_str(weight.shape()));
  if (cube.input) {
    TS_CHECK(cube.input->supports(x.device().type) &&
                 weight.device().type == x.device().type,
             "linear_3d", "expected the input and weight on the ", cube.input->backend(),
             " groups' device type, got ", x.describe(), " and ", weight.describe());
  }
  const Tensor block = all_gather_to_region(x, -1, cube.input);           // (..., K / q)
  const Tensor w = all_gather_to_region(weight, 1, cube.weight);          // (N / q, K / q)
  const Tensor partial = matmul(block, transpose(w, 0, 1));               // (..., N / q)
  if (f == 1) return reduce_scatter_to_region(partial, -1, cube.output);  // (..., N / q^2)
  // Columns are (block, k', chunk): keep chunk k' = k of every block.
  const int64_t chunk = weight.size(0) / (f * q);
  Shape split = x.shape();
  split.back() = f;
  split.push_back(q);
  split.push_back(chunk);
  const Tensor mine = reduce_scatter_to_region(reshape(partial, split), -2, cube.output);
  Shape out = x.shape();
  out.back() = f * chunk;
  return reshape(mine, out);
}

}  // namespace tessera::parallel::tensor
