// The trainer's pipeline step (see pipeline_step.h).
#include "models/train/pipeline_step.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/nn/dropout.h"

namespace tessera::train {

PipelineStep::PipelineStep(Task& task, const parallel::ParallelContext& context, int micro_batches,
                           Device device)
    : task_(task), context_(context) {
  TS_CHECK(task.pipeline_stage() != nullptr, "train",
           "this model cannot be split into pipeline stages; set parallel.pipeline to 1");
  const parallel::ParallelConfig& c = context.config();
  const parallel::pipeline::ScheduleSpec spec{.kind = c.pipeline_options.schedule,
                                              .stages = c.pipeline,
                                              .virtual_stages = c.pipeline_options.virtual_stages,
                                              .micro_batches = micro_batches};
  executor_ = std::make_unique<parallel::pipeline::PipelineExecutor>(context.pipeline_group(), spec,
                                                                     device);
  task_.set_pipeline(executor_.get());
}

double PipelineStep::run(int64_t micro_batch, uint64_t dropout_key,
                         const std::function<Tensor(const Tensor&)>& to_backward,
                         const std::function<void(int chunk)>& before_chunk_final_backward) {
  const nn::PipelineStage& stage = *task_.pipeline_stage();
  task_.draw_micro_batches(executor_->spec().micro_batches, micro_batch);
  double loss_sum = 0;
  parallel::pipeline::StageCallbacks callbacks{.forward = [&](int chunk, int m, const Tensor& input) {
    Tensor out;
    {
      nn::MicroBatchDropout keyed(dropout_key, uint64_t(m));
      out = task_.stage_forward(chunk, m, input);
    }
    if (!stage.last_chunk(chunk)) return out;
    loss_sum += out.item();
    return to_backward(out);
  }};
  if (before_chunk_final_backward)
    callbacks.before_backward = [&](int chunk, int, bool last_for_chunk) {
      if (last_for_chunk) before_chunk_final_backward(chunk);
    };
  executor_->run(callbacks);
  return loss_sum;
}

std::vector<std::string> PipelineStep::tied_parameters_held() const {
  const nn::PipelineStage& stage = *task_.pipeline_stage();
  if (!stage.holds_embeddings() && !stage.holds_head()) return {};
  const std::vector<std::string> tied = task_.tied_parameters();
  std::vector<std::string> held;
  for (const auto& [name, p] : task_.model().named_parameters())
    if (std::find(tied.begin(), tied.end(), name) != tied.end()) held.push_back(name);
  return held;
}

void PipelineStep::reduce_tied_gradients() {
  const std::vector<std::string> tied = tied_parameters_held();
  if (tied.empty()) return;
  const std::shared_ptr<parallel::Communicator>& group = context_.embedding_group();
  TS_ASSERT(group != nullptr);  // tied parameters live on the first and last stage only
  for (const auto& [name, p] : task_.model().named_parameters()) {
    if (std::find(tied.begin(), tied.end(), name) == tied.end()) continue;
    // A sum of two values is the same in either order, so both stages hold bit-identical sums.
    Tensor sum = p.grad().defined() ? p.grad().contiguous().clone()
                                    : zeros(p.shape(), {.dtype = p.dtype(), .device = p.device()});
    group->all_reduce(sum, parallel::ReduceOp::sum)->wait();
    p.set_grad(sum);
  }
}

std::vector<std::vector<std::string>> PipelineStep::chunk_parameters() const {
  const std::vector<std::string> tied = tied_parameters_held();
  std::unordered_set<std::string> model_names;
  for (const auto& [name, p] : task_.model().named_parameters()) model_names.insert(name);
  std::vector<std::vector<std::string>> chunks;
  for (const std::vector<std::string>& held : task_.pipeline_stage()->chunk_parameters()) {
    std::vector<std::string>& names = chunks.emplace_back();
    for (const std::string& name : held)
      if (model_names.count(name) && std::find(tied.begin(), tied.end(), name) == tied.end())
        names.push_back(name);
  }
  return chunks;
}

std::string PipelineStep::describe() const {
  const nn::PipelineStage& stage = *task_.pipeline_stage();
  const parallel::pipeline::ScheduleSpec& spec = executor_->spec();
  std::ostringstream os;
  os << "  pipeline: " << parallel::pipeline::schedule_name(spec.kind) << " over " << spec.stages
     << " stages";
  if (spec.virtual_stages > 1) os << " x " << spec.virtual_stages << " virtual";
  os << ", " << spec.micro_batches << " micro-batches per step, blocks";
  for (const auto& r : stage.all_blocks()) os << " [" << r.begin << "," << r.end << ")";
  os << " (embeddings on stage 0, head and loss on stage " << stage.all_blocks().size() - 1 << ")";
  return os.str();
}

}  // namespace tessera::train
