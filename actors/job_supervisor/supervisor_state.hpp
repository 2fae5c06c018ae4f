// Internal to the job supervisor (not an interface): its state and the functions its three
// parts share. The parts, by concern:
//   job_supervisor.cpp         a generation: spawn and wire the actors, restore, train, results
//   supervisor_checkpoint.cpp  the checkpoint cut protocol (files: models/checkpoint/)
//   supervisor_recovery.cpp    failures, re-placement on the live nodes, restart intensity
//   supervisor_validation.cpp  validation at cuts, the best model, early stopping
// Threading: every function runs inside the supervisor actor.
#pragma once

#include "actors/job_supervisor/job_supervisor.hpp"
#include "models/checkpoint/job_checkpoint.hpp"
#include "runtime/restart_intensity.hpp"
#include "models/metrics.hpp"
#include "spec/job_data.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace satrap::supervisor {

using clock_type = std::chrono::steady_clock;  // time_points of the actor clock (self->clock())

struct supervisor_state {
  job_supervisor_config config;
  job_data data;         // the batch source and the plan's batch counts
  std::string job_yaml;  // the spec as the node agents receive it
  std::vector<embedding_shard_actor> shards;
  std::vector<gradient_aggregator_actor> aggregators;
  std::vector<data_loader_actor> loaders;
  std::vector<dense_trainer_actor> trainers;
  std::vector<trainer_report> reports;
  std::optional<caf::typed_response_promise<job_result>> done;
  clock_type::time_point started;
  int64_t steps = 0;     // per trainer
  // Progress, summed over trainers.
  std::vector<int64_t> trainer_steps;  // computed, as the progress reports say
  std::vector<int64_t> applied_steps;  // on the shards, step by step (what a rollback replays)
  uint64_t rolled_back_generation = 0;  // the generation the newest rollback ended
  std::vector<int64_t> rolled_back_to;  // its steps counted as replayed, per trainer
  std::vector<double> trainer_auc;
  job_progress progress;
  double loss_sum = 0.0;
  int64_t loss_samples = 0;
  // Supervision: the actors of the current generation, and on which node each runs.
  uint64_t generation = 0;
  std::map<caf::actor_addr, std::string> children;  // actor -> node name
  std::set<std::string> lost_nodes;                 // nodes whose actors became unreachable
  std::optional<restart_intensity> intensity;
  bool recovering = false;
  bool finishing = false;  // every trainer reported: failures no longer restart the job
  std::vector<std::string> failures;
  // Checkpoints.
  std::string ckpt_dir;                    // "" : none
  int64_t cut = -1;                        // the cut the trainers are heading for
  std::map<int32_t, cut_report> cut_reports;
  bool checkpointing = false;
  uint64_t sequence = 0;                   // of the newest checkpoint written
  int32_t since_full = 0;                  // checkpoints since the last full one (0: next is full)
  std::optional<checkpoint_meta> last;     // the newest complete checkpoint
  int64_t committed_samples = 0;           // up to the newest cut
  std::vector<double> committed_losses;    // per step up to the newest cut, summed over trainers
  std::vector<caf::typed_response_promise<int64_t>> on_demand;  // checkpoint() callers waiting
  bool want_checkpoint = false;            // the cut under way writes a checkpoint (on demand, timed)
  uint64_t snapshot_sequence = 0;          // newest embedding snapshot sequence (checkpoints and best)
  // Trained since the newest checkpoint, up to the newest cut (validation cuts write nothing).
  int64_t pending_samples = 0;
  std::vector<double> pending_losses;      // per step, summed over trainers
  // Validation (supervisor_validation.cpp).
  double loss_since_eval = 0.0;            // training loss sum since the previous validation
  int64_t samples_since_eval = 0;
  std::vector<std::string> history;        // validation points, JSON objects
  std::optional<eval_metrics> last_validation;
  int64_t last_validation_step = -1;
  int64_t best_step = -1;                  // step of the best validation so far
  eval_metrics best;                       // its metrics
  capnp_payload best_dense;                // its DenseState (in memory)
  std::string best_dir;                    // its embeddings: a full snapshot under this root
  uint64_t best_snapshot = 0;              // the snapshot's sequence (0: none)
  bool best_since_checkpoint = false;      // a best snapshot since the newest checkpoint (next is full)
  int32_t since_best = 0;                  // evaluations since the best
  double restored_validation_auc = std::nan("");  // the restored best model, measured again
  bool stopping = false;                   // training ends at this cut
  bool ending = false;                     // the trainers are told to end: no more cuts
  std::string stop_reason;                 // early_stopping, target_auc
  double target_seconds = -1.0;            // when validation AUC first reached training.target_auc
  int64_t target_samples = -1;
  static inline const char* name = "job_supervisor";
};

