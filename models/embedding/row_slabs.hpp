// Rows in large contiguous slabs: row r lives at slab r / rows_per_slab, so a row costs its bytes
// and nothing else (no heap allocation per row, no pointer per row), and row numbers stay stable
// while the store grows. One bit per row rides beside the slabs: `changed` (since the last
// snapshot); the CLOCK bit lives beside the id in the index bucket (row_index.hpp). Slabs are up
// to 8 MiB on huge pages (huge_pages.hpp), so a slab holds a row count that is not a power of two;
// row -> slab divides by a precomputed reciprocal.
//
// Within a slab, rows come in groups of 64: the group's 64 weight vectors, then their 64 optimizer
// states (`group` rows x (weight_bytes + state_bytes), so a row still costs exactly its bytes).
// Why: a lookup reads only the weights, and a dim-16 fp32 row's weights are then exactly one
// aligned cache line, where a 68-byte row (weights + row-wise Adagrad state) side by side
// straddles two lines almost always: a lookup fetches 2 lines (index bucket + weights) instead of 3.
// An update reads the weights and the state: two lines of the same group, on the same page (an
// earlier try put the states in separate slabs, and updates paid a page walk for it).
// Threading: not thread-safe; one owner.
#pragma once

#include <algorithm>
#include "models/assert.hpp"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "models/embedding/huge_pages.hpp"

namespace satrap {

class row_slabs {
 public:
  static constexpr size_t group = 64;  // rows per group (weights together, then states)

  row_slabs(size_t weight_bytes, size_t state_bytes, size_t rows_per_slab)
      : weight_(weight_bytes),
        state_(state_bytes),
        stride_(weight_bytes + state_bytes),
        per_slab_(rows_per_slab),
        inverse_(~uint64_t{0} / rows_per_slab + 1) {
    SATRAP_ASSERT(weight_bytes > 0 && rows_per_slab > 0 && rows_per_slab % group == 0);
  }

  // Rows per slab for a table of `capacity` rows (0 = unbounded): slabs of at most 8 MiB.
  static size_t rows_per_slab(size_t stride, uint64_t capacity) {
    size_t rows = std::max<size_t>(group, (size_t{8} << 20) / stride / group * group);
    if (capacity > 0)
      rows = std::min<size_t>(rows, (capacity + group - 1) / group * group);
    return rows;
  }

  // Makes room for rows [0, rows): allocates whole slabs.
  void ensure(size_t rows) {
    while (slabs_.size() * per_slab_ < rows) {
      slabs_.emplace_back(static_cast<std::byte*>(huge_alloc(per_slab_ * stride_)),
                          slab_free{per_slab_ * stride_});
      changed_.resize(slabs_.size() * per_slab_ / 64, 0);
    }
  }
  void release() {
    slabs_.clear();
    changed_.clear();
  }

  // Row r's weights (weight_bytes) and its optimizer state (state_bytes).
  std::byte* weights(uint32_t r) { return const_cast<std::byte*>(std::as_const(*this).weights(r)); }
  const std::byte* weights(uint32_t r) const {
    size_t s = slab_of(r), local = r - s * per_slab_;
    return slabs_[s].get() + local * weight_ + (local & ~(group - 1)) * state_;
  }
  std::byte* state(uint32_t r) { return const_cast<std::byte*>(std::as_const(*this).state(r)); }
  const std::byte* state(uint32_t r) const {
    size_t s = slab_of(r), local = r - s * per_slab_;
    return slabs_[s].get() + ((local & ~(group - 1)) + group) * weight_ + local * state_;
  }
  // The row as one block (weights then state, `stride` bytes), as snapshots store it.
  void copy_out(uint32_t r, std::byte* row) const {
    std::copy_n(weights(r), weight_, row);
    std::copy_n(state(r), state_, row + weight_);
  }
  void copy_in(uint32_t r, const std::byte* row) {
    std::copy_n(row, weight_, weights(r));
    std::copy_n(row + weight_, state_, state(r));
  }

  // The lines a lookup reads (the weights: one line when aligned), and those an update adds.
  void prefetch_weights(uint32_t r) const { prefetch_span(weights(r), weight_); }
  void prefetch_row(uint32_t r) const {
    prefetch_weights(r);
    if (state_ > 0)
      prefetch_span(state(r), state_);
  }

  bool changed(uint32_t r) const { return (changed_[r / 64] >> (r % 64)) & 1; }
  void set_changed(uint32_t r, bool on) { set_bit(changed_, r, on); }
  void prefetch_changed(uint32_t r) const { prefetch_line(&changed_[r / 64], true); }
  void clear_changed() { std::fill(changed_.begin(), changed_.end(), 0); }

  size_t stride() const { return stride_; }
  size_t capacity_rows() const { return slabs_.size() * per_slab_; }
  size_t bytes() const {
    return slabs_.size() * huge_alloc_size(per_slab_ * stride_) + changed_.capacity() * 8;
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
  // The first line of [p, p + n), and the last when it is another: all of a span of up to two
  // lines (a dim-16 fp32 row's weights are one); longer rows get their ends, as before.
  static void prefetch_span(const std::byte* p, size_t n) {
    prefetch_line(p);
    auto a = reinterpret_cast<uintptr_t>(p);
    if ((a >> 6) != ((a + n - 1) >> 6))
      prefetch_line(p + n - 1);
  }
  static void set_bit(std::vector<uint64_t>& bits, uint32_t r, bool on) {
    uint64_t m = uint64_t{1} << (r % 64);
    bits[r / 64] = on ? (bits[r / 64] | m) : (bits[r / 64] & ~m);
  }

  size_t weight_, state_, stride_, per_slab_;
  uint64_t inverse_;  // 2^64 / per_slab_, rounded up
  std::vector<std::unique_ptr<std::byte, slab_free>> slabs_;
  std::vector<uint64_t> changed_;
};

}  // namespace satrap
