#include "models/embedding/embedding_table.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <type_traits>

namespace satrap {

namespace {

constexpr size_t pipeline_max = 16;  // ids between the stages of a batch (see run_pipeline)

uint64_t splitmix(uint64_t& state) { return mix64(state += 0x9e3779b97f4a7c15ULL); }

}  // namespace

embedding_table::embedding_table(const embedding_options& options)
    : options_(options),
      layout_(row_layout::of(options)),
      step_(step_params::of(options)),
      kernels_(&sparse_kernels_select(options.simd)),
      index_(options.capacity),
      slabs_(layout_.weight_bytes, 4 * layout_.state_floats,
             row_slabs::rows_per_slab(layout_.stride, options.capacity)),
      coin_(options.seed ^ 0xa0761d6478bd642fULL),
      scratch_(static_cast<size_t>(options.dim)) {
  SATRAP_ASSERT(options.dim > 0 && options.capacity < row_index::more);
  if (options.admission == admission_kind::count_min)
    sketch_.emplace_back(options.sketch_width, options.sketch_depth, options.seed);
}

embedding_counters embedding_table::counters() const {
  embedding_counters c = counters_;
  c.rows = index_.size();
  c.bytes = index_.bytes() + slabs_.bytes() + free_rows_.capacity() * 4
            + evicted_log_.capacity() * 8 + (sketch_.empty() ? 0 : sketch_[0].bytes());
  return c;
}

void embedding_table::init_row(uint64_t id, uint32_t r) {
  std::byte* row = slabs_.weights(r);
  if (layout_.fp16) {
    embedding_init_row(options_, id, scratch_.data());
    kernels_->to_f16(scratch_.data(), reinterpret_cast<uint16_t*>(row), layout_.dim);
  } else {
    embedding_init_row(options_, id, reinterpret_cast<float*>(row));
  }
  auto* state = reinterpret_cast<float*>(slabs_.state(r));
  std::fill(state, state + layout_.state_floats, 0.0f);
  switch (options_.optimizer) {
    case sparse_optimizer_kind::adagrad:
    case sparse_optimizer_kind::rowwise_adagrad:
      std::fill(state, state + layout_.state_floats, options_.initial_accumulator);
      break;
    case sparse_optimizer_kind::ftrl:  // z = 0, n = initial_accumulator
      std::fill(state + layout_.dim, state + 2 * layout_.dim, options_.initial_accumulator);
      break;
    default: break;
  }
}

// Inlined into the pipeline: a call per id was a visible cost in the profile.
template <int Dim>
[[gnu::always_inline]] inline void embedding_table::read_row(uint32_t r, float* out) const {
  const std::byte* row = slabs_.weights(r);
  if constexpr (Dim > 0) {
    std::memcpy(out, row, Dim * sizeof(float));
  } else if (layout_.fp16) {
    kernels_->to_f32(reinterpret_cast<const uint16_t*>(row), out, layout_.dim);
  } else {  // inline 16-byte moves rather than a call to memcpy with a run-time size
    const auto* w = reinterpret_cast<const float*>(row);
    int d = 0;
    for (; d + 4 <= layout_.dim; d += 4)
      std::memcpy(out + d, w + d, 16);
    for (; d < layout_.dim; ++d)
      out[d] = w[d];
  }
}

void embedding_table::step_row(uint32_t r, const float* grad) {
  std::byte* row = slabs_.weights(r);
  auto* state = reinterpret_cast<float*>(slabs_.state(r));
  if (layout_.fp16) {
    auto* w16 = reinterpret_cast<uint16_t*>(row);
    kernels_->to_f32(w16, scratch_.data(), layout_.dim);
    kernels_->step(step_, scratch_.data(), state, grad);
    kernels_->to_f16(scratch_.data(), w16, layout_.dim);
  } else {
    kernels_->step(step_, reinterpret_cast<float*>(row), state, grad);
  }
  slabs_.set_changed(r, true);
}

bool embedding_table::admitted(uint64_t id, bool sighting) {
  switch (options_.admission) {
    case admission_kind::all: return true;
    case admission_kind::probability:
      if (!sighting)
        return false;
      return static_cast<double>(splitmix(coin_) >> 11) * 0x1.0p-53 < options_.admit_probability;
    case admission_kind::count_min:
      return (sighting ? sketch_[0].add(id) : sketch_[0].estimate(id)) >= options_.admit_after;
  }
  return false;
}

// The hand visits the index's slots in a scattered order (slot = k * step mod slots, step coprime
// with slots), not slot by slot: a hand sweeping in slot order empties the slots just behind it
// while inserts land everywhere, so the slots ahead of it fill towards twice the mean load and
// linear probing's clusters there grew without bound under churn (measured: a table of 24,758
// rows fed 80,000 new ids took minutes, overflow counts of 300 at 0.85 mean load). Scattered,
// evictions thin every bucket alike and the load stays the mean everywhere.
uint32_t embedding_table::evict_one(std::span<const uint32_t> pinned) {
  const size_t slots = index_.slots();
  if (hand_slots_ != slots) {  // the step for this many slots: near slots / phi, coprime
    hand_slots_ = slots;
    hand_step_ =
      std::max<size_t>(1, static_cast<size_t>(static_cast<double>(slots) * 0.6180339887));
    while (std::gcd(hand_step_, slots) != 1)
      ++hand_step_;
    hand_ %= slots;
  }
  size_t guard = 3 * slots;
  for (;;) {
    if (guard-- == 0) {  // a bug, not an input error: every row pinned
      std::fprintf(stderr, "embedding_table: CLOCK found no victim among %zu rows\n",
                   index_.size());
      std::abort();
    }
    size_t s = static_cast<size_t>((static_cast<unsigned __int128>(hand_) * hand_step_) % slots);
    if (++hand_ == slots)
      hand_ = 0;
    uint32_t r = index_.row_at(s);
    if (r == row_index::npos || std::find(pinned.begin(), pinned.end(), r) != pinned.end())
      continue;
    if (index_.referenced(s)) {
      index_.clear_referenced(s);
      continue;
    }
    uint64_t id = index_.id_at(s);
    if (tier_ != nullptr) {  // the row moves to the cold tier: not erased for snapshots
      slabs_.copy_out(r, tier_row_.data());
      tier_->evicted(id, tier_row_.data());
    }
    index_.erase_slot(s);  // an entry shifted into s is seen when the hand comes round again
    if (log_evictions_ && tier_ == nullptr)
      evicted_log_.push_back(id);
    ++counters_.evictions;
    return r;
  }
}

uint32_t embedding_table::allocate_row(std::span<const uint32_t> pinned) {
  if (!free_rows_.empty()) {
    uint32_t r = free_rows_.back();
    free_rows_.pop_back();
    return r;
  }
  if (options_.capacity == 0 || rows_made_ < options_.capacity) {
    slabs_.ensure(static_cast<size_t>(rows_made_) + 1);
    return rows_made_++;
  }
  if (options_.eviction == eviction_kind::none)
    return row_index::npos;
  return evict_one(pinned);
}

uint32_t embedding_table::admit(uint64_t id, uint64_t hash, bool sighting,
                                std::span<const uint32_t> pinned, bool create) {
  if (tier_ != nullptr && tier_->fetch(id, tier_load_.data())) {
    uint32_t r = allocate_row(pinned);
    SATRAP_ASSERT(r != row_index::npos, "a tiered table always evicts");
    index_.insert(id, hash, r);
    slabs_.copy_in(r, tier_load_.data());
    slabs_.set_changed(r, true);
    ++counters_.tier_loads;
    return r;
  }
  if (!create || !admitted(id, sighting))
    return row_index::npos;
  uint32_t r = allocate_row(pinned);
  if (r == row_index::npos)
    return r;
  index_.insert(id, hash, r);
  init_row(id, r);
  slabs_.set_changed(r, true);  // a new row belongs in the next incremental snapshot
  ++counters_.admissions;
  return r;
}

namespace {

// Runs a batch through four stages, `distance` ids apart: (1) hash the id and prefetch its home
// bucket; (2) look in the home bucket: most ids are resolved there, and `resolve(j, hash, row,
// in_flight)` finds (or admits) the row and prefetches it; ids that may live further on get the
// next buckets prefetched instead; (3) those finish their index search and are resolved; (4)
// `finish(k, row)` copies or steps the row. So the index's overflow never stalls the pipeline on
// a cache miss. `row` given to resolve: the row found, or npos (absent); rows still in flight must
// not be evicted by it.
// The stages run block by block (`distance` ids each: stage 1 of block b, stage 2 of block b - 1,
// and so on), each a tight loop of its own: the same order of index reads and writes as running
// them id by id, without four stage tests per id.
template <class Index, class Resolve, class Finish>
void run_pipeline(std::span<const uint64_t> ids, size_t distance, Index& index, Resolve&& resolve,
                  Finish&& finish) {
  constexpr bool touch = !std::is_const_v<Index>;  // lookups and updates set the CLOCK bit
  SATRAP_DEBUG_ASSERT(distance <= pipeline_max);
  // A power-of-two ring (a mask, not a division) holding positions b-3d .. b+d; finished entries
  // are reset to npos, so `in_flight` names exactly the rows still in flight (`more` marks an id
  // between stages 2 and 3, and is never a row).
  constexpr size_t ring = 4 * pipeline_max;
  static_assert((ring & (ring - 1)) == 0);
  uint64_t hashes[ring];
  uint32_t rows[ring];
  std::fill(rows, rows + ring, row_index::npos);
  const std::span<const uint32_t> in_flight(rows, ring);
  const size_t n = ids.size(), d = distance, block = std::max<size_t>(distance, 1);
  for (size_t b = 0; b < n + 3 * d + 1; b += block) {
    // Stage s runs on the block that stage 1 ran on (s - 1) * d ids before.
    auto each = [&](size_t lag, auto&& f) {
      if (b >= lag)
        for (size_t j = b - lag; j < std::min(b - lag + block, n); ++j)
          f(j);
    };
    each(0, [&](size_t i) {
      hashes[i % ring] = row_index::hash_of(ids[i]);
      index.prefetch(hashes[i % ring]);
    });
    each(d, [&](size_t j) {
      uint32_t r;
      if constexpr (touch)
        r = index.find_home_touch(ids[j], hashes[j % ring]);
      else
        r = index.find_home(ids[j], hashes[j % ring]);
      if (r == row_index::more)
        index.prefetch_beyond_home(hashes[j % ring]);
      else
        r = resolve(j, hashes[j % ring], r, in_flight);
      rows[j % ring] = r;
    });
    each(2 * d, [&](size_t j) {
      if (rows[j % ring] != row_index::more)
        return;
      rows[j % ring] = row_index::npos;
      uint32_t r;
      if constexpr (touch)
        r = index.find_touch_promote(ids[j], hashes[j % ring]);
      else
        r = index.find(ids[j], hashes[j % ring]);
      rows[j % ring] = resolve(j, hashes[j % ring], r, in_flight);
    });
    each(3 * d, [&](size_t k) {
      finish(k, rows[k % ring]);
      rows[k % ring] = row_index::npos;  // done: no longer pinned
    });
  }
}

}  // namespace

size_t embedding_table::pipeline_distance() const {
  if (options_.capacity == 0)
    return pipeline_max;
  // At most 3*distance rows are in flight (pinned): leave some of a small table evictable.
  return std::min<size_t>((options_.capacity - 1) / 4, pipeline_max);
}

template <int Dim>
void embedding_table::lookup_as(std::span<const uint64_t> ids, float* out) {
  const size_t dim = Dim > 0 ? size_t{Dim} : size_t(layout_.dim);
  run_pipeline(
    ids, pipeline_distance(), index_,
    [&](size_t j, uint64_t hash, uint32_t r, std::span<const uint32_t> in_flight) {
      if (r == row_index::npos)
        r = admit(ids[j], hash, true, in_flight);
      if (r != row_index::npos)
        slabs_.prefetch_weights(r);
      return r;
    },
    [&](size_t k, uint32_t r) {
      if (r != row_index::npos) {
        read_row<Dim>(r, out + k * dim);
      } else {
        embedding_init_row(options_, ids[k], out + k * dim);
        ++counters_.not_admitted_lookups;
      }
    });
  counters_.lookups += ids.size();
}

template <int Dim>
void embedding_table::peek_as(std::span<const uint64_t> ids, float* out) const {
  const size_t dim = Dim > 0 ? size_t{Dim} : size_t(layout_.dim);
  run_pipeline(
    ids, pipeline_max, index_,
    [&](size_t, uint64_t, uint32_t r, std::span<const uint32_t>) {
      if (r != row_index::npos)
        slabs_.prefetch_weights(r);
      return r;
    },
    [&](size_t k, uint32_t r) {
      if (r != row_index::npos)
        read_row<Dim>(r, out + k * dim);
      else
        embedding_init_row(options_, ids[k], out + k * dim);
    });
  counters_.lookups += ids.size();
}

// The common fp32 dims get a lookup with the row size known at compile time: the copy is a few
// vector moves instead of a loop, and the fewer instructions per id let the out-of-order window
// hold more ids' misses.
#define SATRAP_BY_DIM(call, ...)            \
  switch (layout_.fp16 ? 0 : layout_.dim) { \
    case 8: return call<8>(__VA_ARGS__);    \
    case 16: return call<16>(__VA_ARGS__);  \
    case 32: return call<32>(__VA_ARGS__);  \
    case 64: return call<64>(__VA_ARGS__);  \
    default: return call<0>(__VA_ARGS__);   \
  }

void embedding_table::lookup(std::span<const uint64_t> ids, float* out) {
  SATRAP_BY_DIM(lookup_as, ids, out)
}
void embedding_table::peek(std::span<const uint64_t> ids, float* out) const {
  SATRAP_BY_DIM(peek_as, ids, out)
}
#undef SATRAP_BY_DIM

void embedding_table::absent(std::span<const uint64_t> ids, std::vector<uint64_t>& out) const {
  constexpr size_t ahead = 8;
  uint64_t hashes[ahead];
  for (size_t i = 0; i < ids.size() + ahead; ++i) {
    if (i >= ahead) {  // the id `ahead` back, whose slot of the ring i takes next
      size_t j = i - ahead;
      if (index_.find(ids[j], hashes[j % ahead]) == row_index::npos)
        out.push_back(ids[j]);
    }
    if (i < ids.size()) {
      hashes[i % ahead] = row_index::hash_of(ids[i]);
      index_.prefetch(hashes[i % ahead]);
    }
  }
}

void embedding_table::weights_of(const std::byte* row, float* out) const {
  if (layout_.fp16)
    kernels_->to_f32(reinterpret_cast<const uint16_t*>(row), out, layout_.dim);
  else
    std::memcpy(out, row, layout_.dim * sizeof(float));
}

void embedding_table::set_tier(row_tier* tier) {
  SATRAP_ASSERT(tier == nullptr || (options_.eviction == eviction_kind::clock && size() == 0),
                "a tier needs eviction clock and an empty table");
  tier_ = tier;
  tier_row_.resize(layout_.stride);
  tier_load_.resize(layout_.stride);
}

void embedding_table::set_schedule_step(int64_t step) {
  step_.lr = static_cast<float>(options_.learning_rate * lr_factor(options_.schedule, step));
}

void embedding_table::update(std::span<const uint64_t> ids, const float* grads) {
  const size_t dim = layout_.dim;
  const bool create = options_.admission == admission_kind::all;
  run_pipeline(
    ids, pipeline_distance(), index_,
    [&](size_t j, uint64_t hash, uint32_t r, std::span<const uint32_t> in_flight) {
      if (r == row_index::npos && (create || tier_ != nullptr))
        r = admit(ids[j], hash, false, in_flight, create);
      if (r != row_index::npos) {
        slabs_.prefetch_row(r);
        slabs_.prefetch_changed(r);
      }
      return r;
    },
    [&](size_t k, uint32_t r) {
      if (r == row_index::npos) {
        ++counters_.not_admitted_gradients;
        return;
      }
      step_row(r, grads + k * dim);
      ++counters_.updates;
    });
}

}  // namespace satrap
