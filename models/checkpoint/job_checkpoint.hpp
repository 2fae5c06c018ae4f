// A job's consistent checkpoints on disk, as the job supervisor writes and reads them.
//
// Layout of checkpoint.dir:
//   embeddings/snap-<seq>/...        every shard's file of embedding snapshot <seq>, MANIFEST last
//                                    (models/embedding/embedding_snapshot.hpp)
//   dense-<seq>.bin                  the DenseState of trainer 0 (replicas are identical), framed
//                                    as a snapshot file (models/embedding/snapshot_file.hpp)
//   checkpoint-<seq>.json            this file last: the checkpoint is complete once it exists
// A checkpoint at step c holds every step < c applied and nothing of a later one (the trainers'
// cut). Loaders need no state of their own: batch numbers are read positions, so step c is where
// they resume. A stream (Kafka) also records its per-partition next offsets at the cut
// (stream_positions: for lag monitoring and the consumer group; its batch numbers map to offsets
// by the layout kept in checkpoint.dir/kafka-positions.json, models/data/kafka_source.hpp).
// Errors are models' results: an I/O failure's message carries strerror's text (callers above
// models/ turn it into a caf::error with runtime/error.hpp's make_error(model_error): disk full or
// a read-only folder -> no_resource, else io_failure); a malformed manifest is bad_input
// (-> invalid_config). Every file operation goes through the env given (models/env.hpp).
// Threading: plain functions; the job supervisor calls them from its actor.
#pragma once

#include "models/env.hpp"
#include "models/result.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace satrap {

struct checkpoint_meta {
  uint64_t sequence = 0;            // 1, 2, ... within the directory
  int64_t step = 0;                 // steps per trainer applied (where training resumes)
  uint64_t embedding_sequence = 0;  // the embedding snapshot (== sequence)
  bool full = true;                 // a full embedding snapshot, or incremental on the previous
  std::string dense_file;           // name inside the directory
  uint64_t dense_bytes = 0;
  uint64_t dense_checksum = 0;
  int32_t trainers = 0;
  int32_t shards = 0;
  std::string job;                  // the job's name
  int64_t samples = 0;              // training samples up to `step`, all trainers
  std::vector<double> step_losses;  // per step up to `step`: summed per-sample losses, all trainers
  int64_t embedding_rows = 0;       // rows in the snapshot's shard files
  std::string stream_positions;     // JSON: a stream's next offsets at the cut; "": none
};

std::string checkpoint_embedding_root(const std::string& dir);

// The newest complete checkpoint of `dir` (none: nullopt); an error when the newest manifest
// is unreadable or its dense file does not match it.
result<std::optional<checkpoint_meta>> checkpoint_latest(const std::string& dir,
                                                         env& e = default_env());

// Writes dense-<seq>.bin (state: a flat Cap'n Proto message, a whole number of 8-byte words) and
// fills meta's dense_file, dense_bytes and dense_checksum.
result<ok_t> checkpoint_write_dense(const std::string& dir, checkpoint_meta& meta,
                                    std::span<const char> state, env& e = default_env());
// Writes checkpoint-<seq>.json atomically (a temporary file renamed): the commit point.
result<ok_t> checkpoint_write_meta(const std::string& dir, const checkpoint_meta& meta,
                                   env& e = default_env());
// Retention (checkpoint.keep): deletes what the newest `keep` complete checkpoints do not need.
// Kept: every file of a checkpoint at or after the newest complete one (a later one may be being
// written), the newest `keep` complete checkpoints, and every embedding snapshot an incremental
// chain of theirs reaches back to (their parents, to the full one). Deleted, in this order so a
// crash midway leaves no complete checkpoint with missing parts: the manifests
// (checkpoint-<seq>.json, and leftover .tmp), the dense files, then the snapshots. keep == 0
// keeps everything. When a kept chain cannot be read back, nothing is deleted (the error says why).
struct checkpoint_prune_stats {
  int64_t checkpoints_removed = 0;  // checkpoint manifests deleted
  int64_t snapshots_removed = 0;    // embedding snapshot folders deleted
  uint64_t bytes_freed = 0;
};
result<checkpoint_prune_stats> checkpoint_prune(const std::string& dir, int32_t keep,
                                                env& e = default_env());

// The dense state of `meta`, checked against its size and checksum.
result<std::vector<char>> checkpoint_read_dense(const std::string& dir, const checkpoint_meta& meta,
                                                env& e = default_env());

}  // namespace satrap
