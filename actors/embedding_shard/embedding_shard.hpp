// embedding_shard: owns one shard of the embedding rows and applies the sparse optimizer.
//
// Protocol (all payloads are Cap'n Proto messages from schemas/step.capnp):
//   lookup(LookupRequest)      -> EmbeddingRows, rows in the order of the request's ids;
//                                 unseen ids get their deterministic initial row (and are
//                                 inserted, unless the request is read-only: evaluation).
//   update(EmbeddingGradients) -> number of rows updated; one optimizer step per id (a gradient
//                                 of an id without a row is counted, see shard_stats).
//   stats()                    -> shard_stats, with the store's counters.
//   snapshot(root, seq, full)  -> shard_snapshot_info: writes this shard's file of snapshot `seq`
//                                 under root (full, or incremental since its previous one); the
//                                 job supervisor writes the manifest once every shard has.
//   restore(root, seq)         -> rows restored: loads snapshot `seq` (and its parents) keeping
//                                 the ids this shard owns now (any shard count can restore any).
// Files (snapshots, the audit ledger) go through config.environment (models/env.hpp).
// With the SSD tier (config.tier) the rows live in models/tier/'s tiered_table, in
// tier.path/shard-<shard>, emptied when the shard starts (rows of an earlier run or generation
// are not this one's). A tier that cannot be opened fails the actor with the cause (a missing
// folder: invalid_config, so the job fails at once). A snapshot copies the tier consistently
// (tiered_table::checkpoint: RocksDB hard links) into <snapshot dir>/tier-<shard>, beside the
// shard's file, which then holds no rows (an empty marker table keeps the full / incremental
// chain); a restore replaces the live folder with that copy (restore_tier), so the rows are the
// checkpoint's, never later write-backs; the shard count must be the one that wrote it. A full or
// read-only disk under the tier (no_resource) stops the shard with the cause after answering.
// Always-on check: an update of step s' after a lookup of step m > s' + staleness breaks the
// staleness bound; it is logged (staleness_violated) and counted (stats).
// Threading: an actor; its store is touched only by its own behaviour.
#pragma once

#include "models/embedding/embedding_table.hpp"
#include "models/env.hpp"
#include "models/tier/tier_options.hpp"
#include "runtime/atoms.hpp"
#include "runtime/payload.hpp"

#include <caf/actor_system.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

namespace satrap {

struct shard_stats {
  int32_t shard = 0;
  int64_t rows = 0;                    // rows held
  int64_t lookups = 0;                 // ids looked up
  int64_t updates = 0;                 // rows updated
  int64_t bytes = 0;                   // bytes the store holds (rows, index, bitmaps, sketch)
  int64_t admissions = 0;              // rows created for unseen ids
  int64_t evictions = 0;               // rows evicted to make room (capacity bound)
  int64_t not_admitted_lookups = 0;    // lookups answered with an initial row, no row made
  int64_t not_admitted_gradients = 0;  // gradient rows dropped (no row for the id), counted here
  int64_t staleness_violations = 0;    // updates of a step more than `staleness` behind a lookup
  // The SSD tier (model.embedding.tier ssd; else 0): ids found in RAM and not, rows brought back
  // from disk, of those staged by a prefetch, bytes read and written, the RAM tier's bytes.
  int64_t tier_hits = 0;
  int64_t tier_misses = 0;
  int64_t tier_cold_hits = 0;
  int64_t tier_prefetch_hits = 0;
  int64_t tier_bytes_read = 0;
  int64_t tier_bytes_written = 0;
  int64_t tier_ram_bytes = 0;
  // Audit ledger (config.audit only, else empty): pairs (batch, times its gradient was applied to
  // this shard's rows), including the batches the restored checkpoint carries.
  std::vector<int64_t> applied;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_stats& x) {
  return f(caf::meta::type_name("shard_stats"), x.shard, x.rows, x.lookups, x.updates, x.bytes,
           x.admissions, x.evictions, x.not_admitted_lookups, x.not_admitted_gradients,
           x.staleness_violations, x.tier_hits, x.tier_misses, x.tier_cold_hits,
           x.tier_prefetch_hits, x.tier_bytes_read, x.tier_bytes_written, x.tier_ram_bytes,
           x.applied);
}

// One shard's file of a snapshot (models/embedding/embedding_snapshot.hpp, snapshot_file_info).
struct shard_snapshot_info {
  int32_t shard = 0;
  std::string file;  // name inside the snapshot directory
  int64_t rows = 0;
  int64_t bytes = 0;
  uint64_t checksum = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_snapshot_info& x) {
  return f(caf::meta::type_name("shard_snapshot_info"), x.shard, x.file, x.rows, x.bytes,
           x.checksum);
}

using embedding_shard_actor = caf::typed_actor<
  caf::replies_to<lookup_atom, capnp_payload>::with<capnp_payload>,
  caf::replies_to<update_atom, capnp_payload>::with<int64_t>,
  caf::replies_to<stats_atom>::with<shard_stats>,
  caf::replies_to<snapshot_atom, std::string, uint64_t, bool>::with<shard_snapshot_info>,
  caf::replies_to<restore_atom, std::string, uint64_t>::with<int64_t>>;

struct embedding_shard_config {
  int32_t shard = 0;            // index of this shard in the job
  embedding_options embedding;  // rows, initialiser and sparse optimizer
  // kind ssd: hot rows in RAM within tier.ram_budget, the rest in tier.path/shard-<shard>
  // (models/tier/tiered_table.hpp); lookups of batch b prefetch the cold rows of batch b + 1's
  // ids when the request carries them (not yet: each lookup's misses are read in one batch).
  tier_options tier;
  int32_t shards = 1;         // shards in the job, and
  int32_t partitions = 4096;  // virtual partitions: which ids this shard owns (restore)
  std::string job;            // the job's name (status endpoint)
  int32_t trainers = 1;       // batch b belongs to step b / trainers (LR schedule), and
  int32_t staleness = 0;      // a lookup may run this many steps ahead of an update
  // Keep a ledger of applied batches (stats().applied), written beside each snapshot file and
  // read back on restore: the simulator (tests/sim/) checks exactly-once application with it.
  bool audit = false;
  env* environment = &default_env();  // the snapshot files' and the ledger's (models/env.hpp)
};

embedding_shard_actor spawn_embedding_shard(caf::actor_system& sys,
                                            const embedding_shard_config& config);

}  // namespace satrap
