// ZeRO stage 3's sharded build of a model (parallel/zero/sharded_build.h), for the trainer and for
// a user's own loop: `build` runs twice from the same generator states. The first run is a probe:
// every parameter is released as it is registered, and the model it returns yields the layout.
// In the second, each parameter, rounded to the run's dtype, leaves this rank's pieces in the
// master shards as it is drawn and is released. Neither run holds more than one parameter's bytes
// at once. The second run's model is the one to train: pass the masters to the ZeRO optimizer
// (UpdateEngineSpec::zero3_masters, ZeroOptions::sharded_masters).
#pragma once

#include <functional>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "models/nn/module.h"
#include "optim/optimizer.h"

namespace tessera::train {

struct ZeroBuildSpec {
  DType dtype = DType::f32;  // the run's precision: each parameter is rounded before it is taken
  // The optimizer's parameter groups of a built model (the plan follows them).
  std::function<std::vector<optim::ParamGroup>(const nn::Module&)> groups;
  int ranks = 1;  // the ZeRO (data) group: its size and this rank's place
  int rank = 0;
  Device shard_device = kCPU;  // where the masters live (the host under offload)
  // Generators the build draws from: each is put back where it was before the second run, so it
  // ends where one ordinary build leaves it.
  std::vector<Generator*> generators;
};

// Not collective: every rank draws the same numbers. build: builds the model (the same one each
// time), keeps it where the caller wants it and returns it. Returns this rank's f32 master shards.
std::vector<Tensor> build_sharded(const ZeroBuildSpec& spec,
                                  const std::function<const nn::Module&()>& build);

}  // namespace tessera::train
