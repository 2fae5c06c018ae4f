#include "tests/bench/slot_table.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cmath>

namespace satrap {

namespace {
constexpr size_t initial_chunks = 16;  // 192 slots: a new table costs ~15 KiB
}

slot_table::slot_table(size_t row_bytes, size_t expected_rows) : stride_(8 + row_bytes) {
  SATRAP_ASSERT(row_bytes % 4 == 0);
  allocate(chunks_for(expected_rows));
}

size_t slot_table::chunks_for(size_t rows) const {
  return std::max<size_t>(initial_chunks,
                          static_cast<size_t>(std::ceil(static_cast<double>(rows) / (max_load * lanes))));
}

void slot_table::allocate(size_t chunks) {
  SATRAP_ASSERT(chunks * lanes < npos);
  ctrl_ = std::unique_ptr<chunk[], huge_delete>(static_cast<chunk*>(huge_alloc(chunks * sizeof(chunk))),
                                                huge_delete{chunks * sizeof(chunk)});
  // The records are written only as rows arrive: untouched pages stay unmapped until then.
  records_ = std::unique_ptr<std::byte[], huge_delete>(static_cast<std::byte*>(huge_alloc(chunks * lanes * stride_)),
                                                       huge_delete{chunks * lanes * stride_});
  std::memset(static_cast<void*>(ctrl_.get()), 0, chunks * sizeof(chunk));
  chunks_n_ = chunks;
  changed_.assign((slots() + 63) / 64, 0);
  size_ = 0;
}

void slot_table::rehash(size_t chunks) {
  auto old_ctrl = std::move(ctrl_);
  auto old_records = std::move(records_);
  auto old_changed = std::move(changed_);
  const size_t old_slots = chunks_n_ * lanes;
  allocate(chunks);
  for (size_t s = 0; s < old_slots; ++s) {
    const chunk& k = old_ctrl[s / lanes];
    if (k.tag[s % lanes] == 0) continue;
    const std::byte* rec = old_records.get() + s * stride_;
    uint64_t id;
    std::memcpy(&id, rec, 8);
    uint32_t t = insert(id, hash_of(id), (k.ref >> (s % lanes)) & 1);
    std::memcpy(row(t), rec + 8, stride_ - 8);
    if ((old_changed[s / 64] >> (s % 64)) & 1) set_changed(t, true);
  }
}

void slot_table::reserve(size_t rows, size_t limit) {
  if (static_cast<double>(rows) <= max_load * static_cast<double>(slots())) return;
  size_t want = std::max(chunks_for(rows), chunks_n_ + chunks_n_ / 2);
  if (limit > 0) want = std::max(std::min(want, chunks_for(limit)), chunks_for(std::min(rows, limit)));
  if (want > chunks_n_) rehash(want);
}

void slot_table::clear() { allocate(chunks_for(0)); }

uint32_t slot_table::insert(uint64_t id, uint64_t hash, bool referenced) {
  SATRAP_ASSERT(has_room());
  const uint8_t tag = tag_of(hash);
  const size_t home = home_of(hash);
  size_t c = home;
  for (;;) {
    chunk& k = ctrl_[c];
    if (uint32_t free = k.empty()) {
      auto lane = static_cast<size_t>(__builtin_ctz(free));
      k.tag[lane] = static_cast<uint8_t>(tag | (c != home ? 0x80 : 0));
      k.ref = static_cast<uint16_t>((k.ref & ~(1u << lane)) | (static_cast<unsigned>(referenced) << lane));
      auto s = static_cast<uint32_t>(c * lanes + lane);
      std::memcpy(record(s), &id, 8);
      set_changed(s, false);
      ++size_;
      return s;
    }
    if (k.overflow != 0xffff) ++k.overflow;
    c = next(c);
  }
}

void slot_table::move(uint32_t from, uint32_t to, size_t home) {
  chunk& f = ctrl_[from / lanes];
  chunk& t = ctrl_[to / lanes];
  const size_t fl = from % lanes, tl = to % lanes;
  t.tag[tl] = static_cast<uint8_t>((f.tag[fl] & 0x7f) | (to / lanes != home ? 0x80 : 0));
  t.ref = static_cast<uint16_t>((t.ref & ~(1u << tl)) | (((f.ref >> fl) & 1u) << tl));
  std::memcpy(record(to), record(from), stride_);
  set_changed(to, changed(from));
  f.tag[fl] = 0;
  clear_referenced(from);
  set_changed(from, false);
}

void slot_table::erase_slot(uint32_t s, std::span<const uint32_t> pinned) {
  size_t h = s / lanes;
  SATRAP_ASSERT(h < chunks_n_ && used(s));
  if (ctrl_[h].tag[s % lanes] & 0x80)
    for (size_t p = home_of(hash_of(id_at(s))); p != h; p = next(p)) unpass(p);
  ctrl_[h].tag[s % lanes] = 0;
  clear_referenced(s);
  set_changed(s, false);
  --size_;
  // Backward shift: while entries beyond pass the chunk with the hole, move the nearest one that
  // is not in flight into it; its old slot becomes the hole. Only displaced entries can pass a
  // chunk, so only their ids are read.
  auto dist = [&](size_t a, size_t b) { return b >= a ? b - a : b + chunks_n_ - a; };
  while (ctrl_[h].overflow != 0) {
    bool moved = false;
    size_t j = next(h);
    for (size_t steps = 1; steps < chunks_n_ && !moved; ++steps, j = next(j)) {
      const chunk& q = ctrl_[j];
      for (uint32_t m = q.displaced(); m != 0 && !moved; m &= m - 1) {
        auto from = static_cast<uint32_t>(j * lanes + static_cast<size_t>(__builtin_ctz(m)));
        if (std::find(pinned.begin(), pinned.end(), from) != pinned.end()) continue;
        size_t home = home_of(hash_of(id_at(from)));
        if (dist(home, h) >= dist(home, j)) continue;  // its path does not pass h
        for (size_t p = h; p != j; p = next(p)) unpass(p);
        move(from, s, home);
        s = from;
        h = j;
        moved = true;
      }
      if (!moved && q.empty() != 0) break;  // no entry passes a chunk with room
    }
    if (!moved) break;  // only with a saturated count, or entries in flight
  }
}

bool slot_table::erase(uint64_t id) {
  uint32_t s = find(id);
  if (s == npos) return false;
  erase_slot(s);
  return true;
}

}  // namespace satrap
