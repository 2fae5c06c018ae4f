#include "models/cuda/cuda_util.hpp"

#include <cublas_v2.h>
#include <nccl.h>

namespace satrap {

namespace {

model_error located(const char* file, int line, const char* expr, const std::string& why) {
  return make_model_error(std::string(file) + ":" + std::to_string(line) + ": " + expr
                          + " failed: " + why);
}

}  // namespace

cuda_status cuda_check(cudaError_t code, const char* expr, const char* file, int line) {
  if (code == cudaSuccess)
    return ok_t{};
  return located(file, line, expr,
                 std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code));
}

cuda_status cublas_check(int code, const char* expr, const char* file, int line) {
  auto status = static_cast<cublasStatus_t>(code);
  if (status == CUBLAS_STATUS_SUCCESS)
    return ok_t{};
  return located(file, line, expr,
                 std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status));
}

cuda_status nccl_check(int code, const char* expr, const char* file, int line) {
  auto status = static_cast<ncclResult_t>(code);
  if (status == ncclSuccess)
    return ok_t{};
  std::string why = ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0')
    why += std::string(" (") + last + ")";
  return located(file, line, expr, why);
}

cuda_status cuda_launch_check(const char* kernel, const char* file, int line) {
  return cuda_check(cudaGetLastError(), kernel, file, line);
}

result<int> cuda_device_count() {
  int count = 0;
  cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess) {
    cudaGetLastError();  // clear it: "no device" is not a sticky error
    return make_model_error(std::string("no usable CUDA device: ") + cudaGetErrorName(code) + ": "
                            + cudaGetErrorString(code));
  }
  if (count == 0)
    return make_model_error("no usable CUDA device: cudaGetDeviceCount reports 0");
  return count;
}

}  // namespace satrap
