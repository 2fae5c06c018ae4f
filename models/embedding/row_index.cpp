#include "models/embedding/row_index.hpp"

#include <cassert>
#include <cmath>

namespace satrap {

row_index::row_index(size_t expected_rows) { rehash(slots_for(expected_rows)); }

size_t row_index::slots_for(size_t rows) const {
  return std::max<size_t>(16, static_cast<size_t>(std::ceil(static_cast<double>(rows) / max_load)) + 1);
}

void row_index::rehash(size_t slots) {
  auto old = std::move(slots_);
  size_t old_n = slots_n_;
  slots_ = std::unique_ptr<slot[], slots_free>(static_cast<slot*>(huge_alloc(slots * sizeof(slot))),
                                                slots_free{slots * sizeof(slot)});
  slots_n_ = slots;
  for (size_t i = 0; i < slots; ++i) slots_[i].row = npos;
  size_ = 0;
  for (size_t i = 0; i < old_n; ++i)
    if (old[i].row != npos) insert(old[i].id(), hash_of(old[i].id()), old[i].row);
}

void row_index::reserve(size_t rows) {
  if (slots_for(rows) > slots_n_) rehash(slots_for(rows));
}

void row_index::clear() {
  for (size_t i = 0; i < slots_n_; ++i) slots_[i].row = npos;
  size_ = 0;
}

uint32_t row_index::find(uint64_t id, uint64_t hash) const {
  auto lo = static_cast<uint32_t>(id), hi = static_cast<uint32_t>(id >> 32);
  for (size_t i = home_of(hash);; i = i + 1 == slots_n_ ? 0 : i + 1) {
    const slot& s = slots_[i];
    if (s.row == npos) return npos;
    if (s.id_lo == lo && s.id_hi == hi) return s.row;
  }
}

void row_index::insert(uint64_t id, uint64_t hash, uint32_t row) {
  assert(row != npos);
  if (static_cast<double>(size_ + 1) > max_load * static_cast<double>(slots_n_)) {
    rehash(slots_n_ + slots_n_ / 2);
  }
  size_t i = home_of(hash);
  while (slots_[i].row != npos) {
    assert(slots_[i].id() != id);
    i = i + 1 == slots_n_ ? 0 : i + 1;
  }
  slots_[i] = slot{static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32), row};
  ++size_;
}

void row_index::erase_slot(size_t hole) {
  assert(hole < slots_n_ && slots_[hole].row != npos);
  // Backward-shift deletion: move every later entry of the run whose home is not in (hole, j]
  // into the hole, so lookups never need tombstones.
  size_t j = hole;
  for (;;) {
    j = j + 1 == slots_n_ ? 0 : j + 1;
    if (slots_[j].row == npos) break;
    size_t home = home_of(hash_of(slots_[j].id()));
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole].row = npos;
  --size_;
}

bool row_index::erase(uint64_t id) {
  auto lo = static_cast<uint32_t>(id), hi = static_cast<uint32_t>(id >> 32);
  for (size_t i = home_of(hash_of(id));; i = i + 1 == slots_n_ ? 0 : i + 1) {
    if (slots_[i].row == npos) return false;
    if (slots_[i].id_lo == lo && slots_[i].id_hi == hi) {
      erase_slot(i);
      return true;
    }
  }
}

}  // namespace satrap
