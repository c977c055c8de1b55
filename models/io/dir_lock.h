// An exclusive lock on a directory for a process's lifetime, so two runs never write checkpoints
// into one directory at once. flock(2) on "<dir>/.tessera.lock": the kernel drops the lock when
// the process dies, so a crashed run never leaves the directory locked.
#pragma once

#include <string>

namespace tessera::io {

class DirectoryLock {
 public:
  // Creates `dir` if needed and takes its lock without waiting. When another process holds it,
  // throws ValueError "[<op>] <dir>: in use by another run (pid P on host H, since T)".
  DirectoryLock(const std::string& dir, const char* op);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // The lock file's name inside the directory (not a checkpoint; listings skip it).
  static constexpr const char* kFileName = ".tessera.lock";

 private:
  int fd_ = -1;
};

}  // namespace tessera::io
