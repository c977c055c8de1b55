// The update engine the spec asks for (update_engine.h): the plain path or ZeRO.
#include "models/train/update_engine.h"

#include "core/error.h"

namespace tessera::train {

std::unique_ptr<UpdateEngine> make_plain_update(const UpdateEngineSpec& spec);
std::unique_ptr<UpdateEngine> make_zero_update(const UpdateEngineSpec& spec);

std::unique_ptr<UpdateEngine> make_update_engine(const UpdateEngineSpec& spec) {
  TS_CHECK(spec.model != nullptr, "train", "expected a model for the update engine");
  if (spec.zero_stage == 0) return make_plain_update(spec);
  TS_CHECK(spec.grad_group != nullptr, "config", "zero.stage ", spec.zero_stage,
           ": the ZeRO optimizer shards over the data-parallel ranks of an MPI job; run under "
           "mpirun (mpirun -np N tessera train ...) or set zero.stage to 0");
  return make_zero_update(spec);
}

}  // namespace tessera::train
