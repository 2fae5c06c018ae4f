// A count-min sketch of id sightings (16-bit saturating counters, conservative update), used by
// the store's admission: an id gets a row only from its n-th sighting on. It over-counts (never
// under-counts), so an id is admitted no later than its n-th sighting, sometimes earlier when it
// collides with frequent ids in every row. Threading: not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace satrap {

class count_min_sketch {
 public:
  count_min_sketch(uint32_t width, uint32_t depth, uint64_t seed);

  uint32_t add(uint64_t id);             // counts one sighting; returns the new estimate
  uint32_t estimate(uint64_t id) const;  // sightings so far (an upper bound)
  size_t bytes() const { return counters_.size() * sizeof(uint16_t); }

 private:
  size_t cell(uint32_t row, uint64_t id) const;

  uint32_t width_, depth_;
  uint64_t seed_;
  std::vector<uint16_t> counters_;  // depth x width
};

}  // namespace satrap