using self_ptr = job_supervisor_actor::stateful_pointer<supervisor_state>;

// ---- job_supervisor.cpp: a generation ------------------------------------------------------

// Spawns, wires and restores a new generation of every role, then trains it.
void launch(self_ptr self);
// Sends the progress to the observer, if any.
void notify(supervisor_state& st);

// ---- supervisor_results.cpp: the end of a job ---------------------------------------------

// Every trainer reported: reads the shards' statistics, delivers the result, stops the job.
void finish(self_ptr self);

// ---- supervisor_recovery.cpp: failures ----------------------------------------------------

// A trainer's step `step` of generation `gen` is applied on the shards (its gradients acked).
void on_applied(self_ptr self, uint64_t gen, int64_t step, int32_t rank);

// ---- supervisor_checkpoint.cpp: the cut protocol --------------------------------------------

// Checkpoint folder and resume point, before the first generation.
caf::error checkpoint_setup(self_ptr self);
// The next periodic cut after step `from`, or -1.
int64_t next_periodic_cut(const supervisor_state& st, int64_t from);
void on_cut(self_ptr self, cut_report& r);
caf::typed_response_promise<int64_t> on_checkpoint(self_ptr self);
void on_checkpoint_tick(self_ptr self, uint64_t gen);
// The next cut after step `from` (a periodic checkpoint or a validation), or -1.
int64_t next_cut(const supervisor_state& st, int64_t from);
// Writes a checkpoint at the cut, then runs `next`.
void write_checkpoint(self_ptr self, std::function<void()> next);
// Sends every trainer the next cut.
void release_trainers(self_ptr self, int64_t next);

// ---- supervisor_validation.cpp: validation, the best model, early stopping ------------------

// Whether step `c` is a validation point.
bool is_validation_cut(const supervisor_state& st, int64_t c);
// The next validation point after `from`, or -1.
int64_t next_validation_cut(const supervisor_state& st, int64_t from);
// At a validation cut: evaluate, record, keep the best, decide whether to stop; then `next`.
void validate_at_cut(self_ptr self, std::function<void()> next);
// After a cut: go on to the next one, or (stopping) restore the best model and end training.
void after_cut(self_ptr self);

// ---- supervisor_recovery.cpp: failure and recovery ------------------------------------------

// Stops every actor of the job (and the nodes it owns), then the supervisor itself.
void stop_job(self_ptr self, caf::exit_reason reason = caf::exit_reason::user_shutdown);
// Fails the whole job with `e` and stops every actor of it.
void fail_job(self_ptr self, const caf::error& e);
// A failure of generation `gen`: roll back to the newest checkpoint and launch the next one,
// unless the restart intensity is exceeded.
void on_failure(self_ptr self, uint64_t gen, const std::string& reason);
void on_exit(self_ptr self, caf::exit_msg& msg);
// Asks who is alive, re-plans the job on those nodes, then runs `next`.
void replan(self_ptr self, std::function<void()> next);

}  // namespace satrap::supervisor
