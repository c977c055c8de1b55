// Checkpoint directory policy for a run (see checkpoint_root.h).
#include "models/train/checkpoint_root.h"

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "models/io/checkpoint.h"

namespace tessera::train {

namespace fs = std::filesystem;

namespace {

// "3, 6 and 9" (the steps of `all`), for messages.
std::string step_list(const std::vector<io::CheckpointEntry>& all) {
  std::string out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) out += i + 1 == all.size() ? " and " : ", ";
    out += std::to_string(all[i].step);
  }
  return out;
}

}  // namespace

CheckpointRoot::CheckpointRoot(const CheckpointSection& section, const Say& say)
    : section_(section) {
  const std::string& dir = section.dir;
  TS_ASSERT(!dir.empty());
  lock_ = std::make_unique<io::DirectoryLock>(dir, "checkpoint");
  for (const std::string& stale : io::remove_stale_temporaries(dir))
    say("removed an interrupted checkpoint save: " + stale);
  if (section.resume) return;
  const std::vector<io::CheckpointEntry> old = io::list_checkpoints(dir);
  if (old.empty()) return;
  TS_CHECK(section.overwrite, "checkpoint", "checkpoint.dir ", dir,
           " holds checkpoints of an earlier run (steps ", step_list(old),
           "); a fresh run there would mix with them. Set checkpoint.resume true to continue that "
           "run, checkpoint.overwrite true to delete its checkpoints, or choose another "
           "checkpoint.dir");
  for (const io::CheckpointEntry& e : old) {
    std::error_code ec;
    fs::remove_all(e.path, ec);
    TS_CHECK(!ec, "checkpoint", e.path, ": cannot delete it (checkpoint.overwrite): ",
             ec.message());
  }
  say("checkpoint.overwrite: deleted the earlier run's checkpoints (steps " + step_list(old) +
      ") from " + dir);
}

void CheckpointRoot::prune() const { prune_checkpoints(section_.dir, section_.keep); }

std::optional<std::string> checkpoint_to_resume(const CheckpointSection& section) {
  if (!section.resume || section.dir.empty()) return std::nullopt;
  const std::vector<io::CheckpointEntry> all = io::list_checkpoints(section.dir);
  if (section.resume_step > 0) {
    const std::string dir = io::checkpoint_dir(section.dir, section.resume_step);
    TS_CHECK(fs::is_directory(dir), "checkpoint", "checkpoint.resume_step ", section.resume_step,
             ": no checkpoint ", dir,
             all.empty() ? std::string(" (the directory holds none)")
                         : " (steps present: " + step_list(all) + ")");
    return dir;
  }
  try {
    return io::latest_checkpoint(section.dir);
  } catch (const ValueError& e) {
    std::vector<io::CheckpointEntry> earlier(all.begin(), all.end() - 1);
    TS_FAIL("checkpoint", "the latest checkpoint is damaged, not resuming from an older one "
            "silently: ", error_text(e),
            earlier.empty() ? std::string("; no earlier checkpoint exists")
                            : "; to resume from an earlier one set checkpoint.resume_step (steps " +
                                  step_list(earlier) + ")");
  }
}

void prune_checkpoints(const std::string& root, int64_t keep) {
  if (keep <= 0) return;
  const std::vector<io::CheckpointEntry> all = io::list_checkpoints(root);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i].path);
}

}  // namespace tessera::train
