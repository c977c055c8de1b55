// The trainer's checkpoint directory (checkpoint.dir) over one run: rank 0 holds it under an
// exclusive lock for the run's lifetime, clears the temporaries of interrupted saves, and refuses
// to mix two runs in it; every rank asks it which checkpoint to resume from.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "models/io/dir_lock.h"
#include "models/train/train_config.h"

namespace tessera::train {

class CheckpointRoot {
 public:
  using Say = std::function<void(const std::string&)>;

  // The writer's side (rank 0): takes the lock (a second run stops here, naming the first), removes
  // stale "step-N.tmp-*" / "step-N.old-*" directories, and, for a run that does not resume, refuses
  // a directory holding checkpoints unless checkpoint.overwrite (which deletes them). `say` reports
  // what was removed. Throws ValueError naming checkpoint.dir.
  CheckpointRoot(const CheckpointSection& section, const Say& say);

  // Deletes all but the newest checkpoint.keep checkpoints (keep 0: none deleted).
  void prune() const;

 private:
  CheckpointSection section_;
  std::unique_ptr<io::DirectoryLock> lock_;
};

// The checkpoint a run resumes from (any rank): step-<checkpoint.resume_step> when it is set, else
// the latest, or nullopt for a fresh run (resume off, no dir, or no checkpoint yet). A damaged
// latest checkpoint throws naming its file and the steps checkpoint.resume_step could pick instead.
std::optional<std::string> checkpoint_to_resume(const CheckpointSection& section);

// Deletes all but the newest `keep` step-N checkpoints under root (keep 0: none deleted).
void prune_checkpoints(const std::string& root, int64_t keep);

}  // namespace tessera::train
