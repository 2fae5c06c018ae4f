// A flat fp32 vector in device memory with a host mirror, each side either in sync or newer
// (cuda_dense_model's parameters and gradients; its header states when each side becomes newer).
// Threading: a plain owner; calls go on the caller's stream with the caller's device selected.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "models/cuda/cuda_util.hpp"

namespace satrap {

class mirrored_array {
 public:
  enum class newer { none, host, device };

  // n values; the host copy (zeros) is newer until the first upload.
  cuda_status allocate(size_t n) {
    host_.assign(n, 0.0f);
    state_ = newer::host;
    return device_.reserve(n);
  }
  size_t size() const { return host_.size(); }

  // Copies a newer host side to the device (asynchronous on `stream`).
  cuda_status upload(cudaStream_t stream) {
    if (state_ != newer::host)
      return ok_t{};
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemcpyAsync(
      device_.data(), host_.data(), host_.size() * sizeof(float), cudaMemcpyHostToDevice, stream)));
    state_ = newer::none;
    return ok_t{};
  }
  // Copies a newer device side to the host and waits for it.
  cuda_status download(cudaStream_t stream) {
    if (state_ != newer::device)
      return ok_t{};
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemcpyAsync(
      host_.data(), device_.data(), host_.size() * sizeof(float), cudaMemcpyDeviceToHost, stream)));
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)));
    state_ = newer::none;
    return ok_t{};
  }

  // The sides, for reading, or for writing: mark_*_newer() after a write (or a pending one).
  std::vector<float>& host() { return host_; }
  float* device() { return device_.data(); }
  void mark_host_newer() { state_ = newer::host; }
  void mark_device_newer() { state_ = newer::device; }

 private:
  std::vector<float> host_;
  device_array<float> device_;
  newer state_ = newer::host;
};

}  // namespace satrap
