#include "actors/job_supervisor/supervisor_state.hpp"

#include "actors/job_data_opener.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "satrap_schemas/step.capnp.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>

namespace satrap {

job_placement job_placement_of(const placement_plan& plan) {
  job_placement p;
  for (auto& a : plan.actors) {
    auto node = static_cast<uint32_t>(a.node);
    switch (a.role) {
      case actor_role::embedding_shard: p.shards.push_back(node); break;
      case actor_role::gradient_aggregator: p.aggregators.push_back(node); break;
      case actor_role::data_loader: p.loaders.push_back(node); break;
      case actor_role::dense_trainer: p.trainers.push_back(node); break;
    }
  }
  return p;
}

namespace supervisor {

void start_training(self_ptr self, uint64_t gen);

void notify(supervisor_state& st) {
  if (st.config.observer)
    st.config.observer(st.progress);
}

size_t node_index(const std::vector<uint32_t>& where, size_t i) {
  return where.empty() ? 0 : where[i];
}

std::string node_name(supervisor_state& st, size_t index) {
  return index < st.config.node_names.size() ? st.config.node_names[index] : "local";
}

// Spawns `count` actors of one role through the node agents, in parallel; `next` runs once all
// handles are in `out` (by index). Replies of an older generation are dropped.
template <class Handle, class Role, class Next, class... Ts>
void spawn_role(self_ptr self, Role role, const char* name, int32_t count,
                const std::vector<uint32_t>& where, std::vector<Handle>& out, Next next,
                const Ts&... xs) {
  auto& st = self->state;
  out.assign(static_cast<size_t>(count), Handle{});
  auto left = std::make_shared<int32_t>(count);
  auto gen = st.generation;
  for (int32_t i = 0; i < count; ++i) {
    auto node = node_index(where, static_cast<size_t>(i));
    self
      ->request(st.config.nodes[node], ms(st.config.spec.timing.spawn_timeout_ms),
                spawn_atom::value, role, st.job_yaml, i, xs...)
      .then(
        [self, &out, i, left, next, gen, node](Handle& h) {
          auto& st = self->state;
          if (gen != st.generation) {
            self->send_exit(h, caf::exit_reason::kill);
            return;
          }
          self->link_to(h);
          st.children[h.address()] = node_name(st, node);
          out[static_cast<size_t>(i)] = std::move(h);
          if (--*left == 0)
            next();
        },
        [self, name, gen, node](const caf::error& e) {
          auto& st = self->state;
          auto what = std::string("spawning ") + name + " on node " + node_name(st, node) + ": "
                      + error_text(e);
          // A job the node cannot run (its config) fails at once: a restart would not help.
          if (e.category() == caf::atom("satrap")
              && e.code() == static_cast<uint8_t>(errc::invalid_config)) {
            if (gen == st.generation)
              fail_job(self, make_error(errc::invalid_config, what));
            return;
          }
          on_failure(self, gen, what);
        });
  }
}

// After every actor is spawned: restore the shards and the trainers from the newest
// checkpoint, if there is one, then train.
void restore_and_start(self_ptr self, uint64_t gen) {
  auto& st = self->state;
  if (!st.cuts.last()) {
    start_training(self, gen);
    return;
  }
  auto meta = *st.cuts.last();
  auto dense = checkpoint_read_dense(st.cuts.dir(), meta, *st.config.environment);
  if (!dense) {
    fail_job(self, make_error(dense.failure()));
    return;
  }
  auto left = std::make_shared<size_t>(st.shards.size() + st.trainers.size());
  auto rows = std::make_shared<int64_t>(0);
  auto one_done = [self, gen, left, rows, meta] {
    if (--*left == 0) {
      spdlog::info("job_restored step={} sequence={} embedding_rows={}", meta.step, meta.sequence,
                   *rows);
      start_training(self, gen);
    }
  };
  auto on_error = [self, gen](const caf::error& e) {
    auto what = "restoring from the checkpoint: " + error_text(e);
    // A configuration error (a checkpoint this job cannot take: the SSD tier's folders of another
    // shard count) fails again after a restart: the job fails at once.
    if (failure_is_deterministic(e) && gen == self->state.generation) {
      fail_job(self, make_error(errc_of(e, errc::invalid_config), what));
      return;
    }
    on_failure(self, gen, what);
  };
  auto root = checkpoint_embedding_root(st.cuts.dir());
  for (auto& s : st.shards)
    self
      ->request(s, ms(st.config.spec.timing.restore_timeout_ms), restore_atom::value, root,
                meta.embedding_sequence)
      .then(
        [rows, one_done](int64_t n) {
          *rows += n;
          one_done();
        },
        on_error);
  capnp_payload state{payload_bytes(dense->begin(), dense->end())};
  for (auto& t : st.trainers)
    self->request(t, ms(st.config.spec.timing.dense_restore_timeout_ms), restore_atom::value, state)
      .then([one_done](int64_t) { one_done(); }, on_error);
}

void spawn_children(self_ptr self) {
  auto& st = self->state;
  auto& pl = st.config.spec.placement;
  auto& where = st.config.placement;
  auto gen = st.generation;
  spawn_role(self, shard_atom::value, "embedding_shard", pl.shards, where.shards, st.shards, [=] {
    auto& st = self->state;
    spawn_role(
      self, aggregator_atom::value, "gradient_aggregator", pl.aggregators, where.aggregators,
      st.aggregators,
      [=] {
        auto& st = self->state;
        spawn_role(
          self, loader_atom::value, "data_loader", pl.loaders, where.loaders, st.loaders,
          [=] {
            auto& st = self->state;
            spawn_role(
              self, trainer_atom::value, "dense_trainer", pl.trainers, where.trainers, st.trainers,
              [=] { restore_and_start(self, gen); }, st.loaders, st.aggregators,
              caf::actor_cast<progress_sink_actor>(self));
          },
          st.aggregators);
      },
      st.shards);
  });
}

// With the SSD tier: the sums of the shards' latest tier counters into the progress, and each
// shard asked again (its answer counts at the next report).
void poll_tier(self_ptr self) {
  auto& st = self->state;
  st.tier_stats.resize(st.shards.size());
  auto& p = st.progress;
  p.tier_hits = p.tier_misses = p.tier_prefetch_hits = p.tier_bytes_read = 0;
  p.tier_bytes_written = p.tier_ram_bytes = 0;
  for (const auto& s : st.tier_stats) {
    p.tier_hits += s.tier_hits;
    p.tier_misses += s.tier_misses;
    p.tier_prefetch_hits += s.tier_prefetch_hits;
    p.tier_bytes_read += s.tier_bytes_read;
    p.tier_bytes_written += s.tier_bytes_written;
    p.tier_ram_bytes += s.tier_ram_bytes;
  }
  auto gen = st.generation;
  for (size_t i = 0; i < st.shards.size(); ++i)
    self
      ->request(st.shards[i], ms(st.config.spec.timing.trainer_request_timeout_ms),
                stats_atom::value)
      .then(
        [self, gen, i](shard_stats& s) {
          auto& st = self->state;
          if (gen == st.generation && i < st.tier_stats.size())
            st.tier_stats[i] = std::move(s);
        },
        [](const caf::error&) {});  // a lost shard's recovery is the supervisor's own business
}

void on_progress(self_ptr self, const progress_report& r) {
  auto& st = self->state;
  auto rank = static_cast<size_t>(r.rank);
  if (rank >= st.trainer_steps.size())
    return;
  st.trainer_steps[rank] = r.step;
  st.trainer_auc[rank] = r.running_auc;
  st.progress.samples += r.samples;
  st.loss_sum += r.loss_sum;
  st.loss_samples += r.samples;
  if (rank != 0 || !st.config.observer)
    return;
  auto secs = std::chrono::duration<double>(self->clock().now() - st.started).count();
  auto& p = st.progress;
  p.steps = *std::min_element(st.trainer_steps.begin(), st.trainer_steps.end());
  p.samples_per_sec = secs > 0 ? static_cast<double>(p.samples) / secs : 0.0;
  p.loss = st.loss_samples > 0 ? st.loss_sum / static_cast<double>(st.loss_samples) : 0.0;
  double auc = 0;
  for (auto a : st.trainer_auc)
    auc += a;
  p.running_auc = auc / static_cast<double>(st.trainer_auc.size());
  if (st.data.source)
    p.stream_lag = st.data.source->stream_lag(p.steps * static_cast<int64_t>(st.trainers.size()));
  if (st.config.spec.model.tier.kind == tier_kind::ssd)
    poll_tier(self);
  notify(st);
  st.loss_sum = 0;
  st.loss_samples = 0;
}

// ---- a generation ---------------------------------------------------------------------------

void start_training(self_ptr self, uint64_t gen) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  std::vector<caf::actor> peers;
  for (auto& t : st.trainers)
    peers.push_back(caf::actor_cast<caf::actor>(t));
  for (auto& t : st.trainers)
    self->send(t, peers_atom::value, peers);
  train_plan plan;
  plan.steps = st.steps;
  plan.test_batches = st.data.test_batches;
  plan.staleness = spec.training.staleness;
  plan.first_step = st.cuts.resume_step();
  plan.cut = next_cut(st, plan.first_step);
  plan.generation = gen;  // GPU trainers make one NCCL communicator per generation
  st.cuts.release(plan.cut);
  st.trainer_steps.assign(st.trainers.size(), plan.first_step);
  st.rec.start(st.trainers.size(), plan.first_step);
  st.trainer_auc.assign(st.trainers.size(), 0.5);
  st.progress.steps_total = plan.steps;
  if (st.cuts.enabled() && spec.checkpoint.every_seconds > 0)
    self->delayed_send(self, std::chrono::seconds(spec.checkpoint.every_seconds),
                       checkpoint_atom::value, gen);
  spdlog::info(
    "job_started name={} shards={} aggregators={} loaders={} trainers={} steps={} "
    "first_step={} staleness={} batch_size={} nodes={} generation={}",
    spec.name, spec.placement.shards, spec.placement.aggregators, spec.placement.loaders,
    spec.placement.trainers, plan.steps, plan.first_step, plan.staleness, spec.training.batch_size,
    st.config.nodes.size(), gen);
  for (auto& t : st.trainers)
    self->request(t, caf::infinite, run_atom::value, plan)
      .then(
        [self, gen](trainer_report& rep) {
          auto& st = self->state;
          if (gen != st.generation)
            return;
          st.reports.push_back(std::move(rep));
          if (st.reports.size() == st.trainers.size())
            finish(self);
        },
        [self, gen](const caf::error& e) { on_failure(self, gen, error_text(e)); });
}

void launch(self_ptr self) {
  auto& st = self->state;
  ++st.generation;
  st.rec.launched();  // a failure of this generation starts the next recovery
  st.shards.clear();
  st.aggregators.clear();
  st.loaders.clear();
  st.trainers.clear();
  st.reports.clear();
  st.children.clear();
  spawn_children(self);
}

// With the job's data open: size the plan, set up checkpoints, launch the first generation.
void start_job(self_ptr self, const caf::expected<job_data>& data) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  if (!data) {
    fail_job(self, data.error());
    return;
  }
  st.data = *data;
  st.steps = st.data.train_batches / spec.placement.trainers;
  st.job_yaml = job_spec_to_yaml(spec);
  st.best.configure({st.steps, st.data.validation_batches,
                     spec.training.eval_every > 0 ? spec.training.eval_every : st.data.epoch_steps,
                     spec.training.early_stopping, spec.training.target_auc});
  if (auto err = checkpoint_setup(self)) {
    fail_job(self, err);
    return;
  }
  if (spec.training.early_stopping.patience > 0) {
    // The best model's embeddings: beside the checkpoints (storage every node sees), or, without
    // them, under the data cache folder (nodes of one machine).
    static std::atomic<uint64_t> jobs{0};
    st.best.set_dir(!st.cuts.dir().empty()
                      ? (std::filesystem::path(st.cuts.dir()) / "best").string()
                      : (std::filesystem::path(job_data_cache_root(spec.data))
                         / ("best-" + spec.name + "-" + std::to_string(::getpid()) + "-"
                            + std::to_string(jobs++)))
                          .string());
  }
  if (st.config.own_nodes)  // embedded: the in-process agents end with the job
    for (auto& n : st.config.nodes)
      self->link_to(n);
  launch(self);
}

