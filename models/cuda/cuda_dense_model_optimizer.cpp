// The device optimizer of cuda_dense_model (cuda_dense_model.hpp): its steps and its state.
#include "models/cuda/cuda_dense_model_impl.hpp"

namespace satrap {

result<ok_t> cuda_dense_model::set_optimizer(const dense_optimizer_options& options) {
  impl& m = *impl_;
  if (auto s = m.select(); !s)
    return m.fail(s.error());
  const size_t n = m.params.size();
  auto zeroed = [&](device_array<float>& a) -> cuda_status {
    SATRAP_TRY(a.reserve(n));
    return SATRAP_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, n * sizeof(float), m.stream));
  };
  if (options.kind != dense_optimizer_kind::sgd)
    if (auto s = zeroed(m.d_m); !s)
      return m.fail(s.error());
  if (options.kind == dense_optimizer_kind::adam)
    if (auto s = zeroed(m.d_v); !s)
      return m.fail(s.error());
  if (auto s = m.sync(); !s)
    return m.fail(s.error());
  m.optimizer = options;
  m.steps = 0;
  return ok_t{};
}

result<ok_t> cuda_dense_model::optimizer_step() {
  impl& m = *impl_;
  if (!m.optimizer)
    return m.fail("cuda_dense_model::optimizer_step: call set_optimizer first");
  float* p = m.device_side(m.params);
  float* g = m.device_side(m.grads);
  if (p == nullptr || g == nullptr)
    return make_model_error(m.last_error);
  // The learning-rate schedule exactly as dense_optimizer::current_learning_rate applies it.
  dense_optimizer_options o = *m.optimizer;
  o.learning_rate = static_cast<float>(o.learning_rate * lr_factor(o.schedule, m.steps));
  if (auto s = cuda_dense_optimizer_step(m.stream, o, m.steps + 1, m.params.size(), p, g,
                                         m.d_m.data(), m.d_v.data());
      !s)
    return m.fail(s.error());
  ++m.steps;
  if (auto s = m.sync(); !s)
    return m.fail(s.error());
  return ok_t{};
}

int64_t cuda_dense_model::optimizer_steps() const { return impl_->steps; }

result<ok_t> cuda_dense_model::optimizer_state(std::vector<float>& m_out,
                                               std::vector<float>& v_out) const {
  impl& m = *impl_;
  if (!m.optimizer)
    return m.fail("cuda_dense_model::optimizer_state: call set_optimizer first");
  if (auto s = m.select(); !s)
    return m.fail(s.error());
  const size_t n = m.params.size();
  const bool has_m = m.optimizer->kind != dense_optimizer_kind::sgd;
  const bool has_v = m.optimizer->kind == dense_optimizer_kind::adam;
  m_out.assign(has_m ? n : 0, 0.0f);
  v_out.assign(has_v ? n : 0, 0.0f);
  if (has_m)
    if (auto s = m.copy(m_out.data(), m.d_m.data(), n * sizeof(float), cudaMemcpyDeviceToHost); !s)
      return m.fail(s.error());
  if (has_v)
    if (auto s = m.copy(v_out.data(), m.d_v.data(), n * sizeof(float), cudaMemcpyDeviceToHost); !s)
      return m.fail(s.error());
  if (auto s = m.sync(); !s)
    return m.fail(s.error());
  return ok_t{};
}

result<ok_t> cuda_dense_model::set_optimizer_state(std::span<const float> m_in,
                                                   std::span<const float> v_in, int64_t steps) {
  impl& m = *impl_;
  if (!m.optimizer)
    return m.fail("cuda_dense_model::set_optimizer_state: call set_optimizer first");
  const size_t n = m.params.size();
  const bool has_m = m.optimizer->kind != dense_optimizer_kind::sgd;
  const bool has_v = m.optimizer->kind == dense_optimizer_kind::adam;
  if (m_in.size() != (has_m ? n : 0) || v_in.size() != (has_v ? n : 0) || steps < 0)
    return m.fail("cuda_dense_model::set_optimizer_state: the state does not fit this optimizer");
  if (auto s = m.select(); !s)
    return m.fail(s.error());
  if (has_m)
    if (auto s = m.copy(m.d_m.data(), m_in.data(), n * sizeof(float), cudaMemcpyHostToDevice); !s)
      return m.fail(s.error());
  if (has_v)
    if (auto s = m.copy(m.d_v.data(), v_in.data(), n * sizeof(float), cudaMemcpyHostToDevice); !s)
      return m.fail(s.error());
  if (auto s = m.sync(); !s)
    return m.fail(s.error());
  m.steps = steps;
  return ok_t{};
}

}  // namespace satrap
