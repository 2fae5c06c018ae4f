// Every timeout and interval of satrap, by name, with its default, unit and why; no handler
// holds a literal duration. Two groups, by who would want to change them:
//   cluster_timing - the manifest's `timing:` section (heartbeats: how fast a node loss shows);
//   job_timing     - the job file's `timing:` section (request timeouts, the pause before
//                    re-placing a failed job), also what satrap_sim shortens or stretches.
// All values are whole milliseconds (keys end in _ms); `ms()` gives a std::chrono duration, which
// converts to caf::duration and caf::timespan.
// Actors measure time only through their actor clock (`self->clock().now()`), so under CAF's test
// coordinator (tests/sim/) these knobs run on simulated time.
// Threading: plain values.
#pragma once

#include <chrono>
#include <cstdint>

namespace satrap {

inline std::chrono::milliseconds ms(int64_t x) { return std::chrono::milliseconds(x); }

struct cluster_timing {
  // A node sends a heartbeat (with its actors' counters) this often. Shorter: a lost node shows
  // sooner in /status, at one small message per interval per node.
  int64_t heartbeat_interval_ms = 1000;
  // A node whose heartbeats stopped this long is dead: it leaves the list of live nodes that a
  // job is re-placed on. Several intervals, so one late heartbeat (a GC pause, a busy core) is
  // not a loss.
  int64_t heartbeat_timeout_ms = 5000;
  // How often the admin checks heartbeat ages and whether a waiting job can start. Half a
  // second: a loss shows within heartbeat_timeout_ms + this.
  int64_t admin_tick_ms = 500;
  // A node keeps trying to reach (and re-register with) the head this long before it gives up
  // on one attempt; a refusal by the head ends it at once.
  int64_t register_timeout_ms = 10000;
};

struct job_timing {
  // A node agent answers a spawn request within this (opening file data for a loader may take
  // a while on the first spawn of a job on that node).
  int64_t spawn_timeout_ms = 120000;
  // A trainer's request to a loader or an aggregator (a batch's halves, its gradient push).
  // Long: a batch may wait behind a checkpoint cut or a slow shard.
  int64_t trainer_request_timeout_ms = 120000;
  // An aggregator's request to a shard (lookup, update).
  int64_t shard_request_timeout_ms = 60000;
  // A shard restoring its rows from a checkpoint (reads and checks every file of the chain).
  int64_t restore_timeout_ms = 600000;
  // A trainer restoring its dense state from a checkpoint.
  int64_t dense_restore_timeout_ms = 60000;
  // A shard writing its snapshot file for a checkpoint (a full one writes every row).
  int64_t snapshot_timeout_ms = 600000;
  // A trainer answering a hold (freeze fetching) before a timed or on-demand checkpoint.
  int64_t hold_timeout_ms = 30000;
  // A trainer evaluating its share of the validation split at a cut (training.eval_every): every
  // batch read and looked up read-only, the dense model run forward. Long: the split may be large.
  int64_t validation_timeout_ms = 1800000;
  // A shard answering a statistics request at the end of the job.
  int64_t stats_timeout_ms = 30000;
  // The node directory (the admin) answering which nodes are alive, before re-placing.
  int64_t directory_timeout_ms = 30000;
  // After a failure, the supervisor waits this long before asking which nodes are alive: the
  // cluster needs a moment to notice a lost node, or the job would be placed on it again.
  int64_t replan_delay_ms = 1000;
  // A Kafka broker's answer (metadata, offsets when a stream opens; a message a finite stream
  // must have): past it an unreachable broker is an error naming data.kafka.brokers. An
  // unbounded stream waits for new messages as long as it takes (logging kafka_waiting).
  int64_t kafka_timeout_ms = 10000;
  // A Kafka stream's partition ends are asked this often, for its lag (messages not yet trained)
  // in progress, /status and /metrics. 0: never (no lag shown).
  int64_t kafka_lag_interval_ms = 1000;
};

}  // namespace satrap
