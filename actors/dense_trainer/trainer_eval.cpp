// Test and validation passes (trainer_state.hpp).
#include "actors/dense_trainer/trainer_state.hpp"
#include "satrap_schemas/step.capnp.h"

#include <spdlog/spdlog.h>

namespace satrap::trainer_detail {

capnp_payload make_params(const trainer_state& st) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DenseParams>();
  out.setStep(st.loop.next_compute);
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
    fail(self,
         std::string("reading ") + (e.split == data_split::test ? "test" : "validation") + " batch "
           + std::to_string(n),
         in.error());
    return;
  }
  auto size = static_cast<int>(in->dense.size);
  st.loop.logits.resize(static_cast<size_t>(size) * st.config.model.tasks);
  st.model->forward(size, in->dense.dense.data(), in->pooled.values.data(), st.loop.logits.data());
  auto labels = in->dense.labels;
  auto probs = in->dense.probs;
  auto groups = in->dense.groups;
  e.logits.insert(e.logits.end(), st.loop.logits.begin(), st.loop.logits.end());
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
    // Batches are evaluated in their order, whichever arrives first: the predictions follow the
    // split's order (--test-scores, and the supervisor's reordering across trainers).
    fetch_batch(self, &e->inputs, n, n, split_code(e->split), [self, e] {
      while (e->done < e->next && !self->state.failed) {
        auto m = e->batches[e->done];
        auto it = e->inputs.find(m);
        if (it == e->inputs.end() || !it->second.ready())
          break;
        eval_batch(self, *e, m);
        ++e->done;
      }
      eval_issue(self, e);
    });
  }
}

namespace {

// model.dense_optimizer.ema_decay > 0: evaluation reads the weights' moving average. Puts it in
// the model (keeping the trained weights in `keep` when given) and says whether it did.
bool use_weight_average(trainer_state& st, std::vector<float>* keep) {
  auto ema = st.optimizer->ema();
  if (ema.empty())
    return false;
  auto p = st.model->params();
  SATRAP_ASSERT(ema.size() == p.size(), "ema={} params={}", ema.size(), p.size());
  if (keep)
    keep->assign(p.begin(), p.end());
  std::copy(ema.begin(), ema.end(), p.begin());
  return true;
}

}  // namespace

// The test evaluation after the last step (or a stop at a cut); then `run` is answered.
void start_test(self_ptr self) {
  auto& st = self->state;
  if (st.eval.test_started || st.failed)
    return;
  st.eval.test_started = true;
  use_weight_average(st, nullptr);  // for good: the averaged weights are also the ones reported
  st.eval.test.on_done = [self] {
    auto& st = self->state;
    st.report.rank = st.config.rank;
    st.report.eval = st.eval.test.result();
    st.report.steps = st.loop.next_compute;
    st.report.params = make_params(st);
    spdlog::debug("trainer_done rank={} steps={} test_samples={}", st.config.rank,
                  st.loop.next_compute, st.eval.test.logits.size());
    st.done->deliver(std::move(st.report));
  };
  eval_issue(self, &st.eval.test);
}

// Validation at a cut: this trainer's share of the first `batches` validation batches.
caf::typed_response_promise<capnp_payload> on_validate(self_ptr self, int64_t batches) {
  auto& st = self->state;
  auto promise = self->make_response_promise<capnp_payload>();
  if (st.eval.validation) {
    promise.deliver(make_error(errc::invalid_config, "a validation pass is already under way"));
    return promise;
  }
  st.eval.validation.emplace();
  st.eval.validation->split = data_split::validation;
  for (int64_t n = st.config.rank; n < batches; n += st.config.world)
    st.eval.validation->batches.push_back(n);
  bool averaged = use_weight_average(st, &st.eval.trained_params);
  st.eval.validation->on_done = [self, promise, averaged]() mutable {
    auto& st = self->state;
    if (averaged) {  // training goes on from the trained weights
      std::copy(st.eval.trained_params.begin(), st.eval.trained_params.end(),
                st.model->params().begin());
      st.eval.trained_params.clear();
    }
    promise.deliver(st.eval.validation->result());
    st.eval.validation.reset();
  };
  eval_issue(self, &*st.eval.validation);
  return promise;
}

}  // namespace satrap::trainer_detail
