// Building the layout the ZeRO parts share (see zero_layout.h).
#include "parallel/zero/zero_layout.h"

#include <unordered_set>

#include "core/error.h"
#include "core/factory.h"
#include "parallel/comm/config_check.h"
#include "parallel/zero/offload.h"

namespace tessera::parallel::zero {

ZeroPlan plan_parameter_groups(const std::vector<Tensor>& params,
                               const std::vector<optim::ParamGroup>& groups, int ranks,
                               const ZeroPlanOptions& options) {
  // The groups as indices into params, in the plain optimizer's order.
  std::vector<std::vector<size_t>> group_index;
  std::vector<int64_t> numels;
  for (const Tensor& t : params) numels.push_back(t.numel());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<size_t> idx;
    for (const Tensor& p : groups[g].params) {
      size_t k = 0;
      while (k < params.size() && !params[k].is_same(p)) ++k;
      TS_CHECK(k < params.size(), "zero", "expected group parameters among the named ones, got ",
               p.describe(), " in group ", g);
      idx.push_back(k);
    }
    group_index.push_back(std::move(idx));
  }
  return plan_zero(numels, group_index, ranks, options);
}

namespace {

void check_parameters(const ZeroLayout& layout) {
  const char* op = "zero";
  const Communicator& comm = *layout.comm;
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < layout.params.size(); ++i) {
    const std::string& name = layout.names[i];
    const Tensor& t = layout.params[i];
    TS_CHECK(t.defined() && is_floating(t.dtype()), op, "expected floating parameters, got '", name,
             "' ", t.defined() ? t.describe() : "undefined");
    TS_CHECK(t.is_leaf() && t.requires_grad(), op,
             "expected leaf parameters that require grad (ZeRO shards what trains), got '", name,
             "' ", t.describe());
    TS_CHECK(t.is_contiguous(), op, "expected contiguous parameters, got '", name, "'");
    TS_CHECK(t.device().type == comm.device_type(), op, "expected parameters on the ",
             comm.backend(), " communicator's device type, got '", name, "' ", t.describe());
    TS_CHECK(seen.insert(t.impl()).second, op, "expected each parameter once, got '", name,
             "' twice");
  }
}

// Ranks holding different layouts would deadlock in mismatched collectives.
void check_same_layout(const ZeroLayout& layout, const nlohmann::json& optimizer,
                       const ZeroLayoutOptions& options) {
  std::string text = str_cat("zero stage=", options.stage, " cap=", options.bucket_cap_bytes,
                             " align=", options.plan.align, " optimizer=", optimizer.dump(), "\n");
  for (size_t i = 0; i < layout.params.size(); ++i)
    text += str_cat(layout.names[i], " ", shape_str(layout.params[i].shape()), " ",
                    dtype_name(layout.params[i].dtype()), " group ", layout.plan.group_of[i], "\n");
  check_same_config(*layout.comm, text);
}

}  // namespace

std::shared_ptr<const ZeroLayout> make_zero_layout(
    std::vector<std::pair<std::string, Tensor>> params,
    const std::vector<optim::ParamGroup>& groups, const nlohmann::json& optimizer,
    std::shared_ptr<Communicator> comm, const ZeroLayoutOptions& options) {
  auto layout = std::make_shared<ZeroLayout>();
  layout->comm = std::move(comm);
  for (auto& [name, t] : params) {
    layout->names.push_back(std::move(name));
    layout->params.push_back(std::move(t));
  }
  check_parameters(*layout);
  layout->plan = plan_parameter_groups(layout->params, groups, layout->comm->size(), options.plan);
  size_t begin = 0;  // the plain optimizer numbers the parameters through the groups
  for (const optim::ParamGroup& group : groups) {
    layout->group_begin.push_back(begin);
    begin += group.params.size();
  }
  check_same_layout(*layout, optimizer, options);
  for (size_t g = 0; g < layout->plan.groups.size(); ++g) {
    DType dtype = DType::f32;
    const auto& slots = layout->plan.groups[g].slots;
    if (!slots.empty()) {
      dtype = layout->params[slots[0].param].dtype();
      for (const FlatSlot& s : slots)
        if (layout->params[s.param].dtype() != dtype) dtype = DType::f32;
    }
    layout->group_dtypes.push_back(dtype);
    layout->pieces.push_back(layout->plan.groups[g].pieces(layout->comm->rank()));
  }
  const Device device = layout->comm->device();
  layout->shard_device = options.offload ? offload_host_device(device) : device;
  layout->mover = std::make_shared<HostMover>(device);
  return layout;
}

Tensor pack_group(const ZeroLayout& layout, size_t g, DType dtype) {
  const ZeroGroupPlan& gp = layout.plan.groups[g];
  Tensor buf = zeros({gp.padded_numel()}, {.dtype = dtype, .device = layout.comm->device()});
  for (const FlatSlot& s : gp.slots)
    buf.narrow(0, s.offset, s.numel).copy_(layout.params[s.param].reshape({s.numel}));
  return buf;
}

}  // namespace tessera::parallel::zero
