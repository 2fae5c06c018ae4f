// The SSD tier of one shard's store (issue 48): an embedding_table bounded by a RAM budget holds
// the hot rows (weights and optimizer state); rows CLOCK evicts go to a cold store on local disk
// (cold_store.hpp) with their optimizer state, and an id absent from RAM comes back from it, so
// the same updates give the same rows, bit for bit, as a table with every row in RAM.
//
// Flow of a call (lookup, update, peek): the ids absent from RAM are found first
// (embedding_table::absent); those whose row is neither waiting to be written (evicted rows not yet
// on disk), nor staged by a prefetch, are read in one batch; then the table runs its pipeline and
// asks the tier (row_tier::fetch) for each absent id as it admits it. Evicted rows collect in a
// pending batch, handed to the worker thread as one write after the call.
// `prefetch(ids)` (the next batches' ids, known before their lookups) queues a read of their cold
// rows on the worker, which runs while the owner serves the current batch.
// Consistency: the worker runs reads and writes in order, so a read sees every write queued
// before it; a row waiting to be written is newer than the disk and is served from memory; a
// staged (prefetched) row is dropped the moment its id is admitted, so a stale one is never used.
// A failed write (a full disk) keeps its rows in memory and is reported by the next call; retried
// after that. A failed read is reported and changes nothing.
// Threading: one owner thread calls everything; the worker thread touches only the cold store and
// the jobs handed to it.
#pragma once

#include "models/embedding/embedding_table.hpp"
#include "models/result.hpp"
#include "models/tier/cold_store.hpp"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace satrap {

struct tier_counters {
  uint64_t hits = 0;           // ids of lookups and updates found in RAM
  uint64_t misses = 0;         // ids absent from RAM
  uint64_t cold_hits = 0;      // rows brought back from the tier (disk, staged or pending)
  uint64_t prefetch_hits = 0;  // of those, rows a prefetch had staged before the call
  uint64_t read_waits = 0;     // calls that waited on a read (a miss not prefetched in time)
  uint64_t bytes_read = 0;     // row bytes read from the cold store
  uint64_t bytes_written = 0;  // row bytes written to the cold store
  uint64_t rows_written = 0;   // rows written (write-backs and flushes)
  uint64_t ram_bytes = 0;      // the RAM tier: table + staged + pending rows + cold store's RAM
  uint64_t ram_rows = 0;       // the table's capacity in rows, from the budget
};

class tiered_table final : private row_tier {
 public:
  // options.capacity is set from tier.ram_budget (ram_rows); options.eviction must be clock.
  static result<std::unique_ptr<tiered_table>> open(embedding_options options,
                                                    const tier_options& tier);
  ~tiered_table() override;
  tiered_table(const tiered_table&) = delete;
  tiered_table& operator=(const tiered_table&) = delete;

  // Rows that fit in `ram_budget` bytes (at least 64): the table's bytes per row and a reserve
  // of 15% for staged and pending rows and the cold store's own RAM.
  static uint64_t ram_rows(const embedding_options& options, uint64_t ram_budget);

  // Queues a read of the cold rows of `ids` (ids absent from RAM, not already staged or pending).
  void prefetch(std::span<const uint64_t> ids);
  result<ok_t> lookup(std::span<const uint64_t> ids, float* out);
  result<ok_t> update(std::span<const uint64_t> ids, const float* grads);  // ids unique
  result<ok_t> peek(std::span<const uint64_t> ids, float* out);  // reads only: nothing admitted
  void set_schedule_step(int64_t step) { table_.set_schedule_step(step); }

  // Writes every row (RAM and pending) to the cold store and waits for it: the disk holds all.
  result<ok_t> flush();
  // flush, then a consistent copy of the cold store in the new folder `dir` (RocksDB: hard
  // links). A tier opened on a copy (restore_tier) holds every row as it was.
  result<ok_t> checkpoint(const std::string& dir);

  size_t size() const { return table_.size(); }  // rows in RAM
  const embedding_table& ram() const { return table_; }
  tier_counters counters() const;

 private:
  struct job;
  tiered_table(const embedding_options& options, const tier_options& tier,
               std::unique_ptr<cold_store> cold);
  bool fetch(uint64_t id, std::byte* row) override;
  void evicted(uint64_t id, const std::byte* row) override;
  result<ok_t> prepare(std::span<const uint64_t> ids, bool count);
  result<ok_t> after_call();
  uint64_t submit(std::shared_ptr<job> j);
  void wait_for(uint64_t seq);
  void drop_staged(uint64_t id);
  void drop_job_entries(const std::shared_ptr<job>& j);
  bool copy_pending(uint64_t id, std::byte* row) const;
  void worker_loop();

  embedding_table table_;
  tier_options tier_;
  std::unique_ptr<cold_store> cold_;
  size_t stride_;

  // Rows evicted and not yet handed to the worker (newest copy of each id).
  std::vector<uint64_t> pending_ids_;
  std::vector<std::byte> pending_rows_;
  std::unordered_map<uint64_t, uint32_t> pending_at_;
  std::shared_ptr<job> writing_;  // the write in flight (its rows served until it is done)
  std::unordered_map<uint64_t, uint32_t> writing_at_;

  struct staged_entry {
    uint64_t seq;  // the read job holding the row
    uint32_t pos;  // the id's place in it
  };
  std::unordered_map<uint64_t, staged_entry> staged_;
  std::unordered_map<uint64_t, std::shared_ptr<job>> reads_;  // read jobs with staged entries
  std::deque<uint64_t> prefetches_;                           // prefetch jobs, oldest first
  std::vector<uint64_t> missing_, to_read_;
  std::vector<float> weights_;
  std::string failed_;  // a failed write, reported by the next call
  tier_counters counters_;

  // The worker: jobs in order; done_ is the sequence number of the last one finished.
  mutable std::mutex mu_;
  cold_store_counters cold_seen_;  // the cold store's counters after the last job (under mu_)
  uint64_t cold_ram_ = 0;          // its ram_bytes() then (under mu_)
  std::condition_variable cv_;
  std::deque<std::shared_ptr<job>> queue_;
  uint64_t next_seq_ = 0;
  uint64_t done_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

// Makes `path` a copy of the checkpoint folder `checkpoint` (any previous content is removed):
// immutable RocksDB table files are hard-linked, every other file copied.
result<ok_t> restore_tier(const std::string& checkpoint, const std::string& path);

}  // namespace satrap
