// The task factory and the exact cross-rank sum the tasks' evaluations use.
#include "models/train/task.h"

#include <cstring>

#include "core/error.h"
#include "core/factory.h"

namespace tessera::train {

std::unique_ptr<Task> make_task(const TaskContext& ctx) {
  switch (ctx.config->kind) {
    case ModelKind::gpt:
      return make_gpt_task(ctx);
    case ModelKind::bert:
      return make_bert_task(ctx);
    case ModelKind::vit:
      return make_vit_task(ctx);
    case ModelKind::custom:  // the C++ API's recipe builds its task (engine.h)
      break;
  }
  return nullptr;
}

std::vector<double> sum_over_ranks(parallel::Communicator* comm,
                                   const std::vector<double>& values) {
  if (!comm || comm->size() == 1) return values;
  // Doubles travel as their bits (i64) and are added in rank order: exact and identical everywhere,
  // which a floating all-reduce does not promise.
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

void Task::draw_micro_batches(int64_t, int64_t) {
  TS_FAIL("train", "this model cannot be split into pipeline stages; set parallel.pipeline to 1");
}

Tensor Task::stage_forward(int, int64_t, const Tensor&) {
  TS_FAIL("train", "this model cannot be split into pipeline stages; set parallel.pipeline to 1");
}

}  // namespace tessera::train
