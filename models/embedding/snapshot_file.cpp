#include "models/embedding/snapshot_file.hpp"
#include "models/assert.hpp"
#include "models/io_cause.hpp"

#include <cstring>

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

snapshot_file_writer::snapshot_file_writer(std::string path, env& e)
    : env_(e), path_(std::move(path)), tmp_(path_ + ".tmp") {
  auto out = env_.open_writable(tmp_);
  if (out)
    out_ = std::move(out.value());
  else
    error_ = out.error();
}

snapshot_file_writer::~snapshot_file_writer() {
  if (out_) {  // never finished: the temporary goes
    (void)out_->close();
    (void)env_.remove_file(tmp_);
  }
}

bool snapshot_file_writer::append(const void* data, size_t bytes) {
  if (!out_ || !error_.empty())
    return false;
  sum_.add(data, bytes);
  length_ += bytes;
  if (auto r = out_->append(data, bytes); !r) {
    error_ = r.error();
    return false;
  }
  return true;
}

result<snapshot_file_written> snapshot_file_writer::finish() {
  snapshot_file_written out{length_ + 24, sum_.finish()};
  uint64_t trailer[3] = {trailer_magic, length_, out.checksum};
  auto step = [&](result<ok_t> r) {
    if (!r && error_.empty())
      error_ = r.error();
  };
  if (out_ && error_.empty())
    step(out_->append(trailer, sizeof trailer));
  if (out_ && error_.empty())
    step(out_->sync());
  if (out_)
    step(out_->close());
  bool opened = out_ != nullptr;
  out_.reset();
  if (error_.empty())
    step(env_.rename(tmp_, path_));
  if (!error_.empty()) {
    if (opened)
      (void)env_.remove_file(tmp_);
    return make_model_error(path_ + ": cannot write snapshot file: " + io_cause(error_));
  }
  return out;
}

result<mapped_file> mapped_file::open(const std::string& path, uint64_t expect_bytes,
                                      uint64_t expect_checksum, env& e) {
  auto view = e.open_view(path);
  if (!view)
    return make_model_error(path + ": cannot open snapshot file: " + io_cause(view.error()));
  auto size = static_cast<uint64_t>(view.value()->size());
  if (expect_bytes != 0 && size != expect_bytes)
    return make_model_error(path + ": truncated or overwritten: " + std::to_string(size)
                            + " bytes, the manifest says " + std::to_string(expect_bytes));
  if (size < 24 || size % 8 != 0)
    return make_model_error(path + ": truncated: " + std::to_string(size)
                            + " bytes is not a whole snapshot file (no trailer)");
  mapped_file f;
  f.view_ = std::move(view.value());
  const auto* base = f.view_->data();
  f.size_ = size;
  f.payload_ = size - 24;
  uint64_t trailer[3];
  std::memcpy(trailer, base + f.payload_, sizeof trailer);
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
    return make_model_error(path + ": checksum " + hex(f.checksum_)
                            + " differs from the manifest's " + hex(expect_checksum)
                            + " (file replaced after the snapshot)");
  return f;
}

}  // namespace satrap
