// Double-buffered batch copies for cuda_dense_model: a copy stream of its own, page-locked staging
// buffers for the inputs (dense features, pooled embeddings, labels) and for the pooled-embedding
// gradients, and device input buffers per slot (staging_ring.hpp is the state machine).
//
//   stage(N)          host memcpy into slot s's pinned buffers, then the H2D copies on the copy
//                     stream, after `consumed[s]` (the compute stream is done with slot s), then
//                     `uploaded[s]` recorded. Never waits on the device.
//   begin_compute(N)  the compute stream waits for `uploaded[s]`; answers slot s's device inputs.
//                     Batch N+1 may be staged from here on: its upload overlaps N's compute.
//   download_grads    `computed` recorded on the compute stream after the backward pass; the copy
//                     stream waits for it and copies the pooled gradients D2H into pinned memory.
//   finish(out)       records `consumed[s]`, waits for the download (the caller has just
//                     synchronised the compute stream, so this is the copy's tail only), copies the
//                     gradients from pinned memory to `out` and frees slot s.
// Any failed call leaves the stager to be clear()ed (which waits for the copy stream).
// Threading: not thread-safe; used by its model's owner with the model's device selected.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "models/cuda/cuda_util.hpp"
#include "models/cuda/staging_ring.hpp"

namespace satrap {

class batch_stager {
 public:
  struct device_inputs {
    int batch = 0;
    const float* dense = nullptr;
    const float* pooled = nullptr;
    const float* labels = nullptr;
  };

  // `slots` buffers of inputs of per-sample widths dense_width and pooled_width (slots x dim).
  static result<std::unique_ptr<batch_stager>> create(int slots, size_t dense_width,
                                                      size_t pooled_width);
  ~batch_stager();
  batch_stager(const batch_stager&) = delete;
  batch_stager& operator=(const batch_stager&) = delete;

  // Enqueues batch `key`'s upload; false (nothing done) when every slot is busy.
  result<bool> stage(int64_t key, int batch, const float* dense, const float* pooled,
                     const float* labels);
  bool has(int64_t key) const { return ring_.has(key); }
  int free_slots() const { return ring_.free_slots(); }
  result<device_inputs> begin_compute(int64_t key, cudaStream_t compute);
  // n floats of pooled gradients at device address `grads`, written by the compute stream.
  cuda_status download_grads(cudaStream_t compute, const float* grads, size_t n);
  cuda_status finish(cudaStream_t compute, float* out, size_t n);
  // Frees staged slots of keys below `key` (steps that will not be computed).
  void drop_before(int64_t key) { ring_.drop_before(key); }
  // Waits for the copy stream and frees every slot (after an error, or a rollback).
  void clear();
  cudaStream_t copy_stream() const { return copy_; }

 private:
  struct slot {
    int batch = 0;
    pinned_buffer<float> h_dense, h_pooled, h_labels;
    device_array<float> d_dense, d_pooled, d_labels;
    cuda_event uploaded, consumed;
    bool consumed_recorded = false;
  };
  batch_stager() = default;
  cuda_status reserve(slot& s, int batch);

  size_t dense_width_ = 0, pooled_width_ = 0;
  cudaStream_t copy_ = nullptr;
  std::vector<slot> slots_;
  staging_ring ring_{2};
  pinned_buffer<float> h_grads_;
  cuda_event computed_, downloaded_;
  int current_ = -1;  // the computing slot
};

}  // namespace satrap
