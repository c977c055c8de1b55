// Crash-safe file writes: data goes to a temporary file in the target's directory, is fsynced and
// then renamed over the target, so readers see the old file or the new one, never a torn one.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tessera::io {

// Usage: AtomicFileWriter w(path); w.write(...); ...; w.commit();
// Until commit() the target is untouched; a writer destroyed without commit() (an exception
// unwinding, say) removes its temporary file. I/O failures throw InternalError naming the file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Bytes written so far.
  size_t size() const { return written_; }
  // fsync the file, rename it over the target, fsync the directory. Call once.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void abandon() noexcept;
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically (a JSON state file, say).
void write_file_atomic(const std::string& path, std::string_view contents);

// Writes a directory whole or not at all: fill(tmp) writes its files into a fresh temporary
// sibling "<dir>.tmp-XXXXXX", which then takes `dir`'s place in one rename (an existing `dir` is
// swapped out and deleted) before the parent is fsynced. An exception, from fill or the rename,
// removes the temporary directory and leaves `dir` as it was. Errors name `op`.
void write_directory_atomic(const std::string& dir, const char* op,
                            const std::function<void(const std::string& tmp)>& fill);

// The last step of write_directory_atomic for a temporary filled some other way (by several
// processes, say): `tmp` takes `dir`'s place in one rename, the old `dir` is deleted, the parent
// fsynced.
void commit_directory(const std::string& tmp, const std::string& dir, const char* op);

// Makes a rename or file creation inside `dir` durable.
void fsync_directory(const std::string& dir);

// The directory part of a path ("." when it has none).
std::string parent_directory(const std::string& path);

// The whole file as a string; throws ValueError naming `op` and the file when it cannot be read.
std::string read_file(const std::string& path, const char* op);

}  // namespace tessera::io
