// A candidate layout for the store, measured and not the store (bench only: `store_stages`'s
// `slots` variant). Rows and their index in one open-addressing table: each slot holds an id and
// its row (the 8-byte id, then the row's bytes: weights, then optimizer state), and the row is
// addressed from the slot the id hashes to, with no row number in between.
//
// It was the store for one session (2026-12-06, issue 17) and did not land; tests/bench/README.md,
// "the slot table", has the figures. In short: in embedding_store_bench (capacity-bounded, 10M
// rows) lookups reached 0.33-0.39 of the flat gather against 0.25-0.33 for the store, updates
// 1.1-1.6 (store 0.70-0.80), bytes 1.239 (store 1.237), and the default job ran as fast. But a
// table of capacity 0 (the default) grows, and there the store's slabs grow row by row while a
// slot table rehashes: as one table its peak memory doubled on a job that fills 5.6M rows (291
// against 145 bytes per row); split into 16 segments that grow on their own (one control block
// on huge pages for all: 16 small ones on 4 KiB pages cost 10% of lookups and 35% of updates),
// it still held 221 against 145 bytes per row (segments sit between 0.62 and 0.93 load after a
// 1.5x step) and ran at 0.63-0.72x the store's samples/s on the growing jobs of
// pipeline_overhead.sh. What it would need: growth in smaller steps or by pages, and admissions
// that cost no more than the slabs' sequential row writes.
//
// Why this shape: a lookup at the memory limit may afford about one random trip to
// DRAM. The store (a bucketized index of row numbers, then rows in slabs) pays two dependent
// ones on two pages: the index bucket, then the row it names. Here the slots are found
// from a small control array that stays in the last-level cache, and the id and weights a lookup
// reads are side by side in one slot: two adjacent lines on one page, whose addresses are known
// as soon as the control byte matches.
//
// Control: slots come in chunks of 12; a chunk's control is 16 bytes: 12 one-byte tags (0 =
// empty; else 7 bits of the id's hash, and a `displaced` bit: the entry lives past its home
// chunk), the chunk's 12 CLOCK bits and an overflow count. 1.33
// bytes per slot: ~14.5 MiB for 10M rows, which a 32 MiB L3 keeps (a lookup touches one control
// line per id, and 48 slots share a line, so control lines are far hotter than any row's).
// A lookup hashes the id to its home chunk (home = (hash * chunks) >> 64), matches the tag against
// the chunk's 12 tags at once (SSE2), and verifies the id in the slot; at the default load most
// ids live in their home chunk, the rest in the next few (linear probing over chunks). The overflow
// count of a chunk says how many entries probed past it, so a search for an absent id stops at the
// first chunk whose count is 0 (as F14 does). This bench copy has no erase and does not grow: the
// store version's erase cleared the tag, walked the entry's path from its home decrementing the
// counts, then shifted displaced entries whose path passed the hole back into it (as the store's
// row_index does): without that, CLOCK churn at full load left entries displaced behind holes
// until a search for an absent id walked the whole table (its first version did exactly that in
// the churn test). The `displaced` bits kept the shift from reading the ids of entries at home;
// erase never moved slots in flight, and the table grew before a batch, never during one.
//
// Bytes per row: (8 + row bytes + 16 / 12) / load. At dim 16, fp32, row-wise Adagrad (68-byte
// rows) and the load a capacity-bounded table reaches (max_load 0.92): 83.9, 1.23x the payload.
// Threading: not thread-safe; one owner.
// (What the store version's tests found, for whoever takes it up: churn at full load kept the
// mean path of an absent id at 3-5 chunks over 50,000 erase + insert steps, as right after the
// fill; without the backward shift the same test never ended.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "models/embedding/huge_pages.hpp"
#include "models/embedding/id_map.hpp"

namespace satrap {

class slot_table {
 public:
  static constexpr uint32_t npos = UINT32_MAX;
  static constexpr size_t lanes = 12;  // slots per chunk
  static constexpr double max_load = 0.92;

  // row_bytes: the bytes a slot keeps after its id (a multiple of 4); room for `rows` at max_load.
  slot_table(size_t row_bytes, size_t rows);

