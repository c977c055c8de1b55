// Signal handling for the trainer (see interrupt.h). The handler only stores the signal number
// (async-signal-safe); on a second signal it writes a fixed line and _exits with 128 + signal.
#include "models/train/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "core/error.h"

namespace tessera::train {
namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_installed{false};
struct sigaction g_old_int, g_old_term;

extern "C" void on_signal(int sig) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) return;  // first: stop after this step
  static const char kLine[] = "\ntessera: second signal, exiting now without a checkpoint\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
  ::_exit(128 + sig);
}

}  // namespace

InterruptWatch::InterruptWatch() {
  TS_ASSERT(!g_installed.exchange(true));
  g_signal = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptWatch::~InterruptWatch() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

int InterruptWatch::signal() const { return g_signal.load(); }

const char* signal_description(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT (Ctrl-C)";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace tessera::train
