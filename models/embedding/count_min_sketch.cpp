#include "models/embedding/count_min_sketch.hpp"
#include "models/assert.hpp"

#include <algorithm>

#include "models/embedding/id_map.hpp"

namespace satrap {

count_min_sketch::count_min_sketch(uint32_t width, uint32_t depth, uint64_t seed)
    : width_(width), depth_(depth), seed_(seed), counters_(static_cast<size_t>(width) * depth, 0) {
  SATRAP_ASSERT(width > 0 && depth > 0);
}

size_t count_min_sketch::cell(uint32_t row, uint64_t id) const {
  uint64_t h = mix64(id ^ mix64(seed_ + 0x632be59bd9b4e019ULL * (row + 1)));
  return static_cast<size_t>(row) * width_
         + static_cast<size_t>((static_cast<unsigned __int128>(h) * width_) >> 64);
}

uint32_t count_min_sketch::estimate(uint64_t id) const {
  uint32_t best = UINT16_MAX;
  for (uint32_t r = 0; r < depth_; ++r)
    best = std::min<uint32_t>(best, counters_[cell(r, id)]);
  return best;
}

uint32_t count_min_sketch::add(uint64_t id) {
  // Conservative update: raise only the counters at the current minimum.
  uint32_t next = std::min<uint32_t>(estimate(id) + 1, UINT16_MAX);
  for (uint32_t r = 0; r < depth_; ++r) {
    uint16_t& c = counters_[cell(r, id)];
    if (c < next)
      c = static_cast<uint16_t>(next);
  }
  return next;
}

}  // namespace satrap
