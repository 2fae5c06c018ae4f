// The GPU DLRM (cuda_dlrm.hpp): host code calling the cuBLAS GEMMs and the kernels of
// cuda_kernels.hpp on the model's stream.
#include "models/cuda/cuda_dlrm.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "models/cuda/cuda_kernels.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/mlp.hpp"

namespace satrap {

namespace {

// An MLP on the device over a slice of the flat parameter vector: the layout of mlp (linear
// layers W then b, ReLU after every layer but the last), its activations in device memory.
struct device_mlp {
  int in = 0;
  std::vector<int> sizes;
  std::vector<size_t> offsets;  // per layer: W at offsets[l], b right after it
  size_t param_count = 0;
  std::vector<device_array<float>> outputs;  // per layer, post-activation
  const float* x = nullptr;                  // the last forward's input

  device_mlp(int in_, std::vector<int> sizes_) : in(in_), sizes(std::move(sizes_)) {
    int fan_in = in;
    for (int out : sizes) {
      offsets.push_back(param_count);
      param_count += static_cast<size_t>(out) * fan_in + out;
      fan_in = out;
    }
    outputs.resize(sizes.size());
  }
  int layers() const { return static_cast<int>(sizes.size()); }
  int fan_in(int l) const { return l == 0 ? in : sizes[l - 1]; }
  int out() const { return sizes.back(); }
  int widest() const {
    int w = in;
    for (int s : sizes) w = std::max(w, s);
    return w;
  }
  size_t bias_offset(int l) const { return offsets[l] + static_cast<size_t>(sizes[l]) * fan_in(l); }

  cuda_status reserve(int batch) {
    for (int l = 0; l < layers(); ++l)
      SATRAP_TRY(outputs[l].reserve(static_cast<size_t>(batch) * sizes[l]));
    return ok_t{};
  }

  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* input) {
    x = input;
    for (int l = 0; l < layers(); ++l) {
      const float* w = params + offsets[l];
      SATRAP_TRY(cuda_linear_forward(blas, batch, fan_in(l), sizes[l], input, w,
                                     params + bias_offset(l), outputs[l].data(), l + 1 < layers()));
      input = outputs[l].data();
    }
    return input;
  }

  // After forward: grads (param_count) overwritten; dx [batch x in] unless null. dy (batch x out)
  // is the caller's scratch; scratch[0..1] hold batch x widest() each.
  cuda_status backward(const cublas_handle& blas, int batch, const float* params, float* dy,
                       float* grads, float* dx, float* const scratch[2]) {
    const int last = layers() - 1;
    SATRAP_TRY(cuda_relu_backward_bias_grad(blas.stream(), batch, sizes[last], nullptr, dy,
                                            grads + bias_offset(last)));
    float* delta = dy;  // gradient w.r.t. layer l's pre-activation output
    for (int l = last; l >= 0; --l) {
      const int out = sizes[l], in_l = fan_in(l);
      const float* input = l == 0 ? x : outputs[l - 1].data();
      const float* w = params + offsets[l];
      // dW = delta^T input
      SATRAP_TRY(cuda_gemm(blas, true, false, out, in_l, batch, 1.0f, delta, out, input, in_l,
                           0.0f, grads + offsets[l], in_l));
      if (l > 0) {
        float* next = scratch[(last - l) % 2];
        SATRAP_TRY(cuda_gemm(blas, false, false, batch, in_l, out, 1.0f, delta, out, w, in_l, 0.0f,
                             next, in_l));
        // Through layer l-1's ReLU, and its bias gradient.
        SATRAP_TRY(cuda_relu_backward_bias_grad(blas.stream(), batch, in_l,
                                                outputs[l - 1].data(), next,
                                                grads + bias_offset(l - 1)));
        delta = next;
      } else if (dx != nullptr) {
        SATRAP_TRY(cuda_gemm(blas, false, false, batch, in_l, out, 1.0f, delta, out, w, in_l, 0.0f,
                             dx, in_l));
      }
    }
    return ok_t{};
  }
};

enum class newer { none, host, device };

}  // namespace

struct cuda_dlrm::impl {
  dense_model_config config;
  int device = 0;
  cudaStream_t stream = nullptr;
  std::optional<cublas_handle> blas;
  device_mlp bottom;
  device_mlp top;
  size_t n_params = 0;

  std::vector<float> h_params, h_grads;  // host mirrors
  newer params_newer = newer::host;      // the initial parameters are made on the host
  newer grads_newer = newer::none;
  device_array<float> d_params, d_grads, d_m, d_v;
  std::optional<dense_optimizer_options> optimizer;
  int64_t steps = 0;

