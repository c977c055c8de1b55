// flock-based directory lock (see dir_lock.h). The holder writes "pid P on host H, since T" into
// the lock file so the run that is refused can name it.
#include "models/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace tessera::io {
namespace {

std::string holder_description() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[64] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return str_cat("pid ", ::getpid(), " on host ", host, ", since ", when);
}

// What the holder wrote, without its trailing newline ("an unknown process" when empty).
std::string read_holder(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, size_t(n)) : std::string();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? "an unknown process" : s;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const char* op) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TS_CHECK(!ec, op, dir, ": cannot create directory: ", ec.message());
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TS_CHECK(fd_ >= 0, op, path, ": cannot open the lock file: ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    TS_CHECK(err != EWOULDBLOCK, op, dir, ": in use by another run (", holder,
             "); wait for it to end or choose another checkpoint.dir");
    TS_FAIL(op, path, ": cannot lock: ", std::strerror(err));
  }
  const std::string me = holder_description() + "\n";
  // Best effort: the lock itself is the flock, the text only names the holder.
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) >= 0) ::fsync(fd_);
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace tessera::io
