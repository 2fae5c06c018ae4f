// Rows in large contiguous slabs: row r lives at slab r / rows_per_slab, so a row costs its bytes
// and nothing else (no heap allocation per row, no pointer per row), and row numbers stay stable
// while the store grows. Two bits per row ride beside the slabs: `referenced` (CLOCK) and
// `changed` (since the last snapshot). Threading: not thread-safe; one owner.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace satrap {

class row_slabs {
 public:
  row_slabs(size_t stride, size_t rows_per_slab) : stride_(stride), per_slab_(rows_per_slab) {
    assert(stride > 0 && rows_per_slab > 0 && rows_per_slab % 64 == 0);
  }

  // Makes room for rows [0, rows): allocates whole slabs.
  void ensure(size_t rows) {
    while (slabs_.size() * per_slab_ < rows) {
      slabs_.emplace_back(static_cast<std::byte*>(::operator new(per_slab_ * stride_, std::align_val_t{64})));
      referenced_.resize(slabs_.size() * per_slab_ / 64, 0);
      changed_.resize(slabs_.size() * per_slab_ / 64, 0);
    }
  }
  void release() {
    slabs_.clear();
    referenced_.clear();
    changed_.clear();
  }

  std::byte* row(uint32_t r) { return slabs_[r / per_slab_].get() + (r % per_slab_) * stride_; }
  const std::byte* row(uint32_t r) const {
    return slabs_[r / per_slab_].get() + (r % per_slab_) * stride_;
  }
  void prefetch(uint32_t r) const {
    const auto* p = row(r);
    __builtin_prefetch(p);
    __builtin_prefetch(p + stride_ - 1);  // a row may straddle two cache lines
  }

  bool referenced(uint32_t r) const { return (referenced_[r / 64] >> (r % 64)) & 1; }
  void set_referenced(uint32_t r, bool on) { set_bit(referenced_, r, on); }
  bool changed(uint32_t r) const { return (changed_[r / 64] >> (r % 64)) & 1; }
  void set_changed(uint32_t r, bool on) { set_bit(changed_, r, on); }
  void clear_changed() { std::fill(changed_.begin(), changed_.end(), 0); }

  size_t stride() const { return stride_; }
  size_t capacity_rows() const { return slabs_.size() * per_slab_; }
  size_t bytes() const {
    return slabs_.size() * per_slab_ * stride_ + (referenced_.capacity() + changed_.capacity()) * 8;
  }

 private:
  struct slab_free {
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  static void set_bit(std::vector<uint64_t>& bits, uint32_t r, bool on) {
    uint64_t m = uint64_t{1} << (r % 64);
    bits[r / 64] = on ? (bits[r / 64] | m) : (bits[r / 64] & ~m);
  }

  size_t stride_, per_slab_;
  std::vector<std::unique_ptr<std::byte, slab_free>> slabs_;
  std::vector<uint64_t> referenced_, changed_;
};

}  // namespace satrap
