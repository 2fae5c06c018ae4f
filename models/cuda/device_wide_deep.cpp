// Wide&Deep on the device: logit = a linear layer over [dense, e_1..e_slots] + the top MLP over
// the fields [bottom(dense), e_1..e_slots] (twin: dense/wide_deep.cpp). Params: bottom, wide, top.
#include <cuda_runtime_api.h>

#include "models/cuda/device_network.hpp"

namespace satrap {

namespace {

class device_wide_deep final : public device_network {
 public:
  explicit device_wide_deep(const dense_model_config& c)
      : dense_features_(c.dense_features),
        emb_(c.slots * c.dim),
        fields_(c),
        wide_(c.dense_features + c.slots * c.dim, {1}),
        top_(fields_.width(), mlp_sizes(c.top, 1)) {
    wide_at_ = fields_.param_count();
    top_at_ = wide_at_ + wide_.param_count();
  }

  cuda_status reserve(int batch) override {
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(fields_.reserve(batch));
    SATRAP_TRY(wide_.reserve(batch));
    SATRAP_TRY(top_.reserve(batch));
    SATRAP_TRY(w_.reserve(b * wide_.in()));
    SATRAP_TRY(dw_.reserve(b * wide_.in()));
    SATRAP_TRY(dz_.reserve(b * fields_.width()));
    return logits_.reserve(b);
  }

  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* dense, const float* pooled) override {
    cudaStream_t stream = blas.stream();
    auto z = fields_.forward(blas, batch, params, dense, pooled);
    if (!z)
      return z;
    SATRAP_TRY(cuda_concat_rows(stream, batch, dense_features_, dense, emb_, pooled, w_.data()));
    auto deep = top_.forward(blas, batch, params + top_at_, z.value());
    if (!deep)
      return deep;
    auto wide = wide_.forward(blas, batch, params + wide_at_, w_.data());
    if (!wide)
      return wide;
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemcpyAsync(logits_.data(), deep.value(),
                                                 static_cast<size_t>(batch) * sizeof(float),
                                                 cudaMemcpyDeviceToDevice, stream)));
    SATRAP_TRY(cuda_add(stream, static_cast<size_t>(batch), wide.value(), logits_.data()));
    return static_cast<const float*>(logits_.data());
  }

  cuda_status backward(const cublas_handle& blas, int batch, const float* params,
                       const float* dlogits, float* grads, float* pooled_grad) override {
    SATRAP_TRY(top_.backward(blas, batch, params + top_at_, dlogits, grads + top_at_, dz_.data()));
    SATRAP_TRY(
      wide_.backward(blas, batch, params + wide_at_, dlogits, grads + wide_at_, dw_.data()));
    SATRAP_TRY(fields_.backward(blas, batch, params, dz_.data(), grads, pooled_grad));
    // The wide part's share of pooled_grad (its dense-feature share has no parameters to reach).
    return cuda_split_rows(blas.stream(), batch, dense_features_, nullptr, emb_, pooled_grad,
                           dw_.data(), true);
  }

 private:
  int dense_features_, emb_;
  device_fields fields_;
  device_mlp wide_;  // one linear layer to 1
  device_mlp top_;
  size_t wide_at_ = 0, top_at_ = 0;
  device_array<float> w_, dw_, dz_, logits_;  // w_: the wide input [dense, e_1..e_slots]
};

}  // namespace

std::unique_ptr<device_network> make_device_wide_deep(const dense_model_config& config) {
  return std::make_unique<device_wide_deep>(config);
}

}  // namespace satrap
