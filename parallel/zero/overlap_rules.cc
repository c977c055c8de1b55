// The overlapped step's rule and its two wordings (see overlap_rules.h).
#include "parallel/zero/overlap_rules.h"

#include "core/error.h"

namespace tessera::parallel::zero {

bool overlap_step_allowed(bool offload, int stage) { return offload && stage >= 2; }

void check_overlap_step(bool overlap_step, bool offload, int stage, OverlapAsker asker) {
  if (!overlap_step || overlap_step_allowed(offload, stage)) return;
  switch (asker) {
    case OverlapAsker::config:
      TS_FAIL("config",
              "zero.overlap_step steps the host's shards while backward goes on, as each "
              "gradient range is reduced: expected zero.offload true and zero.stage 2 or 3, got "
              "zero.stage ",
              stage, " and zero.offload ", offload ? "true" : "false");
    case OverlapAsker::optimizer:
      TS_FAIL("zero",
              "expected the overlapped step with offload at stage 2 or 3 (the host steps each "
              "shard range its reduction completes), got stage ",
              stage, offload ? " with" : " without", " offload");
  }
}

}  // namespace tessera::parallel::zero
