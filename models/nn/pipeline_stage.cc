// The stage plan of a pipelined model (see pipeline_stage.h).
#include "models/nn/pipeline_stage.h"

#include <algorithm>

#include "core/error.h"

namespace tessera::nn {

PipelineStage PipelineStage::plan(const BuildContext& ctx, int64_t blocks, int64_t block_params,
                                  int64_t first_extra, int64_t last_extra) {
  PipelineStage s;
  const parallel::ParallelContext* parallel = ctx.parallel();
  if (parallel && parallel->config().pipeline > 1) {
    const parallel::ParallelConfig& c = parallel->config();
    s.ranks_ = c.pipeline;
    s.chunks_ = c.pipeline_options.virtual_stages;
    s.rank_ = parallel->coord("pipeline");
  }
  const int stages = s.ranks_ * s.chunks_;
  const parallel::pipeline::PartitionSpec spec =
      parallel ? parallel->config().pipeline_options.partition : parallel::pipeline::PartitionSpec{};
  s.all_ = parallel::pipeline::partition_blocks(
      spec, blocks, stages, std::vector<int64_t>(size_t(blocks), block_params), first_extra,
      last_extra);
  s.chunk_params_.assign(size_t(s.chunks_), {});
  return s;
}

parallel::pipeline::BlockRange PipelineStage::chunk_blocks(int chunk) const {
  TS_CHECK(chunk >= 0 && chunk < chunks_, "pipeline", "expected a model chunk in 0..", chunks_ - 1,
           ", got ", chunk);
  return all_.at(size_t(chunk * ranks_ + rank_));
}

int PipelineStage::chunk_of_block(int64_t block) const {
  for (int c = 0; c < chunks_; ++c) {
    const parallel::pipeline::BlockRange r = chunk_blocks(c);
    if (block >= r.begin && block < r.end) return c;
  }
  return -1;
}

bool PipelineStage::holds_block(int64_t block) const { return chunk_of_block(block) >= 0; }

void PipelineStage::hold(const std::string& prefix, const Module& module,
                         const std::vector<std::string>& tied) {
  record(prefix, module, true, tied);
}

void PipelineStage::record(const std::string& prefix, const Module& module, bool held,
                           const std::vector<std::string>& tied) {
  const auto params = module.named_parameters();
  const auto placements = module.named_placements();  // the same order
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    if (std::find(tied.begin(), tied.end(), name) != tied.end()) continue;
    if (held && !recorded_.insert(params[i].second.impl()).second) continue;
    const std::string full = prefix.empty() ? name : prefix + "." + name;
    serial_.emplace_back(full, placements[i].second.global_shape);
    if (held) {
      const int chunk = block_chunk_ >= 0 ? block_chunk_ : blocks_built_ ? chunks_ - 1 : 0;
      chunk_params_[size_t(chunk)].push_back(full);
    }
  }
}

}  // namespace tessera::nn
