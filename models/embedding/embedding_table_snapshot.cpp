// embedding_table's snapshot side: changed marks, the eviction log, raw row restore.
#include <cstring>
#include "models/assert.hpp"

#include "models/embedding/embedding_table.hpp"

namespace satrap {

size_t embedding_table::changed_rows() const {
  size_t n = 0;
  for (size_t s = 0; s < index_.slots(); ++s) {
    uint32_t r = index_.row_at(s);
    n += r != row_index::npos && slabs_.changed(r);
  }
  return n;
}

void embedding_table::mark_snapshot(uint64_t sequence) {
  slabs_.clear_changed();
  evicted_log_.clear();
  log_evictions_ = true;
  snapshot_sequence_ = sequence;
}

bool embedding_table::restore_row(uint64_t id, const std::byte* row) {
  uint64_t hash = row_index::hash_of(id);
  uint32_t r = index_.find_touch(id, hash);
  if (r == row_index::npos) {
    if (free_rows_.empty() && options_.capacity > 0 && rows_made_ >= options_.capacity)
      return false;
    r = allocate_row({});
    index_.insert(id, hash, r);
  }
  slabs_.copy_in(r, row);
  slabs_.set_changed(r, true);
  return true;
}

void embedding_table::restore_erase(uint64_t id) {
  uint32_t r = index_.find(id);
  if (r == row_index::npos)
    return;
  bool erased = index_.erase(id);
  SATRAP_ASSERT(erased);
  (void)erased;
  slabs_.set_changed(r, false);
  free_rows_.push_back(r);
}

void embedding_table::clear() {
  index_.clear();
  slabs_.release();
  free_rows_.clear();
  free_rows_.shrink_to_fit();
  evicted_log_.clear();
  rows_made_ = 0;
  hand_ = 0;
}

}  // namespace satrap
