// The region ops: each forward is one blocking collective (or none) on contiguous buffers, and each
// backward node calls the conjugate public op, so under create_graph the backward is itself
// recorded. Every node always runs (Node::always_run): the engine hands it zeros when no gradient
// reached it on this rank, so all ranks of the group enter the same collectives in the same order.
#include "parallel/tensor/region_ops.h"

#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::tensor {
namespace {

using autograd::Node;

bool is_identity(const CommPtr& group) { return group == nullptr || group->size() == 1; }

void check_input(const char* op, const Tensor& x, const CommPtr& group) {
  TS_CHECK(x.defined(), op, "expected a defined tensor, got an undefined one");
  TS_CHECK(group->supports(x.device().type), op, "expected a tensor on the ",
           group->backend(), " group '", group->name(), "' device type, got ", x.describe());
}

// dim wrapped into [0, x.dim()), for ops that split or join along it.
int64_t region_dim(const char* op, const Tensor& x, int64_t dim) {
  TS_CHECK(x.dim() > 0, op, "expected a tensor with at least one dim, got ", x.describe());
  return wrap_dim(dim, x.dim(), op);
}

void check_divisible(const char* op, const Tensor& x, int64_t d, const CommPtr& group) {
  TS_CHECK(x.size(d) % group->size() == 0, op, "expected dim ", d, " of shape ",
           shape_str(x.shape()), " to be divisible by the size ", group->size(), " of group '",
           group->name(), "', got ", x.size(d));
}

// x's p chunks along d, rank-major and contiguous (chunk r first for rank r): what reduce_scatter
// and all_to_all send. Along dim 0 that is x itself.
Tensor rank_major_chunks(const Tensor& x, int64_t d, int64_t p) {
  Tensor in = x.contiguous();
  if (d == 0) return in;
  // (s0, .., p * n, ..) -> (s0, .., p, n, ..) -> (p, s0, .., n, ..), contiguous: rank-major.
  Shape split_shape = x.shape();
  split_shape[size_t(d)] /= p;
  split_shape.insert(split_shape.begin() + d, p);
  std::vector<int64_t> perm{d};
  for (int64_t i = 0; i <= x.dim(); ++i)
    if (i != d) perm.push_back(i);
  return in.view(split_shape).permute(perm).contiguous();
}

// A rank-major buffer (p, s0, .., sd, ..) of the ranks' chunks joined along d: (s0, .., p sd, ..).
// What all_gather and all_to_all receive.
Tensor join_rank_major(const Tensor& buffer, int64_t d) {
  const int64_t p = buffer.size(0);
  Shape out_shape(buffer.shape().begin() + 1, buffer.shape().end());
  out_shape[size_t(d)] *= p;
  if (d == 0) return buffer.view(out_shape);
  // (p, s0, .., sd, ..) -> (s0, .., p, sd, ..), then p and sd merge into one dim.
  std::vector<int64_t> perm;
  for (int64_t i = 1; i <= d; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int64_t i = d + 1; i < buffer.dim(); ++i) perm.push_back(i);
  return buffer.permute(perm).contiguous().view(out_shape);
}

// (p, *shape): a buffer for p chunks of `shape`, like x.
Tensor rank_major_buffer(const Tensor& x, Shape shape, int64_t p) {
  shape.insert(shape.begin(), p);
  return empty(shape, {.dtype = x.dtype(), .device = x.device()});
}

// x all-gathered along d: the ranks' x, in rank order, joined along d.
Tensor all_gather_along(const Tensor& x, int64_t d, Communicator& comm) {
  Tensor buffer = rank_major_buffer(x, x.shape(), comm.size());
  comm.all_gather(x.contiguous(), buffer)->wait();
  return join_rank_major(buffer, d);
}

// The sum over ranks of x, this rank's chunk along d.
Tensor reduce_scatter_along(const Tensor& x, int64_t d, Communicator& comm) {
  Shape out_shape = x.shape();
  out_shape[size_t(d)] /= comm.size();
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  comm.reduce_scatter(rank_major_chunks(x, d, comm.size()), out)->wait();
  return out;
}

// x's chunks along split to the ranks in order; the chunks received joined along concat.
Tensor all_to_all_along(const Tensor& x, int64_t split, int64_t concat, Communicator& comm) {
  const int64_t p = comm.size();
  Shape chunk = x.shape();
  chunk[size_t(split)] /= p;
  Tensor buffer = rank_major_buffer(x, chunk, p);  // chunk i from rank i
  comm.all_to_all(rank_major_chunks(x, split, p), buffer)->wait();
  return join_rank_major(buffer, concat);
}

// What every region node shares: its group, the dim it splits or joins along, and the dtype of
// the gradient its collective expects (that of its output, so every rank sends the same dtype).
struct RegionNode : Node {
  CommPtr group;
  int64_t dim = 0;
  int64_t concat_dim = 0;  // all_to_all_to_region's second dim (the one it joins along)
  bool always_run() const override { return true; }
};

struct CopyToRegionBackward final : RegionNode {
  std::string name() const override { return "CopyToRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {reduce_from_region(grad_in_output_dtype(grads), group)};
  }
};

struct ReduceFromRegionBackward final : RegionNode {
  std::string name() const override { return "ReduceFromRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {copy_to_region(grad_in_output_dtype(grads), group)};
  }
};

struct ScatterToRegionBackward final : RegionNode {
  std::string name() const override { return "ScatterToRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {gather_from_region(grad_in_output_dtype(grads), dim, group)};
  }
};

struct GatherFromRegionBackward final : RegionNode {
  std::string name() const override { return "GatherFromRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {scatter_to_region(grad_in_output_dtype(grads), dim, group)};
  }
};

struct ReduceScatterToRegionBackward final : RegionNode {
  std::string name() const override { return "ReduceScatterToRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {all_gather_to_region(grad_in_output_dtype(grads), dim, group)};
  }
};

struct AllGatherToRegionBackward final : RegionNode {
  std::string name() const override { return "AllGatherToRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {reduce_scatter_to_region(grad_in_output_dtype(grads), dim, group)};
  }
};

struct AllToAllToRegionBackward final : RegionNode {
  std::string name() const override { return "AllToAllToRegionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {all_to_all_to_region(grad_in_output_dtype(grads), concat_dim, dim, group)};
  }
};

// Wires `out` to a new N node over x when x requires grad; returns out either way.
template <typename N>
Tensor with_history(const Tensor& x, Tensor out, const CommPtr& group, int64_t dim = 0,
                    int64_t concat_dim = 0) {
  if (auto node = autograd::make_node<N>({&x})) {
    node->group = group;
    node->dim = dim;
    node->concat_dim = concat_dim;
    autograd::set_history(out, node);
    node->record_output(out);
  }
  return out;
}

}  // namespace

