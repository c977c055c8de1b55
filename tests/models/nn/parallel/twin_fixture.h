// The fixture of the serial-vs-twin programs (run under mpirun): a serial layer or model and its
// twin built from one seed, one input run forward and backward through both, the twin's output,
// input gradient and loss against the serial ones; the grid or cube the layers run on, a node that
// passes no gradient, and the per-collective counters against a prediction.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "models/nn/build_context.h"
#include "models/nn/parallel/linear_3d.h"
#include "parallel/comm/comm_types.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/summa.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::testing {

// The SUMMA grid (modes 2d, 2.5d) and the cube (mode 3d) the layers built under ctx run on.
inline tensor::SummaGrid grid_of(const ParallelContext& ctx) {
  Generator unused(0);
  return nn::BuildContext(unused, &ctx).summa_grid();
}
inline tensor::Cube3D cube_of(const ParallelContext& ctx) {
  Generator unused(0);
  return nn::BuildContext(unused, &ctx).cube("test");
}

// make(bctx) twice, from two generators of one seed: under a serial context, then under ctx (the
// twin). The twin must advance its generator as the serial one does (it draws every shard at its
// global indices). Returns {serial, twin}.
template <typename Make>
auto make_twins(const ParallelContext& ctx, uint64_t seed, const std::string& what, Make&& make) {
  Generator g_serial(seed), g_twin(seed);
  auto serial = make(nn::BuildContext(g_serial));
  auto twin = make(nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  return std::pair{std::move(serial), std::move(twin)};
}

// make_twins of M(spec, bctx): a layer or model built from its spec or config.
template <typename M, typename Spec>
auto make_twins_of(const ParallelContext& ctx, uint64_t seed, const std::string& what,
                   const Spec& spec) {
  return make_twins(ctx, seed, what,
                    [&](const nn::BuildContext& b) { return std::make_shared<M>(spec, b); });
}

using LossOf = std::function<Tensor(const Tensor&)>;

// sum(y * gy): the loss whose gradient with respect to y is gy.
inline LossOf weighted_by(const Tensor& gy) {
  return [gy](const Tensor& y) { return sum(mul(y, gy)); };
}

// The names check_pass appends to `what`, and the seed of its dropout masks.
struct PassOptions {
  const char* output = " output";
  const char* input = " input gradient";
  uint64_t seed = 5;
};

// One forward and backward of a serial layer and its twin on leaf copies of the whole input x,
// each from manual_seed(seed) (dropout masks drawn alike): ys = serial(xs), yt = twin(xt), where
// the twin's function splits x and gathers its output as the layout needs; backward through
// loss(y), the serial first. The twin's output and input gradient against the serial ones; {ys,
// yt}.
template <typename Serial, typename Twin>
std::pair<Tensor, Tensor> check_pass(const Tensor& x, Serial&& serial, Twin&& twin,
                                     const LossOf& loss, const std::string& what,
                                     const PassOptions& options = {}) {
  Tensor xs = leaf(x), xt = leaf(x);
  manual_seed(options.seed);
  Tensor ys = serial(xs);
  autograd::backward({loss(ys)});
  manual_seed(options.seed);
  Tensor yt = twin(xt);
  check_close(yt, ys, what + options.output);
  autograd::backward({loss(yt)});
  check_close(xt.grad(), xs.grad(), what + options.input);
  return {ys, yt};
}

// One training step of a serial model and its twin, each from manual_seed(5): loss(model) and its
// backward, the serial first. Returns {the twin's loss, the serial's}.
template <typename M, typename Loss>
std::pair<Tensor, Tensor> train_step(M& serial, M& twin, Loss&& loss) {
  manual_seed(5);
  Tensor want = loss(serial);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = loss(twin);
  autograd::backward({got});
  return {got, want};
}

// train_step, the twin's loss against the serial one's ("<what> loss").
template <typename M, typename Loss>
void check_train_step(M& serial, M& twin, Loss&& loss, const std::string& what) {
  const auto [got, want] = train_step(serial, twin, std::forward<Loss>(loss));
  check_close(got, want, what + " loss");
}

// Both models in eval mode: forward(x) of the twin against the serial one's ("<what> logits").
template <typename M>
void check_eval_logits(M& serial, M& twin, const Tensor& x, const std::string& what) {
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(x), serial.forward(x), what + " logits");
}

