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

 private:
  ParallelConfig config_;
  DeviceMesh mesh_;
  std::shared_ptr<Communicator> world_;
  std::map<std::string, std::shared_ptr<Communicator>> groups_;
  std::map<std::string, std::vector<std::string>> group_axes_;
};

}  // namespace tessera::parallel
