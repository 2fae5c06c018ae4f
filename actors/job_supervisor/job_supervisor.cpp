#include "actors/job_supervisor/job_supervisor.hpp"

#include "actors/job_supervisor/job_data.hpp"

#include "models/metrics.hpp"
#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <optional>

namespace satrap {

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
  // Progress, summed over trainers.
  std::vector<int64_t> trainer_steps;
  std::vector<double> trainer_auc;
  job_progress progress;
  double loss_sum = 0.0;
  int64_t loss_samples = 0;
  static inline const char* name = "job_supervisor";
};

using self_ptr = job_supervisor_actor::stateful_pointer<supervisor_state>;

void start_training(self_ptr self);

void spawn_failed(self_ptr self, const char* role, const caf::error& e) {
  auto& st = self->state;
  spdlog::error("job_failed stage=spawn role={} error=\"{}\"", role, error_text(e));
  if (st.done->pending())
    st.done->deliver(make_error(errc::peer_failure,
                                std::string("spawning ") + role + ": " + error_text(e)));
}

node_agent_actor& node_for(supervisor_state& st, const std::vector<uint32_t>& where, size_t i) {
  return st.config.nodes[where.empty() ? 0 : where[i]];
}

// Spawns `count` actors of one role through the node agents, in parallel; `next` runs once all
// handles are in `out` (by index).
template <class Handle, class Role, class Next, class... Ts>
void spawn_role(self_ptr self, Role role, const char* name, int32_t count,
                const std::vector<uint32_t>& where, std::vector<Handle>& out, Next next,
                const Ts&... xs) {
  auto& st = self->state;
  out.assign(static_cast<size_t>(count), Handle{});
  auto left = std::make_shared<int32_t>(count);
  for (int32_t i = 0; i < count; ++i)
    self->request(node_for(st, where, static_cast<size_t>(i)), st.config.spawn_timeout,
                  spawn_atom::value, role, st.job_yaml, i, xs...)
      .then(
        [self, &out, i, left, next](Handle& h) {
          self->link_to(h);
          out[static_cast<size_t>(i)] = std::move(h);
          if (--*left == 0)
            next();
        },
        [self, name](const caf::error& e) { spawn_failed(self, name, e); });
}

void spawn_children(self_ptr self) {
  auto& st = self->state;
  auto& pl = st.config.spec.placement;
  auto& where = st.config.placement;
  spawn_role(self, shard_atom::value, "embedding_shard", pl.shards, where.shards, st.shards, [=] {
    auto& st = self->state;
    spawn_role(self, aggregator_atom::value, "gradient_aggregator", pl.aggregators,
               where.aggregators, st.aggregators, [=] {
      auto& st = self->state;
      spawn_role(self, loader_atom::value, "data_loader", pl.loaders, where.loaders, st.loaders,
                 [=] {
        auto& st = self->state;
        spawn_role(self, trainer_atom::value, "dense_trainer", pl.trainers, where.trainers,
                   st.trainers, [=] { start_training(self); }, st.loaders, st.aggregators,
                   caf::actor_cast<progress_sink_actor>(self));
      }, st.aggregators);
    }, st.shards);
  });
}

void on_progress(self_ptr self, const progress_report& r) {
  auto& st = self->state;
  auto rank = static_cast<size_t>(r.rank);
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
  st.config.observer(p);
  st.loss_sum = 0;
  st.loss_samples = 0;
}

