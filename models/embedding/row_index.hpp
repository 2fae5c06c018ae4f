// The store's index: a bucketized hash table from 64-bit id to 32-bit row number.
//
// Why this shape: a lookup at the memory limit may afford about one random cache line for the
// index, so a bucket IS one cache line: 5 ids, their 5 rows, an occupancy mask and an overflow
// count, 64 bytes aligned to 64 (the table sits on huge pages, huge_pages.hpp). A lookup hashes
// the id to its home bucket (home = (hash * buckets) >> 64, no power of two needed), compares the
// id against the occupied lanes and is done: at the default fill about 85% of ids live in their
// home bucket, the rest in the next few (linear probing over buckets). The overflow count of a
// bucket says how many entries probed past it, so a lookup of an absent id stops at the first
// bucket whose count is 0. Erase needs no tombstones: it walks the path from the entry's home
// decrementing the counts (as F14 does), then shifts later entries whose path passes the hole back
// into it, so every bucket on a probe path stays full (CLOCK churn would otherwise let paths grow
// without bound). Empty lanes keep row npos.
// Bytes per row: 64 / 5 / max_load = 15 at max_load 0.85, as the previous 12-byte slots at 0.8
// (measured in tests/bench/README.md: the lookup touches one line instead of one to three).
// Hot ids come home: the ~15% of entries past their home bucket cost a lookup one or two more
// dependent lines, and lines in flight are what bounds a batched lookup. find_touch_promote (the
// lookup and update pipelines' search past home) trades such an entry with one of its home
// bucket's entries that was not itself promoted there; linear probing's invariant holds (the
// entry moved out has its home at or before that bucket, so its new path passes the same full
// buckets) and no overflow count changes. An id looked up again then costs one index line, like
// an id that was home from the start. Measured (embedding_store_bench, 10M rows, Zipf ids):
// lookups 0.36-0.47 -> 0.51-0.69 of the flat gather; a table at max_load 0.5 (no overflow, 26
// bytes of index per row) measured about the same, and that is what promotion gets at 15.
// Sweeps (CLOCK, snapshots) see the buckets as `slots()` numbered lanes, 5 per bucket.
// Threading: not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "models/embedding/huge_pages.hpp"
#include "models/embedding/id_map.hpp"

namespace satrap {

class row_index {
 public:
  static constexpr uint32_t npos = UINT32_MAX;
  static constexpr uint32_t more = UINT32_MAX - 1;  // find_home: look further (find)
  static constexpr double max_load = 0.85;
  static constexpr size_t lanes = 5;  // entries per bucket (one cache line)

  explicit row_index(size_t expected_rows = 0);

