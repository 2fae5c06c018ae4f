#include "tests/bench/slot_table.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>

namespace satrap {

slot_table::slot_table(size_t row_bytes, size_t rows)
    : stride_(8 + row_bytes),
      chunks_n_(std::max<size_t>(
        1, static_cast<size_t>(std::ceil(static_cast<double>(rows) / (max_load * lanes))))) {
  SATRAP_ASSERT(row_bytes % 4 == 0 && chunks_n_ * lanes < npos);
  ctrl_ = std::unique_ptr<chunk[], huge_delete>(
    static_cast<chunk*>(huge_alloc(chunks_n_ * sizeof(chunk))),
    huge_delete{chunks_n_ * sizeof(chunk)});
  std::memset(static_cast<void*>(ctrl_.get()), 0, chunks_n_ * sizeof(chunk));
  // The records are written only as rows arrive: untouched pages stay unmapped until then.
  records_ = std::unique_ptr<std::byte[], huge_delete>(
    static_cast<std::byte*>(huge_alloc(slots() * stride_)), huge_delete{slots() * stride_});
}

uint32_t slot_table::insert(uint64_t id, uint64_t hash) {
  SATRAP_ASSERT(static_cast<double>(size_ + 1) <= max_load * static_cast<double>(slots()));
  const uint8_t tag = tag_of(hash);
  const size_t home = home_of(hash);
  size_t c = home;
  for (;;) {
    chunk& k = ctrl_[c];
    if (uint32_t free = k.empty()) {
      auto lane = static_cast<size_t>(__builtin_ctz(free));
      k.tag[lane] = static_cast<uint8_t>(tag | (c != home ? 0x80 : 0));
      k.ref = static_cast<uint16_t>(k.ref | (1u << lane));
      auto s = static_cast<uint32_t>(c * lanes + lane);
      std::memcpy(record(s), &id, 8);
      ++size_;
      return s;
    }
    if (k.overflow != 0xffff)
      ++k.overflow;
    c = next(c);
  }
}

}  // namespace satrap
