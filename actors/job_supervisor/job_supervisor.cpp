#include "actors/job_supervisor/job_supervisor.hpp"

#include "actors/job_supervisor/job_checkpoint.hpp"
#include "runtime/job_data.hpp"
#include "actors/job_supervisor/restart_intensity.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>

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

namespace {

using clock_type = std::chrono::steady_clock;

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
  std::vector<int64_t> trainer_steps;
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

void start_training(self_ptr self, uint64_t gen);
void on_failure(self_ptr self, uint64_t gen, const std::string& reason);
void launch(self_ptr self);

void fail_job(self_ptr self, const caf::error& e) {
  auto& st = self->state;
  spdlog::error("job_failed error=\"{}\"", error_text(e));
  for (auto& p : st.on_demand)
    p.deliver(e);
  st.on_demand.clear();
  if (st.done && st.done->pending())
    st.done->deliver(e);
  ++st.generation;
  self->quit(caf::exit_reason::kill);  // takes the linked children with it
}

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
    self->request(st.config.nodes[node], st.config.spawn_timeout, spawn_atom::value, role,
                  st.job_yaml, i, xs...)
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
  if (!st.last) {
    start_training(self, gen);
    return;
  }
  auto meta = *st.last;
  auto dense = checkpoint_read_dense(st.ckpt_dir, meta);
  if (!dense) {
    fail_job(self, dense.error());
    return;
  }
  auto left = std::make_shared<size_t>(st.shards.size() + st.trainers.size());
  auto rows = std::make_shared<int64_t>(0);
  auto one_done = [self, gen, left, rows, meta] {
    if (--*left == 0) {
      spdlog::info("job_restored step={} sequence={} embedding_rows={}", meta.step,
                   meta.sequence, *rows);
      start_training(self, gen);
    }
  };
  auto on_error = [self, gen](const caf::error& e) {
    on_failure(self, gen, "restoring from the checkpoint: " + error_text(e));
  };
  auto root = checkpoint_embedding_root(st.ckpt_dir);
  for (auto& s : st.shards)
    self->request(s, std::chrono::minutes(10), restore_atom::value, root, meta.embedding_sequence)
      .then([rows, one_done](int64_t n) { *rows += n; one_done(); }, on_error);
  for (auto& t : st.trainers)
    self->request(t, std::chrono::minutes(1), restore_atom::value, *dense)
      .then([one_done](int64_t) { one_done(); }, on_error);
}

void spawn_children(self_ptr self) {
  auto& st = self->state;
  auto& pl = st.config.spec.placement;
  auto& where = st.config.placement;
  auto gen = st.generation;
  spawn_role(self, shard_atom::value, "embedding_shard", pl.shards, where.shards, st.shards, [=] {
    auto& st = self->state;
    spawn_role(self, aggregator_atom::value, "gradient_aggregator", pl.aggregators,
               where.aggregators, st.aggregators, [=] {
      auto& st = self->state;
      spawn_role(self, loader_atom::value, "data_loader", pl.loaders, where.loaders, st.loaders,
                 [=] {
        auto& st = self->state;
        spawn_role(self, trainer_atom::value, "dense_trainer", pl.trainers, where.trainers,
                   st.trainers, [=] { restore_and_start(self, gen); }, st.loaders,
                   st.aggregators, caf::actor_cast<progress_sink_actor>(self));
      }, st.aggregators);
    }, st.shards);
  });
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
  auto secs = std::chrono::duration<double>(clock_type::now() - st.started).count();
  auto& p = st.progress;
  p.steps = *std::min_element(st.trainer_steps.begin(), st.trainer_steps.end());
  p.samples_per_sec = secs > 0 ? static_cast<double>(p.samples) / secs : 0.0;
  p.loss = st.loss_samples > 0 ? st.loss_sum / static_cast<double>(st.loss_samples) : 0.0;
  double auc = 0;
  for (auto a : st.trainer_auc)
    auc += a;
  p.running_auc = auc / static_cast<double>(st.trainer_auc.size());
  notify(st);
  st.loss_sum = 0;
  st.loss_samples = 0;
}

