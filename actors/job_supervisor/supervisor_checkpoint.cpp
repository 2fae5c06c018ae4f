#include "actors/job_supervisor/supervisor_state.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "runtime/error.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace satrap::supervisor {

void begin_cut(self_ptr self);

// Before the first generation: where checkpoints go, and the checkpoint to resume from, if any.
caf::error checkpoint_setup(self_ptr self) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  st.ckpt_dir = spec.checkpoint.dir;
  auto& resume = spec.checkpoint.resume_from;
  if (!resume.empty()) {
    auto latest = checkpoint_latest(resume, *st.config.environment);
    if (!latest)
      return make_error(latest.failure());
    if (!*latest) {
      return make_error(errc::invalid_config,
                        "checkpoint.resume_from: no complete checkpoint in " + resume);
    }
    auto& m = **latest;
    if (m.trainers != spec.placement.trainers) {
      return make_error(errc::invalid_config,
                        "checkpoint.resume_from: the checkpoint has "
                          + std::to_string(m.trainers) + " trainers, the job "
                          + std::to_string(spec.placement.trainers));
    }
    if (st.ckpt_dir.empty())
      st.ckpt_dir = resume;
    if (st.ckpt_dir != resume) {
      return make_error(errc::invalid_config,
                        "checkpoint.resume_from must be checkpoint.dir (or checkpoint.dir "
                        "empty): new checkpoints continue the chain of the old ones");
    }
    st.last = m;
    st.sequence = m.sequence;
    st.snapshot_sequence = m.sequence;
    st.committed_samples = m.samples;
    st.committed_losses = m.step_losses;
    st.progress.checkpoint_step = m.step;
    st.progress.samples = m.samples;
    spdlog::info("job_resuming step={} sequence={} dir={}", m.step, m.sequence, resume);
  } else if (!st.ckpt_dir.empty()) {
    auto latest = checkpoint_latest(st.ckpt_dir, *st.config.environment);
    if (latest && *latest) {
      return make_error(errc::invalid_config,
                        "checkpoint.dir " + st.ckpt_dir
                          + " already holds checkpoints: continue them with "
                            "checkpoint.resume_from (--resume) or choose an empty folder");
    }
  }
  return {};
}

// checkpoint.every_seconds: a cut now, unless one is under way or the job is not training.
void on_checkpoint_tick(self_ptr self, uint64_t gen) {
  auto& st = self->state;
  if (gen != st.generation)
    return;
  if (!st.recovering && st.reports.empty() && !st.checkpointing && !st.ending
      && !st.trainers.empty()) {
    st.want_checkpoint = true;
    begin_cut(self);
  }
  self->delayed_send(self, std::chrono::seconds(st.config.spec.checkpoint.every_seconds),
                     checkpoint_atom::value, gen);
}

int64_t next_periodic_cut(const supervisor_state& st, int64_t from) {
  auto every = st.config.spec.checkpoint.every_steps;
  if (st.ckpt_dir.empty() || every <= 0)
    return -1;
  auto c = (from / every + 1) * every;
  return c < st.steps ? c : -1;
}

int64_t next_cut(const supervisor_state& st, int64_t from) {
  auto a = next_periodic_cut(st, from), b = next_validation_cut(st, from);
  if (a < 0)
    return b;
  return b < 0 ? a : std::min(a, b);
}

void release_trainers(self_ptr self, int64_t next) {
  auto& st = self->state;
  st.cut = next;
  st.cut_reports.clear();
  st.checkpointing = false;
  for (auto& t : st.trainers)
    self->send(t, cut_atom::value, next);
}

