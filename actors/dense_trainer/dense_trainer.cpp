#include "actors/dense_trainer/trainer_state.hpp"

#ifdef SATRAP_HAVE_CUDA
#include "actors/dense_trainer/nccl_device_comm.hpp"
#include "models/cuda/cuda_dense_model.hpp"
#endif
#include "models/assert.hpp"
#include "models/dense/batch_split.hpp"

#include <spdlog/spdlog.h>

namespace satrap {

namespace trainer_detail {

void fail(self_ptr self, const std::string& what, const caf::error& e) {
  auto& st = self->state;
  if (st.failed)
    return;
  st.failed = true;
  spdlog::error("trainer_failed rank={} what=\"{}\" error=\"{}\"", st.config.rank, what,
                error_text(e));
  if (st.done)
    st.done->deliver(make_error(errc::peer_failure, "trainer " + std::to_string(st.config.rank)
                                                      + ": " + what + ": " + error_text(e)));
}

// Asks a loader and an aggregator for the two halves of batch `n`; `on_ready` runs when both

void issue_fetches(self_ptr self) {
  auto& st = self->state;
  while (!st.failed && st.loop.next_fetch < st.plan.steps
         && (st.cuts.step < 0 || st.loop.next_fetch < st.cuts.step)
         && st.loop.next_fetch - st.plan.staleness - 1 <= st.loop.global_applied) {
    auto step = st.loop.next_fetch++;
    // The staleness bound: no step is fetched (its ids looked up) more than `staleness` steps
    // ahead of the last step applied everywhere.
    SATRAP_ASSERT(step - st.loop.global_applied - 1 <= st.plan.staleness,
                  "step={} applied={} staleness={}", step, st.loop.global_applied,
                  st.plan.staleness);
    fetch_batch(self, &st.loop.inputs, step, global_batch(st, step), split_code(data_split::train),
                [self] { try_compute(self); });
  }
}

void report_progress(trainer_state& st, int64_t samples, double loss_sum, bool force) {
  st.progress.samples += samples;
  st.progress.loss_sum += loss_sum;
  if (!force && st.loop.next_compute % st.config.progress_every != 0)
    return;
  st.progress.rank = st.config.rank;
  st.progress.step = st.loop.next_compute;
  st.progress.running_auc = st.auc->value();
  if (st.config.progress)
    caf::anon_send(st.config.progress, progress_atom::value, st.progress);
  st.progress = progress_report{};
}

void on_applied(self_ptr self, int64_t step) {
  auto& st = self->state;
  // Every rank applies each step once, in order; a step at or below global_applied is done.
  SATRAP_ASSERT(step > st.loop.global_applied && step < st.plan.steps,
                "step={} applied={} steps={}", step, st.loop.global_applied, st.plan.steps);
  SATRAP_ASSERT(st.loop.applied_count[step] < st.config.world, "step={} applied by {} of {} ranks",
                step, st.loop.applied_count[step], st.config.world);
  if (++st.loop.applied_count[step] < st.config.world)
    return;
  while (!st.loop.applied_count.empty()
         && st.loop.applied_count.begin()->first == st.loop.global_applied + 1
         && st.loop.applied_count.begin()->second == st.config.world) {
    st.loop.applied_count.erase(st.loop.applied_count.begin());
    ++st.loop.global_applied;
  }
  issue_fetches(self);
  check_cut(self);
  if (st.loop.global_applied == st.plan.steps - 1 && st.cuts.step != st.plan.steps)
    start_test(self);
}

caf::typed_response_promise<trainer_report> on_run(self_ptr self, const train_plan& plan) {
  auto& st = self->state;
  st.plan = plan;
  st.loop.next_fetch = st.loop.next_compute = plan.first_step;
  st.loop.global_applied = plan.first_step - 1;
  st.loop.prev_rank_applied = plan.first_step - 1;
  st.loop.held_push.reset();
  st.cuts.step = plan.cut;
  drop_staged(st);  // a new plan: nothing staged for an earlier one is computed
  st.done = self->make_response_promise<trainer_report>();
  comm_open(self);
  st.eval.test.split = data_split::test;
  for (int64_t t = st.config.rank; t < plan.test_batches; t += st.config.world)
    st.eval.test.batches.push_back(t);
  spdlog::debug("trainer_started rank={} world={} steps={} staleness={} params={}", st.config.rank,
                st.config.world, plan.steps, plan.staleness, st.model->params().size());
  if (plan.first_step >= plan.steps)
    start_test(self);
  else
    issue_fetches(self);
  return *st.done;
}

dense_trainer_impl::behavior_type trainer_behavior(
  self_ptr self, dense_trainer_config config, std::shared_ptr<std::unique_ptr<dense_model>> model) {
  // An exception fails the actor with its message (and bad_alloc as no_resource), not CAF's
  // bare "runtime_error": the supervisor's record and its restart decision see the cause.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& e) {
    return exception_error(e, "dense trainer");
  });
  auto& st = self->state;
  st.config = std::move(config);
  st.model = std::move(*model);
  st.optimizer = std::make_unique<dense_optimizer>(st.config.optimizer, st.model->params().size());
  st.auc = std::make_unique<running_auc>(st.config.auc_window, st.config.auc_refresh);
  st.meter = meter_handle("dense_trainer", st.config.rank, st.config.job);
  st.param_count = st.model->params().size();
  if (st.config.world > 1 && st.config.comm_factory)
    st.ar.device_ar.emplace(st.config.rank, st.config.world, *st.config.comm_factory);
  else if (st.config.world > 1)
    st.ar.ring.emplace(st.config.rank, st.config.world);
  return {
    [self](peers_atom, const std::vector<caf::actor>& peers) {
      self->state.peers.clear();
      for (auto& p : peers)
        self->state.peers.push_back(caf::actor_cast<dense_trainer_actor>(p));
    },
    [self](chunk_atom, capnp_payload& chunk) {
      self->state.meter.on_message(self);
      self->state.ar.inbox.push_back(std::move(chunk));
      drain_inbox(self);
    },
    [self](applied_atom, int64_t step, int32_t rank) {
      self->state.meter.on_message(self);
      on_peer_applied(self, step, rank);
    },
    [self](comm_id_atom, uint64_t generation, const std::string& id) {
      on_comm_id(self, generation, id);
    },
    [self](tick_atom) { on_comm_tick(self); },
    [self](watch_atom) { watch_tick(self, self->state.watch, self->state.config.timeout); },
    [self](cut_atom, int64_t next) { on_cut(self, next); },
    [self](hold_atom) {
      auto& st = self->state;
      st.cuts.step = st.loop.next_fetch;  // the supervisor answers with cut(c >= this)
      st.cuts.reported = false;
      return st.loop.next_fetch;
    },
    [self](restore_atom, const capnp_payload& state) { return on_restore(self, state); },
    [self](eval_atom, int64_t batches) { return on_validate(self, batches); },
    [self](run_atom, const train_plan& plan) { return on_run(self, plan); },
  };
}

}  // namespace trainer_detail

