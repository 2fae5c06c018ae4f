// A keyed pseudo-random permutation of [0, n) evaluated one index at a time (a 4-round Feistel
// network over the next even power of two, with cycle walking), so a shuffle needs no table and
// any sample of any epoch can be located directly.
// Threading: an immutable value; at() is const and thread-safe.
#pragma once

#include "models/embedding/id_map.hpp"
#include "models/assert.hpp"

#include <cstdint>

namespace satrap {

class index_permutation {
 public:
  index_permutation(uint64_t n, uint64_t key) : n_(n) {
    while ((uint64_t{1} << (2 * half_bits_)) < n_)
      ++half_bits_;
    mask_ = (uint64_t{1} << half_bits_) - 1;
    for (uint64_t r = 0; r < 4; ++r)
      round_keys_[r] = mix64(key + r * 0x9e3779b97f4a7c15ULL);
  }

  uint64_t size() const { return n_; }

  // The image of i (i < size()); a bijection of [0, n).
  uint64_t at(uint64_t i) const {
    SATRAP_DEBUG_ASSERT(i < n_);
    do
      i = round_trip(i);
    while (i >= n_);  // cycle walking: at most a few steps, the domain is < 4n
    return i;
  }

 private:
  uint64_t round_trip(uint64_t x) const {
    uint64_t left = x >> half_bits_, right = x & mask_;
    for (uint64_t r = 0; r < 4; ++r) {
      uint64_t f = mix64(right ^ round_keys_[r]) & mask_;
      uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  uint64_t n_;
  uint64_t round_keys_[4] = {};
  int half_bits_ = 0;
  uint64_t mask_ = 0;
};

}  // namespace satrap
