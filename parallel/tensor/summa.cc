// SUMMA products (see summa.h). Each forward runs its q steps with the next step's broadcast
// started before the current step's product (double buffering, as Colossal-AI's 2D ops), and at
// most one reduce in flight. Every rank issues its collectives in the same order on each group, so
// the non-blocking steps cannot deadlock. The backward nodes call the public ops.
#include "parallel/tensor/summa.h"

#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::tensor {

void SummaGrid::check(const char* op) const {
  TS_CHECK((row == nullptr) == (col == nullptr), op,
           "expected both a row and a column group (or neither), got only the ",
           row ? "row" : "column", " group");
  if (!row) return;
  TS_CHECK(row->size() == col->size(), op, "expected a square grid, got a row group '", row->name(),
           "' of ", row->size(), " ranks and a column group '", col->name(), "' of ", col->size());
  TS_CHECK(row->device_type() == col->device_type(), op,
           "expected the row and column groups on one device type, got ", row->backend(), " and ",
           col->backend());
  TS_CHECK((dep == nullptr) == (batch == nullptr), op,
           "expected both a depth and a batch group (2.5D) or neither (2D), got only the ",
           dep ? "depth" : "batch", " group");
  if (!dep) return;
  TS_CHECK(batch->size() == dep->size() * q() && batch->rank() == batch_index(), op,
           "expected the batch group '", batch->name(), "' to stack the ", dep->size(),
           " depth layers of the ", q(), " x ", q(), " grid (", dep->size() * q(),
           " ranks, this one at ", batch_index(), "), got ", batch->size(), " ranks, this one at ",
           batch->rank());
}

std::string batch_split_text(const SummaGrid& grid) {
  const int q = grid.q(), d = grid.depth();
  if (d == 1)
    return str_cat("the 2D grid side q = ", q,
                   " (2D tensor parallelism splits the batch over the grid rows)");
  return str_cat("depth x q = ", d, " x ", q, " = ", d * q,
                 " (2.5D tensor parallelism splits the batch over the ", d,
                 " depth layers, then the ", q, " grid rows)");
}

Tensor depth_replica(const Tensor& x, const SummaGrid& grid) {
  return copy_to_region(x, grid.dep);  // the identity without a depth group (or of one rank)
}