namespace {

caf::expected<std::unique_ptr<dense_model>> make_model(const dense_trainer_config& c) {
  if (!c.cuda && c.model.precision != dense_precision::fp32)
    return make_error(errc::invalid_config, std::string("model.precision ")
                                              + dense_precision_name(c.model.precision)
                                              + ": the CPU dense path computes in fp32 only");
  if (!c.cuda && c.model.type == dense_model_type::torchscript) {
    // libtorch at one intra-op thread; with blas_threads > 1 the batch is split over replicas of
    // the module as for the built-in models (batch_split.hpp): on 2 cores torch's own 2 threads
    // ran the Kaggle DLRM at 0.2-0.6 of its 1 thread (tests/bench/torchscript_vs_torch.sh).
    auto m = make_dense_model_checked(c.model, c.seed, 1);
    if (!m)
      return make_error(errc::invalid_config, m.error());
    if (c.blas_threads <= 1)
      return std::move(*m);
  }
  if (!c.cuda)  // splits each step's batch over blas_threads threads (batch_split.hpp)
    return make_cpu_dense_model(c.model, c.seed, c.blas_threads);
#ifdef SATRAP_HAVE_CUDA
  auto devices = cuda_device_count();
  if (!devices)
    return make_error(errc::invalid_config, "training.device cuda: " + devices.error());
  if (devices.value() == 0)
    return make_error(errc::invalid_config, "training.device cuda: this node has no CUDA device");
  auto m = make_cuda_dense_model(c.model, c.seed, c.rank % devices.value());
  if (!m)
    return make_error(errc::invalid_config, "training.device cuda: " + m.error());
  // The dense optimizer steps on the device (trainer_optimizer.cpp); a ring all-reduce (CPU
  // trainers' protocol, no communicator) would still work on the host mirrors.
  if (auto s = m.value()->set_optimizer(c.optimizer); !s)
    return make_error(errc::invalid_config, "training.device cuda: " + s.error());
  return std::unique_ptr<dense_model>(std::move(m.value()));
#else
  return make_error(errc::invalid_config,
                    "training.device cuda: this satrap was built without CUDA (nvcc not found; "
                    "see SATRAP_CUDA)");
#endif
}

}  // namespace

caf::expected<dense_trainer_actor> spawn_dense_trainer(caf::actor_system& sys,
                                                       dense_trainer_config config) {
  auto model = make_model(config);
  if (!model)
    return model.error();
#ifdef SATRAP_HAVE_CUDA
  if (config.cuda && config.world > 1 && !config.comm_factory) {
    auto nccl = nccl_device_comm_factory(**model);
    if (!nccl)
      return nccl.error();
    config.comm_factory = std::make_shared<const device_comm_factory>(std::move(*nccl));
  }
#endif
  // The public handle: without the trainer's own timer messages (trainer_state.hpp).
  return caf::actor_cast<dense_trainer_actor>(
    sys.spawn(trainer_detail::trainer_behavior, config,
              std::make_shared<std::unique_ptr<dense_model>>(std::move(*model))));
}

}  // namespace satrap