// Every trainer is at the cut: write the shards' files, the dense state and the manifest.
void write_checkpoint(self_ptr self, std::function<void()> next) {
  auto& st = self->state;
  auto gen = st.generation;
  auto step = st.cut;
  checkpoint_meta meta;
  meta.sequence = std::max(st.sequence, st.snapshot_sequence) + 1;
  meta.step = step;
  meta.embedding_sequence = meta.sequence;
  // A best-model snapshot since the newest checkpoint moved the tables' snapshot mark: full.
  meta.full = st.since_full == 0 || st.since_full >= st.config.spec.checkpoint.full_every
              || st.best_since_checkpoint;
  meta.trainers = static_cast<int32_t>(st.trainers.size());
  meta.shards = static_cast<int32_t>(st.shards.size());
  meta.job = st.config.spec.name;
  // What the trainers did since the previous checkpoint becomes committed with this one.
  auto samples = st.committed_samples + st.pending_samples;
  auto losses = st.committed_losses;
  losses.insert(losses.end(), st.pending_losses.begin(), st.pending_losses.end());
  meta.samples = samples;
  meta.step_losses = losses;
  auto state = st.cut_reports.at(0).state;
  auto started = self->clock().now();
  auto infos = std::make_shared<std::vector<shard_snapshot_info>>();
  auto left = std::make_shared<size_t>(st.shards.size());
  auto root = checkpoint_embedding_root(st.ckpt_dir);
  for (auto& s : st.shards)
    self->request(s, ms(st.config.spec.timing.snapshot_timeout_ms), snapshot_atom::value, root,
                  meta.sequence, meta.full)
      .then(
        [=](const shard_snapshot_info& info) mutable {  // (a copy of `next` per shard)
          auto& st = self->state;
          if (gen != st.generation)
            return;
          infos->push_back(info);
          if (--*left > 0)
            return;
          std::vector<snapshot_file_info> files;
          for (auto& i : *infos) {
            files.push_back({i.file, static_cast<uint32_t>(i.shard), static_cast<uint64_t>(i.rows),
                             static_cast<uint64_t>(i.bytes), i.checksum});
            meta.embedding_rows += i.rows;
          }
          auto parent = meta.full ? uint64_t{0} : st.sequence;
          auto written = snapshot_write_manifest(root, meta.sequence, parent,
                                                 st.config.spec.model.embedding, files,
                                                 *st.config.environment);
          caf::error err;
          if (!written)
            err = make_error(io_errc_of(written.error()),
                             "embedding snapshot manifest: " + written.error());
          if (!err)
            if (auto r = checkpoint_write_dense(st.ckpt_dir, meta, state.bytes,
                                                *st.config.environment); !r)
              err = make_error(r.failure());
          if (!err)
            if (auto r = checkpoint_write_meta(st.ckpt_dir, meta, *st.config.environment); !r)
              err = make_error(r.failure());
          if (err) {
            fail_job(self, make_error(errc_of(err, errc::io_failure),
                                      "checkpoint at step " + std::to_string(step) + " failed: "
                                        + error_text(err)));
            return;
          }
          st.sequence = meta.sequence;
          st.snapshot_sequence = meta.sequence;
          st.best_since_checkpoint = false;
          st.pending_samples = 0;
          st.pending_losses.clear();
          st.since_full = meta.full ? 1 : st.since_full + 1;
          st.committed_samples = meta.samples;
          st.committed_losses = meta.step_losses;
          st.last = meta;
          ++st.progress.checkpoints;
          st.progress.checkpoint_step = step;
          auto ms = std::chrono::duration<double, std::milli>(self->clock().now() - started).count();
          spdlog::info("checkpoint_written step={} sequence={} full={} rows={} ms={:.0f} dir={}",
                       step, meta.sequence, meta.full, meta.embedding_rows, ms, st.ckpt_dir);
          // checkpoint.keep: older checkpoints go, never the newest nor a kept chain's parents.
          if (auto pruned = checkpoint_prune(st.ckpt_dir, st.config.spec.checkpoint.keep,
                                             *st.config.environment); !pruned)
            spdlog::warn("checkpoint_prune_failed error=\"{}\"", pruned.error());
          else if (pruned->checkpoints_removed + pruned->snapshots_removed > 0)
            spdlog::info("checkpoints_pruned checkpoints={} snapshots={} bytes={}",
                         pruned->checkpoints_removed, pruned->snapshots_removed,
                         pruned->bytes_freed);
          for (auto& p : st.on_demand)
            p.deliver(step);
          st.on_demand.clear();
          notify(st);
          next();
        },
        [self, gen, step](const caf::error& e) {
          auto what = "checkpoint at step " + std::to_string(step) + " failed: " + error_text(e);
          if (failure_is_deterministic(e)) {  // disk full, read-only folder: a restart fails again
            if (gen == self->state.generation)
              fail_job(self, make_error(errc_of(e, errc::no_resource), what));
            return;
          }
          on_failure(self, gen, what);
        });
}

