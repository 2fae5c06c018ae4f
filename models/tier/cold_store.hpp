// The cold store of the SSD tier (tiered_table.hpp): rows of fixed size (weights and optimizer
// state, layout().stride bytes) by 64-bit id, on local disk. Two kinds, compared in
// tests/bench/cold_store_bench.cpp (figures in tests/bench/README.md):
// - `rocksdb`: RocksDB from Debian (what FBGEMM's SSD embedding kernel uses): an LSM tree, keys
//   the id's 8 big-endian bytes, no WAL (a checkpoint flushes first), no compression, bloom
//   filters, a small block cache; checkpoints are hard links of its immutable files. Compiled in
//   when CMake finds librocksdb-dev (SATRAP_HAVE_ROCKSDB); else `cold_store_available` says no.
// - `slot_file`: one file of fixed-size records [id][row], each id's record rewritten in place
//   (pread / pwrite), found through an in-memory id -> record map (about 24 bytes of RAM per
//   cold row, which the RAM budget pays); rebuilt by a scan when an existing file is opened.
// Errors (a full disk, a missing folder) are results naming the file and the cause; a failed
// put leaves the store as it was for the rows not written, and the caller keeps its rows.
// Threading: one thread at a time (the tier's worker); no internal locking.
#pragma once

#include "models/result.hpp"
#include "models/tier/tier_options.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace satrap {

struct cold_store_counters {
  uint64_t asked = 0;          // ids asked for by get
  uint64_t found = 0;          // of those, rows the store held
  uint64_t bytes_read = 0;     // row bytes read
  uint64_t rows_written = 0;   // rows put
  uint64_t bytes_written = 0;  // row bytes put
};

class cold_store {
 public:
  virtual ~cold_store() = default;
  // For each id: found[i] = 1 and rows[i * stride ..] filled when the store holds it, else 0.
  virtual result<ok_t> get(std::span<const uint64_t> ids, std::byte* rows, uint8_t* found) = 0;
  // Writes rows (ids.size() x stride bytes); a later put of an id replaces its row.
  virtual result<ok_t> put(std::span<const uint64_t> ids, const std::byte* rows) = 0;
  // A consistent copy of the store in the new folder `dir`, openable with open_cold_store
  // (rocksdb: hard links of its files after a flush; slot_file: a copy of the file).
  virtual result<ok_t> checkpoint(const std::string& dir) = 0;
  virtual uint64_t ram_bytes() const = 0;  // RAM the store holds (index, caches, memtables)
  const cold_store_counters& counters() const { return counters_; }
  size_t stride() const { return stride_; }

 protected:
  explicit cold_store(size_t stride) : stride_(stride) {}
  cold_store_counters counters_;
  size_t stride_;
};

const char* cold_store_kind_name(cold_store_kind kind);
bool cold_store_available(cold_store_kind kind);  // rocksdb: compiled in
// Opens (or creates) the store in folder `dir` (created when missing, its parent must exist).
// `ram_budget` (bytes, 0: the largest) sizes RocksDB's memtables (two of budget / 32) and block
// cache (budget / 64), at most 16 and 8 MiB: about 8% of the budget, within the tier's reserve.
result<std::unique_ptr<cold_store>> open_cold_store(cold_store_kind kind, const std::string& dir,
                                                    size_t stride, uint64_t ram_budget = 0);

}  // namespace satrap
