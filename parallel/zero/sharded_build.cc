// Stage 3's pieces taken parameter by parameter as the model is built (see sharded_build.h).
#include "parallel/zero/sharded_build.h"

#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::zero {

void release_unread(const Tensor& t, const std::string& name, const std::string& what) {
  if (t.numel() == 0) return;  // holds no bytes
  Storage& s = *t.storage();
  TS_CHECK(t.offset() == 0 && t.is_contiguous() && s.nbytes() == size_t(t.numel()) * t.itemsize(),
           "zero", "a sharded build releases each parameter's storage: expected '", name,
           "' to own its whole storage, got ", t.describe(), " at offset ", t.offset(), " of ",
           s.nbytes(), " bytes");
  s.set_materializer([name, what](Storage&) {
    TS_FAIL("zero", "parameter '", name, "' was released by ", what,
             " and read before ZeRO stage 3 took it over: nothing may read the parameters "
             "between the model's build and the optimizer's construction");
  });
  s.release();
}

ShardedBuild::ShardedBuild(ZeroPlan plan, BuildProbe probe, int rank, Device shard_device)
    : plan_(std::move(plan)), probe_(std::move(probe)) {
  TS_CHECK(probe_.names.size() == plan_.group_of.size() &&
               probe_.shapes.size() == probe_.names.size(),
           "zero", "expected the probe's ", probe_.names.size(), " parameters to be the plan's ",
           plan_.group_of.size());
  pieces_.resize(probe_.names.size());
  taken_.assign(probe_.names.size(), nullptr);
  for (size_t g = 0; g < plan_.groups.size(); ++g) {
    masters_.push_back(
        zeros({plan_.groups[g].shard_numel}, {.dtype = DType::f32, .device = shard_device}));
    for (const ShardPiece& pc : plan_.groups[g].pieces(rank)) pieces_[pc.param].push_back(pc);
  }
}

ShardedBuild::~ShardedBuild() = default;

void ShardedBuild::take(const Tensor& t) {
  TS_CHECK(next_ < probe_.registered.size(), "zero",
           "the sharded build registered more parameters than its probe (", probe_.registered.size(),
           "): the model must register the same parameters in the same order every time it is "
           "built from one configuration");
  const size_t p = probe_.registered[next_++];
  if (p == BuildProbe::kNotHeld) return;  // its layer is dropped with it
  const std::string& name = probe_.names[p];
  if (taken_[p] != nullptr) {
    TS_CHECK(taken_[p] == t.impl(), "zero", "the sharded build's registration ", next_ - 1,
             " is '", name, "', registered before, so its probe found a tied parameter; got a "
             "different tensor ", t.describe());
    return;
  }
  TS_CHECK(t.shape() == probe_.shapes[p], "zero", "the sharded build's registration ", next_ - 1,
           " is '", name, "' of shape ", shape_str(probe_.shapes[p]), " in its probe, got ",
           t.describe());
  taken_[p] = t.impl();
  autograd::NoGradGuard no_grad;
  const size_t g = plan_.group_of[p];
  const Tensor flat = t.detach().reshape({t.numel()});
  for (const ShardPiece& pc : pieces_[p])
    masters_[g].narrow(0, pc.shard_offset, pc.numel).copy_(flat.narrow(0, pc.param_offset, pc.numel));
  release_unread(t, name, "zero.sharded_init's build");
}

std::vector<Tensor> ShardedBuild::masters() {
  TS_CHECK(next_ == probe_.registered.size(), "zero", "the sharded build registered ", next_,
           " parameters, its probe ", probe_.registered.size(),
           ": the model must register the same parameters every time it is built");
  return std::move(masters_);
}

}  // namespace tessera::parallel::zero
