// The checkpoint cut as a state machine with no actor in it: the job supervisor feeds it the
// trainers' cut reports, their hold answers, ticks and on-demand requests, and carries out what
// it decides (send the trainers a cut, snapshot the shards, write the files, answer callers).
// It keeps which cut the trainers are heading for, the reports in for it, and the chain of
// checkpoints: the newest one, what is committed by it, and what was trained since (pending
// until the next checkpoint commits it). A cut serves a periodic checkpoint
// (checkpoint.every_steps), a timed or on-demand one, or a validation (which writes nothing).
// Threading: not thread-safe; owned by one supervisor.
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "models/checkpoint/job_checkpoint.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace satrap {

class checkpoint_cut {
 public:
  struct policy {
    std::string dir;          // checkpoint.dir ("": no checkpoints)
    int64_t every_steps = 0;  // checkpoint.every_steps (0: none periodic)
    int32_t full_every = 1;   // checkpoint.full_every
    int64_t steps = 0;        // steps per trainer planned
  };

  // Every trainer reported the cut: what they trained since the previous cut, and whether this
  // cut writes a checkpoint.
  struct cut_complete {
    int64_t step = 0;
    int64_t samples = 0;
    double loss_sum = 0.0;  // summed per-sample losses, all trainers
    bool checkpoint = false;
  };

  // Every trainer answered `hold`: where to send them (`cut`); `finishing` when nothing is left to
  // cut before the end (callers waiting are refused; the trainers go back to the cut they had).
  struct hold_outcome {
    int64_t cut = -1;
    bool finishing = false;
  };

  void configure(policy p) { policy_ = std::move(p); }
  // The checkpoint a job resumes from (checkpoint.resume_from): the chain continues after it.
  void resume_from(const checkpoint_meta& m);
  const std::string& dir() const { return policy_.dir; }
  bool enabled() const { return !policy_.dir.empty(); }

  // The next periodic cut after step `from`, or -1.
  int64_t next_periodic(int64_t from) const;
  // Where a generation starts training: the newest checkpoint's step, or 0.
  int64_t resume_step() const { return last_ ? last_->step : 0; }

  // A generation starts (or the trainers are released) heading for `cut` (-1: none).
  void release(int64_t cut);

  // A trainer's cut report; `trainers` of the generation; `callers_waiting`: on-demand callers.
  // nullopt while reports are missing, and for a report to ignore (another cut, a repeat).
  std::optional<cut_complete> on_report(cut_report r, size_t trainers, bool callers_waiting);

  // A timed checkpoint is due (checkpoint.every_seconds) while the job trains: true when a cut
  // must begin now (hold the trainers); false when one is under way already.
  bool on_timer();
  // An on-demand request while the job trains, with `waiting` callers now (this one included):
  // true when a cut must begin now; false when the one under way or being set up answers it.
  bool on_demand(size_t waiting);
  // A hold begins: the trainers freeze fetching.
  void begin_hold() { checkpointing_ = true; }
  // Every trainer answered the hold; `furthest` is the furthest next step among them.
  hold_outcome on_held(int64_t furthest);

  // The checkpoint to write at the cut (sequence, step, full or incremental, what it commits).
  checkpoint_meta plan(const std::string& job, int32_t trainers, int32_t shards) const;
  // `meta` is written (files and manifest): it becomes the newest checkpoint.
  void committed(const checkpoint_meta& meta);
  // A snapshot outside the chain (the best model) takes the next sequence; once it is written,
  // `snapshot_taken` makes the next checkpoint full (the tables' snapshot mark moved).
  uint64_t reserve_snapshot_sequence();
  void snapshot_taken() { snapshot_since_checkpoint_ = true; }

  // A failure: what was trained after the newest checkpoint is trained again.
  void roll_back();
  // The trainers are told to end: no more cuts.
  void end() { ending_ = true; }

  int64_t cut() const { return cut_; }
  bool checkpointing() const { return checkpointing_; }
  bool ending() const { return ending_; }
  uint64_t sequence() const { return sequence_; }
  const std::optional<checkpoint_meta>& last() const { return last_; }
  int64_t committed_samples() const { return committed_samples_; }
  const std::vector<double>& committed_losses() const { return committed_losses_; }
  int64_t pending_samples() const { return pending_samples_; }
  const std::vector<double>& pending_losses() const { return pending_losses_; }
  // Rank 0's DenseState at the cut (every report is in).
  const capnp_payload& dense_state() const { return reports_.at(0).state; }

 private:
  policy policy_;
  int64_t cut_ = -1;                       // the cut the trainers are heading for
  std::map<int32_t, cut_report> reports_;  // in for it, by rank
  bool checkpointing_ = false;             // a cut is being set up or carried out
  bool want_checkpoint_ = false;  // the cut under way writes a checkpoint (timed, on demand)
  bool ending_ = false;
  uint64_t sequence_ = 0;                   // of the newest checkpoint written
  uint64_t snapshot_sequence_ = 0;          // newest embedding snapshot (checkpoints and best)
  bool snapshot_since_checkpoint_ = false;  // a best snapshot since the newest checkpoint
  int32_t since_full_ = 0;                  // checkpoints since the last full one (0: next is full)
  std::optional<checkpoint_meta> last_;     // the newest complete checkpoint
  int64_t committed_samples_ = 0;           // up to the newest checkpoint
  std::vector<double> committed_losses_;    // per step up to it, summed over trainers
  int64_t pending_samples_ = 0;             // trained since it, up to the newest cut
  std::vector<double> pending_losses_;      // per step, summed over trainers
};

}  // namespace satrap
