// 3D vocab-parallel cross-entropy (see vocab_cross_entropy_3d.h): the plane sums its batch chunk's
// losses, the weight group adds the chunks, and the mean divides by the targets that count over
// the whole batch, which every rank holds.
#include "parallel/tensor/vocab_cross_entropy_3d.h"

#include "core/error.h"

namespace tessera::parallel::tensor {

namespace {
constexpr const char* kOp = "vocab_parallel_cross_entropy_3d";

// Targets other than ignore_index in the whole batch (on the host: the targets are data).
int64_t counted(const Tensor& targets, int64_t ignore_index) {
  const Tensor host = targets.to(kCPU).to(DType::i64).contiguous();
  int64_t n = 0;
  for (int64_t i = 0; i < host.numel(); ++i) n += host.data<int64_t>()[i] != ignore_index;
  return n;
}
}  // namespace

CommPtr plane_group_3d(const CommPtr& tensor_group, const Cube3D& cube) {
  cube.check("plane_group_3d");
  const CubeCoords at = cube.coords();
  TS_CHECK(tensor_group && tensor_group->size() == at.q * at.q * at.q, "plane_group_3d",
           "expected the cube's tensor group of q^3 = ", at.q * at.q * at.q, " ranks, got ",
           tensor_group ? tensor_group->size() : 0);
  return tensor_group->split(at.i, at.feature_chunk(), "3d_plane");
}

VocabShard vocab_shard_3d(int64_t vocab_size, const CubeCoords& at, const char* op) {
  const int64_t q2 = int64_t(at.q) * at.q;
  TS_CHECK(vocab_size > 0 && vocab_size % q2 == 0, op, "expected the vocabulary size ", vocab_size,
           " divisible by q^2 = ", q2, " (the 3D cube side q = ", at.q,
           "; the table is cut as a Linear3D weight)");
  return vocab_shard(vocab_size, at.feature_chunk(), int(q2));
}

Tensor vocab_parallel_cross_entropy_3d(const Tensor& local_logits, const Tensor& targets,
                                       const VocabShard& shard, const CrossEntropyOptions& opts,
                                       const Cube3D& cube, const CommPtr& plane) {
  cube.check(kOp);
  const CubeCoords at = cube.coords();
  TS_CHECK(plane && plane->size() == at.q * at.q && plane->rank() == at.feature_chunk(), kOp,
           "expected this rank's plane group of q^2 = ", at.q * at.q,
           " ranks at rank k q + j = ", at.feature_chunk(), ", got ",
           plane ? str_cat(plane->size(), " ranks at rank ", plane->rank()) : "none");
  TS_CHECK(local_logits.defined() && targets.defined() && local_logits.dim() >= 2 &&
               targets.dim() == local_logits.dim() - 1,
           kOp, "expected a piece of logits (B / q, ..., V / q^2) and the whole targets (B, ...)");
  const int64_t rows = local_logits.size(0);
  TS_CHECK(targets.size(0) == rows * at.q, kOp, "expected the whole batch's targets (", rows * at.q,
           ", ...) for a piece of ", rows, " rows on the ", at.q, " x ", at.q, " x ", at.q,
           " cube, got targets ", shape_str(targets.shape()), " and logits ",
           shape_str(local_logits.shape()));
  TS_CHECK(opts.reduction == "mean" || opts.reduction == "sum" || opts.reduction == "none", kOp,
           "expected reduction \"mean\", \"sum\" or \"none\", got \"", opts.reduction, "\"");
  const Tensor mine = targets.narrow(0, int64_t(at.i) * rows, rows).contiguous();
  CrossEntropyOptions chunk = opts;
  chunk.reduction = opts.reduction == "none" ? "none" : "sum";
  Tensor part = vocab_parallel_cross_entropy(local_logits, mine, shard, chunk, plane);
  if (opts.reduction == "none") return gather_from_region(part, 0, cube.weight);  // (B, ...)
  // Every rank holds the whole sum, whose gradient (the same everywhere) reaches each chunk as is.
  Tensor total = reduce_from_region(part, cube.weight);
  if (opts.reduction == "sum") return total;
  return div(total, double(counted(targets, opts.ignore_index)));  // all ignored: NaN, as serial
}

}  // namespace tessera::parallel::tensor
