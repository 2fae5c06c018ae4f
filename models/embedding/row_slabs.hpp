// Rows in large contiguous slabs: row r lives at slab r / rows_per_slab, so a row costs its bytes
// and nothing else (no heap allocation per row, no pointer per row), and row numbers stay stable
// while the store grows. One bit per row rides beside the slabs: `changed` (since the last
// snapshot); the CLOCK bit lives beside the id in the index bucket (row_index.hpp). Slabs are up to 8 MiB on huge pages (huge_pages.hpp), so a
// slab holds a row count that is not a power of two; row -> slab divides by a precomputed
// reciprocal. Threading: not thread-safe; one owner.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "models/embedding/huge_pages.hpp"

namespace satrap {

class row_slabs {
 public:
  row_slabs(size_t stride, size_t rows_per_slab)
      : stride_(stride), per_slab_(rows_per_slab), inverse_(~uint64_t{0} / rows_per_slab + 1) {
    assert(stride > 0 && rows_per_slab > 0 && rows_per_slab % 64 == 0);
  }

  // Rows per slab for a table of `capacity` rows (0 = unbounded): slabs of at most 8 MiB.
  static size_t rows_per_slab(size_t stride, uint64_t capacity) {
    size_t rows = std::max<size_t>(64, (size_t{8} << 20) / stride / 64 * 64);
    if (capacity > 0) rows = std::min<size_t>(rows, (capacity + 63) / 64 * 64);
    return rows;
  }

  // Makes room for rows [0, rows): allocates whole slabs.
  void ensure(size_t rows) {
    while (slabs_.size() * per_slab_ < rows) {
      slabs_.emplace_back(static_cast<std::byte*>(huge_alloc(per_slab_ * stride_)), slab_free{per_slab_ * stride_});
      changed_.resize(slabs_.size() * per_slab_ / 64, 0);
    }
  }
  void release() {
    slabs_.clear();
    changed_.clear();
  }

  std::byte* row(uint32_t r) {
    size_t s = slab_of(r);
    return slabs_[s].get() + (r - s * per_slab_) * stride_;
  }
  const std::byte* row(uint32_t r) const {
    size_t s = slab_of(r);
    return slabs_[s].get() + (r - s * per_slab_) * stride_;
  }
  void prefetch(uint32_t r) const {
    const auto* p = row(r);
    prefetch_line(p);
    prefetch_line(p + stride_ - 1);  // a row may straddle two cache lines
  }

  bool changed(uint32_t r) const { return (changed_[r / 64] >> (r % 64)) & 1; }
  void set_changed(uint32_t r, bool on) { set_bit(changed_, r, on); }
  void prefetch_changed(uint32_t r) const { prefetch_line(&changed_[r / 64], true); }
  void clear_changed() { std::fill(changed_.begin(), changed_.end(), 0); }

  size_t stride() const { return stride_; }
  size_t capacity_rows() const { return slabs_.size() * per_slab_; }
  size_t bytes() const {
    return slabs_.size() * huge_alloc_size(per_slab_ * stride_)
           + changed_.capacity() * 8;
  }

 private:
  struct slab_free {
    size_t bytes;  // no initializer: the enclosing class uses it before it is complete
    void operator()(std::byte* p) const { huge_free(p, bytes); }
  };
  // r / per_slab_ for any 32-bit r (Lemire, Kaser, Kurz 2019: exact with a 64-bit reciprocal).
  size_t slab_of(uint32_t r) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(inverse_) * r) >> 64);
  }
  static void set_bit(std::vector<uint64_t>& bits, uint32_t r, bool on) {
    uint64_t m = uint64_t{1} << (r % 64);
    bits[r / 64] = on ? (bits[r / 64] | m) : (bits[r / 64] & ~m);
  }

  size_t stride_, per_slab_;
  uint64_t inverse_;  // 2^64 / per_slab_, rounded up
  std::vector<std::unique_ptr<std::byte, slab_free>> slabs_;
  std::vector<uint64_t> changed_;
};

}  // namespace satrap
