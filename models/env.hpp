// env: the one seam for time and files, after LevelDB's Env. Code that reads a clock or touches a
// file takes an `env&` (through its config; `default_env()` where none is given) instead of
// calling std::chrono's clocks, <fstream>, <filesystem> or POSIX directly, so that a test or the
// simulator can own time and the disk: `memory_env` (models/memory_env.hpp) keeps files in memory,
// pays for no fsync, moves time only when told, and injects disk faults (full, failed fsync, torn
// write).
//
// Errors are models' result values; a failed file operation's message names the path, what was
// being done and strerror's text (e.g. "No space left on device"), which is what
// runtime/error.hpp's io_errc_of reads to tell a deterministic fault (disk full, read-only) from a
// transient one — the in-memory env's faults use the same texts.
//
// Threading: an env is shared by every thread of a process: every member function is thread-safe.
// A writable_file or file_view has one owner.
#pragma once

#include "models/result.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace satrap {

// A file being written, from its start (or its end, opened to append). Nothing is promised durable
// before sync() succeeds; close() without sync() keeps what the OS has.
class writable_file {
 public:
  virtual ~writable_file() = default;
  virtual result<ok_t> append(const void* data, size_t bytes) = 0;
  virtual result<ok_t> sync() = 0;   // fsync: the bytes so far survive a crash
  virtual result<ok_t> close() = 0;  // idempotent; the destructor closes too, ignoring errors
};

// A whole file, read-only, as one contiguous span (the real env maps it).
class file_view {
 public:
  virtual ~file_view() = default;
  virtual const std::byte* data() const = 0;
  virtual size_t size() const = 0;
  std::string_view text() const { return {reinterpret_cast<const char*>(data()), size()}; }
};

class env {
 public:
  virtual ~env() = default;

  // ---- time ----
  virtual std::chrono::steady_clock::time_point steady_now() = 0;  // durations, deadlines
  virtual std::chrono::system_clock::time_point system_now() = 0;  // wall-clock stamps for people

  // ---- files ----
  // Creates (truncating) or, with append, opens at the end; the parent folder must exist.
  virtual result<std::unique_ptr<writable_file>> open_writable(const std::string& path,
                                                               bool append = false) = 0;
  virtual result<std::unique_ptr<file_view>> open_view(const std::string& path) = 0;
  virtual result<ok_t> rename(const std::string& from, const std::string& to) = 0;  // atomic
  virtual result<ok_t> remove_file(const std::string& path) = 0;  // a missing file is no error
  // Removes a file or a folder with everything under it; answers the bytes of the files removed.
  virtual result<uint64_t> remove_all(const std::string& path) = 0;
  virtual result<ok_t> create_dirs(const std::string& path) = 0;  // with its parents; existing: ok
  virtual bool exists(const std::string& path) = 0;
  virtual bool is_dir(const std::string& path) = 0;
  // The names (not paths) in a folder, sorted; an error when it is not a readable folder.
  virtual result<std::vector<std::string>> list_dir(const std::string& path) = 0;
  virtual result<uint64_t> file_size(const std::string& path) = 0;

  // ---- helpers on top of the above (not virtual: every env gets them the same) ----
  result<std::string> read_file(const std::string& path);
  // Writes `contents` to path + ".tmp", syncs it (with sync) and renames it over `path`: readers
  // see the old file or the new one, never a part.
  result<ok_t> write_file_atomic(const std::string& path, std::string_view contents,
                                 bool sync = true);
  // Appends `contents` to `path` (created when missing), synced with sync.
  result<ok_t> append_file(const std::string& path, std::string_view contents, bool sync = false);
  // Bytes of a file, or of every file under a folder (0 when missing).
  uint64_t tree_bytes(const std::string& path);
};

// The process's real env: POSIX files and std::chrono's clocks. Lives as long as the process.
env& default_env();

}  // namespace satrap
