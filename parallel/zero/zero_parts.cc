// Choosing and building ZeRO's parts (see zero_parts.h).
#include "parallel/zero/zero_parts.h"

#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::zero {

namespace {

// Stages 2 and 3 copy rank 0's parameters to every rank themselves (stage 1's DataParallel does).
void broadcast_parameters(const ZeroLayout& layout) {
  autograd::NoGradGuard no_grad;
  for (size_t g = 0; g < layout.groups(); ++g) {
    Tensor buf = pack_group(layout, g, layout.group_dtypes[g]);
    layout.comm->broadcast(buf, 0)->wait();
    for (const FlatSlot& s : layout.plan.groups[g].slots)
      layout.params[s.param].reshape({s.numel}).copy_(buf.narrow(0, s.offset, s.numel));
  }
}

// This rank's f32 masters: its pieces of the (broadcast) parameters, zero padding.
std::vector<Tensor> masters_from_parameters(const ZeroLayout& layout) {
  std::vector<Tensor> out;
  for (size_t g = 0; g < layout.groups(); ++g) {
    Tensor shard = zeros({layout.plan.groups[g].shard_numel},
                         {.dtype = DType::f32, .device = layout.shard_device});
    for (const ShardPiece& pc : layout.pieces[g])
      shard.narrow(0, pc.shard_offset, pc.numel)
          .copy_(layout.params[pc.param].reshape({-1}).narrow(0, pc.param_offset, pc.numel));
    out.push_back(shard);
  }
  return out;
}

// A sharded build (sharded_build.h) drew the parameters identically on every rank and kept only
// this rank's masters: the parameters are released already and there is nothing to broadcast.
void check_sharded_masters(const ZeroLayout& layout, const ZeroPartsOptions& options) {
  const char* op = "zero";
  const std::vector<Tensor>& masters = options.sharded_masters;
  TS_CHECK(options.stage == 3, op,
           "expected master shards from a sharded build only at stage 3 (it releases the "
           "parameters), got stage ",
           options.stage);
  TS_CHECK(masters.size() == layout.groups(), op, "expected a master shard per group (",
           layout.groups(),
           ") from the sharded "
           "build, got ",
           masters.size());
  for (size_t g = 0; g < masters.size(); ++g) {
    const Tensor& shard = masters[g];
    TS_CHECK(shard.dtype() == DType::f32 && shard.device() == layout.shard_device &&
                 shard.dim() == 1 && shard.numel() == layout.plan.groups[g].shard_numel,
             op, "expected group ", g, "'s master shard from the sharded build as f32 (",
             layout.plan.groups[g].shard_numel, ") on ", layout.shard_device.str(), ", got ",
             shard.describe());
  }
}

}  // namespace

ZeroParts make_zero_parts(std::shared_ptr<const ZeroLayout> layout,
                          const std::vector<optim::ParamGroup>& groups,
                          const nlohmann::json& optimizer, const ZeroPartsOptions& options) {
  const bool built_sharded = !options.sharded_masters.empty();
  if (built_sharded) check_sharded_masters(*layout, options);
  ZeroParts parts;
  if (options.stage == 1) {
    parts.reduction =
        make_all_reduce(layout, options.bucket_cap_bytes, options.broadcast_parameters);
  } else if (options.broadcast_parameters && layout->comm->size() > 1 && !built_sharded) {
    broadcast_parameters(*layout);
  }
  std::vector<Tensor> masters =
      built_sharded ? options.sharded_masters : masters_from_parameters(*layout);
  if (options.stage >= 2) parts.reduction = make_reduce_to_owner(layout, options.bucket_cap_bytes);
  if (options.overlap_step) {
    parts.update = std::make_unique<OverlappedShardUpdate>(layout, std::move(masters), groups,
                                                           optimizer, *parts.reduction);
  } else {
    parts.update = std::make_unique<ShardUpdate>(layout, std::move(masters), groups, optimizer);
  }
  const ShardUpdate* update = parts.update.get();
  const ParamSync::ComputeShard shard = [update](size_t g, bool chunked) {
    return update->compute_shard(g, chunked);
  };
  parts.sync = options.stage == 3 ? make_gather_on_use_sync(layout, shard, options.stage3)
                                  : make_all_gather_sync(layout);
  return parts;
}

}  // namespace tessera::parallel::zero
