// Internal to the job supervisor (not an interface): its state and the functions its three
// parts share. The parts, by concern:
//   job_supervisor.cpp         a generation: spawn and wire the actors, restore, train, results
//   supervisor_checkpoint.cpp  the checkpoint cut protocol (files: job_checkpoint.hpp)
//   supervisor_recovery.cpp    failures, re-placement on the live nodes, restart intensity
// Threading: every function runs inside the supervisor actor.
#pragma once

#include "actors/job_supervisor/job_checkpoint.hpp"
#include "actors/job_supervisor/job_supervisor.hpp"
#include "actors/job_supervisor/restart_intensity.hpp"
#include "runtime/job_data.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
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
  static inline const char* name = "job_supervisor";
};

using self_ptr = job_supervisor_actor::stateful_pointer<supervisor_state>;

// ---- job_supervisor.cpp: a generation ------------------------------------------------------

// Spawns, wires and restores a new generation of every role, then trains it.
void launch(self_ptr self);
// Sends the progress to the observer, if any.
void notify(supervisor_state& st);

// ---- supervisor_checkpoint.cpp: the cut protocol --------------------------------------------

// Checkpoint folder and resume point, before the first generation.
caf::error checkpoint_setup(self_ptr self);
// The next periodic cut after step `from`, or -1.
int64_t next_periodic_cut(const supervisor_state& st, int64_t from);
void on_cut(self_ptr self, cut_report& r);
caf::typed_response_promise<int64_t> on_checkpoint(self_ptr self);
void on_checkpoint_tick(self_ptr self, uint64_t gen);

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
