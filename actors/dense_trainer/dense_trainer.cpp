#include "actors/dense_trainer/dense_trainer.hpp"

#include "actors/dense_trainer/ring_allreduce.hpp"
#include "models/metrics.hpp"
#include "runtime/actor_meter.hpp"
#ifdef SATRAP_HAVE_CUDA
#include "models/cuda/cuda_dlrm.hpp"
#endif
#include "runtime/batch_key.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "models/assert.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <deque>
#include <map>
#include <optional>

namespace satrap {

namespace {

// The two halves of one batch, as they arrive.
struct batch_inputs {
  std::optional<capnp_payload> dense;
  std::optional<capnp_payload> pooled;
  bool ready() const { return dense && pooled; }
};

// One evaluation pass over a list of batches of one split.
struct eval_run {
  data_split split = data_split::test;
  std::vector<int64_t> batches;
  size_t next = 0;
  size_t done = 0;
  std::map<int64_t, batch_inputs> inputs;
  std::vector<float> logits, labels, probs;
  std::vector<uint64_t> groups;
  std::function<void()> on_done;  // runs once every batch is in
  capnp_payload result() const;
};

struct trainer_state {
  dense_trainer_config config;
  std::unique_ptr<dense_model> model;
  std::unique_ptr<dense_optimizer> optimizer;
  std::vector<dense_trainer_actor> peers;
  std::optional<ring_allreduce> ring;
  std::deque<capnp_payload> inbox;  // chunks that arrived before their all-reduce started
  train_plan plan;
  std::optional<caf::typed_response_promise<trainer_report>> done;
  bool failed = false;
  // Step loop.
  int64_t next_fetch = 0;
  int64_t next_compute = 0;
  int64_t global_applied = -1;      // every step <= this is applied on every trainer
  int64_t cut = -1;                 // no fetch of a step >= cut (-1: none)
  bool cut_reported = false;        // the cut_report for `cut` is sent
  std::map<int64_t, int32_t> applied_count;
  std::map<int64_t, batch_inputs> inputs;
  capnp_payload pending_grads;      // PooledGradients of the step being all-reduced
  std::vector<float> logits;
  // Progress.
  std::unique_ptr<running_auc> auc;
  progress_report progress;
  trainer_report report;
  // Evaluation.
  eval_run test;                      // this trainer's test batches, after the last step
  bool test_started = false;
  std::optional<eval_run> validation; // a validation pass at a cut
  meter_handle meter;  // for the status endpoint
  static inline const char* name = "dense_trainer";
};

using self_ptr = dense_trainer_actor::stateful_pointer<trainer_state>;

void try_compute(self_ptr self);
void issue_fetches(self_ptr self);
void eval_issue(self_ptr self, eval_run* e);
void start_test(self_ptr self);

int64_t global_batch(const trainer_state& st, int64_t step) {
  return step * st.config.world + st.config.rank;
}

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
// are in `slot`.
template <class Slots, class OnReady>
void fetch_batch(self_ptr self, Slots* slots, int64_t key, int64_t n, int8_t split,
                 OnReady on_ready) {
  auto& st = self->state;
  auto& loader = st.config.loaders[static_cast<size_t>(n) % st.config.loaders.size()];
  auto& agg = st.config.aggregators[aggregator_for_batch(n, st.config.aggregators.size())];
  auto on_error = [self, n](const caf::error& e) {
    fail(self, "fetching batch " + std::to_string(n), e);
  };
  self->request(loader, st.config.timeout, fetch_atom::value, n, split)
    .then([slots, key, on_ready](capnp_payload& p) {
            auto& in = (*slots)[key];
            in.dense = std::move(p);
            if (in.ready())
              on_ready();
          },
          on_error);
  self->request(agg, st.config.timeout, pooled_atom::value, n, split)
    .then([slots, key, on_ready](capnp_payload& p) {
            auto& in = (*slots)[key];
            in.pooled = std::move(p);
            if (in.ready())
              on_ready();
          },
          on_error);
}

void issue_fetches(self_ptr self) {
  auto& st = self->state;
  while (!st.failed && st.next_fetch < st.plan.steps && (st.cut < 0 || st.next_fetch < st.cut)
         && st.next_fetch - st.plan.staleness - 1 <= st.global_applied) {
    auto step = st.next_fetch++;
    // The staleness bound: no step is fetched (its ids looked up) more than `staleness` steps
    // ahead of the last step applied everywhere.
    SATRAP_ASSERT(step - st.global_applied - 1 <= st.plan.staleness, "step={} applied={} staleness={}",
                  step, st.global_applied, st.plan.staleness);
    fetch_batch(self, &st.inputs, step, global_batch(st, step), split_code(data_split::train),
                [self] { try_compute(self); });
  }
}

void report_progress(trainer_state& st, int64_t samples, double loss_sum, bool force) {
  st.progress.samples += samples;
  st.progress.loss_sum += loss_sum;
  if (!force && st.next_compute % st.config.progress_every != 0)
    return;
  st.progress.rank = st.config.rank;
  st.progress.step = st.next_compute;
  st.progress.running_auc = st.auc->value();
  if (st.config.progress)
    caf::anon_send(st.config.progress, progress_atom::value, st.progress);
  st.progress = progress_report{};
}

capnp_payload make_state(const trainer_state& st) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DenseState>();
  out.setStep(st.next_compute);
  auto p = st.model->params();
  out.setParams(data_of(std::span<const float>(p.data(), p.size())));
  out.setOptimizerSteps(st.optimizer->steps());
  out.setM(data_of(st.optimizer->m()));
  out.setV(data_of(st.optimizer->v()));
  return payload_encode(mb);
}

// At a cut once every step below it is applied everywhere: report, with what was trained since
// the previous cut, and wait for `cut(next)`.
void check_cut(self_ptr self) {
  auto& st = self->state;
  if (st.failed || st.cut < 0 || st.cut_reported || st.global_applied != st.cut - 1
      || st.next_compute != st.cut)
    return;
  st.cut_reported = true;
  cut_report r;
  r.rank = st.config.rank;
  r.step = st.cut;
  r.samples = st.report.samples;
  r.step_losses = std::move(st.report.step_losses);
  if (st.config.rank == 0)
    r.state = make_state(st);
  st.report.samples = 0;
  st.report.step_losses.clear();
  spdlog::debug("trainer_at_cut rank={} step={}", st.config.rank, st.cut);
  if (st.config.progress)
    caf::anon_send(st.config.progress, cut_atom::value, std::move(r));
}

void on_cut(self_ptr self, int64_t next) {
  auto& st = self->state;
  if (next == stop_at_cut) {  // training ends here: every step before next_compute is applied
    st.plan.steps = st.next_compute;
    st.cut = -1;
    start_test(self);
    return;
  }
  st.cut = next;
  if (st.global_applied == st.plan.steps - 1 && st.next_compute == st.plan.steps
      && st.cut != st.plan.steps) {
    start_test(self);
    return;
  }
  st.cut_reported = false;
  issue_fetches(self);
  check_cut(self);
}

caf::result<int64_t> on_restore(self_ptr self, const capnp_payload& state) {
  auto& st = self->state;
  auto model = st.model->params();
  auto in = decode_dense_state(state, model.size());
  if (!in)
    return make_error(errc::invalid_payload, "restore: " + error_text(in.error()));
  if (!st.optimizer->set_state(in->m, in->v, in->optimizer_steps))
    return make_error(errc::invalid_payload,
                      "restore: the checkpoint's optimizer state does not fit this optimizer");
  std::copy(in->params.begin(), in->params.end(), model.begin());
  return in->step;
}

void on_applied(self_ptr self, int64_t step) {
  auto& st = self->state;
  // Every rank applies each step once, in order; a step at or below global_applied is done.
  SATRAP_ASSERT(step > st.global_applied && step < st.plan.steps, "step={} applied={} steps={}",
                step, st.global_applied, st.plan.steps);
  SATRAP_ASSERT(st.applied_count[step] < st.config.world, "step={} applied by {} of {} ranks",
                step, st.applied_count[step], st.config.world);
  if (++st.applied_count[step] < st.config.world)
    return;
  while (!st.applied_count.empty() && st.applied_count.begin()->first == st.global_applied + 1
         && st.applied_count.begin()->second == st.config.world) {
    st.applied_count.erase(st.applied_count.begin());
    ++st.global_applied;
  }
  issue_fetches(self);
  check_cut(self);
  if (st.global_applied == st.plan.steps - 1 && st.cut != st.plan.steps)
    start_test(self);
}

// Steps the dense optimizer and pushes the embedding gradients of step `next_compute`.
void finish_step(self_ptr self) {
  auto& st = self->state;
  SATRAP_ASSERT(st.next_compute < st.next_fetch && st.inputs.count(st.next_compute) == 1,
                "step={} next_fetch={}", st.next_compute, st.next_fetch);
  st.optimizer->step(st.model->params(), st.model->grads());
  auto step = st.next_compute;
  auto n = global_batch(st, step);
  auto& agg = st.config.aggregators[aggregator_for_batch(n, st.config.aggregators.size())];
  self->request(agg, st.config.timeout, grads_atom::value, std::move(st.pending_grads))
    .then(
      [self, step](int64_t) {
        auto& st = self->state;
        for (int32_t r = 0; r < st.config.world; ++r)
          if (r != st.config.rank)
            self->send(st.peers[static_cast<size_t>(r)], applied_atom::value, step, st.config.rank);
        if (st.config.progress)  // the supervisor counts exactly what a rollback replays
          self->send(st.config.progress, applied_atom::value, step, st.config.rank);
        on_applied(self, step);
      },
      [self, n](const caf::error& e) { fail(self, "pushing gradients of batch " + std::to_string(n), e); });
  st.inputs.erase(step);
  ++st.next_compute;
  try_compute(self);
}

void drain_inbox(self_ptr self) {
  auto& st = self->state;
  while (st.ring && st.ring->active() && !st.inbox.empty()) {
    capnp_payload out;
    auto more = st.ring->receive(st.inbox.front(), out);
    st.inbox.pop_front();
    if (!more) {
      fail(self, "all-reducing the gradients of step " + std::to_string(st.next_compute),
           more.error());
      return;
    }
    auto next = st.peers[static_cast<size_t>((st.config.rank + 1) % st.config.world)];
    if (*more)
      self->send(next, chunk_atom::value, std::move(out));
    else
      finish_step(self);
  }
}

// The two halves of batch n as the trainer needs them, checked against each other and the model.
struct batch_views {
  dense_batch_view dense;
  pooled_view pooled;
};

caf::expected<batch_views> decode_inputs(const trainer_state& st, const batch_inputs& in,
                                         int64_t n, int8_t split) {
  auto dense = decode_dense_batch(*in.dense, n, split,
                                  static_cast<uint32_t>(st.config.model.dense_features));
  if (!dense)
    return dense.error();
  if (dense->size > static_cast<uint32_t>(st.config.batch_size))
    return make_error(errc::invalid_payload,
                      "dense batch " + std::to_string(n) + ": " + std::to_string(dense->size)
                        + " samples, more than the batch size "
                        + std::to_string(st.config.batch_size));
  auto pooled = decode_pooled_embeddings(*in.pooled);
  if (!pooled)
    return pooled.error();
  if (auto err = pooled_check_shape(*pooled,
                                    {n, dense->size, static_cast<uint32_t>(st.config.model.slots),
                                     static_cast<uint32_t>(st.config.model.dim)},
                                    "pooled embeddings"))
    return err;
  return batch_views{*dense, *pooled};
}

// PooledGradients of batch n, built in the payload's own buffer: the model writes the gradients
// straight into its Data blob (`values`), so there is no scratch vector and no flattening copy.
struct pooled_grads_builder {
  payload_builder mb;
  float* values = nullptr;
  pooled_grads_builder(const trainer_state& st, int64_t n, uint32_t size, size_t bytes)
      : mb(payload_builder::words_for(3, 1, {bytes})) {
    auto out = mb.initRoot<schema::PooledGradients>();
    out.setBatch(n);
    out.setSize(size);
    out.setSlots(static_cast<uint32_t>(st.config.model.slots));
    out.setDim(static_cast<uint32_t>(st.config.model.dim));
    values = reinterpret_cast<float*>(out.initValues(bytes).begin());
  }
};

void try_compute(self_ptr self) {
  auto& st = self->state;
  if (st.failed || (st.ring && st.ring->active()) || st.next_compute >= st.plan.steps)
    return;
  auto it = st.inputs.find(st.next_compute);
  if (it == st.inputs.end() || !it->second.ready())
    return;
  auto n = global_batch(st, st.next_compute);
  auto in = decode_inputs(st, it->second, n, split_code(data_split::train));
  if (!in) {
    fail(self, "reading batch " + std::to_string(n), in.error());
    return;
  }
  auto size = static_cast<int>(in->dense.size);
  auto labels = in->dense.labels;
  st.logits.resize(static_cast<size_t>(size));
  pooled_grads_builder grads(st, n, static_cast<uint32_t>(size),
                             static_cast<size_t>(size) * st.config.model.slots
                               * st.config.model.dim * sizeof(float));
  auto scale = 1.0f / static_cast<float>(size * st.config.world);
  auto loss = st.model->forward_backward(size, in->dense.dense.data(), in->pooled.values.data(),
                                         labels.data(), scale, st.logits.data(), grads.values);
  st.report.step_losses.push_back(loss);
  st.report.samples += size;
  st.auc->add(st.logits, labels);
  st.pending_grads = grads.mb.finish();
  report_progress(st, size, loss, st.next_compute + 1 == st.plan.steps);
  if (st.config.world == 1) {
    finish_step(self);
    return;
  }
  auto next = st.peers[static_cast<size_t>((st.config.rank + 1) % st.config.world)];
  self->send(next, chunk_atom::value, st.ring->start(st.next_compute, st.model->grads()));
  drain_inbox(self);
}

capnp_payload make_params(const trainer_state& st) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DenseParams>();
  out.setStep(st.next_compute);
  auto p = st.model->params();
  out.setValues(data_of(std::span<const float>(p.data(), p.size())));
  return payload_encode(mb);
}

