#include "models/data/cache_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace satrap {

result<cache_lock::outcome> cache_lock::acquire(const std::string& dir, mode m, bool wait,
                                                std::unique_ptr<cache_lock>& out) {
  auto path = dir + "/" + cache_lock_file;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && (errno == EROFS || errno == EACCES)) {  // a read-only cache: lock what is there
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && m == mode::shared) {
      // A read-only folder without a lock file: nobody can delete it or write into it either.
      out.reset(new cache_lock(-1, path));
      return outcome::held;
    }
  }
  if (fd < 0) {
    if (errno == ENOENT)
      return outcome::gone;
    return make_model_error(path + ": cannot open the cache lock: " + std::strerror(errno));
  }
  int op = (m == mode::shared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
  int rc;
  while ((rc = ::flock(fd, op)) != 0 && errno == EINTR) {}
  if (rc != 0) {
    int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK)
      return outcome::busy;
    return make_model_error(path + ": cannot lock: " + std::strerror(e));
  }
  std::unique_ptr<cache_lock> lock(new cache_lock(fd, path));
  if (!lock->still_linked())
    return outcome::gone;  // deleted while we waited: the lock closes with `lock`
  out = std::move(lock);
  return outcome::held;
}

bool cache_lock::downgrade() {
  if (fd_ < 0)
    return true;
  while (::flock(fd_, LOCK_SH) != 0)
    if (errno != EINTR)
      return false;
  return still_linked();
}

bool cache_lock::still_linked() const {
  if (fd_ < 0)
    return true;
  struct stat held {
  }, named{};
  if (::fstat(fd_, &held) != 0 || ::stat(path_.c_str(), &named) != 0)
    return false;
  return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

cache_lock::~cache_lock() {
  if (fd_ >= 0)
    ::close(fd_);
}

}  // namespace satrap
