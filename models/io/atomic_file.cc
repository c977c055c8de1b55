// Temporary file + fsync + rename + directory fsync (see atomic_file.h).
#include "models/io/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace tessera::io {
namespace {

constexpr const char* kOp = "atomic_write";

[[noreturn]] void fail_errno(const std::string& what, const std::string& path) {
  int err = errno;
  throw InternalError(kOp, str_cat(what, " ", path, ": ", std::strerror(err)));
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Removes a temporary directory unless released (the save reached its rename).
class TempDirGuard {
 public:
  explicit TempDirGuard(std::string path) : path_(std::move(path)) {}
  ~TempDirGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// Puts `from` at `to`, atomically replacing an existing directory; returns where the old
// contents went (to delete), or "" when `to` did not exist.
std::string move_into_place(const std::string& from, const std::string& to, const char* op) {
  if (::rename(from.c_str(), to.c_str()) == 0) return "";
  if (errno != ENOTEMPTY && errno != EEXIST) {
    TS_FAIL(op, "cannot rename ", from, " to ", to, ": ", std::strerror(errno));
  }
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) return from;
  // File systems without RENAME_EXCHANGE: two renames; in between a crash leaves the old
  // contents under "<dir>.old-*", which latest_checkpoint() ignores.
  std::string old = to + ".old-" + std::to_string(::getpid());
  TS_CHECK(::rename(to.c_str(), old.c_str()) == 0, op, "cannot rename ", to, " to ", old, ": ",
           std::strerror(errno));
  TS_CHECK(::rename(from.c_str(), to.c_str()) == 0, op, "cannot rename ", from, " to ", to, ": ",
           std::strerror(errno));
  return old;
}

}  // namespace

void write_directory_atomic(const std::string& dir, const char* op,
                            const std::function<void(const std::string& tmp)>& fill) {
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  const std::string parent = parent_directory(target);
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  TS_CHECK(!ec, op, parent, ": cannot create directory: ", ec.message());
  std::string templ = target + ".tmp-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  TS_CHECK(::mkdtemp(buf.data()) != nullptr, op, "cannot create ", templ, ": ",
           std::strerror(errno));
  const std::string tmp(buf.data());
  TempDirGuard guard(tmp);
  ::chmod(tmp.c_str(), 0755);
  fill(tmp);
  commit_directory(tmp, target, op);
  guard.release();
}

void commit_directory(const std::string& tmp, const std::string& dir, const char* op) {
  const std::string old = move_into_place(tmp, dir, op);
  TempDirGuard old_guard(old);  // the replaced directory, if any
  fsync_directory(parent_directory(dir));
}

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open directory", dir);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0) fail_errno("cannot fsync directory", dir);
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  TS_CHECK(!path_.empty() && path_.back() != '/', kOp, "expected a file path, got '", path_, "'");
  // Hidden, in the same directory (rename must not cross file systems), unique per writer.
  std::string dir = parent_directory(path_);
  std::string templ = (dir == "/" ? "/" : dir + "/") + "." + base_name(path_) + ".tmp-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd_ < 0) fail_errno("cannot create a temporary file like", templ);
  temp_path_.assign(buf.data());
  ::fchmod(fd_, 0644);  // mkstemp makes 0600; checkpoints are meant to be shared
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abandon();
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  TS_CHECK(!committed_ && fd_ >= 0, kOp, "expected an open writer for ", path_,
           ", got one already committed");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    // Linux moves at most about 2 GiB per write call.
    ssize_t n = ::write(fd_, p, std::min<size_t>(nbytes, size_t(1) << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(str_cat("cannot write ", nbytes, " bytes (after ", written_, ") to"), temp_path_);
    }
    p += n;
    nbytes -= size_t(n);
    written_ += size_t(n);
  }
}

void AtomicFileWriter::commit() {
  TS_CHECK(!committed_ && fd_ >= 0, kOp, "expected an open writer for ", path_,
           ", got one already committed");
  if (::fsync(fd_) != 0) fail_errno("cannot fsync", temp_path_);
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail_errno("cannot close", temp_path_);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail_errno(str_cat("cannot rename ", temp_path_, " to"), path_);
  }
  committed_ = true;
  fsync_directory(parent_directory(path_));
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFileWriter w(path);
  w.write(contents);
  w.commit();
}

std::string read_file(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), op, path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  TS_CHECK(!in.bad(), op, path, ": read failed");
  return ss.str();
}

}  // namespace tessera::io
