// The embedding store of one shard: id -> row (weights + optimizer state), with sparse
// optimizers, a capacity bound with eviction, id admission, fp32 or fp16 weights and counters.
//
// Layout: rows live in slabs (row_slabs.hpp: the weights of 64 rows together, then their states,
// so a lookup reads only weight lines); a bucketized index (one 64-byte line holds 5 ids, their
// row numbers and CLOCK bits) maps ids to row numbers (row_index.hpp). At 10M rows of dim 16,
// fp32, row-wise Adagrad that is about 1.24x the payload (68 bytes per row), against > 2x for a heap
// vector per row.
//
// Eviction is CLOCK (second chance), not exact LRU: LRU needs a linked list through the rows
// (8 more bytes per row with 32-bit links, and a write to two other rows on every hit), which
// alone would spend half the memory budget, and its pointer chasing defeats the batched
// prefetching. CLOCK needs one `referenced` bit per row, set on every hit (it lives in the index
// bucket the lookup already holds, written only when not yet set); the hand visits the index's
// slots in a scattered order (k x step mod slots: a hand in slot order let linear probing's
// clusters grow without bound under churn), clears set bits and evicts the first row it finds
// clear. With a row_tier set, an evicted row goes to the tier (LRU was not measured: CLOCK kept).
//
// Admission: a lookup of an unseen id creates its row only when admitted (see embedding_options);
// otherwise it reads as the initial row. An update of an absent id creates its row when
// admission is `all` (and the table has room); otherwise the gradient is dropped and counted in
// not_admitted_gradients, never lost silently.
//
// Batches run through a software pipeline: hash an id and prefetch its home bucket, look there 16
// ids later and prefetch the row (or, for the ~15% of ids that may live further on, prefetch the
// next buckets and finish the search 16 ids later, moving the id into its home bucket:
// row_index::find_touch_promote), copy or step the row 16 ids after that; rows in flight are never
// eviction victims. Promotion moves index entries, never rows, so row numbers in flight stay
// valid; the CLOCK hand may see a moved entry twice or once less in a sweep (CLOCK is
// approximate). Kernels (AVX2 or scalar) are chosen at run time.
// Threading: not thread-safe: one owner (an embedding_shard actor, or the reference loop).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/embedding/count_min_sketch.hpp"
#include "models/embedding/embedding_options.hpp"
#include "models/embedding/row_index.hpp"
#include "models/embedding/row_layout.hpp"
#include "models/embedding/row_slabs.hpp"
#include "models/embedding/sparse_kernels.hpp"

namespace satrap {

struct embedding_counters {
  uint64_t rows = 0;                    // rows held
  uint64_t bytes = 0;                   // bytes held: slabs, index, bitmaps, sketch, logs
  uint64_t admissions = 0;              // rows created for unseen ids (restores not counted)
  uint64_t evictions = 0;               // rows evicted to make room
  uint64_t lookups = 0;                 // ids looked up (lookup and peek)
  uint64_t updates = 0;                 // rows stepped by the optimizer
  uint64_t not_admitted_lookups = 0;    // lookups answered with the initial row (no row made)
  uint64_t not_admitted_gradients = 0;  // gradient rows dropped because their id has no row
  uint64_t tier_loads = 0;              // rows brought back from the cold tier (row_tier)
};

// The cold tier under a table (models/tier/tiered_table.hpp): with one set, a row CLOCK evicts is
// handed to `evicted` (weights and optimizer state, not logged as erased: it still exists), and an
// id absent from RAM asks `fetch` first; a row the tier holds is admitted whatever the admission
// policy (it already exists). Both are called from inside lookup / update, on the owner's thread.
class row_tier {
 public:
  virtual ~row_tier() = default;
  // Fills `row` (layout().stride bytes) and answers true when the tier holds `id`'s row.
  virtual bool fetch(uint64_t id, std::byte* row) = 0;
  // `id`'s row leaves RAM; `row` is valid during the call only.
  virtual void evicted(uint64_t id, const std::byte* row) = 0;
};

class embedding_table {
 public:
  explicit embedding_table(const embedding_options& options);

  // out: ids.size() x dim. Unseen ids get a row when admitted; else they read as initial rows.
  void lookup(std::span<const uint64_t> ids, float* out);
  // Like lookup, but never creates a row: an unseen id reads as its initial row (evaluation).
  void peek(std::span<const uint64_t> ids, float* out) const;
  // One optimizer step per id (ids unique; grads already summed), grads: ids.size() x dim.
  void update(std::span<const uint64_t> ids, const float* grads);
  // The learning rate of the next updates: learning_rate x lr_factor(options().schedule, step).
  void set_schedule_step(int64_t step);

