// DeepFM on the device: over the fields [bottom(dense), e_1..e_slots], logit = the FM
// second-order term + a first-order linear layer + the top MLP (twin: dense/deepfm.cpp).
// Params: bottom, first-order linear, top.
#include "models/cuda/device_network.hpp"

namespace satrap {

namespace {

class device_deepfm final : public device_network {
 public:
  explicit device_deepfm(const dense_model_config& c)
      : dim_(c.dim),
        fields_(c),
        linear_(fields_.width(), {1}),
        top_(fields_.width(), mlp_sizes(c.top, 1)) {
    linear_at_ = fields_.param_count();
    top_at_ = linear_at_ + linear_.param_count();
  }

  cuda_status reserve(int batch) override {
    const size_t b = static_cast<size_t>(batch), n = b * fields_.width();
    SATRAP_TRY(fields_.reserve(batch));
    SATRAP_TRY(linear_.reserve(batch));
    SATRAP_TRY(top_.reserve(batch));
    SATRAP_TRY(sums_.reserve(b * dim_));
    SATRAP_TRY(logits_.reserve(b));
    SATRAP_TRY(g_.reserve(n));
    return t_.reserve(n);
  }

  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* dense, const float* pooled) override {
    auto z = fields_.forward(blas, batch, params, dense, pooled);
    if (!z)
      return z;
    z_ = z.value();
    auto deep = top_.forward(blas, batch, params + top_at_, z_);
    if (!deep)
      return deep;
    auto first = linear_.forward(blas, batch, params + linear_at_, z_);
    if (!first)
      return first;
    SATRAP_TRY(cuda_fm_forward(blas.stream(), batch, fields(), dim_, z_, first.value(),
                               deep.value(), sums_.data(), logits_.data()));
    return static_cast<const float*>(logits_.data());
  }

  cuda_status backward(const cublas_handle& blas, int batch, const float* params,
                       const float* dlogits, float* grads, float* pooled_grad) override {
    SATRAP_TRY(top_.backward(blas, batch, params + top_at_, dlogits, grads + top_at_, g_.data()));
    SATRAP_TRY(
      linear_.backward(blas, batch, params + linear_at_, dlogits, grads + linear_at_, t_.data()));
    // d fm / d v_ik = S_k - v_ik, plus the first-order term's share t.
    SATRAP_TRY(cuda_fm_backward(blas.stream(), batch, fields(), dim_, z_, sums_.data(), dlogits,
                                t_.data(), g_.data()));
    return fields_.backward(blas, batch, params, g_.data(), grads, pooled_grad);
  }

 private:
  int fields() const { return fields_.width() / dim_; }

  int dim_;
  device_fields fields_;
  device_mlp linear_;  // first-order term: one linear layer to 1
  device_mlp top_;
  size_t linear_at_ = 0, top_at_ = 0;
  const float* z_ = nullptr;
  device_array<float> sums_, logits_, g_, t_;
};

}  // namespace

std::unique_ptr<device_network> make_device_deepfm(const dense_model_config& config) {
  return std::make_unique<device_deepfm>(config);
}

}  // namespace satrap