namespace {

using autograd::Node;
using autograd::SavedTensor;

bool is_serial(const SummaGrid& grid) { return grid.q() == 1; }

void check_operand(const char* op, const Tensor& t, const char* what, const SummaGrid& grid) {
  TS_CHECK(t.defined(), op, "expected a defined ", what, ", got an undefined one");
  if (!is_serial(grid))
    TS_CHECK(grid.row->supports(t.device().type), op, "expected ", what, " on the ",
             grid.row->backend(), " groups' device type, got ", t.describe());
}

void check_pair(const char* op, const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  grid.check(op);
  check_operand(op, a, "A", grid);
  check_operand(op, b, "B", grid);
  TS_CHECK(a.dtype() == b.dtype(), op, "expected A and B of one dtype, got ", a.describe(), " and ",
           b.describe());
  TS_CHECK(a.dim() >= 2, op, "expected A with at least 2 dims, got ", a.describe());
}

// A block as a contiguous matrix of rows: (..., m, k) -> (M, k).
Tensor as_rows(const Tensor& t) {
  const int64_t cols = t.size(-1);
  return t.contiguous().reshape({t.numel() / cols, cols});
}

// Step `root`'s block of `mine` (contiguous) over `group`: `mine` itself at the root (a broadcast
// only reads the root's buffer), a buffer being received elsewhere. Started, not waited for.
struct Incoming {
  Tensor block;
  WorkPtr work;
};
Incoming start_broadcast(const Tensor& mine, Communicator& group, int root) {
  Tensor buffer = group.rank() == root
                      ? mine
                      : empty(mine.shape(), {.dtype = mine.dtype(), .device = mine.device()});
  return {buffer, group.broadcast(buffer, root)};
}

// C = A B: step i broadcasts A[r][i] along the row and B[i][s] along the column.
Tensor ab_forward(const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  autograd::NoGradGuard no_grad;
  const int q = grid.q();
  const Tensor a2 = as_rows(a), b2 = b.contiguous();
  auto start = [&](int i) {
    return std::make_pair(start_broadcast(a2, *grid.row, i), start_broadcast(b2, *grid.col, i));
  };
  auto next = start(0);
  Tensor c;
  for (int i = 0; i < q; ++i) {
    auto cur = std::move(next);
    if (i + 1 < q) next = start(i + 1);
    cur.first.work->wait();
    cur.second.work->wait();
    Tensor step = matmul(cur.first.block, cur.second.block);  // (M, n)
    c = c.defined() ? add(c, step) : step;
  }
  Shape out = a.shape();
  out.back() = b.size(1);
  return c.reshape(out);
}

// Partial products reduced to step i's root: `partial(block)` from the block step i broadcasts over
// `bcast` (root i), summed over `reduce` to its rank i, which keeps the sum.
template <typename Partial_>
Tensor broadcast_reduce(const Tensor& mine, Communicator& bcast, Communicator& reduce,
                        Partial_ partial) {
  autograd::NoGradGuard no_grad;
  const int q = bcast.size();
  Incoming next = start_broadcast(mine, bcast, 0);
  WorkPtr reducing;
  Tensor result;
  for (int i = 0; i < q; ++i) {
    Incoming cur = std::move(next);
    if (i + 1 < q) next = start_broadcast(mine, bcast, i + 1);
    cur.work->wait();
    Tensor p = partial(cur.block).contiguous();
    if (reducing) reducing->wait();  // one partial in flight at a time
    reducing = reduce.reduce(p, i);
    if (reduce.rank() == i) result = p;  // the sum lands here once the reduce is done
  }
  reducing->wait();
  return result;
}

// C = A B^T: step i broadcasts B[i][s] along the column; the row sums A[r][s] B[i][s]^T into
// C[r][i].
Tensor abt_forward(const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  const Tensor a2 = as_rows(a);
  Tensor c = broadcast_reduce(b.contiguous(), *grid.col, *grid.row,
                              [&](const Tensor& bi) { return matmul(a2, bi.transpose(0, 1)); });
  Shape out = a.shape();
  out.back() = b.size(0);
  return c.reshape(out);
}

// C = A^T B: step i broadcasts A[r][i] along the row; the column sums A[r][i]^T B[r][s] into
// C[i][s].
Tensor atb_forward(const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  const Tensor b2 = as_rows(b);
  return broadcast_reduce(as_rows(a), *grid.row, *grid.col,
                          [&](const Tensor& ai) { return matmul(ai.transpose(0, 1), b2); });
}

// What every SUMMA node shares: the grid and the operands its backward needs (B for dA, A for dB).
struct SummaNode : Node {
  SummaGrid grid;
  SavedTensor a, b;
  bool always_run() const override { return true; }
  void release_saved() override {
    a.reset();
    b.reset();
  }
};

struct SummaAbBackward final : SummaNode {
  std::string name() const override { return "SummaAbBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = grad_in_output_dtype(grads);
    Tensor da, db;
    if (needs_input_grad(0)) da = summa_abt(g, b.unpack(name()), grid);
    if (needs_input_grad(1)) db = summa_atb(a.unpack(name()), g, grid);
    return {da, db};
  }
};

struct SummaAbtBackward final : SummaNode {
  std::string name() const override { return "SummaAbtBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = grad_in_output_dtype(grads);
    Tensor da, db;
    if (needs_input_grad(0)) da = summa_ab(g, b.unpack(name()), grid);
    if (needs_input_grad(1)) db = summa_atb(g, a.unpack(name()), grid);
    return {da, db};
  }
};

struct SummaAtbBackward final : SummaNode {
  std::string name() const override { return "SummaAtbBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = grad_in_output_dtype(grads);
    Tensor da, db;
    if (needs_input_grad(0)) da = summa_abt(b.unpack(name()), g, grid);
    if (needs_input_grad(1)) db = summa_ab(a.unpack(name()), g, grid);
    return {da, db};
  }
};

// Wires `out` to a new N node over (a, b) when either requires grad; returns out either way.
template <typename N>
Tensor with_history(const Tensor& a, const Tensor& b, Tensor out, const SummaGrid& grid) {
  if (auto node = autograd::make_node<N>({&a, &b})) {
    node->grid = grid;
    if (node->needs_input_grad(0)) node->b = SavedTensor(b);
    if (node->needs_input_grad(1)) node->a = SavedTensor(a);
    autograd::set_history(out, node);
    node->record_output(out);
  }
  return out;
}

}  // namespace