  static uint64_t hash_of(uint64_t id) { return mix64(id ^ 0x2545f4914f6cdd1dULL); }
  size_t home_of(uint64_t hash) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(hash) * chunks_n_) >> 64);
  }
  size_t slots() const { return chunks_n_ * lanes; }
  // The control line of the id's home chunk (most searches read only it).
  void prefetch_home(uint64_t hash) const { prefetch_line(&ctrl_[home_of(hash)]); }

  // The first slot on the id's path whose tag matches: a candidate, whose id is not yet checked
  // (7-bit tags: about 1 in 127 lanes matches another id); npos when no lane on the path matches,
  // that is when the id is certainly absent. Reads control only.
  uint32_t candidate(uint64_t hash) const {
    const uint8_t tag = tag_of(hash);
    size_t c = home_of(hash);
    for (size_t steps = 0; steps < chunks_n_; ++steps, c = next(c)) {
      const chunk& k = ctrl_[c];
      if (uint32_t m = k.match(tag))
        return static_cast<uint32_t>(c * lanes + static_cast<size_t>(__builtin_ctz(m)));
      if (k.overflow == 0)
        return npos;
    }
    return npos;
  }
  // The slot holding id, npos when absent.
  uint32_t find(uint64_t id, uint64_t hash) const {
    const uint8_t tag = tag_of(hash);
    size_t c = home_of(hash);
    for (size_t steps = 0; steps < chunks_n_; ++steps, c = next(c)) {
      const chunk& k = ctrl_[c];
      for (uint32_t m = k.match(tag); m != 0; m &= m - 1) {
        auto s = static_cast<uint32_t>(c * lanes + static_cast<size_t>(__builtin_ctz(m)));
        if (id_at(s) == id)
          return s;
      }
      if (k.overflow == 0)
        return npos;
    }
    return npos;
  }
  // Inserts id (absent) and returns its slot, marked referenced; its row bytes are left as they
  // were (the caller writes them). The table does not grow: size it for its rows when made.
  uint32_t insert(uint64_t id, uint64_t hash);

  // ---- a slot ----
  uint64_t id_at(uint32_t s) const {
    uint64_t id;
    std::memcpy(&id, record(s), 8);
    return id;
  }
  std::byte* row(uint32_t s) { return record(s) + 8; }
  const std::byte* row(uint32_t s) const { return record(s) + 8; }
  // The lines holding the slot's id and its first `row_bytes` bytes.
  void prefetch_slot(uint32_t s, size_t row_bytes) const {
    auto a = reinterpret_cast<uintptr_t>(record(s));
    for (uintptr_t line = a & ~uintptr_t{63}; line < a + 8 + row_bytes; line += 64)
      prefetch_line(reinterpret_cast<const void*>(line));
  }
  // The CLOCK bit, in the chunk's control (a hit sets it in a line the search already holds).
  void touch(uint32_t s) {
    chunk& k = ctrl_[s / lanes];
    auto bit = static_cast<uint16_t>(1u << (s % lanes));
    if (!(k.ref & bit))
      k.ref = static_cast<uint16_t>(k.ref | bit);
  }

 private:
  struct alignas(16) chunk {
    uint8_t tag[lanes];  // 0: empty lane; else bit 7 displaced, bits 0-6 the id's tag (nonzero)
    uint16_t ref;        // bit i: lane i referenced since the CLOCK hand last passed
    uint16_t overflow;   // entries whose probe passed this chunk (saturates at 0xffff, then stays)
    uint32_t match(uint8_t t) const {  // bit i: lane i holds tag t (displaced or not)
#if defined(__SSE2__)
      __m128i c =
        _mm_and_si128(_mm_load_si128(reinterpret_cast<const __m128i*>(this)), _mm_set1_epi8(0x7f));
      return static_cast<uint32_t>(
               _mm_movemask_epi8(_mm_cmpeq_epi8(c, _mm_set1_epi8(static_cast<char>(t)))))
             & 0xfffu;
#else
      uint32_t m = 0;
      for (size_t i = 0; i < lanes; ++i)
        m |= static_cast<uint32_t>((tag[i] & 0x7f) == t) << i;
      return m;
#endif
    }
    uint32_t empty() const {  // bit i: lane i is empty
      uint32_t m = 0;
      for (size_t i = 0; i < lanes; ++i)
        m |= static_cast<uint32_t>(tag[i] == 0) << i;
      return m;
    }
  };
  static_assert(sizeof(chunk) == 16);

  static uint8_t tag_of(uint64_t hash) {  // 7 low bits (home uses the high bits); never 0
    auto t = static_cast<uint8_t>(hash & 0x7f);
    return t != 0 ? t : 1;
  }
  size_t next(size_t c) const { return c + 1 == chunks_n_ ? 0 : c + 1; }
  std::byte* record(uint32_t s) const { return records_.get() + static_cast<size_t>(s) * stride_; }

  struct huge_delete {
    size_t bytes;  // no initializer: the enclosing class uses it before it is complete
    void operator()(void* p) const { huge_free(p, bytes); }
  };
  size_t stride_;  // 8 + row bytes
  std::unique_ptr<chunk[], huge_delete> ctrl_;
  std::unique_ptr<std::byte[], huge_delete> records_;
  size_t chunks_n_ = 0;
  size_t size_ = 0;
};

}  // namespace satrap
