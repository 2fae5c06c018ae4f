// The lock of one cached data set (dataset_cache.hpp): an flock(2) on <dir>/lock. A job holds it
// shared for as long as it reads the data set (chunk_store holds one; dataset_cache_build returns
// one so that nothing deletes the set between its conversion and its opening); a conversion holds
// it exclusive while it writes; whoever deletes a data set (the size cap, `satrap cache clean`)
// must first get it exclusive without waiting, and leaves the set alone when it cannot.
// flock belongs to the open file, so a lock dies with its process (kill -9 included): a crashed
// job never leaves a data set undeletable.
// A folder deleted while someone waited for its lock leaves that waiter locking an unlinked file;
// acquire() notices (the path no longer names the locked file) and reports the folder gone.
// Threading: one cache_lock per owner; distinct objects may be used from any thread.
#pragma once

#include "models/result.hpp"

#include <memory>
#include <string>

namespace satrap {

class cache_lock {
 public:
  enum class mode { shared, exclusive };
  enum class outcome { held, busy, gone };

  // Locks `dir`/lock (created when missing; `dir` must exist) into `out`. wait = false: busy when
  // another holder conflicts. gone: the folder was deleted meanwhile. An error says why it failed.
  static result<outcome> acquire(const std::string& dir, mode m, bool wait,
                                 std::unique_ptr<cache_lock>& out);
  // Exclusive -> shared. Not atomic (flock's conversion drops the lock first): false when the
  // folder was deleted in between, and the lock is then no longer worth holding.
  bool downgrade();

  ~cache_lock();
  cache_lock(const cache_lock&) = delete;
  cache_lock& operator=(const cache_lock&) = delete;

 private:
  cache_lock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  bool still_linked() const;  // the path still names the file this lock is on
  int fd_;                    // -1: a read-only folder without a lock file (nothing to exclude)
  std::string path_;
};

// The name of the lock file inside a data set's folder.
inline constexpr const char* cache_lock_file = "lock";

}  // namespace satrap