Tensor summa_ab(const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  check_pair("summa_ab", a, b, grid);
  TS_CHECK(b.dim() == 2 && a.size(-1) == b.size(0), "summa_ab",
           "expected blocks A (..., m, k) and B (k, n), got shape ", shape_str(a.shape()), " and ",
           shape_str(b.shape()));
  if (is_serial(grid)) return matmul(a, b);
  return with_history<SummaAbBackward>(a, b, ab_forward(a, b, grid), grid);
}

Tensor summa_abt(const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  check_pair("summa_abt", a, b, grid);
  TS_CHECK(b.dim() == 2 && a.size(-1) == b.size(1), "summa_abt",
           "expected blocks A (..., m, n) and B (k, n), got shape ", shape_str(a.shape()), " and ",
           shape_str(b.shape()));
  if (is_serial(grid)) return matmul(a, transpose(b, 0, 1));
  return with_history<SummaAbtBackward>(a, b, abt_forward(a, b, grid), grid);
}

Tensor summa_atb(const Tensor& a, const Tensor& b, const SummaGrid& grid) {
  check_pair("summa_atb", a, b, grid);
  const Shape rows_a(a.shape().begin(), a.shape().end() - 1);
  const Shape rows_b(b.shape().begin(), b.shape().end() - 1);
  TS_CHECK(b.dim() == a.dim() && rows_a == rows_b, "summa_atb",
           "expected blocks A (..., m, k) and B (..., m, n) with the same rows, got shape ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  if (is_serial(grid)) {
    const int64_t m = shape_numel(rows_a);
    return matmul(transpose(reshape(a, {m, a.size(-1)}), 0, 1), reshape(b, {m, b.size(-1)}));
  }
  return with_history<SummaAtbBackward>(a, b, atb_forward(a, b, grid), grid);
}

namespace {

void check_layout(const char* op, const Tensor& x, const SummaGrid& grid) {
  grid.check(op);
  check_operand(op, x, "input", grid);
  TS_CHECK(x.dim() >= 2, op, "expected an activation (B, ..., C), got ", x.describe());
}

}  // namespace

Tensor split_2d(const Tensor& x, const SummaGrid& grid) {
  check_layout("split_2d", x, grid);
  const int q = grid.q();
  TS_CHECK(x.size(0) % grid.batch_parts() == 0 && x.size(-1) % q == 0, "split_2d",
           "expected the batch (dim 0) of shape ", shape_str(x.shape()), " divisible by ",
           batch_split_text(grid), " and its hidden (last dim) divisible by the grid side ", q);
  return scatter_to_region(scatter_to_region(x, 0, grid.batch_group()), -1, grid.row);
}

Tensor gather_2d(const Tensor& x, const SummaGrid& grid) {
  check_layout("gather_2d", x, grid);
  return gather_from_region(gather_from_region(x, -1, grid.row), 0, grid.batch_group());
}

}  // namespace tessera::parallel::tensor
