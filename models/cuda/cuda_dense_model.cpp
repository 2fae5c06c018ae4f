// The GPU dense model (cuda_dense_model.hpp): the batch's copies, the loss, fp16 loss scaling,
// the mirrors and the device optimizer around a device_network.
#include "models/cuda/cuda_dense_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "models/cuda/cuda_kernels.hpp"
#include "models/cuda/device_network.hpp"
#include "models/cuda/mirrored_array.hpp"

namespace satrap {

namespace {

// fp16 dynamic loss scaling, as in PyTorch's GradScaler defaults.
constexpr float kInitialLossScale = 65536.0f;
constexpr int64_t kLossScaleGrowthSteps = 2000;

}  // namespace

struct cuda_dense_model::impl {
  dense_model_config config;
  int device = 0;
  cudaStream_t stream = nullptr;
  std::optional<cublas_handle> blas;
  std::unique_ptr<device_network> net;

  mirrored_array params, grads;
  device_array<float> d_m, d_v;  // optimizer state
  std::optional<dense_optimizer_options> optimizer;
  int64_t steps = 0;

  float loss_scale = 1.0f;  // fp16 only: see the header
  int64_t good_steps = 0, skipped = 0;

  int capacity = 0;  // batch size the buffers below hold
  device_array<float> d_dense, d_pooled, d_labels, d_dlogits, d_pooled_grad;
  device_array<double> d_loss;
  device_array<int> d_overflow;
  std::string last_error;

  ~impl() {
    cudaSetDevice(device);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    blas.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  size_t pooled_size(int batch) const {
    return static_cast<size_t>(batch) * config.slots * config.dim;
  }
  cuda_status select() { return SATRAP_CUDA_CHECK(cudaSetDevice(device)); }
  cuda_status sync() { return SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)); }

  cuda_status reserve(int batch) {
    if (batch <= capacity) return ok_t{};
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(net->reserve(batch));
    SATRAP_TRY(d_dense.reserve(b * config.dense_features));
    SATRAP_TRY(d_pooled.reserve(pooled_size(batch)));
    SATRAP_TRY(d_pooled_grad.reserve(pooled_size(batch)));
    SATRAP_TRY(d_labels.reserve(b));
    SATRAP_TRY(d_dlogits.reserve(b));
    SATRAP_TRY(d_loss.reserve(1));
    SATRAP_TRY(d_overflow.reserve(1));
    capacity = batch;
    return ok_t{};
  }

  cuda_status copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
    return SATRAP_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream));
  }

  // Inputs uploaded, parameters current; returns the device logits (batch).
  result<const float*> run_forward(int batch, const float* dense, const float* pooled) {
    if (batch <= 0) return make_model_error("cuda_dense_model: batch must be positive");
    SATRAP_TRY(select());
    SATRAP_TRY(reserve(batch));
    SATRAP_TRY(params.upload(stream));
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(copy(d_dense.data(), dense, b * config.dense_features * sizeof(float),
                    cudaMemcpyHostToDevice));
    SATRAP_TRY(copy(d_pooled.data(), pooled, pooled_size(batch) * sizeof(float),
                    cudaMemcpyHostToDevice));
    return net->forward(*blas, batch, params.device(), d_dense.data(), d_pooled.data());
  }

  // fp16: unscales the gradients; on an overflow zeroes them and halves the scale.
  cuda_status unscale(int batch) {
    int* flag = d_overflow.data();
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), stream)));
    const float inverse = 1.0f / loss_scale;
    SATRAP_TRY(cuda_unscale_check(stream, grads.size(), grads.device(), inverse, flag));
    SATRAP_TRY(cuda_unscale_check(stream, pooled_size(batch), d_pooled_grad.data(), inverse, flag));
    int overflow = 0;
    SATRAP_TRY(copy(&overflow, flag, sizeof(int), cudaMemcpyDeviceToHost));
    SATRAP_TRY(sync());
    if (overflow == 0) {
      if (++good_steps == kLossScaleGrowthSteps) {
        loss_scale *= 2.0f;
        good_steps = 0;
      }
      return ok_t{};
    }
    ++skipped;
    good_steps = 0;
    loss_scale = std::max(1.0f, loss_scale * 0.5f);
    SATRAP_TRY(SATRAP_CUDA_CHECK(
        cudaMemsetAsync(grads.device(), 0, grads.size() * sizeof(float), stream)));
    return SATRAP_CUDA_CHECK(
        cudaMemsetAsync(d_pooled_grad.data(), 0, pooled_size(batch) * sizeof(float), stream));
  }

  result<double> forward_backward(int batch, const float* dense, const float* pooled,
                                  const float* labels, float scale, float* logits,
                                  float* pooled_grad) {
    auto out = run_forward(batch, dense, pooled);
    if (!out) return make_model_error(out.error());
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(copy(d_labels.data(), labels, b * sizeof(float), cudaMemcpyHostToDevice));
    SATRAP_TRY(cuda_bce_with_logits(stream, batch, out.value(), d_labels.data(),
                                    scale * loss_scale, d_dlogits.data(), d_loss.data()));
    SATRAP_TRY(net->backward(*blas, batch, params.device(), d_dlogits.data(), grads.device(),
                             d_pooled_grad.data()));
    grads.mark_device_newer();  // overwritten whole, whatever the host held
    if (config.precision == dense_precision::fp16) SATRAP_TRY(unscale(batch));
    SATRAP_TRY(copy(logits, out.value(), b * sizeof(float), cudaMemcpyDeviceToHost));
    SATRAP_TRY(copy(pooled_grad, d_pooled_grad.data(), pooled_size(batch) * sizeof(float),
                    cudaMemcpyDeviceToHost));
    double loss = 0.0;
    SATRAP_TRY(copy(&loss, d_loss.data(), sizeof(double), cudaMemcpyDeviceToHost));
    SATRAP_TRY(sync());
    return loss;
  }

  // Keeps the error for last_error() and returns it.
  model_error fail(const std::string& error) {
    last_error = error;
    return make_model_error(error);
  }
  // A device pointer after uploading a newer host side; null (last_error set) on a failure.
  float* device_side(mirrored_array& a) {
    cuda_status s = select();
    if (s) s = a.upload(stream);
    if (!s) {
      last_error = s.error();
      return nullptr;
    }
    a.mark_device_newer();
    return a.device();
  }
  // The host side after downloading a newer device side (an error goes to last_error).
  std::vector<float>& host_side(mirrored_array& a) {
    cuda_status s = select();
    if (s) s = a.download(stream);
    if (!s) last_error = s.error();
    return a.host();
  }
};

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
  if (!r) impl_->last_error = r.error();
  return r;
}

