// The options of the SSD tier (tiered_table.hpp), as the job spec holds them
// (`model.embedding.tier.*`). Threading: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace satrap {

enum class tier_kind { none, ssd };  // none: every row in RAM (the store alone)
enum class cold_store_kind { rocksdb, slot_file };

struct tier_options {
  tier_kind kind = tier_kind::none;
  cold_store_kind store = cold_store_kind::rocksdb;  // the cold store (cold_store.hpp)
  std::string path;         // the cold store's folder (made when missing; its parent must exist)
  uint64_t ram_budget = 0;  // bytes for the RAM tier: rows, index, staged and pending rows
  size_t prefetch_batches = 4;  // prefetched batches kept staged at most (older ones dropped)
};

}  // namespace satrap
