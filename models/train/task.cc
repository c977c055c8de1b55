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

void Task::draw_micro_batches(int64_t, int64_t) {
  TS_FAIL("train", "this model cannot be split into pipeline stages; set parallel.pipeline to 1");
}

Tensor Task::stage_forward(int, int64_t, const Tensor&) {
  TS_FAIL("train", "this model cannot be split into pipeline stages; set parallel.pipeline to 1");
}

}  // namespace tessera::train
