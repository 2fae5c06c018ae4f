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
  std::string ckpt_dir = spec.checkpoint.dir;
  auto& resume = spec.checkpoint.resume_from;
  std::optional<checkpoint_meta> resumed;
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
      return make_error(errc::invalid_config, "checkpoint.resume_from: the checkpoint has "
                                                + std::to_string(m.trainers) + " trainers, the job "
                                                + std::to_string(spec.placement.trainers));
    }
    if (ckpt_dir.empty())
      ckpt_dir = resume;
    if (ckpt_dir != resume) {
      return make_error(errc::invalid_config,
                        "checkpoint.resume_from must be checkpoint.dir (or checkpoint.dir "
                        "empty): new checkpoints continue the chain of the old ones");
    }
    resumed = m;
    st.progress.checkpoint_step = m.step;
    st.progress.samples = m.samples;
    spdlog::info("job_resuming step={} sequence={} dir={}", m.step, m.sequence, resume);
  } else if (!ckpt_dir.empty()) {
    auto latest = checkpoint_latest(ckpt_dir, *st.config.environment);
    if (latest && *latest) {
      return make_error(errc::invalid_config,
                        "checkpoint.dir " + ckpt_dir
                          + " already holds checkpoints: continue them with "
                            "checkpoint.resume_from (--resume) or choose an empty folder");
    }
  }
  st.cuts.configure({ckpt_dir, spec.checkpoint.every_steps, spec.checkpoint.full_every, st.steps});
  if (resumed)
    st.cuts.resume_from(*resumed);
  return {};
}

// checkpoint.every_seconds: a cut now, unless one is under way or the job is not training.
void on_checkpoint_tick(self_ptr self, uint64_t gen) {
  auto& st = self->state;
  if (gen != st.generation)
    return;
  if (!st.rec.recovering() && st.reports.empty() && !st.cuts.ending() && !st.trainers.empty()
      && st.cuts.on_timer())
    begin_cut(self);
  self->delayed_send(self, std::chrono::seconds(st.config.spec.checkpoint.every_seconds),
                     checkpoint_atom::value, gen);
}

int64_t next_cut(const supervisor_state& st, int64_t from) {
  auto a = st.cuts.next_periodic(from), b = st.best.next_validation_cut(from);
  if (a < 0)
    return b;
  return b < 0 ? a : std::min(a, b);
}

void release_trainers(self_ptr self, int64_t next) {
  auto& st = self->state;
  st.cuts.release(next);
  for (auto& t : st.trainers)
    self->send(t, cut_atom::value, next);
}

void snapshot_shards(self_ptr self, const std::string& root, uint64_t seq, bool full,
                     std::function<void(std::vector<snapshot_file_info>)> done,
                     std::function<void(const caf::error&)> failed) {
  auto& st = self->state;
  auto gen = st.generation;
  auto files = std::make_shared<std::vector<snapshot_file_info>>();
  auto left = std::make_shared<size_t>(st.shards.size());
  auto failed_once = std::make_shared<bool>(false);
  for (auto& s : st.shards)
    self
      ->request(s, ms(st.config.spec.timing.snapshot_timeout_ms), snapshot_atom::value, root, seq,
                full)
      .then(
        [self, gen, files, left, done](const shard_snapshot_info& i) {
          if (gen != self->state.generation)
            return;
          files->push_back({i.file, static_cast<uint32_t>(i.shard), static_cast<uint64_t>(i.rows),
                            static_cast<uint64_t>(i.bytes), i.checksum});
          if (--*left == 0)
            done(std::move(*files));
        },
        [failed_once, failed](const caf::error& e) {
          if (*failed_once)
            return;
          *failed_once = true;
          failed(e);
        });
}

