// DLRM on the device: bottom MLP, pairwise-dot interaction, top MLP (twin: dense/dlrm.cpp, dot
// interaction, no dropout). Params: bottom, top.
#include "models/cuda/device_network.hpp"
#include "models/dense/interaction.hpp"

namespace satrap {

namespace {

class device_dlrm final : public device_network {
 public:
  explicit device_dlrm(const dense_model_config& c)
      : slots_(c.slots),
        dim_(c.dim),
        bottom_(c.dense_features, mlp_sizes(c.bottom, c.dim)),
        top_(interaction_output_size(c.slots, c.dim), mlp_sizes(c.top, 1)) {}

  cuda_status reserve(int batch) override {
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(bottom_.reserve(batch));
    SATRAP_TRY(top_.reserve(batch));
    SATRAP_TRY(z_.reserve(b * top_.in()));
    SATRAP_TRY(dz_.reserve(b * top_.in()));
    return dx_.reserve(b * dim_);
  }

  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* dense, const float* pooled) override {
    pooled_ = pooled;
    auto x = bottom_.forward(blas, batch, params, dense);
    if (!x)
      return make_model_error(x.error());
    x_ = x.value();
    SATRAP_TRY(cuda_interaction_forward(blas.stream(), batch, slots_, dim_, x_, pooled, z_.data()));
    return top_.forward(blas, batch, params + bottom_.param_count(), z_.data());
  }

  cuda_status backward(const cublas_handle& blas, int batch, const float* params,
                       const float* dlogits, float* grads, float* pooled_grad) override {
    const size_t top_at = bottom_.param_count();
    SATRAP_TRY(top_.backward(blas, batch, params + top_at, dlogits, grads + top_at, dz_.data()));
    SATRAP_TRY(cuda_interaction_backward(blas.stream(), batch, slots_, dim_, x_, pooled_,
                                         dz_.data(), dx_.data(), pooled_grad));
    return bottom_.backward(blas, batch, params, dx_.data(), grads, nullptr);
  }

 private:
  int slots_, dim_;
  device_mlp bottom_, top_;
  device_array<float> z_, dz_, dx_;
  const float* x_ = nullptr;       // the bottom MLP's output (owned by bottom_)
  const float* pooled_ = nullptr;  // the last forward's pooled embeddings
};

}  // namespace

std::unique_ptr<device_network> make_device_dlrm(const dense_model_config& config) {
  return std::make_unique<device_dlrm>(config);
}

}  // namespace satrap
