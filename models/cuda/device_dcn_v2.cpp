// DCN-v2 (stacked) on the device: the fields x0 = [bottom(dense), e_1..e_slots], full-rank cross
// layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l, then the top MLP (twin: dense/dcn_v2.cpp).
// Params: bottom, cross layers (W_l, b_l each), top.
#include <cuda_runtime_api.h>

#include "models/cuda/device_network.hpp"

namespace satrap {

namespace {

class device_dcn_v2 final : public device_network {
 public:
  explicit device_dcn_v2(const dense_model_config& c)
      : fields_(c), top_(fields_.width(), mlp_sizes(c.top, 1)) {
    size_t at = fields_.param_count();
    for (int l = 0; l < c.cross_layers; ++l) {
      cross_.emplace_back(fields_.width(), std::vector<int>{fields_.width()});
      cross_at_.push_back(at);
      at += cross_.back().param_count();
    }
    top_at_ = at;
    xs_.resize(cross_.size());  // x_1 .. x_L (x_0 is the fields' output)
  }

  cuda_status reserve(int batch) override {
    const size_t n = static_cast<size_t>(batch) * fields_.width();
    SATRAP_TRY(fields_.reserve(batch));
    SATRAP_TRY(top_.reserve(batch));
    for (auto& c : cross_)
      SATRAP_TRY(c.reserve(batch));
    for (auto& x : xs_)
      SATRAP_TRY(x.reserve(n));
    for (auto* b : {&g_, &dx0_, &du_, &dxl_})
      SATRAP_TRY(b->reserve(n));
    return ok_t{};
  }

  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* dense, const float* pooled) override {
    const size_t n = static_cast<size_t>(batch) * fields_.width();
    auto z = fields_.forward(blas, batch, params, dense, pooled);
    if (!z)
      return z;
    x0_ = z.value();
    const float* xl = x0_;
    for (size_t l = 0; l < cross_.size(); ++l) {
      auto u = cross_[l].forward(blas, batch, params + cross_at_[l], xl);
      if (!u)
        return u;
      SATRAP_TRY(cuda_cross_forward(blas.stream(), n, x0_, u.value(), xl, xs_[l].data()));
      xl = xs_[l].data();
    }
    return top_.forward(blas, batch, params + top_at_, xl);
  }

  cuda_status backward(const cublas_handle& blas, int batch, const float* params,
                       const float* dlogits, float* grads, float* pooled_grad) override {
    const size_t n = static_cast<size_t>(batch) * fields_.width();
    cudaStream_t stream = blas.stream();
    // g = dL/dx_{l+1}; x_{l+1} = x0 * u_l + x_l with u_l = W_l x_l + b_l.
    SATRAP_TRY(top_.backward(blas, batch, params + top_at_, dlogits, grads + top_at_, g_.data()));
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemsetAsync(dx0_.data(), 0, n * sizeof(float), stream)));
    for (size_t l = cross_.size(); l-- > 0;) {
      SATRAP_TRY(cuda_cross_backward(stream, n, g_.data(), x0_, cross_[l].output(), du_.data(),
                                     dx0_.data()));
      SATRAP_TRY(cross_[l].backward(blas, batch, params + cross_at_[l], du_.data(),
                                    grads + cross_at_[l], dxl_.data()));
      SATRAP_TRY(cuda_add(stream, n, dxl_.data(), g_.data()));
    }
    SATRAP_TRY(cuda_add(stream, n, dx0_.data(), g_.data()));  // x_0 is x0 itself
    return fields_.backward(blas, batch, params, g_.data(), grads, pooled_grad);
  }

 private:
  device_fields fields_;
  device_mlp top_;
  std::vector<device_mlp> cross_;  // one linear layer each (no activation)
  std::vector<size_t> cross_at_;
  size_t top_at_ = 0;
  std::vector<device_array<float>> xs_;
  const float* x0_ = nullptr;
  device_array<float> g_, dx0_, du_, dxl_;
};

}  // namespace

std::unique_ptr<device_network> make_device_dcn_v2(const dense_model_config& config) {
  return std::make_unique<device_dcn_v2>(config);
}

}  // namespace satrap
