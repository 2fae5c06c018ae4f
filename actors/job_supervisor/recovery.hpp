// Failure and recovery of a job, as a state machine with no actor in it: the job supervisor feeds
// it failures, lost nodes and the trainers' applied steps, and carries out what it decides (give
// up, or roll back to the newest checkpoint and launch the next generation). It keeps the restart
// intensity (supervision.max_restarts within supervision.window_s), the failures so far, the nodes
// lost under the job, and per trainer the newest step applied on the shards: after a rollback,
// every step applied past the checkpoint counts as replayed (batches_replayed), including a step
// of the rolled-back generation whose `applied` arrives late.
// Threading: not thread-safe; owned by one supervisor. Time is passed in (the actor clock).
#pragma once

#include "runtime/restart_intensity.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace satrap {

class recovery {
 public:
  using time_point = restart_intensity::time_point;

  // What a failure decided.
  enum class action {
    ignore,          // stale (another generation), already recovering, or no job running
    after_training,  // every trainer reported: nothing to recover (warn)
    give_up,         // the restart intensity is exceeded: the job fails
    restart,         // roll back to `resume` and launch the next generation
  };
  struct decision {
    action what = action::ignore;
    int64_t replayed = 0;  // restart: batches whose applied gradients are rolled back
  };

  // supervision.max_restarts within supervision.window_s (before the first failure).
  void configure(int max_restarts, std::chrono::steady_clock::duration window) {
    intensity_.emplace(max_restarts, window);
  }

  // A generation starts training `trainers` trainers at `first_step`.
  void start(size_t trainers, int64_t first_step);
  // A generation is launched: its failure starts the next recovery.
  void launched() { recovering_ = false; }
  // Every trainer reported: failures no longer restart the job.
  void finishing() { finishing_ = true; }

  // A failure of generation `gen` (`current`: the supervisor's) at `now`; `resume`: the newest
  // checkpoint's step (0: none).
  decision on_failure(uint64_t gen, uint64_t current, bool running, const std::string& reason,
                      time_point now, int64_t resume);
  // A trainer's step `step` of generation `gen` is applied on the shards: returns how many
  // batches more count as replayed (an applied step of the rolled-back generation, late).
  int64_t on_applied(uint64_t gen, uint64_t current, int64_t step, int32_t rank);

  void node_lost(const std::string& node) { lost_nodes_.insert(node); }
  bool is_lost(const std::string& node) const { return lost_nodes_.count(node) > 0; }
  void node_back(const std::string& node) { lost_nodes_.erase(node); }

  bool recovering() const { return recovering_; }
  bool is_finishing() const { return finishing_; }
  const std::vector<std::string>& failures() const { return failures_; }
  void add_failure(std::string what) { failures_.push_back(std::move(what)); }

 private:
  std::optional<restart_intensity> intensity_;
  bool recovering_ = false;
  bool finishing_ = false;
  std::vector<std::string> failures_;    // the reason of each restart (and late notes)
  std::set<std::string> lost_nodes_;     // nodes whose actors became unreachable
  std::vector<int64_t> applied_steps_;   // per trainer: steps applied on the shards
  uint64_t rolled_back_generation_ = 0;  // the generation the newest rollback ended
  std::vector<int64_t> rolled_back_to_;  // its steps counted as replayed, per trainer
};

}  // namespace satrap