// Every trainer is at the cut: write the shards' files, the dense state and the manifest.
void write_checkpoint(self_ptr self, std::function<void()> next) {
  auto& st = self->state;
  auto gen = st.generation;
  auto step = st.cuts.cut();
  auto meta = st.cuts.plan(st.config.spec.name, static_cast<int32_t>(st.trainers.size()),
                           static_cast<int32_t>(st.shards.size()));
  auto state = st.cuts.dense_state();
  const int64_t cut_batches = step * static_cast<int64_t>(st.trainers.size());
  if (st.data.source)
    meta.stream_positions = st.data.source->positions_after(cut_batches);
  auto started = self->clock().now();
  auto root = checkpoint_embedding_root(st.cuts.dir());
  snapshot_shards(
    self, root, meta.sequence, meta.full,
    [=](std::vector<snapshot_file_info> files) mutable {
      auto& st = self->state;
      for (auto& f : files)
        meta.embedding_rows += static_cast<int64_t>(f.rows);
      auto parent = meta.full ? uint64_t{0} : st.cuts.sequence();
      auto written = snapshot_write_manifest(
        root, meta.sequence, parent, st.config.spec.model.embedding, files, *st.config.environment);
      caf::error err;
      if (!written)
        err = make_error(io_errc_of(written.error()),
                         "embedding snapshot manifest: " + written.error());
      if (!err)
        if (auto r =
              checkpoint_write_dense(st.cuts.dir(), meta, state.bytes, *st.config.environment);
            !r)
          err = make_error(r.failure());
      if (!err)
        if (auto r = checkpoint_write_meta(st.cuts.dir(), meta, *st.config.environment); !r)
          err = make_error(r.failure());
      if (err) {
        fail_job(self, make_error(errc_of(err, errc::io_failure),
                                  "checkpoint at step " + std::to_string(step)
                                    + " failed: " + error_text(err)));
        return;
      }
      st.cuts.committed(meta);
      // Durable: only now may a stream tell its broker (Kafka's consumer group; monitoring only).
      if (st.data.source && !meta.stream_positions.empty())
        st.data.source->positions_durable(cut_batches);
      ++st.progress.checkpoints;
      st.progress.checkpoint_step = step;
      auto ms = std::chrono::duration<double, std::milli>(self->clock().now() - started).count();
      spdlog::info("checkpoint_written step={} sequence={} full={} rows={} ms={:.0f} dir={}", step,
                   meta.sequence, meta.full, meta.embedding_rows, ms, st.cuts.dir());
      // checkpoint.keep: older checkpoints go, never the newest nor a kept chain's parents.
      if (auto pruned =
            checkpoint_prune(st.cuts.dir(), st.config.spec.checkpoint.keep, *st.config.environment);
          !pruned)
        spdlog::warn("checkpoint_prune_failed error=\"{}\"", pruned.error());
      else if (pruned->checkpoints_removed + pruned->snapshots_removed > 0)
        spdlog::info("checkpoints_pruned checkpoints={} snapshots={} bytes={}",
                     pruned->checkpoints_removed, pruned->snapshots_removed, pruned->bytes_freed);
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
  if (st.rec.recovering())
    return;  // from an older generation
  auto done = st.cuts.on_report(std::move(r), st.trainers.size(), !st.on_demand.empty());
  if (!done)
    return;
  st.best.on_trained(done->samples, done->loss_sum);
  auto then_checkpoint = [self, checkpoint = done->checkpoint] {
    if (checkpoint)
      write_checkpoint(self, [self] { after_cut(self); });
    else
      after_cut(self);
  };
  if (st.best.is_validation_cut(done->step))
    validate_at_cut(self, then_checkpoint);
  else
    then_checkpoint();
}

// An on-demand checkpoint: freeze every trainer's fetching, then cut at the furthest of them.
caf::typed_response_promise<int64_t> on_checkpoint(self_ptr self) {
  auto& st = self->state;
  auto promise = self->make_response_promise<int64_t>();
  if (!st.cuts.enabled()) {
    promise.deliver(make_error(errc::invalid_config,
                               "the job has no checkpoint.dir: nowhere to write a checkpoint"));
    return promise;
  }
  if (st.trainers.empty() || st.rec.recovering() || st.reports.size() > 0 || st.cuts.ending()) {
    promise.deliver(make_error(errc::invalid_config,
                               "the job is not training now (starting, recovering or evaluating)"));
    return promise;
  }
  st.on_demand.push_back(promise);
  if (st.cuts.on_demand(st.on_demand.size()))
    begin_cut(self);
  return promise;
}

// Freezes every trainer's fetching, then cuts at the furthest of them (on demand, or timed).
void begin_cut(self_ptr self) {
  auto& st = self->state;
  st.cuts.begin_hold();
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
          auto held = st.cuts.on_held(*furthest);
          if (held.finishing) {
            for (auto& p : st.on_demand)
              p.deliver(make_error(errc::invalid_config, "the job is finishing its last steps"));
            st.on_demand.clear();
          }
          for (auto& t : st.trainers)
            self->send(t, cut_atom::value, held.cut);
        },
        [self, gen](const caf::error& e) {
          on_failure(self, gen, "holding a trainer for a checkpoint: " + error_text(e));
        });
}

}  // namespace satrap::supervisor
