// Ids -> virtual partitions -> shards. A fixed number of virtual partitions (default 4096) is
// assigned to shards, rather than id % shards, so that a shard can later be moved or split by
// reassigning whole partitions without rehashing every id.
// Threading: immutable after construction; share freely.
#pragma once

#include <cstdint>
#include "models/assert.hpp"
#include <vector>

namespace satrap {

class partition_map {
 public:
  partition_map() = default;

  // Contiguous, balanced ranges of partitions per shard.
  static partition_map uniform(uint32_t partitions, uint32_t shards) {
    SATRAP_ASSERT(partitions >= shards && shards > 0);
    partition_map m;
    m.owner_.resize(partitions);
    for (uint32_t p = 0; p < partitions; ++p)
      m.owner_[p] = static_cast<uint32_t>(uint64_t{p} * shards / partitions);
    m.shards_ = shards;
    return m;
  }

  // Ids arrive already hashed (see slot_id_hash), but the high bits of a second mix keep
  // partitions balanced even for ids that are not.
  uint32_t partition_of(uint64_t id) const {
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    return static_cast<uint32_t>((id >> 32) * owner_.size() >> 32);
  }

  uint32_t shard_of(uint64_t id) const { return owner_[partition_of(id)]; }
  uint32_t shards() const { return shards_; }
  uint32_t partitions() const { return static_cast<uint32_t>(owner_.size()); }

 private:
  std::vector<uint32_t> owner_;  // partition -> shard
  uint32_t shards_ = 0;
};

}  // namespace satrap
