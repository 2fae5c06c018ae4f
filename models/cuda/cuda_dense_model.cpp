// The GPU dense model (cuda_dense_model.hpp): the batch's copies (synchronous, or staged through
// batch_stager), the loss, fp16 loss scaling and the mirrors around a device_network.
#include "models/cuda/cuda_dense_model_impl.hpp"

namespace satrap {

cuda_dense_model::cuda_dense_model(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
cuda_dense_model::~cuda_dense_model() = default;

std::span<float> cuda_dense_model::params() {
  auto& h = impl_->host_side(impl_->params);
  impl_->params.mark_host_newer();
  return h;
}

std::span<const float> cuda_dense_model::params() const { return impl_->host_side(impl_->params); }

std::span<float> cuda_dense_model::grads() {
  auto& h = impl_->host_side(impl_->grads);
  impl_->grads.mark_host_newer();
  return h;
}

result<double> cuda_dense_model::try_forward_backward(int batch, const float* dense,
                                                      const float* pooled, const float* labels,
                                                      float loss_scale, float* logits,
                                                      float* pooled_grad) {
  auto r = impl_->forward_backward(batch, dense, pooled, labels, loss_scale, logits, pooled_grad);
  if (!r)
    impl_->last_error = r.error();
  return r;
}

result<ok_t> cuda_dense_model::try_forward(int batch, const float* dense, const float* pooled,
                                           float* logits) {
  impl& m = *impl_;
  auto out = m.run_forward(batch, dense, pooled);
  if (!out)
    return m.fail(out.error());
  if (auto s = m.copy(logits, out.value(), static_cast<size_t>(batch) * sizeof(float),
                      cudaMemcpyDeviceToHost);
      !s)
    return m.fail(s.error());
  if (auto s = m.sync(); !s)
    return m.fail(s.error());
  return ok_t{};
}

result<bool> cuda_dense_model::stage_batch(int64_t key, int batch, const float* dense,
                                           const float* pooled, const float* labels) {
  impl& m = *impl_;
  if (auto s = m.select(); !s)
    return m.fail(s.error());
  if (!m.stager) {
    auto st = batch_stager::create(kStagingSlots, static_cast<size_t>(m.config.dense_features),
                                   m.pooled_size(1));
    if (!st)
      return m.fail(st.error());
    m.stager = std::move(st.value());
  }
  auto r = m.stager->stage(key, batch, dense, pooled, labels);
  if (!r) {
    m.stager->clear();
    return m.fail(r.error());
  }
  return r;
}

bool cuda_dense_model::staged(int64_t key) const {
  return impl_->stager && impl_->stager->has(key);
}

void cuda_dense_model::drop_staged_before(int64_t key) {
  if (impl_->stager)
    impl_->stager->drop_before(key);
}

void cuda_dense_model::drop_staged() {
  if (!impl_->stager)
    return;
  (void)impl_->select();
  impl_->stager->clear();
}

result<double> cuda_dense_model::forward_backward_staged(int64_t key, float loss_scale,
                                                         float* logits, float* pooled_grad) {
  impl& m = *impl_;
  auto r = m.forward_backward_staged(key, loss_scale, logits, pooled_grad);
  if (!r) {
    if (m.stager)
      m.stager->clear();  // nothing staged is trusted after an error
    return m.fail(r.error());
  }
  return r;
}

double cuda_dense_model::forward_backward(int batch, const float* dense, const float* pooled,
                                          const float* labels, float loss_scale, float* logits,
                                          float* pooled_grad) {
  auto r = try_forward_backward(batch, dense, pooled, labels, loss_scale, logits, pooled_grad);
  if (r)
    return r.value();
  for (int i = 0; i < batch; ++i)
    logits[i] = std::numeric_limits<float>::quiet_NaN();
  return std::numeric_limits<double>::quiet_NaN();
}

void cuda_dense_model::forward(int batch, const float* dense, const float* pooled, float* logits) {
  if (auto r = try_forward(batch, dense, pooled, logits); !r)
    for (int i = 0; i < batch; ++i)
      logits[i] = std::numeric_limits<float>::quiet_NaN();
}

size_t cuda_dense_model::param_count() const { return impl_->params.size(); }
int cuda_dense_model::device() const { return impl_->device; }
dense_precision cuda_dense_model::precision() const { return impl_->config.precision; }
float cuda_dense_model::loss_scale() const { return impl_->loss_scale; }
int64_t cuda_dense_model::skipped_steps() const { return impl_->skipped; }
cudaStream_t cuda_dense_model::stream() const { return impl_->stream; }
float* cuda_dense_model::device_params() { return impl_->device_side(impl_->params); }
float* cuda_dense_model::device_grads() { return impl_->device_side(impl_->grads); }

result<ok_t> cuda_dense_model::sync_to_host() {
  impl& m = *impl_;
  if (auto s = m.select(); !s)
    return m.fail(s.error());
  if (auto s = m.params.download(m.stream); !s)
    return m.fail(s.error());
  if (auto s = m.grads.download(m.stream); !s)
    return m.fail(s.error());
  return ok_t{};
}

const std::string& cuda_dense_model::last_error() const { return impl_->last_error; }

result<std::unique_ptr<cuda_dense_model>> make_cuda_dense_model(const dense_model_config& config,
                                                                uint64_t seed, int device) {
  auto net = make_device_network(config);
  if (!net)
    return make_model_error("make_cuda_dense_model: " + net.error());
  auto count = cuda_device_count();
  if (!count)
    return make_model_error(count.error());
  if (device < 0 || device >= count.value())
    return make_model_error("make_cuda_dense_model: no CUDA device " + std::to_string(device) + " ("
                            + std::to_string(count.value()) + " present)");
  auto m = std::make_unique<cuda_dense_model::impl>();
  m->config = config;
  m->device = device;
  m->net = std::move(net.value());
  if (config.precision == dense_precision::fp16)
    m->loss_scale = kInitialLossScale;
  SATRAP_TRY(m->select());
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking)));
  auto blas = cublas_handle::create(m->stream, config.precision);
  if (!blas)
    return make_model_error(blas.error());
  m->blas.emplace(std::move(blas.value()));

  // The CPU twin's initial parameters, so both start from the same bits.
  auto twin = make_dense_model(config, seed);
  const auto init = twin->params();
  SATRAP_TRY(m->params.allocate(init.size()));
  std::copy(init.begin(), init.end(), m->params.host().begin());
  SATRAP_TRY(m->grads.allocate(init.size()));
  SATRAP_TRY(m->params.upload(m->stream));
  SATRAP_TRY(m->grads.upload(m->stream));
  SATRAP_TRY(m->sync());
  return std::make_unique<cuda_dense_model>(std::move(m));
}

}  // namespace satrap
