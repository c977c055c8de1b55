// The probing and the sharded build of a ZeRO stage 3 model (see zero_build.h).
#include "models/train/zero_build.h"

#include <string>
#include <unordered_map>
#include <utility>

#include "autograd/grad_mode.h"
#include "models/nn/parameter_sink.h"
#include "parallel/zero/sharded_build.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {
namespace {

using parallel::zero::BuildProbe;
using parallel::zero::ShardedBuild;

// Records which tensor each registration is and releases it: the probe holds one parameter's
// bytes at a time. The handles stay (without bytes), so a dropped layer's tensor is never taken
// for a later one allocated where it was.
class ProbeSink : public nn::ParameterSink {
 public:
  void on_parameter(const Tensor& t) override {
    registered.push_back(t);
    parallel::zero::release_unread(t, "#" + std::to_string(registered.size() - 1),
                                   "zero.sharded_init's probing build");
  }
  std::vector<Tensor> registered;
};

// Rounds each new parameter to the run's dtype (as Module::to would after a whole build) and
// hands it to this rank's shards.
class ShardSink : public nn::ParameterSink {
 public:
  ShardSink(ShardedBuild& build, DType dtype) : build_(build), dtype_(dtype) {}
  void on_parameter(const Tensor& t) override {
    if (t.dtype() != dtype_ && !t.storage()->released()) {
      autograd::NoGradGuard no_grad;
      nn::replace_data(t, t.detach().to(dtype_));
    }
    build_.take(t);
  }

 private:
  ShardedBuild& build_;
  DType dtype_;
};

// The probe's findings from the model it built.
BuildProbe read_probe(const nn::Module& model, const std::vector<Tensor>& registered) {
  BuildProbe probe;
  std::unordered_map<const TensorImpl*, size_t> index;
  for (const auto& [name, t] : model.named_parameters()) {
    index.emplace(t.impl(), probe.names.size());
    probe.names.push_back(name);
    probe.shapes.push_back(t.shape());
  }
  for (const Tensor& t : registered) {
    auto it = index.find(t.impl());
    probe.registered.push_back(it == index.end() ? BuildProbe::kNotHeld : it->second);
  }
  return probe;
}

}  // namespace

std::vector<Tensor> build_sharded(const ZeroBuildSpec& spec,
                                  const std::function<const nn::Module&()>& build) {
  std::vector<Generator> before;
  for (const Generator* g : spec.generators) before.push_back(*g);
  BuildProbe probe;
  parallel::zero::ZeroPlan plan;
  {
    ProbeSink sink;
    nn::ScopedParameterSink scope(sink);
    const nn::Module& model = build();
    probe = read_probe(model, sink.registered);
    std::vector<Tensor> params;
    for (const auto& entry : model.named_parameters()) params.push_back(entry.second);
    plan = parallel::zero::plan_parameter_groups(params, spec.groups(model), spec.ranks);
  }
  for (size_t i = 0; i < before.size(); ++i)
    spec.generators[i]->set_state(before[i].seed(), before[i].offset());
  ShardedBuild sharded(std::move(plan), std::move(probe), spec.rank, spec.shard_device);
  ShardSink sink(sharded, spec.dtype);
  {
    nn::ScopedParameterSink scope(sink);
    build();
  }
  return sharded.masters();
}

}  // namespace tessera::train