  size_t size() const { return index_.size(); }
  bool contains(uint64_t id) const { return index_.find(id) != row_index::npos; }
  // Appends to `out` the ids of `ids` that hold no row in RAM (index lines prefetched ahead).
  void absent(std::span<const uint64_t> ids, std::vector<uint64_t>& out) const;
  // The weights of a row given as bytes (layout().stride, as snapshots and the tier hold it).
  void weights_of(const std::byte* row, float* out) const;
  // The cold tier (not owned; nullptr: none). Needs eviction clock; set before the first row.
  void set_tier(row_tier* tier);
  const embedding_options& options() const { return options_; }
  const row_layout& layout() const { return layout_; }
  embedding_counters counters() const;
  const char* kernels_name() const { return kernels_->name; }

  // ---- snapshots (embedding_snapshot.hpp) ----
  // f(id, row bytes) for every row, or only those changed since the last mark_snapshot. The row
  // bytes (layout().stride: weights, then optimizer state) are valid during the call only.
  template <class F>
  void for_each_row(bool changed_only, F&& f) const {
    std::vector<std::byte> row(layout_.stride);
    for (size_t s = 0; s < index_.slots(); ++s) {
      uint32_t r = index_.row_at(s);
      if (r == row_index::npos || (changed_only && !slabs_.changed(r)))
        continue;
      slabs_.copy_out(r, row.data());
      f(index_.id_at(s), static_cast<const std::byte*>(row.data()));
    }
  }
  size_t changed_rows() const;
  // Ids evicted since the last mark_snapshot (recorded only after a first snapshot).
  const std::vector<uint64_t>& evicted_since_snapshot() const { return evicted_log_; }
  // The state now is snapshot `sequence`: clears the changed marks and the eviction log.
  void mark_snapshot(uint64_t sequence);
  uint64_t snapshot_sequence() const { return snapshot_sequence_; }  // 0: none yet
  // Restore: sets id's row bytes (layout().stride of them); false when the table is full.
  bool restore_row(uint64_t id, const std::byte* row);
  void restore_erase(uint64_t id);
  void clear();  // no rows; counters other than rows and bytes are kept

 private:
  // create false: only a row the tier holds is brought back (an update without admission all).
  uint32_t admit(uint64_t id, uint64_t hash, bool sighting, std::span<const uint32_t> pinned,
                 bool create = true);
  bool admitted(uint64_t id, bool sighting);
  uint32_t allocate_row(std::span<const uint32_t> pinned);  // npos when full and not evicting
  uint32_t evict_one(std::span<const uint32_t> pinned);
  void init_row(uint64_t id, uint32_t r);
  template <int Dim>  // Dim > 0: an fp32 table of that dim (a constant-size copy); 0: any table
  void read_row(uint32_t r, float* out) const;
  template <int Dim>
  void lookup_as(std::span<const uint64_t> ids, float* out);
  template <int Dim>
  void peek_as(std::span<const uint64_t> ids, float* out) const;
  void step_row(uint32_t r, const float* grad);
  size_t pipeline_distance() const;

  embedding_options options_;
  row_layout layout_;
  step_params step_;
  const sparse_kernels* kernels_;
  row_index index_;
  row_slabs slabs_;
  uint32_t rows_made_ = 0;                 // rows ever handed out (fresh rows come from here)
  std::vector<uint32_t> free_rows_;        // rows freed by restore_erase
  size_t hand_ = 0;                        // CLOCK hand: the k-th slot of the scattered order
  size_t hand_step_ = 1, hand_slots_ = 0;  // the order: slot = k * hand_step_ mod hand_slots_
  std::vector<count_min_sketch> sketch_;   // one when admission is count_min
  uint64_t coin_ = 0;                      // admission=probability: splitmix64 state
  std::vector<uint64_t> evicted_log_;
  bool log_evictions_ = false;  // after the first snapshot
  uint64_t snapshot_sequence_ = 0;
  mutable embedding_counters counters_;
  mutable std::vector<float> scratch_;  // one fp32 row (fp16 tables)
  row_tier* tier_ = nullptr;
  std::vector<std::byte> tier_row_;   // an evicted row's bytes, to the tier
  std::vector<std::byte> tier_load_;  // a fetched row's bytes, from the tier
};

}  // namespace satrap