  int capacity = 0;  // batch size the buffers below hold
  device_array<float> d_dense, d_pooled, d_labels, d_z, d_dz, d_dx, d_dlogits, d_pooled_grad;
  device_array<float> scratch_a, scratch_b;
  device_array<double> d_loss;
  std::string last_error;

  impl(const dense_model_config& c, int dev)
      : config(c),
        device(dev),
        bottom(c.dense_features, mlp_sizes(c.bottom, c.dim)),
        top(interaction_output_size(c.slots, c.dim), mlp_sizes(c.top, 1)) {
    n_params = bottom.param_count + top.param_count;
  }

  ~impl() {
    cudaSetDevice(device);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    blas.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  cuda_status select() { return SATRAP_CUDA_CHECK(cudaSetDevice(device)); }
  cuda_status sync() { return SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)); }

  cuda_status upload(newer& state, device_array<float>& d, const std::vector<float>& h) {
    if (state != newer::host) return ok_t{};
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemcpyAsync(d.data(), h.data(), h.size() * sizeof(float),
                                                 cudaMemcpyHostToDevice, stream)));
    state = newer::none;
    return ok_t{};
  }
  cuda_status download(newer& state, const device_array<float>& d, std::vector<float>& h) {
    if (state != newer::device) return ok_t{};
    SATRAP_TRY(select());
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.data(), h.size() * sizeof(float),
                                                 cudaMemcpyDeviceToHost, stream)));
    SATRAP_TRY(sync());
    state = newer::none;
    return ok_t{};
  }

  cuda_status reserve(int batch) {
    if (batch <= capacity) return ok_t{};
    const size_t b = static_cast<size_t>(batch);
    const size_t pooled = b * config.slots * config.dim;
    SATRAP_TRY(bottom.reserve(batch));
    SATRAP_TRY(top.reserve(batch));
    SATRAP_TRY(d_dense.reserve(b * config.dense_features));
    SATRAP_TRY(d_pooled.reserve(pooled));
    SATRAP_TRY(d_pooled_grad.reserve(pooled));
    SATRAP_TRY(d_labels.reserve(b));
    SATRAP_TRY(d_dlogits.reserve(b));
    SATRAP_TRY(d_z.reserve(b * top.in));
    SATRAP_TRY(d_dz.reserve(b * top.in));
    SATRAP_TRY(d_dx.reserve(b * config.dim));
    const size_t widest = static_cast<size_t>(std::max(bottom.widest(), top.widest()));
    SATRAP_TRY(scratch_a.reserve(b * widest));
    SATRAP_TRY(scratch_b.reserve(b * widest));
    SATRAP_TRY(d_loss.reserve(1));
    capacity = batch;
    return ok_t{};
  }

  cuda_status copy_in(float* d, const float* h, size_t n) {
    return SATRAP_CUDA_CHECK(
        cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, stream));
  }
  cuda_status copy_out(float* h, const float* d, size_t n) {
    return SATRAP_CUDA_CHECK(
        cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }

  // Inputs uploaded, parameters current; returns the device logits (batch).
  result<const float*> run_forward(int batch, const float* dense, const float* pooled) {
    if (batch <= 0) return make_model_error("cuda_dlrm: batch must be positive");
    SATRAP_TRY(select());
    SATRAP_TRY(reserve(batch));
    SATRAP_TRY(upload(params_newer, d_params, h_params));
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(copy_in(d_dense.data(), dense, b * config.dense_features));
    SATRAP_TRY(copy_in(d_pooled.data(), pooled, b * config.slots * config.dim));
    auto x = bottom.forward(*blas, batch, d_params.data(), d_dense.data());
    if (!x) return make_model_error(x.error());
    SATRAP_TRY(cuda_interaction_forward(stream, batch, config.slots, config.dim, x.value(),
                                        d_pooled.data(), d_z.data()));
    return top.forward(*blas, batch, d_params.data() + bottom.param_count, d_z.data());
  }

  result<double> forward_backward(int batch, const float* dense, const float* pooled,
                                  const float* labels, float loss_scale, float* logits,
                                  float* pooled_grad) {
    auto out = run_forward(batch, dense, pooled);
    if (!out) return make_model_error(out.error());
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(copy_in(d_labels.data(), labels, b));
    SATRAP_TRY(cuda_bce_with_logits(stream, batch, out.value(), d_labels.data(), loss_scale,
                                    d_dlogits.data(), d_loss.data()));
    float* const scratch[2] = {scratch_a.data(), scratch_b.data()};
    SATRAP_TRY(top.backward(*blas, batch, d_params.data() + bottom.param_count, d_dlogits.data(),
                            d_grads.data() + bottom.param_count, d_dz.data(), scratch));
    SATRAP_TRY(cuda_interaction_backward(stream, batch, config.slots, config.dim,
                                         bottom.outputs.back().data(), d_pooled.data(),
                                         d_dz.data(), d_dx.data(), d_pooled_grad.data()));
    SATRAP_TRY(bottom.backward(*blas, batch, d_params.data(), d_dx.data(), d_grads.data(), nullptr,
                               scratch));
    grads_newer = newer::device;  // overwritten whole, whatever the host held
    SATRAP_TRY(copy_out(logits, out.value(), b));
    SATRAP_TRY(copy_out(pooled_grad, d_pooled_grad.data(), b * config.slots * config.dim));
    double loss = 0.0;
    SATRAP_TRY(SATRAP_CUDA_CHECK(
        cudaMemcpyAsync(&loss, d_loss.data(), sizeof(double), cudaMemcpyDeviceToHost, stream)));
    SATRAP_TRY(sync());
    return loss;
  }

  // Keeps the error for last_error() and returns it.
  model_error fail(const std::string& error) {
    last_error = error;
    return make_model_error(error);
  }
};