result<ok_t> cuda_dense_model::try_forward(int batch, const float* dense, const float* pooled,
                                           float* logits) {
  impl& m = *impl_;
  auto out = m.run_forward(batch, dense, pooled);
  if (!out) return m.fail(out.error());
  if (auto s = m.copy(logits, out.value(), static_cast<size_t>(batch) * sizeof(float),
                      cudaMemcpyDeviceToHost);
      !s)
    return m.fail(s.error());
  if (auto s = m.sync(); !s) return m.fail(s.error());
  return ok_t{};
}

double cuda_dense_model::forward_backward(int batch, const float* dense, const float* pooled,
                                          const float* labels, float loss_scale, float* logits,
                                          float* pooled_grad) {
  auto r = try_forward_backward(batch, dense, pooled, labels, loss_scale, logits, pooled_grad);
  if (r) return r.value();
  for (int i = 0; i < batch; ++i) logits[i] = std::numeric_limits<float>::quiet_NaN();
  return std::numeric_limits<double>::quiet_NaN();
}

void cuda_dense_model::forward(int batch, const float* dense, const float* pooled, float* logits) {
  if (auto r = try_forward(batch, dense, pooled, logits); !r)
    for (int i = 0; i < batch; ++i) logits[i] = std::numeric_limits<float>::quiet_NaN();
}

result<ok_t> cuda_dense_model::set_optimizer(const dense_optimizer_options& options) {
  impl& m = *impl_;
  if (auto s = m.select(); !s) return m.fail(s.error());
  const size_t n = m.params.size();
  auto zeroed = [&](device_array<float>& a) -> cuda_status {
    SATRAP_TRY(a.reserve(n));
    return SATRAP_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, n * sizeof(float), m.stream));
  };
  if (options.kind != dense_optimizer_kind::sgd)
    if (auto s = zeroed(m.d_m); !s) return m.fail(s.error());
  if (options.kind == dense_optimizer_kind::adam)
    if (auto s = zeroed(m.d_v); !s) return m.fail(s.error());
  if (auto s = m.sync(); !s) return m.fail(s.error());
  m.optimizer = options;
  m.steps = 0;
  return ok_t{};
}

result<ok_t> cuda_dense_model::optimizer_step() {
  impl& m = *impl_;
  if (!m.optimizer) return m.fail("cuda_dense_model::optimizer_step: call set_optimizer first");
  float* p = m.device_side(m.params);
  float* g = m.device_side(m.grads);
  if (p == nullptr || g == nullptr) return make_model_error(m.last_error);
  if (auto s = cuda_dense_optimizer_step(m.stream, *m.optimizer, m.steps + 1, m.params.size(), p,
                                         g, m.d_m.data(), m.d_v.data());
      !s)
    return m.fail(s.error());
  ++m.steps;
  if (auto s = m.sync(); !s) return m.fail(s.error());
  return ok_t{};
}

int64_t cuda_dense_model::optimizer_steps() const { return impl_->steps; }
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
  if (auto s = m.select(); !s) return m.fail(s.error());
  if (auto s = m.params.download(m.stream); !s) return m.fail(s.error());
  if (auto s = m.grads.download(m.stream); !s) return m.fail(s.error());
  return ok_t{};
}

const std::string& cuda_dense_model::last_error() const { return impl_->last_error; }

result<std::unique_ptr<cuda_dense_model>> make_cuda_dense_model(const dense_model_config& config,
                                                                uint64_t seed, int device) {
  auto net = make_device_network(config);
  if (!net) return make_model_error("make_cuda_dense_model: " + net.error());
  auto count = cuda_device_count();
  if (!count) return make_model_error(count.error());
  if (device < 0 || device >= count.value())
    return make_model_error("make_cuda_dense_model: no CUDA device " + std::to_string(device) +
                            " (" + std::to_string(count.value()) + " present)");
  auto m = std::make_unique<cuda_dense_model::impl>();
  m->config = config;
  m->device = device;
  m->net = std::move(net.value());
  if (config.precision == dense_precision::fp16) m->loss_scale = kInitialLossScale;
  SATRAP_TRY(m->select());
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking)));
  auto blas = cublas_handle::create(m->stream, config.precision);
  if (!blas) return make_model_error(blas.error());
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
