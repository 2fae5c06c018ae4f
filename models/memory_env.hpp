// memory_env: an env (models/env.hpp) whose files live in memory and whose clocks move only when
// told, for tests and the deterministic simulator. Faults, each with the error text the real disk
// would give (so runtime's io_errc_of classifies them the same way):
//   - capacity: a write past `capacity_bytes` of file data fails with ENOSPC's text;
//   - failed fsync: the next `n` sync() calls fail with EIO's text;
//   - torn writes: crash() keeps of every file only what was synced (a file never synced after
//     its creation is lost; the unsynced tail of an appended file is cut), as a power loss would.
// Folders exist implicitly as the parents of files, plus those made with create_dirs.
// Threading: every member function takes one mutex; safe from any thread.
#pragma once

#include "models/env.hpp"

#include <map>
#include <mutex>
#include <set>

namespace satrap {

class memory_env final : public env {
 public:
  // Both clocks start at `start` (steady) / the Unix epoch plus `start` (system).
  explicit memory_env(std::chrono::nanoseconds start = std::chrono::hours(1));

  // ---- control (tests and the simulator) ----
  void advance(std::chrono::nanoseconds by);  // moves both clocks
  void set_capacity(uint64_t bytes);          // of all files' data; default unbounded
  void fail_syncs(int count);                 // the next `count` sync() calls fail
  void crash();                               // drops every byte not synced
  uint64_t used_bytes() const;
  int syncs() const;           // successful sync() calls so far
  int refused_writes() const;  // writes refused for capacity so far
  int failed_syncs() const;    // sync() calls failed by fail_syncs

  // ---- env ----
  std::chrono::steady_clock::time_point steady_now() override;
  std::chrono::system_clock::time_point system_now() override;
  result<std::unique_ptr<writable_file>> open_writable(const std::string& path,
                                                       bool append = false) override;
  result<std::unique_ptr<file_view>> open_view(const std::string& path) override;
  result<ok_t> rename(const std::string& from, const std::string& to) override;
  result<ok_t> remove_file(const std::string& path) override;
  result<uint64_t> remove_all(const std::string& path) override;
  result<ok_t> create_dirs(const std::string& path) override;
  bool exists(const std::string& path) override;
  bool is_dir(const std::string& path) override;
  result<std::vector<std::string>> list_dir(const std::string& path) override;
  result<uint64_t> file_size(const std::string& path) override;

 private:
  struct file {
    std::shared_ptr<std::string> bytes;  // shared with open views (copy on write)
    size_t synced = 0;                   // bytes that survive crash()
  };
  class writer;
  friend class writer;

  result<ok_t> write_at_end(const std::string& path, const void* data, size_t n);
  result<ok_t> sync_file(const std::string& path);
  bool dir_locked(const std::string& path) const;

  mutable std::mutex mu_;
  std::chrono::nanoseconds now_;
  uint64_t capacity_ = UINT64_MAX;
  uint64_t used_ = 0;
  int failing_syncs_ = 0;
  int syncs_ = 0;
  int refused_writes_ = 0;
  int failed_syncs_ = 0;
  std::map<std::string, file> files_;  // by normalised path
  std::set<std::string> dirs_;         // made with create_dirs
};

}  // namespace satrap
