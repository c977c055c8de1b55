// 2D vocab-parallel cross-entropy (see vocab_cross_entropy_2d.h): the row group sums its batch
// chunk's losses, the batch group (2D: the column group) adds the chunks, and the mean divides by
// the targets that count over the whole batch, which every rank holds.
#include "parallel/tensor/vocab_cross_entropy_2d.h"

#include "core/error.h"

namespace tessera::parallel::tensor {

namespace {
constexpr const char* kOp = "vocab_parallel_cross_entropy_2d";

// Targets other than ignore_index in the whole batch (on the host: the targets are data).
int64_t counted(const Tensor& targets, int64_t ignore_index) {
  const Tensor host = targets.to(kCPU).to(DType::i64).contiguous();
  int64_t n = 0;
  for (int64_t i = 0; i < host.numel(); ++i) n += host.data<int64_t>()[i] != ignore_index;
  return n;
}
}  // namespace

Tensor vocab_parallel_cross_entropy_2d(const Tensor& local_logits, const Tensor& targets,
                                       const VocabShard& shard, const CrossEntropyOptions& opts,
                                       const SummaGrid& grid) {
  grid.check(kOp);
  TS_CHECK(local_logits.defined() && targets.defined() && local_logits.dim() >= 2 &&
               targets.dim() == local_logits.dim() - 1,
           kOp, "expected a block of logits (B / q, ..., V_local) and the whole targets (B, ...)");
  const int q = grid.q(), parts = grid.batch_parts();
  const int64_t rows = local_logits.size(0);
  TS_CHECK(targets.size(0) == rows * parts, kOp, "expected the whole batch's targets (",
           rows * parts, ", ...) for a block of ", rows, " rows on the ",
           grid.depth() > 1 ? str_cat(grid.depth(), " x ") : "", q, " x ", q, " grid, got targets ",
           shape_str(targets.shape()), " and logits ", shape_str(local_logits.shape()));
  TS_CHECK(opts.reduction == "mean" || opts.reduction == "sum" || opts.reduction == "none", kOp,
           "expected reduction \"mean\", \"sum\" or \"none\", got \"", opts.reduction, "\"");
  const Tensor mine = targets.narrow(0, int64_t(grid.batch_index()) * rows, rows).contiguous();
  CrossEntropyOptions chunk = opts;
  chunk.reduction = opts.reduction == "none" ? "none" : "sum";
  Tensor part = vocab_parallel_cross_entropy(local_logits, mine, shard, chunk, grid.row);
  const CommPtr& chunks = grid.batch_group();  // the batch chunks of every depth layer
  if (opts.reduction == "none") return gather_from_region(part, 0, chunks);  // (B, ...)
  // Every rank holds the whole sum, whose gradient (the same everywhere) reaches each chunk as is.
  Tensor total = reduce_from_region(part, chunks);
  if (opts.reduction == "sum") return total;
  // All ignored gives 0 / 0 = NaN, as cross_entropy does.
  return div(total, double(counted(targets, opts.ignore_index)));
}

}  // namespace tessera::parallel::tensor
