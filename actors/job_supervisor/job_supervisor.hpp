// job_supervisor: spawns and wires one job's actors, runs it, checkpoints it, restarts it after a
// failure, and reports the result.
//
// Protocol:
//   run()                      -> job_result, once every trainer has trained and evaluated.
//   progress(progress_report)  from the trainers; summed into job_progress for the observer.
//   cut(cut_report)            from the trainers at a checkpoint cut (see dense_trainer.hpp).
//   checkpoint()               -> the step of a checkpoint taken now (on demand).
// Through the node agents of the placement it spawns shards, then aggregators (given every
// shard), then loaders (given every aggregator), then trainers (given loaders, aggregators, and
// each other as peers). Its children are linked to it: when it ends, they end.
//
// Checkpoints (checkpoint.every_steps or every_seconds, or on demand) are consistent cuts: the trainers stop
// looking up at the cut step and drain; then every shard writes its snapshot file, the
// supervisor writes the dense state and the checkpoint manifest last
// (models/checkpoint/job_checkpoint.hpp), and the trainers go on.
// Recovery: it traps its children's exits. When any child fails (a crash, or its node lost: the
// connection dropped or its heartbeats stopped) or a trainer reports an error, the whole
// generation of actors is stopped and re-placed on the nodes alive now (the node directory
// says which), restored from the newest checkpoint (or started over when there is none), and
// training resumes at the checkpoint's step. Gradients applied after that checkpoint are rolled
// back with the shards and their batches trained again: they are counted (batches_replayed), so
// in the final model every batch's gradient is applied exactly once. Restarts are bounded by
// supervision.max_restarts within supervision.window_s; past that the job fails with the reason.
// Threading: an actor. The observer callback runs inside it, one call at a time.
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "actors/spawn_protocol.hpp"
#include "models/env.hpp"
#include "runtime/atoms.hpp"
#include "spec/job_spec.hpp"
#include "runtime/payload.hpp"
#include "spec/placement.hpp"

#include <caf/actor_system.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace satrap {

// Progress of a running job, for a terminal or a status endpoint.
struct job_progress {
  int64_t steps = 0;  // steps done (the slowest trainer)
  int64_t steps_total = 0;
  int64_t samples = 0;  // training samples so far, all trainers
  double samples_per_sec = 0.0;
  double loss = 0.0;             // mean loss since the previous progress
  double running_auc = 0.5;      // mean over trainers of their recent-prediction AUC
  int64_t restarts = 0;          // recoveries so far
  int64_t batches_replayed = 0;  // batches whose applied gradients were rolled back and retrained
  int64_t checkpoints = 0;       // checkpoints written
  int64_t checkpoint_step = -1;  // step of the newest one
  std::string last_failure;      // why the newest restart happened
  // Validation (NaN / -1 before the first one).
  int64_t validation_step = -1;          // step of the latest validation
  double validation_auc = std::nan("");  // its AUC
  double validation_logloss = std::nan("");
  int64_t best_step = -1;  // step of the best one
  double best_validation_auc = std::nan("");
  // A stream (data.source kafka): messages not yet trained, behind the partitions' ends (-1: not
  // a stream, or not known yet). Its consumption rate is samples_per_sec.
  int64_t stream_lag = -1;
  // The SSD tier (model.embedding.tier ssd), summed over the shards' latest stats (asked at each
  // progress report, so one report behind): ids found in RAM and not, rows a prefetch had staged,
  // bytes read from and written to the cold stores, the RAM tiers' bytes (-1: no tier).
  int64_t tier_hits = 0;
  int64_t tier_misses = 0;
  int64_t tier_prefetch_hits = 0;
  int64_t tier_bytes_read = 0;
  int64_t tier_bytes_written = 0;
  int64_t tier_ram_bytes = -1;
};

