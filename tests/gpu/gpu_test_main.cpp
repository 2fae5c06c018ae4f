// satrap_gpu_test: the CUDA path against its CPU twins (gpu_kernels_test.cpp: every kernel;
// gpu_models_test.cpp: every GPU model and mixed precision; gpu_nccl_test.cpp: NCCL). Without a
// CUDA device only the test suite "host" runs (error messages, refusals), then the binary prints
// why and exits 77 (CTest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <cublas_v2.h>
#include <string>
#include <vector>

#include "models/cuda/cuda_dense_model.hpp"
#include "models/cuda/nccl_comm.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace satrap;

namespace {

bool cublas_mapped() {  // whether libcublas is mapped into this process
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr)
    return false;
  char line[4096];
  bool found = false;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::string(line).find("libcublas") != std::string::npos)
      found = true;
  std::fclose(f);
  return found;
}

bool cublas_at_start = true;  // set by main

}  // namespace

// ---- without a GPU too --------------------------------------------------------------------------

TEST_SUITE("host") {
  TEST_CASE("CUDA errors become messages with file:line, not aborts") {
    cuda_status s = SATRAP_CUDA_CHECK(cudaErrorInvalidValue);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().find("gpu_test_main.cpp:") != std::string::npos);
    CHECK(s.error().find("cudaErrorInvalidValue") != std::string::npos);
    CHECK(SATRAP_CUDA_CHECK(cudaSuccess).ok());
    cuda_status b = SATRAP_CUBLAS_CHECK(7);  // CUBLAS_STATUS_INVALID_VALUE
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos);
    CHECK_FALSE(SATRAP_NCCL_CHECK(4).ok());  // ncclInvalidArgument
  }

  TEST_CASE(
    "cuBLAS is not loaded at start, and is on its first call (models/cuda/cublas_lazy.cpp)") {
    CHECK_FALSE(cublas_at_start);  // read in main, before any case ran
    CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE))
          == "CUBLAS_STATUS_INVALID_VALUE");
    CHECK(cublas_mapped());
  }

  TEST_CASE("make_cuda_dense_model refuses what the GPU path lacks, and missing devices") {
    dense_model_config config;
    config.interaction = dlrm_interaction::dot_cat;
    auto m = make_cuda_dense_model(config, 1);
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().find("interaction dot only") != std::string::npos);
    config.interaction = dlrm_interaction::dot;
    config.type = dense_model_type::deepfm;
    config.dropout = 0.5f;
    auto d = make_cuda_dense_model(config, 1);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().find("no model.dropout") != std::string::npos);
    config.dropout = 0.0f;
    auto far = make_cuda_dense_model(config, 1, 1 << 20);
    CHECK_FALSE(far.ok());
    if (!cuda_device_count().ok()) {  // no GPU here: the factory says so instead of failing later
      auto none = make_cuda_dense_model(config, 1);
      REQUIRE_FALSE(none.ok());
      CHECK(none.error().find("no usable CUDA device") != std::string::npos);
    }
  }

  TEST_CASE("nccl_comm checks the unique id's size") {
    std::vector<uint8_t> short_id(16, 0);
    auto c = nccl_comm::init_rank(short_id, 1, 0, 0);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().find("expected 128") != std::string::npos);
    CHECK(nccl_comm::version() > 0);
  }
}

// Without a device: the host suite, then exit 77 (CTest's SKIP_RETURN_CODE) saying why.
int main(int argc, char** argv) {
  cublas_at_start = cublas_mapped();
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  auto devices = cuda_device_count();
  if (!devices.ok()) {
    context.addFilter("test-suite", "host");
    int rc = context.run();
    if (rc != 0 || context.shouldExit())
      return rc;
    std::printf("SKIPPED: %s; the GPU cases of satrap_gpu_test need a CUDA device\n",
                devices.error().c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("satrap_gpu_test on %s (sm_%d%d), %d device(s), NCCL %d\n", prop.name, prop.major,
                prop.minor, devices.value(), nccl_comm::version());
  return context.run();
}