  static uint64_t hash_of(uint64_t id) { return mix64(id ^ 0x2545f4914f6cdd1dULL); }
  size_t home_of(uint64_t hash) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(hash) * buckets_n_) >> 64);
  }
  void prefetch(uint64_t hash) const { prefetch_line(&buckets_[home_of(hash)]); }

  uint32_t find(uint64_t id, uint64_t hash) const {  // npos when absent
    for (size_t b = home_of(hash);; b = next(b)) {
      const bucket& k = buckets_[b];
      if (uint32_t m = k.match(id))
        return k.row[__builtin_ctz(m)];
      if (k.overflow == 0)
        return npos;
    }
  }
  uint32_t find(uint64_t id) const { return find(id, hash_of(id)); }
  // find, and sets the entry's `referenced` bit (CLOCK) when found.
  uint32_t find_touch(uint64_t id, uint64_t hash) {
    for (size_t b = home_of(hash);; b = next(b)) {
      bucket& k = buckets_[b];
      if (uint32_t m = k.match(id))
        return k.touch(m);
      if (k.overflow == 0)
        return npos;
    }
  }
  // find_touch, and an entry found beyond its home bucket trades places with an entry of the
  // home bucket that was not itself promoted there (see `promoted`): the ids that are looked up
  // again and again come to live in their home bucket, so their next lookups read one index line
  // instead of two or three. The lines are those the search just read.
  uint32_t find_touch_promote(uint64_t id, uint64_t hash) {
    const size_t home = home_of(hash);
    for (size_t b = home;; b = next(b)) {
      bucket& k = buckets_[b];
      if (uint32_t m = k.match(id)) {
        if (b != home)
          if (unsigned to = promote(home, b, static_cast<unsigned>(__builtin_ctz(m))); to < lanes)
            return buckets_[home].touch(1u << to);
        return k.touch(m);
      }
      if (k.overflow == 0)
        return npos;
    }
  }
  // The home bucket only: the row, npos when absent, or `more` when the id may live in a later
  // bucket; then prefetch_beyond_home and call find later (a pipeline does not wait on it).
  uint32_t find_home(uint64_t id, uint64_t hash) const {
    const bucket& k = buckets_[home_of(hash)];
    if (uint32_t m = k.match(id))
      return k.row[__builtin_ctz(m)];
    return k.overflow == 0 ? npos : more;
  }
  uint32_t find_home_touch(uint64_t id, uint64_t hash) {  // and sets `referenced` when found
    bucket& k = buckets_[home_of(hash)];
    if (uint32_t m = k.match(id))
      return k.touch(m);
    return k.overflow == 0 ? npos : more;
  }
  void prefetch_beyond_home(uint64_t hash) const {  // the next two buckets (most overflow is there)
    size_t b = next(home_of(hash));
    prefetch_line(&buckets_[b]);
    prefetch_line(&buckets_[next(b)]);
  }
  // Inserts (id -> row), referenced; id must be absent. Grows when past max_load.
  void insert(uint64_t id, uint64_t hash, uint32_t row, bool referenced = true);
  // Removes the entry in lane `slot`; entries of later lanes may move back into it.
  void erase_slot(size_t slot);
  bool erase(uint64_t id);  // false when absent
  // Recomputes what the buckets record: every overflow count equals the number of entries whose
  // probe passes that bucket, every bucket passed is full, promoted bits only on lanes in use
  // whose entry is at home, and size(). O(entries x path); for tests.
  bool consistent() const;
  void reserve(size_t rows);
  void clear();

  size_t size() const { return size_; }
  size_t slots() const { return buckets_n_ * lanes; }
  size_t bytes() const { return huge_alloc_size(buckets_n_ * sizeof(bucket)); }
  // Lane access for sweeps (CLOCK, snapshots): npos row = empty.
  uint32_t row_at(size_t slot) const { return buckets_[slot / lanes].row[slot % lanes]; }
  uint64_t id_at(size_t slot) const { return buckets_[slot / lanes].id[slot % lanes]; }
  // The CLOCK bit of a lane, beside its entry: a hit sets it in the line the lookup already holds.
  bool referenced(size_t slot) const { return (buckets_[slot / lanes].ref >> (slot % lanes)) & 1; }
  // The CLOCK hand passing: clears the lane's `referenced` bit and its promoted bit, so an id
  // that was hot when promoted can be traded away by a later promotion once it has gone cold.
  void clear_referenced(size_t slot) {
    bucket& k = buckets_[slot / lanes];
    k.ref = static_cast<uint8_t>(k.ref & ~(1u << (slot % lanes)));
    k.promoted = static_cast<uint16_t>(k.promoted & ~(1u << (slot % lanes)));
  }

 private:
  struct alignas(64) bucket {
    uint64_t id[lanes];
    uint32_t row[lanes];
    uint8_t used;  // bit i: lane i holds an entry
    uint8_t ref;   // bit i: lane i referenced since the CLOCK hand last passed
    // Entries whose probe passed this bucket (saturates at overflow_max, then stays).
    uint16_t overflow : 11;
    // Bit i: lane i holds an entry that find_touch_promote moved into its home bucket; such an
    // entry is not traded away by a later promotion (two hot ids would take turns otherwise).
    // A hint only: erase, insert and the CLOCK hand (clear_referenced) clear it. A table without
    // a capacity has no hand, so there a promoted id keeps its lane until it is erased.
    uint16_t promoted : 5;
    // Bit i set when lane i is occupied by `id_`. Branch-free; compilers vectorise the compares.
    uint32_t match(uint64_t id_) const {
      uint32_t m = 0;
      for (size_t i = 0; i < lanes; ++i)
        m |= static_cast<uint32_t>(id[i] == id_) << i;
      return m & used;
    }
    uint32_t touch(uint32_t m) {  // the row of match m, marked referenced (written only if not yet)
      auto lane = static_cast<unsigned>(__builtin_ctz(m));
      if (!((ref >> lane) & 1))
        ref = static_cast<uint8_t>(ref | (1u << lane));
      return row[lane];
    }
  };
  static_assert(sizeof(bucket) == 64);
  static constexpr uint8_t full = (1u << lanes) - 1;
  static constexpr uint16_t overflow_max = (1u << 11) - 1;

  // Entry (b, lane), whose home is `home`, trades places with an unpromoted entry of `home`:
  // returns the lane it now has in `home`, or `lanes` when it stays where it was (every lane of
  // home promoted, or home not full: only after a saturated overflow count). Keeps the invariant
  // of linear probing: the entry moved out of home has its home at or before `home`, so its new
  // probe path passes the buckets the promoted entry's path passed, all of them full, and no
  // overflow count changes.
  unsigned promote(size_t home, size_t b, unsigned lane);

  size_t next(size_t b) const { return b + 1 == buckets_n_ ? 0 : b + 1; }
  void unpass(size_t b) {
    if (buckets_[b].overflow != overflow_max)
      --buckets_[b].overflow;
  }
  size_t buckets_for(size_t rows) const;
  void rehash(size_t buckets);

  struct buckets_free {
    size_t bytes;  // no initializer: the enclosing class uses it before it is complete
    void operator()(bucket* p) const { huge_free(p, bytes); }
  };
  std::unique_ptr<bucket[], buckets_free> buckets_;
  size_t buckets_n_ = 0;
  size_t size_ = 0;
};

}  // namespace satrap
