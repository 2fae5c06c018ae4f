// Small pieces of the CUDA path: CUDA / cuBLAS / NCCL status codes turned into satrap's result
// (an error message naming the call, the code's text and file:line; never an abort), a device
// array, a page-locked host buffer and an event that own what they hold, and the device count.
// Threading: device_array is a plain owner (one at a time); the free functions are thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "models/result.hpp"

namespace satrap {

using cuda_status = result<ok_t>;

// ok for cudaSuccess, else "<file>:<line>: <expr> failed: <cudaGetErrorName>: <text>".
cuda_status cuda_check(cudaError_t code, const char* expr, const char* file, int line);
// cublasStatus_t and ncclResult_t as int (their headers stay out of this one).
cuda_status cublas_check(int code, const char* expr, const char* file, int line);
cuda_status nccl_check(int code, const char* expr, const char* file, int line);

// After a kernel launch: the launch error, if any (cudaGetLastError), with the kernel's name.
cuda_status cuda_launch_check(const char* kernel, const char* file, int line);

// How many CUDA devices this process sees; an error (with the driver's reason) when none can be
// used, e.g. no driver or no GPU.
result<int> cuda_device_count();

}  // namespace satrap

#define SATRAP_CUDA_CHECK(expr) ::satrap::cuda_check((expr), #expr, __FILE__, __LINE__)
#define SATRAP_CUBLAS_CHECK(expr) \
  ::satrap::cublas_check(static_cast<int>(expr), #expr, __FILE__, __LINE__)
#define SATRAP_NCCL_CHECK(expr) \
  ::satrap::nccl_check(static_cast<int>(expr), #expr, __FILE__, __LINE__)
#define SATRAP_LAUNCH_CHECK(kernel) ::satrap::cuda_launch_check(kernel, __FILE__, __LINE__)

// Returns the error from the enclosing function (whose type is any result<T>) when `expr`, a
// result, failed.
#define SATRAP_TRY(expr)                                        \
  do {                                                          \
    auto satrap_try_status_ = (expr);                           \
    if (!satrap_try_status_.ok())                               \
      return ::satrap::model_error{satrap_try_status_.error()}; \
  } while (0)

namespace satrap {

// Device memory for n values of T; grows only (reserve), never shrinks; freed on destruction.
template <class T>
class device_array {
 public:
  device_array() = default;
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  device_array(device_array&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  device_array& operator=(device_array&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~device_array() { release(); }

  // Capacity for at least n values; the old contents are lost when it grows.
  cuda_status reserve(size_t n) {
    if (n <= n_)
      return ok_t{};
    release();
    void* p = nullptr;
    SATRAP_TRY(cuda_check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc", __FILE__, __LINE__));
    p_ = static_cast<T*>(p);
    n_ = n;
    return ok_t{};
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t capacity() const { return n_; }

 private:
  void release() {
    if (p_ != nullptr)
      cudaFree(p_);  // an error here has nowhere to go; the memory is gone anyway
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory for n values of T (cudaHostAlloc), so that cudaMemcpyAsync from or to it
// is a true asynchronous DMA; grows only (reserve), freed on destruction (cudaFreeHost).
template <class T>
class pinned_buffer {
 public:
  pinned_buffer() = default;
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  pinned_buffer(pinned_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~pinned_buffer() { release(); }

  // Capacity for at least n values; the old contents are lost when it grows. No copy that reads
  // or writes the old memory may still be in flight.
  cuda_status reserve(size_t n) {
    if (n <= n_)
      return ok_t{};
    release();
    void* p = nullptr;
    SATRAP_TRY(cuda_check(cudaHostAlloc(&p, n * sizeof(T), cudaHostAllocPortable), "cudaHostAlloc",
                          __FILE__, __LINE__));
    p_ = static_cast<T*>(p);
    n_ = n;
    return ok_t{};
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t capacity() const { return n_; }

 private:
  void release() {
    if (p_ != nullptr)
      cudaFreeHost(p_);  // as device_array: an error here has nowhere to go
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

// A CUDA event without timing (ordering between streams only); destroyed with its owner.
class cuda_event {
 public:
  cuda_event() = default;
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  cuda_event(cuda_event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  cuda_event& operator=(cuda_event&& o) noexcept {
    if (this != &o) {
      release();
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }
  ~cuda_event() { release(); }
  cuda_status create() {
    release();
    return cuda_check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming),
                      "cudaEventCreateWithFlags", __FILE__, __LINE__);
  }
  cudaEvent_t get() const { return e_; }

 private:
  void release() {
    if (e_ != nullptr)
      cudaEventDestroy(e_);
    e_ = nullptr;
  }
  cudaEvent_t e_ = nullptr;
};

}  // namespace satrap
