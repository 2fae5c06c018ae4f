// batch_stager.hpp: pinned staging buffers and a copy stream for cuda_dense_model.
#include "models/cuda/batch_stager.hpp"

#include <cstring>
#include <utility>

namespace satrap {

result<std::unique_ptr<batch_stager>> batch_stager::create(int slots, size_t dense_width,
                                                           size_t pooled_width) {
  SATRAP_ASSERT(slots >= 1, "batch_stager: {} slots", slots);
  std::unique_ptr<batch_stager> s(new batch_stager());
  s->dense_width_ = dense_width;
  s->pooled_width_ = pooled_width;
  s->ring_ = staging_ring(slots);
  s->slots_ = std::vector<slot>(static_cast<size_t>(slots));
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamCreateWithFlags(&s->copy_, cudaStreamNonBlocking)));
  for (auto& sl : s->slots_) {
    SATRAP_TRY(sl.uploaded.create());
    SATRAP_TRY(sl.consumed.create());
  }
  SATRAP_TRY(s->computed_.create());
  SATRAP_TRY(s->downloaded_.create());
  return s;
}

batch_stager::~batch_stager() {
  if (copy_ != nullptr) {
    cudaStreamSynchronize(copy_);  // no copy may outlive the buffers (errors: nowhere to go)
    slots_.clear();                // events and buffers before the stream
    cudaStreamDestroy(copy_);
  }
}

cuda_status batch_stager::reserve(slot& s, int batch) {
  const size_t b = static_cast<size_t>(batch);
  SATRAP_TRY(s.h_dense.reserve(b * dense_width_));
  SATRAP_TRY(s.h_pooled.reserve(b * pooled_width_));
  SATRAP_TRY(s.h_labels.reserve(b));
  SATRAP_TRY(s.d_dense.reserve(b * dense_width_));
  SATRAP_TRY(s.d_pooled.reserve(b * pooled_width_));
  return s.d_labels.reserve(b);
}

result<bool> batch_stager::stage(int64_t key, int batch, const float* dense, const float* pooled,
                                 const float* labels) {
  if (batch <= 0)
    return make_model_error("batch_stager: batch must be positive");
  if (ring_.has(key))
    return true;  // staged already
  auto index = ring_.stage(key);
  if (!index)
    return false;
  slot& s = slots_[static_cast<size_t>(*index)];
  auto enqueue = [&]() -> cuda_status {
    // A free slot's last upload was consumed by a computation that has finished, so this waits
    // for nothing in practice; it keeps the host buffers safe if a caller ever skipped the sync.
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaEventSynchronize(s.uploaded.get())));
    SATRAP_TRY(reserve(s, batch));
    const size_t b = static_cast<size_t>(batch);
    auto host_copy = [](float* to, const float* from, size_t n) {
      if (n > 0)
        std::memcpy(to, from, n * sizeof(float));  // (no dense features: null, 0)
    };
    host_copy(s.h_dense.data(), dense, b * dense_width_);
    host_copy(s.h_pooled.data(), pooled, b * pooled_width_);
    host_copy(s.h_labels.data(), labels, b);
    if (s.consumed_recorded)
      SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamWaitEvent(copy_, s.consumed.get(), 0)));
    auto h2d = [&](float* to, const float* from, size_t n) {
      return SATRAP_CUDA_CHECK(
        cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyHostToDevice, copy_));
    };
    SATRAP_TRY(h2d(s.d_dense.data(), s.h_dense.data(), b * dense_width_));
    SATRAP_TRY(h2d(s.d_pooled.data(), s.h_pooled.data(), b * pooled_width_));
    SATRAP_TRY(h2d(s.d_labels.data(), s.h_labels.data(), b));
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaEventRecord(s.uploaded.get(), copy_)));
    s.batch = batch;
    return ok_t{};
  };
  if (auto st = enqueue(); !st) {
    ring_.drop(key);  // nothing of it is trusted
    return make_model_error(st.error());
  }
  return true;
}

result<batch_stager::device_inputs> batch_stager::begin_compute(int64_t key, cudaStream_t compute) {
  if (!ring_.has(key))
    return make_model_error("batch_stager: batch " + std::to_string(key) + " is not staged");
  current_ = ring_.begin_compute(key);
  slot& s = slots_[static_cast<size_t>(current_)];
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamWaitEvent(compute, s.uploaded.get(), 0)));
  return device_inputs{s.batch, s.d_dense.data(), s.d_pooled.data(), s.d_labels.data()};
}

cuda_status batch_stager::download_grads(cudaStream_t compute, const float* grads, size_t n) {
  SATRAP_ASSERT(current_ >= 0, "batch_stager: download_grads without a computing batch");
  SATRAP_TRY(h_grads_.reserve(n));
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaEventRecord(computed_.get(), compute)));
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaStreamWaitEvent(copy_, computed_.get(), 0)));
  SATRAP_TRY(SATRAP_CUDA_CHECK(
    cudaMemcpyAsync(h_grads_.data(), grads, n * sizeof(float), cudaMemcpyDeviceToHost, copy_)));
  return SATRAP_CUDA_CHECK(cudaEventRecord(downloaded_.get(), copy_));
}

cuda_status batch_stager::finish(cudaStream_t compute, float* out, size_t n) {
  SATRAP_ASSERT(current_ >= 0, "batch_stager: finish without a computing batch");
  SATRAP_ASSERT(n <= h_grads_.capacity(), "batch_stager: finish n={} capacity={}", n,
                h_grads_.capacity());
  slot& s = slots_[static_cast<size_t>(current_)];
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaEventRecord(s.consumed.get(), compute)));
  s.consumed_recorded = true;
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaEventSynchronize(downloaded_.get())));
  if (n > 0)
    std::memcpy(out, h_grads_.data(), n * sizeof(float));
  ring_.finish();
  current_ = -1;
  return ok_t{};
}

void batch_stager::clear() {
  if (copy_ != nullptr)
    cudaStreamSynchronize(copy_);  // its error resurfaces at the next call
  ring_.clear();
  current_ = -1;
}

}  // namespace satrap