caf::typed_response_promise<job_result> on_run(self_ptr self) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  st.done = self->make_response_promise<job_result>();
  st.started = self->clock().now();
  st.rec.configure(spec.supervision.max_restarts, std::chrono::seconds(spec.supervision.window_s));
  if (st.config.nodes.empty()) {
    fail_job(self, make_error(errc::invalid_config, "no node to run the job on"));
    return *st.done;
  }
  // File data may be converted into its cache first: off this actor's worker thread.
  open_job_data(self, spec, [self](opened_job_data d) { start_job(self, *d); });
  return *st.done;
}

job_supervisor_impl::behavior_type supervisor_behavior(self_ptr self,
                                                       job_supervisor_config config) {
  self->state.config = std::move(config);
  self->set_exit_handler([self](caf::exit_msg& msg) { on_exit(self, msg); });
  return {
    [self](run_atom) { return on_run(self); },
    [self](progress_atom, const progress_report& r) { on_progress(self, r); },
    [self](applied_atom, uint64_t gen, int64_t step, int32_t rank) {
      on_applied(self, gen, step, rank);
    },
    [self](cut_atom, cut_report& r) { on_cut(self, r); },
    [self](checkpoint_atom) { return on_checkpoint(self); },
    [self](checkpoint_atom, uint64_t gen) { on_checkpoint_tick(self, gen); },
    [self](restore_atom, uint64_t gen) {  // after a failure: re-place, restore, go on
      if (gen == self->state.generation)
        replan(self, [self] { launch(self); });
    },
  };
}

}  // namespace supervisor

job_supervisor_actor spawn_job_supervisor(caf::actor_system& sys,
                                          const job_supervisor_config& config) {
  // The public handle: without the supervisor's own messages (supervisor_state.hpp).
  return caf::actor_cast<job_supervisor_actor>(sys.spawn(supervisor::supervisor_behavior, config));
}

}  // namespace satrap