capnp_payload eval_run::result() const {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::EvalResult>();
  out.setLogits(data_of(logits));
  out.setLabels(data_of(labels));
  out.setProbs(data_of(probs));
  out.setGroups(data_of(groups));
  return payload_encode(mb);
}

void eval_batch(self_ptr self, eval_run& e, int64_t n) {
  auto& st = self->state;
  auto in = decode_inputs(st, e.inputs[n], n, split_code(e.split));
  if (!in) {
    fail(self, std::string("reading ") + (e.split == data_split::test ? "test" : "validation")
                 + " batch " + std::to_string(n), in.error());
    return;
  }
  auto size = static_cast<int>(in->dense.size);
  st.logits.resize(static_cast<size_t>(size));
  st.model->forward(size, in->dense.dense.data(), in->pooled.values.data(), st.logits.data());
  auto labels = in->dense.labels;
  auto probs = in->dense.probs;
  auto groups = in->dense.groups;
  e.logits.insert(e.logits.end(), st.logits.begin(), st.logits.end());
  e.labels.insert(e.labels.end(), labels.begin(), labels.end());
  e.probs.insert(e.probs.end(), probs.begin(), probs.end());
  e.groups.insert(e.groups.end(), groups.begin(), groups.end());
  e.inputs.erase(n);
}