cuda_dlrm::cuda_dlrm(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
cuda_dlrm::~cuda_dlrm() = default;

std::span<float> cuda_dlrm::params() {
  if (auto s = impl_->download(impl_->params_newer, impl_->d_params, impl_->h_params); !s)
    impl_->last_error = s.error();
  impl_->params_newer = newer::host;
  return impl_->h_params;
}

std::span<const float> cuda_dlrm::params() const {
  if (auto s = impl_->download(impl_->params_newer, impl_->d_params, impl_->h_params); !s)
    impl_->last_error = s.error();
  return impl_->h_params;
}

std::span<float> cuda_dlrm::grads() {
  if (auto s = impl_->download(impl_->grads_newer, impl_->d_grads, impl_->h_grads); !s)
    impl_->last_error = s.error();
  impl_->grads_newer = newer::host;
  return impl_->h_grads;
}

result<double> cuda_dlrm::try_forward_backward(int batch, const float* dense, const float* pooled,
                                               const float* labels, float loss_scale,
                                               float* logits, float* pooled_grad) {
  auto r = impl_->forward_backward(batch, dense, pooled, labels, loss_scale, logits, pooled_grad);
  if (!r) impl_->last_error = r.error();
  return r;
}

result<ok_t> cuda_dlrm::try_forward(int batch, const float* dense, const float* pooled,
                                    float* logits) {
  auto out = impl_->run_forward(batch, dense, pooled);
  if (!out) return impl_->fail(out.error());
  if (auto s = impl_->copy_out(logits, out.value(), static_cast<size_t>(batch)); !s)
    return impl_->fail(s.error());
  if (auto s = impl_->sync(); !s) return impl_->fail(s.error());
  return ok_t{};
}

double cuda_dlrm::forward_backward(int batch, const float* dense, const float* pooled,
                                   const float* labels, float loss_scale, float* logits,
                                   float* pooled_grad) {
  auto r = try_forward_backward(batch, dense, pooled, labels, loss_scale, logits, pooled_grad);
  if (r) return r.value();
  for (int i = 0; i < batch; ++i) logits[i] = std::numeric_limits<float>::quiet_NaN();
  return std::numeric_limits<double>::quiet_NaN();
}

void cuda_dlrm::forward(int batch, const float* dense, const float* pooled, float* logits) {
  if (auto r = try_forward(batch, dense, pooled, logits); !r)
    for (int i = 0; i < batch; ++i) logits[i] = std::numeric_limits<float>::quiet_NaN();
}

result<ok_t> cuda_dlrm::set_optimizer(const dense_optimizer_options& options) {
  impl& m = *impl_;
  if (auto s = m.select(); !s) return m.fail(s.error());
  const size_t n = m.n_params;
  const bool need_m = options.kind != dense_optimizer_kind::sgd;
  const bool need_v = options.kind == dense_optimizer_kind::adam;
  if (need_m) {
    if (auto s = m.d_m.reserve(n); !s) return m.fail(s.error());
    if (auto s = SATRAP_CUDA_CHECK(cudaMemsetAsync(m.d_m.data(), 0, n * sizeof(float), m.stream)); !s)
      return m.fail(s.error());
  }
  if (need_v) {
    if (auto s = m.d_v.reserve(n); !s) return m.fail(s.error());
    if (auto s = SATRAP_CUDA_CHECK(cudaMemsetAsync(m.d_v.data(), 0, n * sizeof(float), m.stream)); !s)
      return m.fail(s.error());
  }
  if (auto s = m.sync(); !s) return m.fail(s.error());
  m.optimizer = options;
  m.steps = 0;
  return ok_t{};
}

result<ok_t> cuda_dlrm::optimizer_step() {
  impl& m = *impl_;
  if (!m.optimizer) return m.fail("cuda_dlrm::optimizer_step: call set_optimizer first");
  if (auto s = m.select(); !s) return m.fail(s.error());
  if (auto s = m.upload(m.params_newer, m.d_params, m.h_params); !s) return m.fail(s.error());
  if (auto s = m.upload(m.grads_newer, m.d_grads, m.h_grads); !s) return m.fail(s.error());
  if (auto s = cuda_dense_optimizer_step(m.stream, *m.optimizer, m.steps + 1, m.n_params,
                                         m.d_params.data(), m.d_grads.data(), m.d_m.data(),
                                         m.d_v.data());
      !s)
    return m.fail(s.error());
  ++m.steps;
  m.params_newer = newer::device;
  if (auto s = m.sync(); !s) return m.fail(s.error());
  return ok_t{};
}

int64_t cuda_dlrm::optimizer_steps() const { return impl_->steps; }
size_t cuda_dlrm::param_count() const { return impl_->n_params; }
int cuda_dlrm::device() const { return impl_->device; }
cudaStream_t cuda_dlrm::stream() const { return impl_->stream; }

float* cuda_dlrm::device_params() {
  impl& m = *impl_;
  if (auto s = m.select(); !s) {
    m.last_error = s.error();
    return nullptr;
  }
  if (auto s = m.upload(m.params_newer, m.d_params, m.h_params); !s) {
    m.last_error = s.error();
    return nullptr;
  }
  m.params_newer = newer::device;
  return m.d_params.data();
}

float* cuda_dlrm::device_grads() {
  impl& m = *impl_;
  if (auto s = m.select(); !s) {
    m.last_error = s.error();
    return nullptr;
  }
  if (auto s = m.upload(m.grads_newer, m.d_grads, m.h_grads); !s) {
    m.last_error = s.error();
    return nullptr;
  }
  m.grads_newer = newer::device;
  return m.d_grads.data();
}

result<ok_t> cuda_dlrm::sync_to_host() {
  impl& m = *impl_;
  if (auto s = m.download(m.params_newer, m.d_params, m.h_params); !s) return m.fail(s.error());
  if (auto s = m.download(m.grads_newer, m.d_grads, m.h_grads); !s) return m.fail(s.error());
  return ok_t{};
}

const std::string& cuda_dlrm::last_error() const { return impl_->last_error; }

result<std::unique_ptr<cuda_dlrm>> make_cuda_dlrm(const dense_model_config& config, uint64_t seed,
                                                  int device) {
  if (config.type != dense_model_type::dlrm)
    return make_model_error(std::string("make_cuda_dlrm: model type '") +
                            dense_model_type_name(config.type) + "' has no CUDA path (only dlrm)");
  auto count = cuda_device_count();
  if (!count) return make_model_error(count.error());
  if (device < 0 || device >= count.value())
    return make_model_error("make_cuda_dlrm: no CUDA device " + std::to_string(device) + " (" +
                            std::to_string(count.value()) + " present)");
  auto m = std::make_unique<cuda_dlrm::impl>(config, device);
  SATRAP_TRY(m->select());
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking)));
  auto blas = cublas_handle::create(m->stream);
  if (!blas) return make_model_error(blas.error());
  m->blas.emplace(std::move(blas.value()));

  // The CPU DLRM's initialisation, through the same mlp::init on the same layout.
  m->h_params.resize(m->n_params);
  m->h_grads.assign(m->n_params, 0.0f);
  mlp bottom(config.dense_features, mlp_sizes(config.bottom, config.dim), false);
  mlp top(interaction_output_size(config.slots, config.dim), mlp_sizes(config.top, 1), false);
  bottom.init(m->h_params.data(), seed);
  top.init(m->h_params.data() + bottom.param_count(), seed + 1);
  SATRAP_TRY(m->d_params.reserve(m->n_params));
  SATRAP_TRY(m->d_grads.reserve(m->n_params));
  SATRAP_TRY(m->upload(m->params_newer, m->d_params, m->h_params));
  SATRAP_TRY(SATRAP_CUDA_CHECK(
      cudaMemsetAsync(m->d_grads.data(), 0, m->n_params * sizeof(float), m->stream)));
  SATRAP_TRY(m->sync());
  return std::make_unique<cuda_dlrm>(std::move(m));
}

}  // namespace satrap
