// Snapshots of embedding tables: full, or incremental (the rows changed and the ids evicted since
// the table's previous snapshot), as Cap'n Proto files per shard with a manifest written last
// (layout and framing: schemas/snapshot.capnp). An id's weights and optimizer state are one row
// of bytes, so they are always saved together, at the same moment.
//
// A restore loads a complete snapshot (one with a manifest) and its chain of parents back to a
// full one, from every shard file of each, keeping the ids a predicate accepts: so any number of
// shards can restore what any number wrote (resharding 4 -> 3 passes each new shard
// `partition_map::shard_of(id) == k`). Every file's size and checksum are checked against its
// trailer and the manifest before it is parsed; any error names the file and what was wrong, and
// leaves the table empty. Files go through the env given (models/env.hpp), default_env() unless.
// Threading: these functions use the table they are given from the calling thread only (the
// table's owner); distinct tables may be written from distinct threads, then the manifest once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/embedding/embedding_table.hpp"
#include "models/env.hpp"
#include "models/result.hpp"

namespace satrap {

enum class snapshot_kind { full, incremental };

// One shard's file, as the manifest records it.
struct snapshot_file_info {
  std::string name;       // file name inside the snapshot directory
  uint32_t shard = 0;     // the shard that wrote it
  uint64_t rows = 0;      // rows in it
  uint64_t bytes = 0;     // file size
  uint64_t checksum = 0;  // checksum in its trailer
};

struct snapshot_restore_stats {
  uint64_t snapshots = 0;  // snapshots applied (the chain's length)
  uint64_t files = 0;      // shard files read
  uint64_t rows_read = 0;  // rows in those files
  uint64_t rows_kept = 0;  // rows the predicate accepted (later versions overwrite earlier ones)
};

// `root`/snap-<sequence, 8 digits>
std::string snapshot_dir(const std::string& root, uint64_t sequence);

// Writes shard `shard`'s file of snapshot `sequence` (> the table's last). Incremental needs a
// previous snapshot of this table (its parent). On success the table is marked at `sequence`.
result<snapshot_file_info> snapshot_write_shard(embedding_table& table, const std::string& root,
                                                uint64_t sequence, uint32_t shard,
                                                snapshot_kind kind, env& e = default_env());
// Writes the manifest: from here on snapshot `sequence` is complete. parent: 0 for a full one.
result<ok_t> snapshot_write_manifest(const std::string& root, uint64_t sequence, uint64_t parent,
                                     const embedding_options& options,
                                     std::span<const snapshot_file_info> files,
                                     env& e = default_env());
// Every shard's file (shard k = tables[k]), then the manifest.
result<ok_t> snapshot_write(std::span<embedding_table* const> tables, const std::string& root,
                            uint64_t sequence, snapshot_kind kind, env& e = default_env());

// Sequences of the complete snapshots under root (with a manifest), ascending.
std::vector<uint64_t> snapshot_list(const std::string& root, env& e = default_env());

// The parent of complete snapshot `sequence` (0: it is full), from its checked MANIFEST.
result<uint64_t> snapshot_parent(const std::string& root, uint64_t sequence,
                                 env& e = default_env());

using snapshot_keep = std::function<bool(uint64_t id)>;
// Loads snapshot `sequence` and its parents into `table` (which must be empty), keeping the ids
// keep(id) accepts (all when keep is empty). The table is then marked at `sequence`.
result<snapshot_restore_stats> snapshot_restore(embedding_table& table, const std::string& root,
                                                uint64_t sequence, const snapshot_keep& keep = {},
                                                env& e = default_env());

}  // namespace satrap
