// Checkpoint cuts, the dense state and restore (trainer_state.hpp).
#include "actors/dense_trainer/trainer_state.hpp"
#include "satrap_schemas/step.capnp.h"

#include <spdlog/spdlog.h>

namespace satrap::trainer_detail {

capnp_payload make_state(const trainer_state& st) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DenseState>();
  out.setStep(st.loop.next_compute);
  auto p = st.model->params();
  out.setParams(data_of(std::span<const float>(p.data(), p.size())));
  out.setOptimizerSteps(st.optimizer->steps());
  out.setM(data_of(st.optimizer->m()));
  out.setV(data_of(st.optimizer->v()));
  out.setEma(data_of(st.optimizer->ema()));
  return payload_encode(mb);
}

// At a cut once every step below it is applied everywhere: report, with what was trained since
// the previous cut, and wait for `cut(next)`.
void check_cut(self_ptr self) {
  auto& st = self->state;
  if (st.failed || st.cuts.step < 0 || st.cuts.reported
      || st.loop.global_applied != st.cuts.step - 1 || st.loop.next_compute != st.cuts.step)
    return;
  st.cuts.reported = true;
  cut_report r;
  r.rank = st.config.rank;
  r.step = st.cuts.step;
  r.samples = st.report.samples;
  r.step_losses = std::move(st.report.step_losses);
  if (st.config.rank == 0) {
    if (auto err = optimizer_state_to_host(st)) {  // GPU trainers: the device holds it
      fail(self, "taking the dense state at step " + std::to_string(st.cuts.step), err);
      return;
    }
    r.state = make_state(st);
  }
  st.report.samples = 0;
  st.report.step_losses.clear();
  spdlog::debug("trainer_at_cut rank={} step={}", st.config.rank, st.cuts.step);
  if (st.config.progress)
    caf::anon_send(st.config.progress, cut_atom::value, std::move(r));
}

void on_cut(self_ptr self, int64_t next) {
  auto& st = self->state;
  if (next == stop_at_cut) {  // training ends here: every step before next_compute is applied
    st.plan.steps = st.loop.next_compute;
    st.cuts.step = -1;
    start_test(self);
    return;
  }
  st.cuts.step = next;
  if (st.loop.global_applied == st.plan.steps - 1 && st.loop.next_compute == st.plan.steps
      && st.cuts.step != st.plan.steps) {
    start_test(self);
    return;
  }
  st.cuts.reported = false;
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
  if (!st.optimizer->set_ema(in->ema))
    return make_error(
      errc::invalid_payload,
      "restore: the checkpoint's weight average does not fit model.dense_optimizer.ema_decay");
  std::copy(in->params.begin(), in->params.end(), model.begin());
  if (auto err = optimizer_state_to_device(st))
    return make_error(errc::invalid_payload, "restore: " + error_text(err));
  drop_staged(st);  // batches staged before the rollback hold the old timeline's embeddings
  return in->step;
}

}  // namespace satrap::trainer_detail
