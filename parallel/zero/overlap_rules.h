// The overlapped step's rule (ZeroOptions::overlap_step): the host steps each range of this rank's
// shard as its reduction completes, which needs the shards on the host (offload) and a reducer
// that hands over ranges during backward (stages 2 and 3). One owner for the config reader and
// the optimizer, each of which words the refusal in its own terms.
#pragma once

namespace tessera::parallel::zero {

// Who asks: the config reader names zero.* keys, the optimizer its options.
enum class OverlapAsker { config, optimizer };

// Whether the overlapped step can run with this offload and stage.
bool overlap_step_allowed(bool offload, int stage);

// Throws ValueError ("config" or "zero") unless overlap_step is off or allowed.
void check_overlap_step(bool overlap_step, bool offload, int stage, OverlapAsker asker);

}  // namespace tessera::parallel::zero