// ---- checkpoints ----------------------------------------------------------------------------

int64_t next_periodic_cut(const supervisor_state& st, int64_t from) {
  auto every = st.config.spec.checkpoint.every_steps;
  if (st.ckpt_dir.empty() || every <= 0)
    return -1;
  auto c = (from / every + 1) * every;
  return c < st.steps ? c : -1;
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
void write_checkpoint(self_ptr self) {
  auto& st = self->state;
  auto gen = st.generation;
  auto step = st.cut;
  checkpoint_meta meta;
  meta.sequence = st.sequence + 1;
  meta.step = step;
  meta.embedding_sequence = meta.sequence;
  meta.full = st.since_full == 0 || st.since_full >= st.config.spec.checkpoint.full_every;
  meta.trainers = static_cast<int32_t>(st.trainers.size());
  meta.shards = static_cast<int32_t>(st.shards.size());
  meta.job = st.config.spec.name;
  // What the trainers did since the previous cut becomes committed with this checkpoint.
  auto samples = st.committed_samples;
  auto losses = st.committed_losses;
  size_t base = losses.size();
  for (auto& [rank, r] : st.cut_reports) {
    samples += r.samples;
    if (losses.size() < base + r.step_losses.size())
      losses.resize(base + r.step_losses.size(), 0.0);
    for (size_t i = 0; i < r.step_losses.size(); ++i)
      losses[base + i] += r.step_losses[i];
  }
  meta.samples = samples;
  meta.step_losses = losses;
  auto state = st.cut_reports.at(0).state;
  auto started = clock_type::now();
  auto infos = std::make_shared<std::vector<shard_snapshot_info>>();
  auto left = std::make_shared<size_t>(st.shards.size());
  auto root = checkpoint_embedding_root(st.ckpt_dir);
  for (auto& s : st.shards)
    self->request(s, std::chrono::minutes(10), snapshot_atom::value, root, meta.sequence, meta.full)
      .then(
        [=](const shard_snapshot_info& info) mutable {
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
                                                 st.config.spec.model.embedding, files);
          caf::error err;
          if (!written)
            err = make_error(errc::io_failure, "embedding snapshot manifest: " + written.error());
          if (!err)
            err = checkpoint_write_dense(st.ckpt_dir, meta, state);
          if (!err)
            err = checkpoint_write_meta(st.ckpt_dir, meta);
          if (err) {
            fail_job(self, make_error(errc::io_failure, "checkpoint at step " + std::to_string(step)
                                                          + ": " + error_text(err)));
            return;
          }
          st.sequence = meta.sequence;
          st.since_full = meta.full ? 1 : st.since_full + 1;
          st.committed_samples = meta.samples;
          st.committed_losses = meta.step_losses;
          st.last = meta;
          ++st.progress.checkpoints;
          st.progress.checkpoint_step = step;
          auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - started).count();
          spdlog::info("checkpoint_written step={} sequence={} full={} rows={} ms={:.0f} dir={}",
                       step, meta.sequence, meta.full, meta.embedding_rows, ms, st.ckpt_dir);
          for (auto& p : st.on_demand)
            p.deliver(step);
          st.on_demand.clear();
          notify(st);
          release_trainers(self, next_periodic_cut(st, step));
        },
        [self, gen, step](const caf::error& e) {
          on_failure(self, gen, "checkpoint at step " + std::to_string(step) + ": " + error_text(e));
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
  write_checkpoint(self);
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
  if (st.trainers.empty() || st.recovering || st.reports.size() > 0) {
    promise.deliver(make_error(errc::invalid_config,
                               "the job is not training now (starting, recovering or evaluating)"));
    return promise;
  }
  st.on_demand.push_back(promise);
  if (st.checkpointing || st.on_demand.size() > 1)
    return promise;  // answered by the checkpoint under way or being set up
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
    self->request(t, std::chrono::seconds(30), hold_atom::value)
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
            release_trainers(self, next_periodic_cut(st, *furthest));
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

// ---- results --------------------------------------------------------------------------------

job_result summarize(supervisor_state& st) {
  job_result r;
  std::vector<float> logits, labels, probs;
  auto& spec = st.config.spec;
  auto per_step = static_cast<double>(spec.training.batch_size) * spec.placement.trainers;
  for (auto l : st.committed_losses)
    r.step_losses.push_back(l / per_step);
  r.samples = st.committed_samples;
  auto base = r.step_losses.size();
  std::vector<std::vector<float>> by_rank;  // each trainer's logits: its batches rank, rank+W, ...
  for (auto& rep : st.reports) {
    payload_reader reader(rep.eval);
    auto ev = reader.root<schema::EvalResult>();
    auto before = static_cast<std::ptrdiff_t>(logits.size());
    for (auto [src, dst] : {std::pair{ev.getLogits(), &logits}, {ev.getLabels(), &labels},
                            {ev.getProbs(), &probs}}) {
      auto v = data_view<float>(src);
      dst->insert(dst->end(), v.begin(), v.end());
    }
    by_rank.emplace_back(logits.begin() + before, logits.end());
    r.samples += rep.samples;
    r.step_losses.resize(std::max(r.step_losses.size(), base + rep.step_losses.size()), 0.0);
    for (size_t i = 0; i < rep.step_losses.size(); ++i)
      r.step_losses[base + i] += rep.step_losses[i] / per_step;
    r.params.push_back(rep.params);
  }
  std::vector<float> scores(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    scores[i] = sigmoid(logits[i]);
  // The logits again in test-batch order (only the split's last batch may be short).
  std::vector<size_t> taken(by_rank.size(), 0);
  const auto bs = static_cast<size_t>(spec.training.batch_size);
  for (size_t k = 0; !by_rank.empty(); ++k) {
    auto t = k % by_rank.size();
    auto n = std::min(bs, by_rank[t].size() - taken[t]);
    if (n == 0)
      break;
    r.test_logits.insert(r.test_logits.end(), by_rank[t].begin() + taken[t],
                         by_rank[t].begin() + taken[t] + n);
    taken[t] += n;
  }
  r.test_auc = auc_exact(scores, labels);
  r.oracle_auc = probs.size() == labels.size() ? auc_exact(probs, labels) : std::nan("");
  r.test_logloss = logloss_from_logits(logits, labels);
  r.test_samples = static_cast<int64_t>(labels.size());
  r.data_skipped = st.data.skipped;
  r.train_seconds = std::chrono::duration<double>(clock_type::now() - st.started).count();
  r.samples_per_sec = static_cast<double>(r.samples) / r.train_seconds;
  r.restarts = st.progress.restarts;
  r.batches_replayed = st.progress.batches_replayed;
  r.checkpoints = st.progress.checkpoints;
  r.failures = st.failures;
  return r;
}

// The final model's embeddings (config.final_snapshot_dir, for `satrap train --export`): every
// shard writes a full snapshot after the evaluation, the manifest last; then the result goes out.
void write_final_snapshot(self_ptr self, std::shared_ptr<job_result> result) {
  auto& st = self->state;
  auto dir = st.config.final_snapshot_dir;
  if (dir.empty()) {
    st.done->deliver(std::move(*result));
    return;
  }
  auto seq = st.sequence + 1;  // above any snapshot a shard's table was marked at
  auto infos = std::make_shared<std::vector<snapshot_file_info>>();
  auto left = std::make_shared<size_t>(st.shards.size());
  auto gen = st.generation;
  for (auto& s : st.shards)
    self->request(s, std::chrono::minutes(10), snapshot_atom::value, dir, seq, true)
      .then(
        [self, result, infos, left, dir, seq](const shard_snapshot_info& i) {
          infos->push_back({i.file, static_cast<uint32_t>(i.shard), static_cast<uint64_t>(i.rows),
                            static_cast<uint64_t>(i.bytes), i.checksum});
          if (--*left > 0)
            return;
          auto written = snapshot_write_manifest(dir, seq, 0, self->state.config.spec.model.embedding,
                                                 *infos);
          if (!written) {
            fail_job(self, make_error(errc::io_failure, "final snapshot: " + written.error()));
            return;
          }
          spdlog::info("final_snapshot_written sequence={} dir={}", seq, dir);
          self->state.done->deliver(std::move(*result));
        },
        [self, gen](const caf::error& e) {
          on_failure(self, gen, "final snapshot: " + error_text(e));
        });
}

void finish(self_ptr self) {
  auto& st = self->state;
  std::sort(st.reports.begin(), st.reports.end(),
            [](auto& a, auto& b) { return a.rank < b.rank; });
  auto result = std::make_shared<job_result>(summarize(st));
  auto left = std::make_shared<size_t>(st.shards.size());
  auto gen = st.generation;
  for (auto& shard : st.shards)
    self->request(shard, std::chrono::seconds(30), stats_atom::value)
      .then(
        [self, result, left](const shard_stats& s) {
          result->embedding_rows += s.rows;
          result->gradients_lost += s.not_admitted_gradients;
          if (--*left == 0)
            write_final_snapshot(self, result);
        },
        [self, gen](const caf::error& e) {
          on_failure(self, gen, "reading shard statistics: " + error_text(e));
        });
}

// ---- generations: start, failure, recovery ----------------------------------------------------

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
  plan.first_step = st.last ? st.last->step : 0;
  plan.cut = next_periodic_cut(st, plan.first_step);
  st.cut = plan.cut;
  st.cut_reports.clear();
  st.checkpointing = false;
  st.trainer_steps.assign(st.trainers.size(), plan.first_step);
  st.trainer_auc.assign(st.trainers.size(), 0.5);
  st.progress.steps_total = plan.steps;
  st.recovering = false;
  if (!st.ckpt_dir.empty() && spec.checkpoint.every_seconds > 0)
    self->delayed_send(self, std::chrono::seconds(spec.checkpoint.every_seconds),
                       checkpoint_atom::value, gen);
  spdlog::info("job_started name={} shards={} aggregators={} loaders={} trainers={} steps={} "
               "first_step={} staleness={} batch_size={} nodes={} generation={}",
               spec.name, spec.placement.shards, spec.placement.aggregators,
               spec.placement.loaders, spec.placement.trainers, plan.steps, plan.first_step,
               plan.staleness, spec.training.batch_size, st.config.nodes.size(), gen);
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

// Picks the nodes for the next generation: those the directory reports alive, less those whose
// actors this supervisor saw become unreachable; then plans the job on them.
void replan(self_ptr self, std::function<void()> next) {
  auto& st = self->state;
  if (!st.config.directory) {  // embedded: the one local agent
    next();
    return;
  }
  auto gen = st.generation;
  self->request(st.config.directory, std::chrono::seconds(30), nodes_atom::value)
    .then(
      [self, gen, next](std::vector<std::string>& names, std::vector<node_agent_actor>& agents) {
        auto& st = self->state;
        if (gen != st.generation)
          return;
        manifest alive = st.config.cluster;
        alive.nodes.clear();
        std::vector<node_agent_actor> nodes;
        std::vector<std::string> node_names;
        for (auto& n : st.config.cluster.nodes) {
          auto it = std::find(names.begin(), names.end(), n.name);
          if (it == names.end())
            continue;
          auto& agent = agents[static_cast<size_t>(it - names.begin())];
          if (st.lost_nodes.count(n.name)) {
            // Lost under this job: only a new process of that node (a new agent) may serve again.
            auto old = std::find(st.config.node_names.begin(), st.config.node_names.end(), n.name);
            if (old != st.config.node_names.end()
                && st.config.nodes[static_cast<size_t>(old - st.config.node_names.begin())] == agent)
              continue;
            st.lost_nodes.erase(n.name);
          }
          alive.nodes.push_back(n);
          nodes.push_back(agent);
          node_names.push_back(n.name);
        }
        auto plan = alive.nodes.empty()
                      ? caf::expected<placement_plan>(make_error(errc::invalid_config, "no node is alive"))
                      : plan_job(alive, st.config.spec);
        if (!plan) {
          fail_job(self, make_error(errc::invalid_config,
                                    "cannot re-place the job after a failure ("
                                      + st.failures.back() + "): " + error_text(plan.error())));
          return;
        }
        st.config.nodes = std::move(nodes);
        st.config.node_names = std::move(node_names);
        st.config.placement = job_placement_of(*plan);
        std::string where;
        for (auto& n : st.config.node_names)
          where += (where.empty() ? "" : ",") + n;
        spdlog::info("job_replaced nodes={} actors={}", where, plan->actors.size());
        next();
      },
      [self, gen](const caf::error& e) {
        fail_job(self, make_error(errc::peer_failure,
                                  "asking which nodes are alive: " + error_text(e)));
      });
}

void launch(self_ptr self) {
  auto& st = self->state;
  ++st.generation;
  st.recovering = false;  // a failure of this generation starts the next recovery
  st.shards.clear();
  st.aggregators.clear();
  st.loaders.clear();
  st.trainers.clear();
  st.reports.clear();
  st.children.clear();
  spawn_children(self);
}

void on_failure(self_ptr self, uint64_t gen, const std::string& reason) {
  auto& st = self->state;
  if (gen != st.generation || st.recovering || !st.done || !st.done->pending())
    return;
  st.recovering = true;
  auto now = clock_type::now();
  st.failures.push_back(reason);
  st.progress.last_failure = reason;
  for (auto& p : st.on_demand)
    p.deliver(make_error(errc::peer_failure, "the job failed before the checkpoint: " + reason));
  st.on_demand.clear();
  if (!st.intensity->allow(now)) {
    auto& sv = st.config.spec.supervision;
    fail_job(self, make_error(errc::peer_failure,
                              "restart intensity exceeded (" + std::to_string(sv.max_restarts)
                                + " restarts within " + std::to_string(sv.window_s)
                                + " s); last failure: " + reason));
    return;
  }
  // Everything trained after the newest checkpoint is rolled back and trained again.
  auto resume = st.last ? st.last->step : 0;
  int64_t replayed = 0;
  for (auto s : st.trainer_steps)
    replayed += std::max<int64_t>(0, s - resume);
  st.progress.restarts += 1;
  st.progress.batches_replayed += replayed;
  st.progress.samples = st.committed_samples;
  st.progress.steps = resume;  // progress restarts from the checkpoint
  st.trainer_steps.assign(st.trainer_steps.size(), resume);
  spdlog::warn("job_restarting reason=\"{}\" restart={} resume_step={} batches_replayed={}",
               reason, st.progress.restarts, resume, replayed);
  notify(st);
  ++st.generation;  // from here on, the old generation's replies and exits are stale
  for (auto& [addr, node] : st.children)
    if (auto a = caf::actor_cast<caf::actor>(addr))
      self->send_exit(a, caf::exit_reason::kill);
  st.children.clear();
  // Give the cluster a moment to notice a lost node before asking who is alive.
  auto gen_now = st.generation;
  self->delayed_send(self, std::chrono::seconds(1), restore_atom::value, gen_now);
}

void on_exit(self_ptr self, caf::exit_msg& msg) {
  auto& st = self->state;
  auto it = st.children.find(msg.source);
  if (it == st.children.end()) {
    // Not a child of this generation: one we stopped (ignored), or whoever runs the job
    // shutting it down (cancel).
    if (msg.reason == caf::exit_reason::user_shutdown)
      self->quit(msg.reason);
    return;
  }
  auto node = it->second;
  st.children.erase(it);
  if (msg.reason == caf::exit_reason::remote_link_unreachable) {
    st.lost_nodes.insert(node);
    on_failure(self, st.generation, "node " + node + " lost (connection dropped or heartbeats stopped)");
  } else if (msg.reason) {
    on_failure(self, st.generation, "an actor on node " + node + " failed: " + error_text(msg.reason));
  }
}

caf::typed_response_promise<job_result> on_run(self_ptr self) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  st.done = self->make_response_promise<job_result>();
  st.started = clock_type::now();
  st.intensity.emplace(spec.supervision.max_restarts, std::chrono::seconds(spec.supervision.window_s));
  auto data = job_data_open(spec);
  if (!data) {
    fail_job(self, data.error());
    return *st.done;
  }
  st.data = std::move(*data);
  st.steps = st.data.train_batches / spec.placement.trainers;
  st.job_yaml = job_spec_to_yaml(spec);
  st.ckpt_dir = spec.checkpoint.dir;
  auto& resume = spec.checkpoint.resume_from;
  if (!resume.empty()) {
    auto latest = checkpoint_latest(resume);
    if (!latest) {
      fail_job(self, latest.error());
      return *st.done;
    }
    if (!*latest) {
      fail_job(self, make_error(errc::invalid_config,
                                "checkpoint.resume_from: no complete checkpoint in " + resume));
      return *st.done;
    }
    auto& m = **latest;
    if (m.trainers != spec.placement.trainers) {
      fail_job(self, make_error(errc::invalid_config,
                                "checkpoint.resume_from: the checkpoint has "
                                  + std::to_string(m.trainers) + " trainers, the job "
                                  + std::to_string(spec.placement.trainers)));
      return *st.done;
    }
    if (st.ckpt_dir.empty())
      st.ckpt_dir = resume;
    if (st.ckpt_dir != resume) {
      fail_job(self, make_error(errc::invalid_config,
                                "checkpoint.resume_from must be checkpoint.dir (or checkpoint.dir "
                                "empty): new checkpoints continue the chain of the old ones"));
      return *st.done;
    }
    st.last = m;
    st.sequence = m.sequence;
    st.committed_samples = m.samples;
    st.committed_losses = m.step_losses;
    st.progress.checkpoint_step = m.step;
    st.progress.samples = m.samples;
    spdlog::info("job_resuming step={} sequence={} dir={}", m.step, m.sequence, resume);
  } else if (!st.ckpt_dir.empty()) {
    auto latest = checkpoint_latest(st.ckpt_dir);
    if (latest && *latest) {
      fail_job(self, make_error(errc::invalid_config,
                                "checkpoint.dir " + st.ckpt_dir
                                  + " already holds checkpoints: continue them with "
                                    "checkpoint.resume_from (--resume) or choose an empty folder"));
      return *st.done;
    }
  }
  if (st.config.nodes.empty()) {
    fail_job(self, make_error(errc::invalid_config, "no node to run the job on"));
    return *st.done;
  }
  if (st.config.own_nodes)  // embedded: the in-process agents end with the job
    for (auto& n : st.config.nodes)
      self->link_to(n);
  launch(self);
  return *st.done;
}

job_supervisor_actor::behavior_type supervisor_behavior(self_ptr self,
                                                        job_supervisor_config config) {
  self->state.config = std::move(config);
  self->set_exit_handler([self](caf::exit_msg& msg) { on_exit(self, msg); });
  return {
    [self](run_atom) { return on_run(self); },
    [self](progress_atom, const progress_report& r) { on_progress(self, r); },
    [self](cut_atom, cut_report& r) { on_cut(self, r); },
    [self](checkpoint_atom) { return on_checkpoint(self); },
    [self](checkpoint_atom, uint64_t gen) {  // checkpoint.every_seconds
      auto& st = self->state;
      if (gen != st.generation)
        return;
      if (!st.recovering && st.reports.empty() && !st.checkpointing && !st.trainers.empty())
        begin_cut(self);
      self->delayed_send(self, std::chrono::seconds(st.config.spec.checkpoint.every_seconds),
                         checkpoint_atom::value, gen);
    },
    [self](restore_atom, uint64_t gen) {  // after a failure: re-place, restore, go on
      if (gen == self->state.generation)
        replan(self, [self] { launch(self); });
    },
  };
}

}  // namespace

job_supervisor_actor spawn_job_supervisor(caf::actor_system& sys,
                                          const job_supervisor_config& config) {
  return sys.spawn(supervisor_behavior, config);
}

}  // namespace satrap