void eval_issue(self_ptr self, eval_run* e) {
  auto& st = self->state;
  if (st.failed)
    return;
  if (e->done == e->batches.size()) {
    auto done = std::move(e->on_done);
    e->on_done = nullptr;
    if (done)
      done();
    return;
  }
  auto in_flight = e->next - e->done;
  while (e->next < e->batches.size() && in_flight < static_cast<size_t>(st.config.eval_window)) {
    auto n = e->batches[e->next++];
    ++in_flight;
    fetch_batch(self, &e->inputs, n, n, split_code(e->split), [self, e, n] {
      eval_batch(self, *e, n);
      ++e->done;
      eval_issue(self, e);
    });
  }
}

// The test evaluation after the last step (or a stop at a cut); then `run` is answered.
void start_test(self_ptr self) {
  auto& st = self->state;
  if (st.test_started || st.failed)
    return;
  st.test_started = true;
  st.test.on_done = [self] {
    auto& st = self->state;
    st.report.rank = st.config.rank;
    st.report.eval = st.test.result();
    st.report.steps = st.next_compute;
    st.report.params = make_params(st);
    spdlog::debug("trainer_done rank={} steps={} test_samples={}", st.config.rank,
                  st.next_compute, st.test.logits.size());
    st.done->deliver(std::move(st.report));
  };
  eval_issue(self, &st.test);
}