void on_cut(self_ptr self, cut_report& r) {
  auto& st = self->state;
  if (st.recovering || r.step != st.cut || st.cut_reports.count(r.rank))
    return;  // from an older generation, or not the cut asked for
  st.cut_reports.emplace(r.rank, std::move(r));
  if (st.cut_reports.size() < st.trainers.size())
    return;
  st.checkpointing = true;
  // What the trainers did since the previous cut: pending until a checkpoint commits it.
  size_t base = st.pending_losses.size();
  for (auto& [rank, rep] : st.cut_reports) {
    st.pending_samples += rep.samples;
    st.samples_since_eval += rep.samples;
    if (st.pending_losses.size() < base + rep.step_losses.size())
      st.pending_losses.resize(base + rep.step_losses.size(), 0.0);
    for (size_t i = 0; i < rep.step_losses.size(); ++i) {
      st.pending_losses[base + i] += rep.step_losses[i];
      st.loss_since_eval += rep.step_losses[i];
    }
  }
  auto c = st.cut;
  bool checkpoint = !st.ckpt_dir.empty() && (st.want_checkpoint || !st.on_demand.empty()
                                             || (st.config.spec.checkpoint.every_steps > 0
                                                 && c % st.config.spec.checkpoint.every_steps == 0
                                                 && c < st.steps));
  st.want_checkpoint = false;
  auto then_checkpoint = [self, checkpoint] {
    if (checkpoint)
      write_checkpoint(self, [self] { after_cut(self); });
    else
      after_cut(self);
  };
  if (is_validation_cut(st, c))
    validate_at_cut(self, then_checkpoint);
  else
    then_checkpoint();
}

void begin_cut(self_ptr self);

// An on-demand checkpoint: freeze every trainer's fetching, then cut at the furthest of them.
caf::typed_response_promise<int64_t> on_checkpoint(self_ptr self) {
  auto& st = self->state;
  auto promise = self->make_response_promise<int64_t>();
  if (st.ckpt_dir.empty()) {
    promise.deliver(make_error(errc::invalid_config,
                               "the job has no checkpoint.dir: nowhere to write a checkpoint"));
    return promise;
  }
  if (st.trainers.empty() || st.recovering || st.reports.size() > 0 || st.ending) {
    promise.deliver(make_error(errc::invalid_config,
                               "the job is not training now (starting, recovering or evaluating)"));
    return promise;
  }
  st.on_demand.push_back(promise);
  if (st.checkpointing || st.on_demand.size() > 1)
    return promise;  // answered by the checkpoint under way or being set up
  st.want_checkpoint = true;
  begin_cut(self);
  return promise;
}

// Freezes every trainer's fetching, then cuts at the furthest of them (on demand, or timed).
void begin_cut(self_ptr self) {
  auto& st = self->state;
  st.checkpointing = true;
  auto gen = st.generation;
  auto furthest = std::make_shared<int64_t>(0);
  auto left = std::make_shared<size_t>(st.trainers.size());
  for (auto& t : st.trainers)
    self->request(t, ms(st.config.spec.timing.hold_timeout_ms), hold_atom::value)
      .then(
        [self, gen, furthest, left](int64_t next) {
          auto& st = self->state;
          *furthest = std::max(*furthest, next);
          if (gen != st.generation || --*left > 0)
            return;
          if (*furthest >= st.steps) {  // nothing left to cut before: the job is finishing
            for (auto& p : st.on_demand)
              p.deliver(make_error(errc::invalid_config, "the job is finishing its last steps"));
            st.on_demand.clear();
            // Back to the cut they were heading for (a final validation holds them at the end).
            st.checkpointing = false;
            st.want_checkpoint = false;
            for (auto& t : st.trainers)
              self->send(t, cut_atom::value, st.cut);
            return;
          }
          // Reports already in for a pending periodic cut at the same step stay valid (a trainer
          // answers a repeated cut with an empty report, which is ignored).
          st.cut = *furthest;
          for (auto& t : st.trainers)
            self->send(t, cut_atom::value, st.cut);
        },
        [self, gen](const caf::error& e) {
          on_failure(self, gen, "holding a trainer for a checkpoint: " + error_text(e));
        });
}

}  // namespace satrap::supervisor
