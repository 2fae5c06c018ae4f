#include "actors/job_supervisor/checkpoint_cut.hpp"

#include <algorithm>

namespace satrap {

void checkpoint_cut::resume_from(const checkpoint_meta& m) {
  last_ = m;
  sequence_ = m.sequence;
  snapshot_sequence_ = m.sequence;
  committed_samples_ = m.samples;
  committed_losses_ = m.step_losses;
}

int64_t checkpoint_cut::next_periodic(int64_t from) const {
  auto every = policy_.every_steps;
  if (policy_.dir.empty() || every <= 0)
    return -1;
  auto c = (from / every + 1) * every;
  return c < policy_.steps ? c : -1;
}

void checkpoint_cut::release(int64_t cut) {
  cut_ = cut;
  reports_.clear();
  checkpointing_ = false;
}

std::optional<checkpoint_cut::cut_complete> checkpoint_cut::on_report(cut_report r, size_t trainers,
                                                                      bool callers_waiting) {
  if (r.step != cut_ || reports_.count(r.rank))
    return std::nullopt;  // from an older generation, or not the cut asked for
  reports_.emplace(r.rank, std::move(r));
  if (reports_.size() < trainers)
    return std::nullopt;
  checkpointing_ = true;
  // What the trainers did since the previous cut: pending until a checkpoint commits it.
  cut_complete done;
  done.step = cut_;
  size_t base = pending_losses_.size();
  for (auto& [rank, rep] : reports_) {
    pending_samples_ += rep.samples;
    done.samples += rep.samples;
    if (pending_losses_.size() < base + rep.step_losses.size())
      pending_losses_.resize(base + rep.step_losses.size(), 0.0);
    for (size_t i = 0; i < rep.step_losses.size(); ++i) {
      pending_losses_[base + i] += rep.step_losses[i];
      done.loss_sum += rep.step_losses[i];
    }
  }
  auto c = cut_;
  done.checkpoint =
    enabled()
    && (want_checkpoint_ || callers_waiting
        || (policy_.every_steps > 0 && c % policy_.every_steps == 0 && c < policy_.steps));
  want_checkpoint_ = false;
  return done;
}

bool checkpoint_cut::on_timer() {
  if (checkpointing_)
    return false;
  want_checkpoint_ = true;
  return true;
}

bool checkpoint_cut::on_demand(size_t waiting) {
  if (checkpointing_ || waiting > 1)
    return false;  // answered by the checkpoint under way or being set up
  want_checkpoint_ = true;
  return true;
}

checkpoint_cut::hold_outcome checkpoint_cut::on_held(int64_t furthest) {
  if (furthest >= policy_.steps) {  // nothing left to cut before: the job is finishing
    // Back to the cut they were heading for (a final validation holds them at the end).
    checkpointing_ = false;
    want_checkpoint_ = false;
    return {cut_, true};
  }
  // Reports already in for a pending periodic cut at the same step stay valid (a trainer
  // answers a repeated cut with an empty report, which is ignored).
  cut_ = furthest;
  return {cut_, false};
}

checkpoint_meta checkpoint_cut::plan(const std::string& job, int32_t trainers,
                                     int32_t shards) const {
  checkpoint_meta meta;
  meta.sequence = std::max(sequence_, snapshot_sequence_) + 1;
  meta.step = cut_;
  meta.embedding_sequence = meta.sequence;
  // A best-model snapshot since the newest checkpoint moved the tables' snapshot mark: full.
  meta.full = since_full_ == 0 || since_full_ >= policy_.full_every || snapshot_since_checkpoint_;
  meta.trainers = trainers;
  meta.shards = shards;
  meta.job = job;
  // What the trainers did since the previous checkpoint becomes committed with this one.
  meta.samples = committed_samples_ + pending_samples_;
  meta.step_losses = committed_losses_;
  meta.step_losses.insert(meta.step_losses.end(), pending_losses_.begin(), pending_losses_.end());
  return meta;
}

void checkpoint_cut::committed(const checkpoint_meta& meta) {
  sequence_ = meta.sequence;
  snapshot_sequence_ = meta.sequence;
  snapshot_since_checkpoint_ = false;
  pending_samples_ = 0;
  pending_losses_.clear();
  since_full_ = meta.full ? 1 : since_full_ + 1;
  committed_samples_ = meta.samples;
  committed_losses_ = meta.step_losses;
  last_ = meta;
}

uint64_t checkpoint_cut::reserve_snapshot_sequence() {
  snapshot_sequence_ = std::max(sequence_, snapshot_sequence_) + 1;
  return snapshot_sequence_;
}

void checkpoint_cut::roll_back() {
  pending_samples_ = 0;
  pending_losses_.clear();
  want_checkpoint_ = false;
  ending_ = false;
}

}  // namespace satrap
