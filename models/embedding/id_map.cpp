#include "models/embedding/id_map.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <bit>

namespace satrap {

id_map::id_map(size_t expected) {
  size_t cap = std::bit_ceil(expected * 2 < 16 ? size_t{16} : expected * 2);
  keys_.assign(cap, 0);
  values_.assign(cap, npos);
  mask_ = cap - 1;
}

uint32_t id_map::find_or_insert(uint64_t id, uint32_t value_if_new, bool& inserted) {
  SATRAP_DEBUG_ASSERT(value_if_new != npos);
  if ((size_ + 1) * 2 > keys_.size())
    grow();
  for (size_t i = mix64(id) & mask_;; i = (i + 1) & mask_) {
    if (values_[i] == npos) {
      keys_[i] = id;
      values_[i] = value_if_new;
      ++size_;
      inserted = true;
      return value_if_new;
    }
    if (keys_[i] == id) {
      inserted = false;
      return values_[i];
    }
  }
}

uint32_t id_map::find(uint64_t id) const {
  for (size_t i = mix64(id) & mask_;; i = (i + 1) & mask_) {
    if (values_[i] == npos)
      return npos;
    if (keys_[i] == id)
      return values_[i];
  }
}

void id_map::clear() {
  std::fill(values_.begin(), values_.end(), npos);
  size_ = 0;
}

void id_map::grow() {
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<uint32_t> old_values = std::move(values_);
  keys_.assign(old_keys.size() * 2, 0);
  values_.assign(old_keys.size() * 2, npos);
  mask_ = keys_.size() - 1;
  for (size_t j = 0; j < old_keys.size(); ++j) {
    if (old_values[j] == npos)
      continue;
    size_t i = mix64(old_keys[j]) & mask_;
    while (values_[i] != npos)
      i = (i + 1) & mask_;
    keys_[i] = old_keys[j];
    values_[i] = old_values[j];
  }
}

}  // namespace satrap
