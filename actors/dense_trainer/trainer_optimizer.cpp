// The dense optimizer step of a trainer (trainer_state.hpp). CPU trainers step `st.optimizer` on
// the host. GPU trainers step the device optimizer (cuda_dense_model::optimizer_step, on the
// device gradients the NCCL all-reduce summed in place), so no parameters or gradients cross
// PCIe per step; `st.optimizer` then holds the state of record only at a checkpoint cut (filled
// from the device before make_state) and hands a restored state to the device.
#include "actors/dense_trainer/trainer_state.hpp"
#ifdef SATRAP_HAVE_CUDA
#include "models/cuda/cuda_dense_model.hpp"
#endif

namespace satrap::trainer_detail {

namespace {

#ifdef SATRAP_HAVE_CUDA
caf::error device_error(const std::string& what) { return make_error(errc::peer_failure, what); }
#endif

}  // namespace

#ifdef SATRAP_HAVE_CUDA
cuda_dense_model* cuda_model(trainer_state& st) {
  return dynamic_cast<cuda_dense_model*>(st.model.get());
}
#endif

caf::error optimizer_step(trainer_state& st) {
#ifdef SATRAP_HAVE_CUDA
  if (auto* gpu = cuda_model(st)) {
    auto s = gpu->optimizer_step();
    return s ? caf::error{} : device_error("device optimizer step: " + s.error());
  }
#endif
  st.optimizer->step(st.model->params(), st.model->grads());
  return caf::none;
}

caf::error optimizer_state_to_host(trainer_state& st) {
#ifdef SATRAP_HAVE_CUDA
  if (auto* gpu = cuda_model(st)) {
    std::vector<float> m, v;
    if (auto s = gpu->optimizer_state(m, v); !s)
      return device_error("reading the device optimizer state: " + s.error());
    if (!st.optimizer->set_state(m, v, gpu->optimizer_steps()))
      return make_error(errc::invalid_payload, "the device optimizer state does not fit");
  }
#else
  (void)st;
#endif
  return caf::none;
}

caf::error optimizer_state_to_device(trainer_state& st) {
#ifdef SATRAP_HAVE_CUDA
  if (auto* gpu = cuda_model(st)) {
    auto s = gpu->set_optimizer_state(st.optimizer->m(), st.optimizer->v(), st.optimizer->steps());
    if (!s)
      return device_error("loading the device optimizer state: " + s.error());
  }
#else
  (void)st;
#endif
  return caf::none;
}

}  // namespace satrap::trainer_detail