struct job_result {
  double test_auc = 0.0;
  double oracle_auc = 0.0;  // AUC of the teacher's probabilities on the same test set
  double test_logloss = 0.0;
  int64_t samples = 0;  // training samples
  int64_t test_samples = 0;
  double train_seconds = 0.0;         // from start to the last trainer's report (evaluation incl.)
  double samples_per_sec = 0.0;       // training samples / train_seconds
  std::vector<double> step_losses;    // mean training loss per step (all trainers)
  std::vector<capnp_payload> params;  // DenseParams of each trainer, by rank
  int64_t embedding_rows = 0;         // rows held by the shards at the end
  std::map<std::string, int64_t>
    data_skipped;                     // input lines skipped (data.on_error skip), by reason
  int64_t restarts = 0;               // recoveries
  int64_t batches_replayed = 0;       // batches trained again after a rollback to a checkpoint
  int64_t checkpoints = 0;            // checkpoints written
  int64_t gradients_lost = 0;         // gradient rows the stores dropped (ids not admitted)
  std::vector<std::string> failures;  // the reason of each restart
  // Test metrics beyond AUC and log loss (NaN when undefined: one class, or no metrics.group_by).
  double test_ne = 0.0;           // log loss over the entropy of the test click rate
  double test_calibration = 0.0;  // mean prediction over mean label
  double test_gauc = 0.0;         // grouped AUC by metrics.group_by
  // Validation while training (best_step -1: none).
  int64_t steps = 0;            // steps trained (per trainer; fewer than planned when stopped)
  int64_t steps_total = 0;      // steps planned
  int64_t best_step = -1;       // the step of the model tested (the best validation)
  double validation_auc = 0.0;  // its validation AUC
  double validation_logloss = 0.0;
  double validation_gauc = 0.0;
  double restored_validation_auc = std::nan("");  // the best model measured again once restored
                                                  // (NaN: the last model was the best)
  std::vector<std::string> validation_history;    // one JSON object per validation
  std::string stop_reason;                        // "": ran every step; early_stopping; target_auc
  double target_seconds = -1.0;  // training.target_auc: time and samples to reach it (-1: not)
  int64_t target_samples = -1;
  // Each shard's statistics at the end, by index (with its audit ledger when the nodes run
  // audited, node_agent_config::audit); `shard` is -1 where a shard did not answer (lost after
  // training ended: the result stands, its statistics are missing).
  std::vector<shard_stats> shards;
  std::vector<float> test_logits;  // the final evaluation's logits, in test-split order
                                   // (samples x tasks, sample-major)
  // Several tasks (data.labels): each task's test figures, in data.labels' order; the figures
  // above (test_auc, oracle_auc, test_logloss, ...) are then their means by
  // training.task_weights. Empty with one task.
  std::vector<std::string> task_names;
  std::vector<double> task_test_auc, task_oracle_auc, task_test_logloss;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_result& x) {
  return f(caf::meta::type_name("job_result"), x.test_auc, x.oracle_auc, x.test_logloss, x.samples,
           x.test_samples, x.train_seconds, x.samples_per_sec, x.step_losses, x.params,
           x.embedding_rows, x.data_skipped, x.restarts, x.batches_replayed, x.checkpoints,
           x.gradients_lost, x.failures, x.test_ne, x.test_calibration, x.test_gauc, x.steps,
           x.steps_total, x.best_step, x.validation_auc, x.validation_logloss, x.validation_gauc,
           x.restored_validation_auc, x.validation_history, x.stop_reason, x.target_seconds,
           x.target_samples, x.shards, x.test_logits, x.task_names, x.task_test_auc,
           x.task_oracle_auc, x.task_test_logloss);
}

using job_supervisor_actor = caf::typed_actor<
  caf::replies_to<run_atom>::with<job_result>, caf::reacts_to<progress_atom, progress_report>,
  caf::reacts_to<applied_atom, uint64_t, int64_t, int32_t>, caf::reacts_to<cut_atom, cut_report>,
  caf::replies_to<checkpoint_atom>::with<int64_t>>;
// (Its own timer messages are on a private extension: supervisor_state.hpp.)

// Who is alive now (the admin on a cluster): names and agents of the live nodes.
using node_directory_actor = caf::typed_actor<
  caf::replies_to<nodes_atom>::with<std::vector<std::string>, std::vector<node_agent_actor>>>;

// Where each actor runs: for each role, the index into `nodes` of each of its actors.
struct job_placement {
  std::vector<uint32_t> shards, aggregators, loaders, trainers;
};

// The placement of a plan, as the supervisor needs it.
job_placement job_placement_of(const placement_plan& plan);

struct job_supervisor_config {
  job_spec spec;                                      // finalised (job_spec_finalize)
  std::function<void(const job_progress&)> observer;  // may be empty
  std::vector<node_agent_actor> nodes;                // at least one (embedded_job.hpp: one local)
  bool own_nodes = false;                             // link to `nodes`: they end with the job
  std::vector<std::string> node_names;                // name of each of `nodes` (cluster)
  job_placement placement;                            // empty lists: everything on nodes[0]
  manifest cluster;                                   // for re-placing after a node loss
  node_directory_actor directory;                     // null: embedded (no re-placement)
  std::string final_snapshot_dir;     // "": none; else every shard writes the final model's rows
                                      // there after the evaluation (a full embedding snapshot)
  env* environment = &default_env();  // the checkpoints', best model's and history's files
};

job_supervisor_actor spawn_job_supervisor(caf::actor_system& sys,
                                          const job_supervisor_config& config);

}  // namespace satrap
