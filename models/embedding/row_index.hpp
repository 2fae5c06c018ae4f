// The store's index: an open-addressing hash table from 64-bit id to 32-bit row number.
//
// Why this shape: the index is pure overhead on top of the rows, so it must be small. A slot is
// 12 bytes (the id split in two 32-bit halves, and the row), packed, with no pointers, no per-entry
// allocation and no tombstones (erase shifts the probe run back). The slot count need not be a
// power of two (home = (hash * slots) >> 64), so a table sized for its capacity holds up to
// max_load = 0.8 of it: 15 bytes per row at worst when full, about 1/4.5 of a dim-16 fp32 row with
// row-wise Adagrad. The slots sit on huge pages (huge_pages.hpp). Linear probing keeps a lookup to one or two cache lines, which the batched
// callers prefetch.
// Threading: not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "models/embedding/huge_pages.hpp"
#include "models/embedding/id_map.hpp"

namespace satrap {

class row_index {
 public:
  static constexpr uint32_t npos = UINT32_MAX;
  static constexpr double max_load = 0.8;

  explicit row_index(size_t expected_rows = 0);

  static uint64_t hash_of(uint64_t id) { return mix64(id ^ 0x2545f4914f6cdd1dULL); }
  size_t home_of(uint64_t hash) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(hash) * slots_n_) >> 64);
  }
  void prefetch(uint64_t hash) const {  // the home slot and the next (a slot may straddle lines)
    const auto* p = reinterpret_cast<const char*>(&slots_[home_of(hash)]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 2 * sizeof(slot) - 1);
  }

  uint32_t find(uint64_t id, uint64_t hash) const;  // npos when absent
  uint32_t find(uint64_t id) const { return find(id, hash_of(id)); }
  // Inserts (id -> row); id must be absent. Grows when past max_load.
  void insert(uint64_t id, uint64_t hash, uint32_t row);
  // Removes the entry in `slot` (its probe run shifts back into place).
  void erase_slot(size_t slot);
  bool erase(uint64_t id);  // false when absent
  void reserve(size_t rows);
  void clear();

  size_t size() const { return size_; }
  size_t slots() const { return slots_n_; }
  size_t bytes() const { return huge_alloc_size(slots_n_ * sizeof(slot)); }
  // Slot access for sweeps (CLOCK, snapshots): npos row = empty.
  uint32_t row_at(size_t slot) const { return slots_[slot].row; }
  uint64_t id_at(size_t slot) const { return slots_[slot].id(); }

 private:
  struct slot {
    uint32_t id_lo, id_hi, row;
    uint64_t id() const { return (static_cast<uint64_t>(id_hi) << 32) | id_lo; }
  };
  static_assert(sizeof(slot) == 12);

  size_t slots_for(size_t rows) const;
  void rehash(size_t slots);

  struct slots_free {
    size_t bytes;  // no initializer: the enclosing class uses it before it is complete
    void operator()(slot* p) const { huge_free(p, bytes); }
  };
  std::unique_ptr<slot[], slots_free> slots_;
  size_t slots_n_ = 0;
  size_t size_ = 0;
};

}  // namespace satrap