// Validation at a cut: this trainer's share of the first `batches` validation batches.
caf::typed_response_promise<capnp_payload> on_validate(self_ptr self, int64_t batches) {
  auto& st = self->state;
  auto promise = self->make_response_promise<capnp_payload>();
  if (st.validation) {
    promise.deliver(make_error(errc::invalid_config, "a validation pass is already under way"));
    return promise;
  }
  st.validation.emplace();
  st.validation->split = data_split::validation;
  for (int64_t n = st.config.rank; n < batches; n += st.config.world)
    st.validation->batches.push_back(n);
  st.validation->on_done = [self, promise]() mutable {
    auto& st = self->state;
    promise.deliver(st.validation->result());
    st.validation.reset();
  };
  eval_issue(self, &*st.validation);
  return promise;
}

caf::typed_response_promise<trainer_report> on_run(self_ptr self, const train_plan& plan) {
  auto& st = self->state;
  st.plan = plan;
  st.next_fetch = st.next_compute = plan.first_step;
  st.global_applied = plan.first_step - 1;
  st.cut = plan.cut;
  st.done = self->make_response_promise<trainer_report>();
  st.test.split = data_split::test;
  for (int64_t t = st.config.rank; t < plan.test_batches; t += st.config.world)
    st.test.batches.push_back(t);
  spdlog::debug("trainer_started rank={} world={} steps={} staleness={} params={}",
                st.config.rank, st.config.world, plan.steps, plan.staleness,
                st.model->params().size());
  if (plan.first_step >= plan.steps)
    start_test(self);
  else
    issue_fetches(self);
  return *st.done;
}

