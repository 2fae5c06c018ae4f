#include "models/data/batch.hpp"

#include "models/embedding/id_map.hpp"

namespace satrap {

uint64_t slot_id_hash(int slot, uint64_t value) {
  uint64_t h = mix64(static_cast<uint64_t>(slot) * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
  return mix64(value ^ h);
}

}  // namespace satrap
