// An MLP on the device over a slice of the flat parameter vector: the layout of mlp (dense/mlp.hpp:
// linear layers W (out x in) then b, ReLU after every layer but the last), its activations and its
// backward scratch in device memory. The building block of every GPU model (device_network.hpp):
// a cross layer or a one-logit linear layer is a device_mlp of one layer.
// Threading: not thread-safe; owned by one model, used on its cuBLAS handle's stream.
#pragma once

#include <cstddef>
#include <vector>

#include "models/cuda/cuda_kernels.hpp"
#include "models/cuda/cuda_util.hpp"

namespace satrap {

class device_mlp {
 public:
  // in -> sizes[0] -> ... -> sizes.back(), as mlp(in, sizes, /*relu_last=*/false).
  device_mlp(int in, std::vector<int> sizes);

  size_t param_count() const { return param_count_; }
  int in() const { return in_; }
  int out() const { return sizes_.back(); }

  // Activations and scratch for `batch` samples (grows only).
  cuda_status reserve(int batch);

  // Returns the device output [batch x out()], valid until the next forward. `input` must stay
  // valid until backward.
  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* input);
  // The last forward's output.
  const float* output() const { return outputs_.back().data(); }
  // After forward: grads (param_count()) overwritten; dx [batch x in()] overwritten unless null.
  // dy [batch x out()] is left as it was.
  cuda_status backward(const cublas_handle& blas, int batch, const float* params, const float* dy,
                       float* grads, float* dx);

 private:
  int layers() const { return static_cast<int>(sizes_.size()); }
  int fan_in(int l) const { return l == 0 ? in_ : sizes_[l - 1]; }
  size_t bias_offset(int l) const {
    return offsets_[l] + static_cast<size_t>(sizes_[l]) * fan_in(l);
  }

  int in_;
  std::vector<int> sizes_;
  std::vector<size_t> offsets_;  // per layer: W at offsets_[l], b right after it
  size_t param_count_ = 0;
  std::vector<device_array<float>> outputs_;  // per layer, post-activation
  device_array<float> scratch_[2];            // backward deltas, batch x widest layer each
  const float* x_ = nullptr;                  // the last forward's input
};

}  // namespace satrap
