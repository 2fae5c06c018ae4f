// The slot_file cold store (cold_store.hpp): fixed-size records [id][row] rewritten in place.
#include "models/embedding/id_map.hpp"
#include "models/tier/cold_store.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace satrap {

namespace {

std::string cause() { return std::strerror(errno); }

class slot_file_store final : public cold_store {
 public:
  slot_file_store(size_t stride, int fd, std::string path)
      : cold_store(stride), fd_(fd), path_(std::move(path)), record_(stride + 8) {}
  ~slot_file_store() override { ::close(fd_); }

  result<ok_t> load() {  // rebuilds the index from the records
    struct stat st {};
    if (::fstat(fd_, &st) != 0)
      return make_model_error(path_ + ": " + cause());
    records_ = static_cast<uint64_t>(st.st_size) / record_;
    std::vector<std::byte> chunk(record_ * 4096);
    for (uint64_t r = 0; r < records_;) {
      uint64_t n = std::min<uint64_t>(4096, records_ - r);
      if (!read_all(chunk.data(), n * record_, r * record_))
        return make_model_error(path_ + ": reading the records: " + cause());
      for (uint64_t k = 0; k < n; ++k) {
        uint64_t id;
        std::memcpy(&id, chunk.data() + k * record_, 8);
        bool inserted = false;
        index_.find_or_insert(id, static_cast<uint32_t>(r + k), inserted);
      }
      r += n;
    }
    return ok_t{};
  }

  result<ok_t> get(std::span<const uint64_t> ids, std::byte* rows, uint8_t* found) override {
    std::vector<std::byte> rec(record_);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint32_t slot = index_.find(ids[i]);
      found[i] = slot != id_map::npos;
      if (!found[i])
        continue;
      if (!read_all(rec.data(), record_, uint64_t{slot} * record_))
        return make_model_error(path_ + ": reading a row: " + cause());
      std::memcpy(rows + i * stride_, rec.data() + 8, stride_);
      ++counters_.found;
      counters_.bytes_read += stride_;
    }
    counters_.asked += ids.size();
    return ok_t{};
  }

  result<ok_t> put(std::span<const uint64_t> ids, const std::byte* rows) override {
    // New ids get records at the end, written together; known ids are rewritten in place.
    std::vector<std::byte> tail;
    std::vector<std::byte> rec(record_);
    uint64_t first_new = records_;
    for (size_t i = 0; i < ids.size(); ++i) {
      uint32_t slot = index_.find(ids[i]);
      std::memcpy(rec.data(), &ids[i], 8);
      std::memcpy(rec.data() + 8, rows + i * stride_, stride_);
      if (slot != id_map::npos) {
        if (!write_all(rec.data(), record_, uint64_t{slot} * record_))
          return make_model_error(path_ + ": writing a row: " + cause());
      } else {
        bool inserted = false;
        index_.find_or_insert(ids[i], static_cast<uint32_t>(first_new + tail.size() / record_),
                              inserted);
        tail.insert(tail.end(), rec.begin(), rec.end());
      }
    }
    if (!tail.empty() && !write_all(tail.data(), tail.size(), first_new * record_)) {
      std::string why = cause();
      // The new ids' records are not there: forget them (the caller keeps the rows).
      id_map kept(index_.size());
      for (uint64_t r = 0; r < first_new; ++r) {
        std::byte idb[8];
        if (read_all(idb, 8, r * record_)) {
          uint64_t id;
          std::memcpy(&id, idb, 8);
          bool inserted = false;
          kept.find_or_insert(id, static_cast<uint32_t>(r), inserted);
        }
      }
      index_ = std::move(kept);
      if (::ftruncate(fd_, static_cast<off_t>(first_new * record_)) != 0) {}
      return make_model_error(path_ + ": writing rows: " + why);
    }
    records_ = first_new + tail.size() / record_;
    counters_.rows_written += ids.size();
    counters_.bytes_written += ids.size() * stride_;
    return ok_t{};
  }

  result<ok_t> checkpoint(const std::string& dir) override {
    if (::fdatasync(fd_) != 0)
      return make_model_error(path_ + ": sync: " + cause());
    if (::mkdir(dir.c_str(), 0755) != 0)
      return make_model_error(dir + ": making the checkpoint folder: " + cause());
    std::string to = dir + "/rows.slots";
    int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
      return make_model_error(to + ": " + cause());
    std::vector<std::byte> buf(1 << 20);
    uint64_t total = records_ * record_;
    for (uint64_t off = 0; off < total;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), total - off));
      if (!read_all(buf.data(), n, off) || ::pwrite(out, buf.data(), n, off) != ssize_t(n)) {
        std::string why = cause();
        ::close(out);
        return make_model_error(to + ": copying the slot file: " + why);
      }
      off += n;
    }
    bool synced = ::fdatasync(out) == 0;
    ::close(out);
    if (!synced)
      return make_model_error(to + ": sync: " + cause());
    return ok_t{};
  }

  uint64_t ram_bytes() const override { return index_.size() * 24; }

 private:
  bool read_all(std::byte* p, size_t n, uint64_t off) const {
    while (n > 0) {
      ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(off));
      if (got <= 0) {
        if (got < 0 && errno == EINTR)
          continue;
        if (got == 0)
          errno = EIO;
        return false;
      }
      p += got, n -= size_t(got), off += uint64_t(got);
    }
    return true;
  }
  bool write_all(const std::byte* p, size_t n, uint64_t off) {
    while (n > 0) {
      ssize_t put = ::pwrite(fd_, p, n, static_cast<off_t>(off));
      if (put < 0) {
        if (errno == EINTR)
          continue;
        return false;
      }
      p += put, n -= size_t(put), off += uint64_t(put);
    }
    return true;
  }

  int fd_;
  std::string path_;
  size_t record_;
  uint64_t records_ = 0;
  id_map index_;
};

}  // namespace

result<std::unique_ptr<cold_store>> open_slot_file_store(const std::string& dir, size_t stride) {
  std::string path = dir + "/rows.slots";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_model_error(path + ": opening the tier's slot file: " + cause());
  auto store = std::make_unique<slot_file_store>(stride, fd, path);
  auto loaded = store->load();
  if (!loaded)
    return loaded.failure();
  return std::unique_ptr<cold_store>(std::move(store));
}

}  // namespace satrap
