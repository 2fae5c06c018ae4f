// samples/s of the GPU DLRM (forward_backward + the device optimizer step) against the CPU DLRM
// (forward_backward + dense_optimizer) in the same run, on the Criteo Kaggle shape: 13 dense
// features, 26 slots, dim 16, bottom 512-256-64(-16), top 512-256(-1), batch 2048, Adagrad.
// The GPU figure includes the per-step copies a trainer makes (dense features, pooled embeddings
// and labels in; logits and pooled gradients out). `precision` is the GPU GEMMs' (fp32, bf16,
// fp16; the CPU is fp32); cpu_seconds 0 skips the CPU. Prints one key=value line; exits 77
// (skipped) without a CUDA device.
//
//   gpu_dlrm_bench [gpu_steps=300] [cpu_seconds=5] [batch=2048] [precision=fp32]
#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "models/cuda/cuda_dense_model.hpp"
#include "models/cuda/nccl_comm.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"

using namespace satrap;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct batch_data {
  std::vector<float> dense, pooled, labels;
};

std::vector<batch_data> make_batches(const dense_model_config& c, int batch, int count) {
  std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<batch_data> out(count);
  for (batch_data& b : out) {
    b.dense.resize(size_t(batch) * c.dense_features);
    b.pooled.resize(size_t(batch) * c.slots * c.dim);
    b.labels.resize(batch);
    for (float& x : b.dense)
      x = normal(rng);
    for (float& x : b.pooled)
      x = 0.05f * normal(rng);
    for (float& y : b.labels)
      y = uniform(rng) < 0.25f ? 1.0f : 0.0f;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int gpu_steps = argc > 1 ? std::atoi(argv[1]) : 300;
  const double cpu_seconds = argc > 2 ? std::atof(argv[2]) : 5.0;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 2048;
  const std::string precision = argc > 4 ? argv[4] : "fp32";
  const bool known = precision == "fp32" || precision == "bf16" || precision == "fp16";
  if (gpu_steps < 1 || cpu_seconds < 0 || batch < 1 || !known || argc > 5) {
    std::fprintf(stderr,
                 "usage: gpu_dlrm_bench [gpu_steps>=1] [cpu_seconds>=0] [batch>=1] "
                 "[precision=fp32|bf16|fp16]\n");
    return 2;
  }
  auto devices = cuda_device_count();
  if (!devices.ok()) {
    std::printf("SKIPPED: %s\n", devices.error().c_str());
    return 77;
  }

  dense_model_config config;
  config.dense_features = 13;
  config.slots = 26;
  config.dim = 16;
  config.bottom = {512, 256, 64};
  config.top = {512, 256};
  config.precision = precision == "bf16"   ? dense_precision::bf16
                     : precision == "fp16" ? dense_precision::fp16
                                           : dense_precision::fp32;
  dense_optimizer_options opt;
  opt.kind = dense_optimizer_kind::adagrad;
  opt.learning_rate = 0.01f;
  const uint64_t seed = 1;
  const float scale = 1.0f / batch;
  auto batches = make_batches(config, batch, 4);
  std::vector<float> logits(batch), pooled_grad(size_t(batch) * config.slots * config.dim);

  // GPU.
  auto made = make_cuda_dense_model(config, seed);
  if (!made.ok()) {
    std::fprintf(stderr, "gpu_dlrm_bench: %s\n", made.error().c_str());
    return 1;
  }
  cuda_dense_model& gpu = *made.value();
  if (auto s = gpu.set_optimizer(opt); !s.ok()) {
    std::fprintf(stderr, "gpu_dlrm_bench: %s\n", s.error().c_str());
    return 1;
  }
  double gpu_first_loss = std::nan(""), gpu_last_loss = 0.0;
  auto gpu_step = [&](int k) -> bool {
    const batch_data& b = batches[k % batches.size()];
    auto loss = gpu.try_forward_backward(batch, b.dense.data(), b.pooled.data(), b.labels.data(),
                                         scale, logits.data(), pooled_grad.data());
    if (!loss.ok() || !gpu.optimizer_step().ok()) {
      std::fprintf(stderr, "gpu_dlrm_bench: %s\n", gpu.last_error().c_str());
      return false;
    }
    if (std::isnan(gpu_first_loss))
      gpu_first_loss = loss.value();
    gpu_last_loss = loss.value();
    return true;
  };
  if (!gpu_step(0))
    return 1;
  for (int k = 1; k < 10; ++k)  // warm-up (cuBLAS heuristics, allocations)
    if (!gpu_step(k))
      return 1;
  double t0 = now_s();
  for (int k = 0; k < gpu_steps; ++k)
    if (!gpu_step(k))
      return 1;
  double gpu_time = now_s() - t0;

  // CPU, same init and data.
  auto cpu = make_dlrm(config, seed);
  dense_optimizer cpu_opt(opt, cpu->params().size());
  double cpu_first_loss = 0.0;
  auto cpu_step = [&](int k) {
    const batch_data& b = batches[k % batches.size()];
    double loss = cpu->forward_backward(batch, b.dense.data(), b.pooled.data(), b.labels.data(),
                                        scale, logits.data(), pooled_grad.data());
    cpu_opt.step(cpu->params(), cpu->grads());
    if (k == 0)
      cpu_first_loss = loss;
  };
  int cpu_steps = 0;
  double cpu_time = 0.0;
  if (cpu_seconds > 0)
    cpu_step(0);  // warm-up, and the first loss to compare with the GPU's
  t0 = now_s();
  while (cpu_seconds > 0 && (cpu_time < cpu_seconds || cpu_steps < 3)) {
    cpu_step(cpu_steps + 1);
    ++cpu_steps;
    cpu_time = now_s() - t0;
  }

  cudaDeviceProp prop{};
  std::string device = "unknown";
  if (cudaGetDeviceProperties(&prop, gpu.device()) == cudaSuccess)
    device = prop.name;
  for (char& ch : device)
    if (ch == ' ')
      ch = '_';
  const double gpu_sps = double(gpu_steps) * batch / gpu_time;
  const double cpu_sps = cpu_steps > 0 ? double(cpu_steps) * batch / cpu_time : 0.0;
  std::printf(
    "gpu_dlrm_bench device=%s precision=%s batch=%d params=%zu gpu_samples_per_sec=%.0f "
    "cpu_samples_per_sec=%.0f speedup=%.2f gpu_ms_per_step=%.3f cpu_ms_per_step=%.2f "
    "gpu_steps=%d cpu_steps=%d cpu_blas_threads=%d first_loss_gpu=%.6f first_loss_cpu=%.6f "
    "last_loss_gpu=%.6f nccl=%d\n",
    device.c_str(), precision.c_str(), batch, gpu.param_count(), gpu_sps, cpu_sps,
    cpu_sps > 0 ? gpu_sps / cpu_sps : 0.0, 1e3 * gpu_time / gpu_steps,
    cpu_steps > 0 ? 1e3 * cpu_time / cpu_steps : 0.0, gpu_steps, cpu_steps,
    openblas_get_num_threads(), gpu_first_loss / batch, cpu_first_loss / batch,
    gpu_last_loss / batch, nccl_comm::version());
  return std::isfinite(gpu_last_loss) ? 0 : 1;
}
