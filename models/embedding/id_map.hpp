// A small open-addressing hash map from 64-bit ids to 32-bit slots (linear probing, no erase).
// Threading: not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace satrap {

class id_map {
 public:
  static constexpr uint32_t npos = UINT32_MAX;

  explicit id_map(size_t expected = 16);

  // The value of `id`, inserting `value_if_new` when absent. Sets `inserted`.
  uint32_t find_or_insert(uint64_t id, uint32_t value_if_new, bool& inserted);
  uint32_t find(uint64_t id) const;  // npos when absent
  size_t size() const { return size_; }
  void clear();

 private:
  void grow();

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_;  // npos marks an empty cell
  size_t mask_ = 0;
  size_t size_ = 0;
};

// The mixer id_map probes with (a murmur3 / splitmix64 finalizer).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace satrap