Tensor copy_to_region(const Tensor& x, const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("copy_to_region", x, group);
  if (!autograd::any_requires_grad({&x})) return x;
  // A new handle on x's storage (like a view), so the node's history does not replace x's.
  return with_history<CopyToRegionBackward>(x, x.detach(), group);
}

Tensor reduce_from_region(const Tensor& x, const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("reduce_from_region", x, group);
  Tensor out = x.clone();
  group->all_reduce(out)->wait();
  return with_history<ReduceFromRegionBackward>(x, out, group);
}

Tensor scatter_to_region(const Tensor& x, int64_t dim, const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("scatter_to_region", x, group);
  const int64_t d = region_dim("scatter_to_region", x, dim);
  check_divisible("scatter_to_region", x, d, group);
  const int64_t n = x.size(d) / group->size();
  Tensor out = x.narrow(d, int64_t(group->rank()) * n, n).clone();
  return with_history<ScatterToRegionBackward>(x, out, group, d);
}

Tensor gather_from_region(const Tensor& x, int64_t dim, const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("gather_from_region", x, group);
  const int64_t d = region_dim("gather_from_region", x, dim);
  return with_history<GatherFromRegionBackward>(x, all_gather_along(x, d, *group), group, d);
}

Tensor reduce_scatter_to_region(const Tensor& x, int64_t dim, const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("reduce_scatter_to_region", x, group);
  const int64_t d = region_dim("reduce_scatter_to_region", x, dim);
  check_divisible("reduce_scatter_to_region", x, d, group);
  return with_history<ReduceScatterToRegionBackward>(x, reduce_scatter_along(x, d, *group), group,
                                                     d);
}

Tensor all_gather_to_region(const Tensor& x, int64_t dim, const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("all_gather_to_region", x, group);
  const int64_t d = region_dim("all_gather_to_region", x, dim);
  return with_history<AllGatherToRegionBackward>(x, all_gather_along(x, d, *group), group, d);
}

Tensor all_to_all_to_region(const Tensor& x, int64_t split_dim, int64_t concat_dim,
                            const CommPtr& group) {
  if (is_identity(group)) return x;
  check_input("all_to_all_to_region", x, group);
  const int64_t split = region_dim("all_to_all_to_region", x, split_dim);
  const int64_t concat = region_dim("all_to_all_to_region", x, concat_dim);
  check_divisible("all_to_all_to_region", x, split, group);
  return with_history<AllToAllToRegionBackward>(x, all_to_all_along(x, split, concat, *group),
                                                group, split, concat);
}

}  // namespace tessera::parallel::tensor
