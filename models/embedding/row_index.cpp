#include "models/embedding/row_index.hpp"
#include "models/assert.hpp"

#include <cmath>
#include <vector>

namespace satrap {

row_index::row_index(size_t expected_rows) { rehash(buckets_for(expected_rows)); }

size_t row_index::buckets_for(size_t rows) const {
  return std::max<size_t>(
    4, static_cast<size_t>(std::ceil(static_cast<double>(rows) / (max_load * lanes))));
}

void row_index::rehash(size_t buckets) {
  auto old = std::move(buckets_);
  size_t old_n = buckets_n_;
  buckets_ = std::unique_ptr<bucket[], buckets_free>(
    static_cast<bucket*>(huge_alloc(buckets * sizeof(bucket))),
    buckets_free{buckets * sizeof(bucket)});
  buckets_n_ = buckets;
  clear();
  for (size_t b = 0; b < old_n; ++b)
    for (size_t i = 0; i < lanes; ++i)
      if (old[b].used & (1u << i))
        insert(old[b].id[i], hash_of(old[b].id[i]), old[b].row[i], (old[b].ref >> i) & 1);
}

void row_index::reserve(size_t rows) {
  if (buckets_for(rows) > buckets_n_)
    rehash(buckets_for(rows));
}

void row_index::clear() {
  for (size_t b = 0; b < buckets_n_; ++b) {
    bucket& k = buckets_[b];
    for (size_t i = 0; i < lanes; ++i) {
      k.id[i] = 0;
      k.row[i] = npos;
    }
    k.used = 0;
    k.ref = 0;
    k.overflow = 0;
    k.promoted = 0;
  }
  size_ = 0;
}

void row_index::insert(uint64_t id, uint64_t hash, uint32_t row, bool referenced) {
  SATRAP_DEBUG_ASSERT(row != npos);
  SATRAP_DEBUG_ASSERT(find(id, hash) == npos);
  if (static_cast<double>(size_ + 1) > max_load * static_cast<double>(slots())) {
    rehash(buckets_n_ + buckets_n_ / 2);
  }
  size_t b = home_of(hash);
  while (buckets_[b].used == full) {
    if (buckets_[b].overflow != overflow_max)
      ++buckets_[b].overflow;
    b = next(b);
  }
  bucket& k = buckets_[b];
  auto lane = static_cast<size_t>(__builtin_ctz(~k.used & full));
  k.id[lane] = id;
  k.row[lane] = row;
  k.used = static_cast<uint8_t>(k.used | (1u << lane));
  k.ref =
    static_cast<uint8_t>((k.ref & ~(1u << lane)) | (static_cast<unsigned>(referenced) << lane));
  k.promoted = static_cast<uint16_t>(k.promoted & ~(1u << lane));
  ++size_;
}

unsigned row_index::promote(size_t home, size_t b, unsigned lane) {
  bucket& h = buckets_[home];
  bucket& q = buckets_[b];
  SATRAP_DEBUG_ASSERT(q.used & (1u << lane));
  unsigned free = ~static_cast<unsigned>(h.promoted) & full;
  if (free == 0 || h.used != full)
    return lanes;
  auto to = static_cast<unsigned>(__builtin_ctz(free));
  std::swap(h.id[to], q.id[lane]);
  std::swap(h.row[to], q.row[lane]);
  unsigned hr = (h.ref >> to) & 1u, qr = (q.ref >> lane) & 1u;
  h.ref = static_cast<uint8_t>((h.ref & ~(1u << to)) | (qr << to));
  q.ref = static_cast<uint8_t>((q.ref & ~(1u << lane)) | (hr << lane));
  h.promoted = static_cast<uint16_t>(h.promoted | (1u << to));
  q.promoted = static_cast<uint16_t>(q.promoted & ~(1u << lane));
  return to;
}

void row_index::erase_slot(size_t slot) {
  size_t h = slot / lanes, lane = slot % lanes;
  SATRAP_DEBUG_ASSERT(h < buckets_n_ && (buckets_[h].used & (1u << lane)));
  for (size_t p = home_of(hash_of(buckets_[h].id[lane])); p != h; p = next(p))
    unpass(p);
  buckets_[h].used = static_cast<uint8_t>(buckets_[h].used & ~(1u << lane));
  buckets_[h].promoted = static_cast<uint16_t>(buckets_[h].promoted & ~(1u << lane));
  buckets_[h].row[lane] = npos;
  --size_;
  // Backward shift: while entries beyond pass the bucket with the hole, move the nearest one
  // into it; its old lane becomes the hole. This keeps every bucket on an entry's probe path
  // full, so probe paths stay as short as right after insertion (a table under CLOCK churn would
  // otherwise collect paths through half-empty buckets, as tombstones do).
  auto dist = [&](size_t a, size_t b) { return b >= a ? b - a : b + buckets_n_ - a; };
  while (buckets_[h].overflow != 0) {
    bool moved = false;
    size_t j = next(h);
    for (size_t steps = 1; steps < buckets_n_ && !moved; ++steps, j = next(j)) {
      bucket& q = buckets_[j];
      for (size_t i = 0; i < lanes && !moved; ++i) {
        if (!(q.used & (1u << i)))
          continue;
        size_t home = home_of(hash_of(q.id[i]));
        if (dist(home, h) >= dist(home, j))
          continue;  // its path does not pass h
        bucket& k = buckets_[h];
        k.id[lane] = q.id[i];
        k.row[lane] = q.row[i];
        k.used = static_cast<uint8_t>(k.used | (1u << lane));
        k.ref = static_cast<uint8_t>((k.ref & ~(1u << lane)) | (((q.ref >> i) & 1u) << lane));
        for (size_t p = h; p != j; p = next(p))
          unpass(p);
        q.used = static_cast<uint8_t>(q.used & ~(1u << i));
        q.row[i] = npos;
        h = j;
        lane = i;
        moved = true;
      }
      if (q.used != full && !moved)
        break;  // no entry passes a bucket with room
    }
    if (!moved)
      break;  // only with a saturated count
  }
}

bool row_index::consistent() const {
  std::vector<uint32_t> passes(buckets_n_, 0);
  size_t entries = 0;
  for (size_t b = 0; b < buckets_n_; ++b) {
    const bucket& k = buckets_[b];
    for (size_t i = 0; i < lanes; ++i) {
      bool used = (k.used >> i) & 1, promoted = (k.promoted >> i) & 1;
      if (!used) {
        if (promoted || k.row[i] != npos)
          return false;
        continue;
      }
      ++entries;
      size_t home = home_of(hash_of(k.id[i]));
      if (promoted && home != b)
        return false;
      for (size_t p = home; p != b; p = next(p)) {
        if (buckets_[p].used != full)
          return false;
        ++passes[p];
      }
    }
  }
  for (size_t b = 0; b < buckets_n_; ++b)
    if (buckets_[b].overflow != passes[b] && buckets_[b].overflow != overflow_max)
      return false;
  return entries == size_;
}

bool row_index::erase(uint64_t id) {
  for (size_t b = home_of(hash_of(id));; b = next(b)) {
    const bucket& k = buckets_[b];
    if (uint32_t m = k.match(id)) {
      erase_slot(b * lanes + static_cast<size_t>(__builtin_ctz(m)));
      return true;
    }
    if (k.overflow == 0)
      return false;
  }
}

}  // namespace satrap
