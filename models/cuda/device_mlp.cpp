// The device MLP (device_mlp.hpp): cuBLAS GEMMs and the fused bias / ReLU kernels.
#include "models/cuda/device_mlp.hpp"

#include <algorithm>
#include <utility>

namespace satrap {

device_mlp::device_mlp(int in, std::vector<int> sizes) : in_(in), sizes_(std::move(sizes)) {
  SATRAP_ASSERT(in_ > 0 && !sizes_.empty(), "in={} layers={}", in_, sizes_.size());
  int fan = in_;
  for (int out : sizes_) {
    offsets_.push_back(param_count_);
    param_count_ += static_cast<size_t>(out) * fan + out;
    fan = out;
  }
  outputs_.resize(sizes_.size());
}

cuda_status device_mlp::reserve(int batch) {
  const size_t b = static_cast<size_t>(batch);
  for (int l = 0; l < layers(); ++l)
    SATRAP_TRY(outputs_[l].reserve(b * sizes_[l]));
  const size_t widest = static_cast<size_t>(*std::max_element(sizes_.begin(), sizes_.end()));
  for (auto& s : scratch_)
    SATRAP_TRY(s.reserve(b * widest));
  return ok_t{};
}

result<const float*> device_mlp::forward(const cublas_handle& blas, int batch, const float* params,
                                         const float* input) {
  x_ = input;
  for (int l = 0; l < layers(); ++l) {
    SATRAP_TRY(cuda_linear_forward(blas, batch, fan_in(l), sizes_[l], input, params + offsets_[l],
                                   params + bias_offset(l), outputs_[l].data(), l + 1 < layers()));
    input = outputs_[l].data();
  }
  return input;
}

cuda_status device_mlp::backward(const cublas_handle& blas, int batch, const float* params,
                                 const float* dy, float* grads, float* dx) {
  const int last = layers() - 1;
  // The last layer has no ReLU: its delta is dy itself (the fused kernel only reads it then).
  SATRAP_TRY(cuda_relu_backward_bias_grad(blas.stream(), batch, sizes_[last], nullptr,
                                          const_cast<float*>(dy), grads + bias_offset(last)));
  const float* delta = dy;  // gradient w.r.t. layer l's pre-activation output
  for (int l = last; l >= 0; --l) {
    const int out = sizes_[l], in_l = fan_in(l);
    const float* input = l == 0 ? x_ : outputs_[l - 1].data();
    const float* w = params + offsets_[l];
    // dW = delta^T input
    SATRAP_TRY(cuda_gemm(blas, true, false, out, in_l, batch, 1.0f, delta, out, input, in_l, 0.0f,
                         grads + offsets_[l], in_l));
    if (l > 0) {
      float* next = scratch_[(last - l) % 2].data();
      SATRAP_TRY(cuda_gemm(blas, false, false, batch, in_l, out, 1.0f, delta, out, w, in_l, 0.0f,
                           next, in_l));
      // Through layer l-1's ReLU, and its bias gradient.
      SATRAP_TRY(cuda_relu_backward_bias_grad(blas.stream(), batch, in_l, outputs_[l - 1].data(),
                                              next, grads + bias_offset(l - 1)));
      delta = next;
    } else if (dx != nullptr) {
      SATRAP_TRY(
        cuda_gemm(blas, false, false, batch, in_l, out, 1.0f, delta, out, w, in_l, 0.0f, dx, in_l));
    }
  }
  return ok_t{};
}

}  // namespace satrap
