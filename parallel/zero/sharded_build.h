// ZeRO stage 3's sharded build: no rank ever holds the whole model. As the model is built, each
// parameter is handed over the moment its layer has drawn it (models/nn/parameter_sink.h); this
// rank copies its pieces of it into its f32 master shards and the parameter's bytes are released
// at once. The build then holds one parameter beside this rank's shards, instead of every
// parameter, and ShardedOptimizer takes the masters as they are (ZeroOptions::sharded_masters).
//
// The shards are offsets into the plan, which needs every parameter's size before the first one
// is drawn: a probing build of the same model (each parameter released as it is registered, so it
// too holds one at a time) gives the parameters in their named order, and which of them each
// registration is (`registered`: a tied parameter registers twice). Every rank draws the same
// numbers from the same seed, so nothing is broadcast and the masters equal what the whole build
// gives, bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

// What the probing build found: the parameters in named order, and the parameter each
// registration was (an index into names, or kNotHeld for a layer the model built and dropped, as
// a pipeline stage drops the other stages' layers).
struct BuildProbe {
  static constexpr size_t kNotHeld = size_t(-1);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<size_t> registered;
};

class ShardedBuild {
 public:
  // plan: the ZeRO layout of probe's parameters; rank: this rank's place in the data group;
  // shard_device: where the masters live (the host under offload).
  ShardedBuild(ZeroPlan plan, BuildProbe probe, int rank, Device shard_device);
  ~ShardedBuild();
  ShardedBuild(const ShardedBuild&) = delete;
  ShardedBuild& operator=(const ShardedBuild&) = delete;

  // The build's next registration: `t` must be the parameter the probe found there. Its pieces in
  // this rank's shards are copied into the masters and its storage is released (reading it before
  // ZeRO stage 3 installs its gather fails, naming it). A tied parameter's second registration
  // must be the same tensor as its first. A parameter the model does not hold is left alone.
  void take(const Tensor& t);
  // Every registration seen: this rank's f32 master shards, one per group (padding zero).
  std::vector<Tensor> masters();

 private:
  ZeroPlan plan_;
  BuildProbe probe_;
  std::vector<std::vector<ShardPiece>> pieces_;  // per parameter: this rank's pieces of it
  std::vector<const TensorImpl*> taken_;          // per parameter: its tensor, once taken
  std::vector<Tensor> masters_;
  size_t next_ = 0;
};

// Releases the storage of a parameter a build has registered, with a materializer that fails
// naming `name` and why (`what`): nothing may read it until ZeRO stage 3 takes it over. The
// parameter must own its whole storage, as stage 3 requires.
void release_unread(const Tensor& t, const std::string& name, const std::string& what);

}  // namespace tessera::parallel::zero