job_result summarize(supervisor_state& st) {
  job_result r;
  std::vector<float> logits, labels, probs;
  auto& spec = st.config.spec;
  auto per_step = static_cast<double>(spec.training.batch_size) * spec.placement.trainers;
  for (auto& rep : st.reports) {
    payload_reader reader(rep.eval);
    auto ev = reader.root<schema::EvalResult>();
    for (auto [src, dst] : {std::pair{ev.getLogits(), &logits}, {ev.getLabels(), &labels},
                            {ev.getProbs(), &probs}}) {
      auto v = data_view<float>(src);
      dst->insert(dst->end(), v.begin(), v.end());
    }
    r.samples += rep.samples;
    r.step_losses.resize(rep.step_losses.size(), 0.0);
    for (size_t i = 0; i < rep.step_losses.size(); ++i)
      r.step_losses[i] += rep.step_losses[i] / per_step;
    r.params.push_back(rep.params);
  }
  std::vector<float> scores(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    scores[i] = sigmoid(logits[i]);
  r.test_auc = auc_exact(scores, labels);
  r.oracle_auc = probs.size() == labels.size() ? auc_exact(probs, labels) : std::nan("");
  r.test_logloss = logloss_from_logits(logits, labels);
  r.test_samples = static_cast<int64_t>(labels.size());
  r.data_skipped = st.data.skipped;
  r.train_seconds = std::chrono::duration<double>(clock_type::now() - st.started).count();
  r.samples_per_sec = static_cast<double>(r.samples) / r.train_seconds;
  return r;
}

void finish(self_ptr self) {
  auto& st = self->state;
  std::sort(st.reports.begin(), st.reports.end(),
            [](auto& a, auto& b) { return a.rank < b.rank; });
  auto result = std::make_shared<job_result>(summarize(st));
  auto left = std::make_shared<size_t>(st.shards.size());
  for (auto& shard : st.shards)
    self->request(shard, std::chrono::seconds(30), stats_atom::value)
      .then(
        [self, result, left](const shard_stats& s) {
          result->embedding_rows += s.rows;
          if (--*left == 0)
            self->state.done->deliver(std::move(*result));
        },
        [self](const caf::error& e) {
          if (self->state.done->pending())
            self->state.done->deliver(e);
        });
}

caf::typed_response_promise<job_result> on_run(self_ptr self) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  st.done = self->make_response_promise<job_result>();
  st.started = clock_type::now();
  auto data = job_data_open(spec);
  if (!data) {
    spdlog::error("job_failed error=\"{}\"", error_text(data.error()));
    st.done->deliver(data.error());
    return *st.done;
  }
  st.data = std::move(*data);
  st.job_yaml = job_spec_to_yaml(spec);
  if (st.config.nodes.empty()) {  // embedded: one in-process agent, ended with the job
    st.config.nodes.push_back(spawn_node_agent(self->system(), {"local"}));
    self->link_to(st.config.nodes.back());
  }
  spawn_children(self);
  return *st.done;
}

void start_training(self_ptr self) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  std::vector<caf::actor> peers;
  for (auto& t : st.trainers)
    peers.push_back(caf::actor_cast<caf::actor>(t));
  for (auto& t : st.trainers)
    self->send(t, peers_atom::value, peers);
  st.trainer_steps.assign(st.trainers.size(), 0);
  st.trainer_auc.assign(st.trainers.size(), 0.5);
  train_plan plan;
  plan.steps = st.data.train_batches / spec.placement.trainers;
  plan.test_batches = st.data.test_batches;
  plan.staleness = spec.training.staleness;
  st.progress.steps_total = plan.steps;
  spdlog::info("job_started name={} shards={} aggregators={} loaders={} trainers={} steps={} "
               "staleness={} batch_size={} nodes={}",
               spec.name, spec.placement.shards, spec.placement.aggregators,
               spec.placement.loaders, spec.placement.trainers, plan.steps, plan.staleness,
               spec.training.batch_size, st.config.nodes.size());
  for (auto& t : st.trainers)
    self->request(t, caf::infinite, run_atom::value, plan)
      .then(
        [self](trainer_report& rep) {
          auto& st = self->state;
          st.reports.push_back(std::move(rep));
          if (st.reports.size() == st.trainers.size())
            finish(self);
        },
        [self](const caf::error& e) {
          spdlog::error("job_failed error=\"{}\"", error_text(e));
          if (self->state.done->pending())  // the first failure is the reason
            self->state.done->deliver(e);
        });
}

job_supervisor_actor::behavior_type supervisor_behavior(self_ptr self,
                                                        job_supervisor_config config) {
  self->state.config = std::move(config);
  return {
    [self](run_atom) { return on_run(self); },
    [self](progress_atom, const progress_report& r) { on_progress(self, r); },
  };
}

}  // namespace

job_supervisor_actor spawn_job_supervisor(caf::actor_system& sys,
                                          const job_supervisor_config& config) {
  return sys.spawn(supervisor_behavior, config);
}

}  // namespace satrap
