#include "models/embedding/snapshot_file.hpp"
#include "models/assert.hpp"

#include <cassert>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/embedding/id_map.hpp"

namespace satrap {

namespace {

constexpr uint64_t trailer_magic = 0x3150414e53544153ULL;  // "SATSNAP1" little-endian
constexpr uint64_t p1 = 0x9e3779b185ebca87ULL, p2 = 0xc2b2ae3d27d4eb4fULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

std::string hex(uint64_t x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

void checksum64::add(const void* data, size_t bytes) {
  SATRAP_ASSERT(bytes % 8 == 0);
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    uint64_t& lane = lanes_[words_++ & 3];
    lane = rotl(lane + w * p2, 31) * p1;
  }
}

uint64_t checksum64::finish() const {
  uint64_t h = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
  return mix64(h ^ (words_ * p1));
}

snapshot_file_writer::snapshot_file_writer(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) errno_ = errno;
}

snapshot_file_writer::~snapshot_file_writer() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

bool snapshot_file_writer::append(const void* data, size_t bytes) {
  if (fd_ < 0 || errno_ != 0) return false;
  sum_.add(data, bytes);
  length_ += bytes;
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errno_ = n < 0 ? errno : EIO;
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

result<snapshot_file_written> snapshot_file_writer::finish() {
  snapshot_file_written out{length_ + 24, sum_.finish()};
  uint64_t trailer[3] = {trailer_magic, length_, out.checksum};
  if (fd_ >= 0 && errno_ == 0) {
    const auto* p = reinterpret_cast<const char*>(trailer);
    if (::write(fd_, p, sizeof trailer) != static_cast<ssize_t>(sizeof trailer)) errno_ = errno ? errno : EIO;
  }
  if (fd_ >= 0 && errno_ == 0 && ::fsync(fd_) != 0) errno_ = errno;
  if (fd_ >= 0 && ::close(fd_) != 0 && errno_ == 0) errno_ = errno;
  fd_ = -1;
  if (errno_ == 0 && ::rename(tmp_.c_str(), path_.c_str()) != 0) errno_ = errno;
  if (errno_ != 0) {
    ::unlink(tmp_.c_str());
    return make_model_error(path_ + ": cannot write snapshot file: " + std::strerror(errno_));
  }
  return out;
}

result<mapped_file> mapped_file::open(const std::string& path, uint64_t expect_bytes,
                                      uint64_t expect_checksum) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_model_error(path + ": cannot open snapshot file: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  auto size = static_cast<uint64_t>(st.st_size);
  if (expect_bytes != 0 && size != expect_bytes) {
    ::close(fd);
    return make_model_error(path + ": truncated or overwritten: " + std::to_string(size)
                            + " bytes, the manifest says " + std::to_string(expect_bytes));
  }
  if (size < 24 || size % 8 != 0) {
    ::close(fd);
    return make_model_error(path + ": truncated: " + std::to_string(size)
                            + " bytes is not a whole snapshot file (no trailer)");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return make_model_error(path + ": cannot map: " + std::strerror(errno));
  mapped_file f;
  f.base_ = base;
  f.size_ = size;
  f.payload_ = size - 24;
  uint64_t trailer[3];
  std::memcpy(trailer, static_cast<const char*>(base) + f.payload_, sizeof trailer);
  if (trailer[0] != trailer_magic || trailer[1] != f.payload_)
    return make_model_error(path + ": truncated or corrupted: no valid trailer at the end of its "
                            + std::to_string(size) + " bytes");
  checksum64 sum;
  sum.add(base, f.payload_);
  f.checksum_ = sum.finish();
  if (f.checksum_ != trailer[2])
    return make_model_error(path + ": corrupted: checksum " + hex(f.checksum_)
                            + " does not match the recorded " + hex(trailer[2]));
  if (expect_checksum != 0 && f.checksum_ != expect_checksum)
    return make_model_error(path + ": checksum " + hex(f.checksum_) + " differs from the manifest's "
                            + hex(expect_checksum) + " (file replaced after the snapshot)");
  return f;
}

mapped_file::mapped_file(mapped_file&& o) noexcept
    : base_(o.base_), size_(o.size_), payload_(o.payload_), checksum_(o.checksum_) {
  o.base_ = nullptr;
}

mapped_file& mapped_file::operator=(mapped_file&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, size_);
    base_ = o.base_;
    size_ = o.size_;
    payload_ = o.payload_;
    checksum_ = o.checksum_;
    o.base_ = nullptr;
  }
  return *this;
}

mapped_file::~mapped_file() {
  if (base_) ::munmap(base_, size_);
}

}  // namespace satrap
