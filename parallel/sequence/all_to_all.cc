// The Ulysses all-to-alls (all_to_all.h) and the all_to_all attention mode (attention.h): the
// serial fused attention on this rank's heads over the whole sequence, between the two.
#include "parallel/sequence/all_to_all.h"

#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "parallel/sequence/attention.h"
#include "parallel/sequence/problem.h"

namespace tessera::parallel::sequence {
namespace {

bool is_identity(const std::shared_ptr<Communicator>& group) {
  return group == nullptr || group->size() == 1;
}

void check_input(const char* op, const Tensor& x, const Communicator& group, int64_t heads) {
  TS_CHECK(x.defined() && x.dim() == 4, op, "expected a (B, H, T, D) tensor, got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TS_CHECK(group.supports(x.device().type), op, "expected a tensor on the ", group.backend(),
           " group '", group.name(), "' device type, got ", x.describe());
  TS_CHECK(heads % group.size() == 0, op,
           "expected the heads to split over the sequence group, got H = ", heads, " heads and ",
           group.size(), " ranks in group '", group.name(), "'");
}

// (B, H, C, D) -> (B, H / S, S C, D): chunk j of the all-to-all's input is head group j.
Tensor to_heads(const Tensor& x, Communicator& group) {
  const int64_t s = group.size(), b = x.size(0), h = x.size(1), c = x.size(2), d = x.size(3);
  const Tensor in = x.reshape({b, s, h / s, c, d}).permute({1, 0, 2, 3, 4}).contiguous();
  const Tensor out =
      empty(in.shape(), {.dtype = x.dtype(), .device = x.device()});  // chunk i from rank i
  group.all_to_all(in, out)->wait();
  return out.permute({1, 2, 0, 3, 4}).contiguous().view({b, h / s, s * c, d});
}

// (B, H / S, S C, D) -> (B, H, C, D): chunk j of the all-to-all's input is rank j's positions.
Tensor to_sequence(const Tensor& x, Communicator& group) {
  const int64_t s = group.size(), b = x.size(0), hs = x.size(1), c = x.size(2) / s, d = x.size(3);
  const Tensor in = x.reshape({b, hs, s, c, d}).permute({2, 0, 1, 3, 4}).contiguous();
  const Tensor out = empty(in.shape(), {.dtype = x.dtype(), .device = x.device()});  // head group i
  group.all_to_all(in, out)->wait();
  return out.permute({1, 0, 2, 3, 4}).contiguous().view({b, s * hs, c, d});
}

struct AllToAllNode : autograd::Node {
  std::shared_ptr<Communicator> group;
  bool always_run() const override { return true; }
};

struct SequenceToHeadsBackward final : AllToAllNode {
  std::string name() const override { return "SequenceToHeadsBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {heads_to_sequence(grad_in_output_dtype(grads), group)};
  }
};

struct HeadsToSequenceBackward final : AllToAllNode {
  std::string name() const override { return "HeadsToSequenceBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {sequence_to_heads(grad_in_output_dtype(grads), group)};
  }
};

template <typename N>
Tensor with_history(const Tensor& x, Tensor out, const std::shared_ptr<Communicator>& group) {
  if (auto node = autograd::make_node<N>({&x})) {
    node->group = group;
    autograd::set_history(out, node);
    node->record_output(out);
  }
  return out;
}

}  // namespace

Tensor sequence_to_heads(const Tensor& x, const std::shared_ptr<Communicator>& group) {
  if (is_identity(group)) return x;
  check_input("sequence_to_heads", x, *group, x.defined() && x.dim() == 4 ? x.size(1) : 0);
  return with_history<SequenceToHeadsBackward>(x, to_heads(x, *group), group);
}

Tensor heads_to_sequence(const Tensor& x, const std::shared_ptr<Communicator>& group) {
  if (is_identity(group)) return x;
  check_input("heads_to_sequence", x, *group, 0);
  TS_CHECK(x.size(2) % group->size() == 0, "heads_to_sequence", "expected the sequence of ",
           x.describe(), " to split over the ", group->size(), " ranks of group '", group->name(),
           "'");
  return with_history<HeadsToSequenceBackward>(x, to_sequence(x, *group), group);
}

Tensor all_to_all_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                            const SequenceAttentionArgs& args) {
  constexpr const char* kOp = "all_to_all_attention";
  const detail::Problem p = detail::make_problem(kOp, q, k, v, args);
  TS_CHECK(p.H % p.size == 0, kOp,
           "expected the heads to split over the sequence group (all_to_all mode), got H = ", p.H,
           " heads and S = ", p.size, " ranks");
  AttentionArgs a;
  a.key_padding_mask = p.mask;
  a.causal = p.causal;
  a.dropout_p = args.dropout_p;
  a.scale = args.scale;
  a.gen = args.gen;
  // This rank's heads of the whole layer, so dropout draws their rows of the serial mask.
  a.total_heads = p.heads;
  a.head_offset = p.head_offset + p.rank * (p.H / p.size);
  const auto heads = [&](const Tensor& x) {
    return from_layout(sequence_to_heads(x, args.group), 2, p.layout, p.size);
  };
  const Tensor out = scaled_dot_product_attention(heads(q), heads(k), heads(v), a);
  if (p.stats) {
    p.stats->blocks += 1;
    p.stats->score_elements += p.B * (p.H / p.size) * (p.causal ? p.T * (p.T + 1) / 2 : p.T * p.T);
  }
  return heads_to_sequence(to_layout(out, 2, p.layout, p.size), args.group);
}

}  // namespace tessera::parallel::sequence
