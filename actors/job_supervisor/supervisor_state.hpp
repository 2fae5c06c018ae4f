// Internal to the job supervisor (not an interface): what its parts share, and the functions
// they call of each other. The state of the checkpoint cut, of recovery and of the best model is
// in plain state machines (no actor inside, each with its own tests); the parts feed them
// messages and carry out what they decide. The parts, by concern:
//   job_supervisor.cpp         a generation: spawn and wire the actors, restore, train, progress
//   supervisor_checkpoint.cpp  the cut protocol (checkpoint_cut.hpp) and the checkpoint files
//                              (models/checkpoint/job_checkpoint.hpp, through config.environment);
//                              snapshot_shards, the shards' snapshot fan-out
//   supervisor_recovery.cpp    failures, re-placement on the live nodes (recovery.hpp)
//   supervisor_validation.cpp  validation at cuts, the best model, early stopping (best_model.hpp)
//   supervisor_results.cpp     the end of a job: the result, the final snapshot
// Threading: every function runs inside the supervisor actor.
#pragma once

#include "actors/job_supervisor/best_model.hpp"
#include "actors/job_supervisor/checkpoint_cut.hpp"
#include "actors/job_supervisor/job_supervisor.hpp"
#include "actors/job_supervisor/recovery.hpp"
#include "models/checkpoint/job_checkpoint.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "spec/job_data.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace satrap::supervisor {

using clock_type = std::chrono::steady_clock;  // time_points of the actor clock (self->clock())

// The supervisor's own messages, which no other actor sends: a timed checkpoint
// (checkpoint.every_seconds) and, after a failure, the next generation's launch; each carries the
// generation it is for. Not on the public handle (job_supervisor.hpp).
using job_supervisor_impl = job_supervisor_actor::extend<
  caf::reacts_to<restore_atom, uint64_t>,      // after a failure: re-place, restore, go on
  caf::reacts_to<checkpoint_atom, uint64_t>>;  // checkpoint.every_seconds

struct supervisor_state {
  job_supervisor_config config;
  job_data data;         // the batch source and the plan's batch counts
  std::string job_yaml;  // the spec as the node agents receive it
  int64_t steps = 0;     // per trainer
  // The actors of the current generation, and on which node each runs.
  uint64_t generation = 0;
  std::vector<embedding_shard_actor> shards;
  std::vector<gradient_aggregator_actor> aggregators;
  std::vector<data_loader_actor> loaders;
  std::vector<dense_trainer_actor> trainers;
  std::map<caf::actor_addr, std::string> children;  // actor -> node name
  // Who waits: the run() caller, and checkpoint() callers.
  std::optional<caf::typed_response_promise<job_result>> done;
  std::vector<caf::typed_response_promise<int64_t>> on_demand;
  // Progress.
  clock_type::time_point started;
  std::vector<trainer_report> reports;  // the trainers' final reports, as they come
  std::vector<int64_t> trainer_steps;   // computed, as the progress reports say
  std::vector<double> trainer_auc;
  std::vector<shard_stats> tier_stats;  // with the SSD tier: each shard's latest stats (progress)
  job_progress progress;
  double loss_sum = 0.0;  // since the previous progress, summed over trainers
  int64_t loss_samples = 0;
  // The state machines.
  checkpoint_cut cuts;
  recovery rec;
  best_model best;
  static inline const char* name = "job_supervisor";
};

using self_ptr = job_supervisor_impl::stateful_pointer<supervisor_state>;

// ---- job_supervisor.cpp: a generation ------------------------------------------------------

// Spawns, wires and restores a new generation of every role, then trains it.
void launch(self_ptr self);
// Sends the progress to the observer, if any.
void notify(supervisor_state& st);

// ---- supervisor_results.cpp: the end of a job ---------------------------------------------

// Every trainer reported: reads the shards' statistics, delivers the result, stops the job.
void finish(self_ptr self);

// ---- supervisor_checkpoint.cpp: the cut protocol --------------------------------------------

// Checkpoint folder and resume point, before the first generation.
caf::error checkpoint_setup(self_ptr self);
void on_cut(self_ptr self, cut_report& r);
caf::typed_response_promise<int64_t> on_checkpoint(self_ptr self);
void on_checkpoint_tick(self_ptr self, uint64_t gen);
// The next cut after step `from` (a periodic checkpoint or a validation), or -1.
int64_t next_cut(const supervisor_state& st, int64_t from);
// Writes a checkpoint at the cut, then runs `next`.
void write_checkpoint(self_ptr self, std::function<void()> next);
// Sends every trainer the next cut.
void release_trainers(self_ptr self, int64_t next);
// Asks every shard of this generation for a snapshot (sequence `seq` under `root`, full or
// incremental) and gathers the answers: `done` gets every shard's file once all are in; `failed`
// runs on the first error only. Replies of an older generation are dropped.
void snapshot_shards(self_ptr self, const std::string& root, uint64_t seq, bool full,
                     std::function<void(std::vector<snapshot_file_info>)> done,
                     std::function<void(const caf::error&)> failed);

// ---- supervisor_validation.cpp: validation, the best model, early stopping ------------------

// At a validation cut: evaluate, record, keep the best, decide whether to stop; then `next`.
void validate_at_cut(self_ptr self, std::function<void()> next);
// After a cut: go on to the next one, or (stopping) restore the best model and end training.
void after_cut(self_ptr self);

// ---- supervisor_recovery.cpp: failure and recovery ------------------------------------------

// A trainer's step `step` of generation `gen` is applied on the shards (its gradients acked).
void on_applied(self_ptr self, uint64_t gen, int64_t step, int32_t rank);
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