// Passes no gradient to its input, as a head that does not use a tensor would: a loss through it
// reaches the nodes before it, but no gradient arrives there (an always-run node must run anyway).
struct DropGradNode final : autograd::Node {
  std::string name() const override { return "DropGradNode"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
};
inline Tensor drop_grad(const Tensor& x) {
  Tensor out = x.detach().clone();
  if (auto node = autograd::make_node<DropGradNode>({&x})) autograd::set_history(out, node);
  return out;
}

// One ring collective of `payload` bytes on a group of q, as comm_types.h counts it per rank:
// 1 call; (q - 1) / q of it sent and received (all_reduce: twice that).
inline void ring(CommStats& s, CommKind kind, int q, int64_t payload) {
  CommCounter& c = s[kind];
  const int64_t moved = (kind == CommKind::all_reduce ? 2 : 1) * (q - 1) * payload / q;
  c.calls += 1;
  c.payload_bytes += payload;
  c.bytes_sent += moved;
  c.bytes_received += moved;
}

// A group's counter of one collective kind against the prediction: calls, payload, sent, received.
inline void check_counter(const CommCounter& got, const CommCounter& exp,
                          const std::string& where) {
  RANK_CHECK(got.calls == exp.calls, where, ": ", got.calls, " calls, predicted ", exp.calls);
  RANK_CHECK(got.payload_bytes == exp.payload_bytes, where, ": payload ", got.payload_bytes,
             ", predicted ", exp.payload_bytes);
  RANK_CHECK(got.bytes_sent == exp.bytes_sent, where, ": sent ", got.bytes_sent, ", predicted ",
             exp.bytes_sent);
  RANK_CHECK(got.bytes_received == exp.bytes_received, where, ": received ", got.bytes_received,
             ", predicted ", exp.bytes_received);
}

// What one check predicts the groups of a grid or cube move: a CommStats per group.
struct GridVolume {  // 2D / 2.5D: the grid's row, column and depth groups
  CommStats row, col, dep;
};
struct CubeVolume {  // 3D: the cube's input, weight and output groups
  CommStats input, weight, output;
};

// Each group's counters since its reset against its prediction, every collective kind; a null
// prediction says the group moved nothing, a null group is skipped.
inline void check_groups(const std::vector<std::pair<tensor::CommPtr, const CommStats*>>& groups,
                         const std::string& what) {
  const CommStats none;
  for (int k = 0; k < kNumCommKinds; ++k) {
    const CommKind kind = CommKind(k);
    for (const auto& [group, predicted] : groups) {
      if (!group) continue;
      check_counter(group->stats()[kind], (predicted ? *predicted : none)[kind],
                    str_cat(what, " ", group->name(), " ", comm_kind_name(kind)));
    }
  }
}
// The grid's groups (the batch group, which these layers never use, moved nothing).
inline void check_volume(const tensor::SummaGrid& grid, const GridVolume& want,
                         const std::string& what) {
  check_groups(
      {{grid.row, &want.row}, {grid.col, &want.col}, {grid.dep, &want.dep}, {grid.batch, nullptr}},
      what);
}
inline void check_volume(const tensor::Cube3D& cube, const CubeVolume& want,
                         const std::string& what) {
  check_groups(
      {{cube.input, &want.input}, {cube.weight, &want.weight}, {cube.output, &want.output}}, what);
}

// Resets the counters of the groups given (null ones skipped).
inline void reset_stats(std::initializer_list<tensor::CommPtr> groups) {
  for (const auto& group : groups)
    if (group) group->reset_stats();
}

inline void reset(const tensor::SummaGrid& grid) {
  reset_stats({grid.row, grid.col, grid.dep, grid.batch});
}
inline void reset(const tensor::Cube3D& cube) {
  reset_stats({cube.input, cube.weight, cube.output});
}

// The groups given (null ones skipped) moved nothing since their counters were reset: a refused
// call is refused by every rank before any collective.
inline void check_nothing_moved(std::initializer_list<tensor::CommPtr> groups) {
  for (const auto& group : groups)
    if (group)
      RANK_CHECK(group->stats().total().calls == 0, "a refused call moved something on ",
                 group->name());
}

}  // namespace tessera::parallel::testing