dense_trainer_actor::behavior_type trainer_behavior(self_ptr self, dense_trainer_config config,
                                                    std::shared_ptr<std::unique_ptr<dense_model>> model) {
  // An exception fails the actor with its message (and bad_alloc as no_resource), not CAF's
  // bare "runtime_error": the supervisor's record and its restart decision see the cause.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& e) {
    return exception_error(e, "dense trainer");
  });
  auto& st = self->state;
  st.config = std::move(config);
  st.model = std::move(*model);
  st.optimizer = std::make_unique<dense_optimizer>(st.config.optimizer,
                                                   st.model->params().size());
  st.auc = std::make_unique<running_auc>(st.config.auc_window);
  st.meter = meter_handle("dense_trainer", st.config.rank, st.config.job);
  if (st.config.world > 1)
    st.ring.emplace(st.config.rank, st.config.world);
  return {
    [self](peers_atom, const std::vector<caf::actor>& peers) {
      self->state.peers.clear();
      for (auto& p : peers)
        self->state.peers.push_back(caf::actor_cast<dense_trainer_actor>(p));
    },
    [self](chunk_atom, capnp_payload& chunk) {
      self->state.meter.on_message(self);
      self->state.inbox.push_back(std::move(chunk));
      drain_inbox(self);
    },
    [self](applied_atom, int64_t step, int32_t) {
      self->state.meter.on_message(self);
      on_applied(self, step);
    },
    [self](cut_atom, int64_t next) { on_cut(self, next); },
    [self](hold_atom) {
      auto& st = self->state;
      st.cut = st.next_fetch;  // the supervisor answers with cut(c >= this)
      st.cut_reported = false;
      return st.next_fetch;
    },
    [self](restore_atom, const capnp_payload& state) { return on_restore(self, state); },
    [self](eval_atom, int64_t batches) { return on_validate(self, batches); },
    [self](run_atom, const train_plan& plan) { return on_run(self, plan); },
  };
}

}  // namespace

caf::expected<std::unique_ptr<dense_model>> make_model(const dense_trainer_config& c) {
  if (!c.cuda)
    return make_dense_model(c.model, c.seed);
#ifdef SATRAP_HAVE_CUDA
  auto devices = cuda_device_count();
  if (!devices)
    return make_error(errc::invalid_config, "training.device cuda: " + devices.error());
  if (devices.value() == 0)
    return make_error(errc::invalid_config, "training.device cuda: this node has no CUDA device");
  auto m = make_cuda_dlrm(c.model, c.seed, c.rank % devices.value());
  if (!m)
    return make_error(errc::invalid_config, "training.device cuda: " + m.error());
  // Through dense_model: the host optimizer and the ring all-reduce work on the host mirrors.
  return std::unique_ptr<dense_model>(std::move(m.value()));
#else
  return make_error(errc::invalid_config,
                    "training.device cuda: this satrap was built without CUDA (nvcc not found; "
                    "see SATRAP_CUDA)");
#endif
}

caf::expected<dense_trainer_actor> spawn_dense_trainer(caf::actor_system& sys,
                                                       const dense_trainer_config& config) {
  auto model = make_model(config);
  if (!model)
    return model.error();
  return sys.spawn(trainer_behavior, config,
                   std::make_shared<std::unique_ptr<dense_model>>(std::move(*model)));
}

}  // namespace satrap
