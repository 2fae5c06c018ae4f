// NCCL (models/cuda/nccl_comm.hpp): a one-rank communicator on the GPU, the GPU model's gradients
// all-reduced on the device, and a multi-rank all-reduce when the machine has several GPUs.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "models/cuda/cuda_dense_model.hpp"
#include "models/cuda/nccl_comm.hpp"
#include "models/dense/model_zoo.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace satrap;
using namespace satrap::gpu_test;

// ---- NCCL ---------------------------------------------------------------------------------------

TEST_CASE("a one-rank NCCL communicator all-reduces (sum) in place and out of place") {
  auto id = nccl_comm::make_unique_id();
  REQUIRE_OK(id);
  REQUIRE(id.value().size() == 128);
  auto comm = nccl_comm::init_rank(id.value(), 1, 0, 0);
  REQUIRE_OK(comm);
  CHECK(comm.value()->size() == 1);
  CHECK(comm.value()->rank() == 0);
  cudaStream_t stream = nullptr;
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamCreate(&stream)));
  const size_t n = 100003;
  auto h = random_floats(n, 120);
  auto d = to_device(h);
  device_array<float> out;
  REQUIRE_OK(out.reserve(n));
  REQUIRE_OK(comm.value()->all_reduce_sum(d.data(), d.data(), n, stream));
  REQUIRE_OK(comm.value()->all_reduce_sum(d.data(), out.data(), n, stream));
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)));
  check_close("in place", to_host(d, n), h, 0.0, 0.0);
  check_close("out of place", to_host(out, n), h, 0.0, 0.0);

  // The trainer's flow: all-reduce the GPU DLRM's gradients on the device, on the model's stream.
  dense_model_config config;
  config.slots = 3;
  auto model = make_cuda_dense_model(config, 5);
  REQUIRE_OK(model);
  cuda_dense_model& m = *model.value();
  const int batch = 16;
  auto dense = random_floats(size_t(batch) * config.dense_features, 121);
  auto pooled = random_floats(size_t(batch) * config.slots * config.dim, 122);
  std::vector<float> labels(batch, 1.0f), logits(batch), pooled_grad(pooled.size());
  REQUIRE_OK(m.try_forward_backward(batch, dense.data(), pooled.data(), labels.data(), 1.0f,
                                    logits.data(), pooled_grad.data()));
  float* dg = m.device_grads();
  REQUIRE(dg != nullptr);
  REQUIRE_OK(comm.value()->all_reduce_sum(dg, dg, m.param_count(), m.stream()));
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamSynchronize(m.stream())));
  auto reduced = m.grads();  // downloads: device_grads() marked the device copy newer
  std::vector<float> cl(batch), cpg(pooled.size());
  auto cpu = make_dlrm(config, 5);
  cpu->forward_backward(batch, dense.data(), pooled.data(), labels.data(), 1.0f, cl.data(),
                        cpg.data());
  check_rel_l2("all-reduced grads (one rank)", std::vector<float>(reduced.begin(), reduced.end()),
               std::vector<float>(cpu->grads().begin(), cpu->grads().end()), 1e-5);
  REQUIRE_OK(comm.value()->destroy());
  CHECK_FALSE(comm.value()->all_reduce_sum(d.data(), d.data(), n, stream).ok());
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamDestroy(stream)));
}

TEST_CASE("NCCL all-reduce across every GPU, one rank (and thread) per device") {
  auto devices = cuda_device_count();
  REQUIRE_OK(devices);
  const int n = devices.value();
  if (n < 2) {
    MESSAGE("one GPU: the multi-rank all-reduce needs two or more (the one-rank case ran above)");
    return;
  }
  auto id = nccl_comm::make_unique_id();
  REQUIRE_OK(id);
  const size_t count = 1 << 20;
  std::vector<std::string> errors(n);
  std::vector<float> first(n), last(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& e) { errors[r] = e; };
      auto comm = nccl_comm::init_rank(id.value(), n, r, r);
      if (!comm.ok())
        return fail(comm.error());
      cudaStream_t stream = nullptr;
      if (auto s = SATRAP_CUDA_CHECK(cudaStreamCreate(&stream)); !s.ok())
        return fail(s.error());
      device_array<float> buf;
      if (auto s = buf.reserve(count); !s.ok())
        return fail(s.error());
      std::vector<float> h(count, static_cast<float>(r + 1));
      cudaMemcpy(buf.data(), h.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      if (auto s = comm.value()->all_reduce_sum(buf.data(), buf.data(), count, stream); !s.ok())
        return fail(s.error());
      if (auto s = SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)); !s.ok())
        return fail(s.error());
      cudaMemcpy(h.data(), buf.data(), count * sizeof(float), cudaMemcpyDeviceToHost);
      first[r] = h.front();
      last[r] = h.back();
      cudaStreamDestroy(stream);
      if (auto s = comm.value()->destroy(); !s.ok())
        return fail(s.error());
    });
  for (auto& t : threads)
    t.join();
  const float expected = static_cast<float>(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
    CHECK(first[r] == expected);
    CHECK(last[r] == expected);
  }
}
