// Ctrl-C and SIGTERM during training: the first signal asks the trainer to stop after the current
// step (it saves a checkpoint and exits non-zero); a second one ends the process at once.
#pragma once

namespace tessera::train {

// Installs the SIGINT and SIGTERM handlers for its lifetime and restores the previous ones after.
// One at a time per process.
class InterruptWatch {
 public:
  InterruptWatch();
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  // The first signal received since construction (SIGINT, SIGTERM), or 0.
  int signal() const;
};

// "SIGINT (Ctrl-C)", "SIGTERM".
const char* signal_description(int signal);

}  // namespace tessera::train
