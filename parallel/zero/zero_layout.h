// The facts every ZeRO part shares, fixed at construction: the data group, the shard plan over the
// model's parameters, this rank's pieces of each group, and where the shards live. Built once by
// make_zero_layout (collective: every rank must pass the same layout) and then only read.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"
#include "parallel/comm/communicator.h"
#include "parallel/zero/host_mover.h"
#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

struct ZeroLayout {
  std::shared_ptr<Communicator> comm;  // the data-parallel group
  std::vector<std::string> names;      // the parameters' names, in their named order
  std::vector<Tensor> params;          // the model's parameters, same order
  ZeroPlan plan;
  std::vector<std::vector<ShardPiece>> pieces;  // per group: this rank's
  // Per group: the parameters' dtype if they share one, else f32 (what the gathers move).
  std::vector<DType> group_dtypes;
  std::vector<size_t> group_begin;  // per group: the plain optimizer's index of its first parameter
  // Where the master shards, their gradients and the optimizer state live: the communicator's
  // device, or the host under offload.
  Device shard_device;
  // The moves between the device and the host (shared by the parts that make them).
  std::shared_ptr<HostMover> mover;

  int rank() const { return comm->rank(); }
  size_t groups() const { return plan.groups.size(); }
};

struct ZeroLayoutOptions {
  int stage = 1;
  int64_t bucket_cap_bytes = 0;
  ZeroPlanOptions plan;
  bool offload = false;
};

// The ZeRO layout of `params` (the parameters in their named order) grouped as `groups` (each
// parameter in exactly one) over `ranks` data ranks: the plan make_zero_layout builds from the
// same arguments.
ZeroPlan plan_parameter_groups(const std::vector<Tensor>& params,
                               const std::vector<optim::ParamGroup>& groups, int ranks,
                               const ZeroPlanOptions& options = {});

// Collective over comm: checks the parameters (floating leaves requiring grad, contiguous, on the
// communicator's device type, each once), plans the groups and checks that every rank holds the
// same layout and optimizer (`optimizer` enters the check only).
std::shared_ptr<const ZeroLayout> make_zero_layout(
    std::vector<std::pair<std::string, Tensor>> params,
    const std::vector<optim::ParamGroup>& groups, const nlohmann::json& optimizer,
    std::shared_ptr<Communicator> comm, const ZeroLayoutOptions& options);

// Group g's parameters packed into its flat buffer (padded_numel, zero padding) in `dtype`, on the
// communicator's device.
Tensor pack_group(const ZeroLayout& layout, size_t g, DType dtype);

}  // namespace tessera::parallel::zero
