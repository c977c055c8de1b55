// ParallelContext: this rank's place in the job. Built once from the configuration's `parallel`
// section and the world communicator, it validates the layout, builds the device mesh and creates
// every group the layout defines (see group_layout.h for the names and definitions), so layers only
// ask for their group by name. Pass it explicitly; there is no global instance.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/mesh/device_mesh.h"
#include "parallel/mesh/group_layout.h"
#include "parallel/mesh/parallel_config.h"

namespace tessera::parallel {

class ParallelContext {
 public:
  // Collective over `world`: checks that every rank holds the same parallel config, validates it
  // against world->size() and splits `world` into every group.
  ParallelContext(const ParallelConfig& config, std::shared_ptr<Communicator> world);

  const ParallelConfig& config() const { return config_; }
  const DeviceMesh& mesh() const { return mesh_; }
  const std::shared_ptr<Communicator>& world() const { return world_; }
  int rank() const { return world_->rank(); }
  int world_size() const { return world_->size(); }
  // This rank's coordinate on a mesh axis ("data", "pipeline", "tp_row", ...).
  int coord(const std::string& axis) const { return mesh_.coord(rank(), axis); }

  // Whether a forward pass is a collective over the model-parallel groups (tensor, pipeline or
  // sequence parallelism), so every rank must run it (evaluation, sampling) and not rank 0 alone.
  bool forward_is_collective() const {
    return config_.tensor.size > 1 || config_.pipeline > 1 || config_.sequence > 1;
  }

  // For the run's header: "tensor parallel: 1d over 2 ranks, groups [0,1] [2,3]" (and Megatron's
  // sequence parallelism when on); "sequence parallel: ring_flash attention over 2 ranks, each
  // holding 32 positions of every sequence (zigzag layout: ...)" for sequences of `positions`.
  std::string describe_tensor() const;
  std::string describe_sequence(int64_t positions) const;

  bool has_group(const std::string& name) const { return groups_.count(name) != 0; }
  // The communicator of this rank's group `name`; throws naming the groups that exist.
  const std::shared_ptr<Communicator>& group(const std::string& name) const;
  // The world ranks of this rank's group `name`, in group-rank order.
  std::vector<int> group_ranks(const std::string& name) const;
  std::vector<std::string> group_names() const;

  const std::shared_ptr<Communicator>& data_group() const { return group("data"); }
  const std::shared_ptr<Communicator>& pipeline_group() const { return group("pipeline"); }
  const std::shared_ptr<Communicator>& sequence_group() const { return group("sequence"); }
  const std::shared_ptr<Communicator>& tensor_group() const { return group("tensor"); }
  // The first and last pipeline stage of this rank's pipeline group (group_layout.h's embedding
  // group): null on the middle stages and without a pipeline.
  const std::shared_ptr<Communicator>& embedding_group() const { return embedding_; }

 private:
  ParallelConfig config_;
  DeviceMesh mesh_;
  std::shared_ptr<Communicator> world_;
  std::map<std::string, std::shared_ptr<Communicator>> groups_;
  std::map<std::string, std::vector<std::string>> group_axes_;
  std::shared_ptr<Communicator> embedding_;
};

}  // namespace tessera::parallel
