// The GPU dense models (models/cuda/cuda_dense_model.hpp) against their CPU twins (dense/): same
// initialisation, then loss, logits, every parameter gradient and the pooled-embedding gradient
// over several optimizer steps; and mixed precision against fp32.
#include <doctest/doctest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "models/cuda/cuda_dense_model.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace satrap;
using namespace satrap::gpu_test;

namespace {

// Random inputs of one batch for a config.
struct batch_inputs {
  std::vector<float> dense, pooled, labels;
  batch_inputs(const dense_model_config& c, int batch, uint32_t seed, float pooled_range = 1.0f)
      : dense(random_floats(size_t(batch) * c.dense_features, seed)),
        pooled(
          random_floats(size_t(batch) * c.slots * c.dim, seed + 1, -pooled_range, pooled_range)),
        labels(random_floats(batch, seed + 2, 0.0f, 1.0f)) {
    for (float& y : labels)
      y = y < 0.3f ? 1.0f : 0.0f;
  }
};

std::vector<float> copy_of(std::span<const float> s) { return {s.begin(), s.end()}; }

// `steps` SGD steps of the CPU model and its GPU twin in lock step (the CPU parameters copied into
// the GPU model after each step): the loss, logits, every parameter gradient and the
// pooled-embedding gradient agree within rtol (relative L2) at every step.
void compare_with_cpu(const dense_model_config& config, int batch, int steps, double rtol) {
  const uint64_t seed = 7;
  auto cpu = make_dense_model(config, seed);
  auto gpu = make_cuda_dense_model(config, seed);
  REQUIRE_OK(gpu);
  cuda_dense_model& g = *gpu.value();
  REQUIRE(g.param_count() == cpu->params().size());
  check_close("init params", copy_of(g.params()), copy_of(cpu->params()), 0.0, 0.0);
  batch_inputs in(config, batch, 100);
  const float scale = 1.0f / batch;
  // SGD: Adam's and Adagrad's first steps are about lr * sign(g), which rounding noise can flip
  // for a gradient near 0; their kernels are compared on equal gradients in gpu_kernels_test.
  dense_optimizer_options o;
  o.kind = dense_optimizer_kind::sgd;
  o.learning_rate = 0.05f;
  dense_optimizer cpu_opt(o, cpu->params().size());
  REQUIRE_OK(g.set_optimizer(o));
  for (int step = 0; step < steps; ++step) {
    INFO("model " << dense_model_type_name(config.type) << " step " << step);
    std::vector<float> cl(batch), gl(batch), cpg(in.pooled.size()), gpg(in.pooled.size());
    double closs = cpu->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(),
                                         scale, cl.data(), cpg.data());
    auto gloss = g.try_forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(),
                                        scale, gl.data(), gpg.data());
    REQUIRE_OK(gloss);
    check_rel_l2("loss", {float(gloss.value())}, {float(closs)}, rtol);
    check_rel_l2("logits", gl, cl, rtol);
    check_rel_l2("pooled_grad", gpg, cpg, rtol);
    check_rel_l2("grads", copy_of(g.grads()), copy_of(cpu->grads()), rtol);
    cpu_opt.step(cpu->params(), cpu->grads());
    REQUIRE_OK(g.optimizer_step());  // uploads the host grads (grads() marked them newer)
    CHECK(g.optimizer_steps() == step + 1);
    auto gp = g.params();
    check_rel_l2("params after step", copy_of(gp), copy_of(cpu->params()), rtol);
    std::copy(cpu->params().begin(), cpu->params().end(), gp.begin());  // lock step
  }
  std::vector<float> cl(batch), gl(batch);
  cpu->forward(batch, in.dense.data(), in.pooled.data(), cl.data());
  REQUIRE_OK(g.try_forward(batch, in.dense.data(), in.pooled.data(), gl.data()));
  check_rel_l2("forward", gl, cl, rtol);
  // A smaller batch after a larger one reuses the buffers.
  std::vector<float> c5(5), g5(5), cpg5(5 * config.slots * config.dim), gpg5(cpg5.size());
  double closs5 = cpu->forward_backward(5, in.dense.data(), in.pooled.data(), in.labels.data(),
                                        1.0f, c5.data(), cpg5.data());
  double gloss5 = g.forward_backward(5, in.dense.data(), in.pooled.data(), in.labels.data(), 1.0f,
                                     g5.data(), gpg5.data());
  CHECK(g.last_error().empty());
  CHECK(gloss5 == doctest::Approx(closs5).epsilon(1e-4));
  check_rel_l2("pooled_grad batch 5", gpg5, cpg5, rtol);
  REQUIRE_OK(g.sync_to_host());
}

dense_model_config small_config(dense_model_type type) {
  dense_model_config c;
  c.type = type;
  c.dense_features = 13;
  c.slots = 6;
  c.dim = 8;
  c.bottom = {32, 16};
  c.top = {48, 24};
  c.cross_layers = 2;
  return c;
}

// The Criteo Kaggle shape of gpu_dlrm_bench.
dense_model_config criteo_config(dense_model_type type) {
  dense_model_config c;
  c.type = type;
  c.slots = 26;
  c.dim = 16;
  c.bottom = {512, 256, 64};
  c.top = {512, 256};
  c.cross_layers = 2;
  return c;
}

}  // namespace

// ---- every model against its CPU twin ----------------------------------------------------------

TEST_CASE("every GPU model: same init, loss, gradients and SGD steps as its CPU twin") {
  for (auto type : {dense_model_type::dlrm, dense_model_type::dcn_v2, dense_model_type::deepfm,
                    dense_model_type::wide_deep}) {
    compare_with_cpu(small_config(type), 129, 3, 1e-5);
  }
}

TEST_CASE("every GPU model on the Criteo shape matches its CPU twin") {
  for (auto type : {dense_model_type::dlrm, dense_model_type::dcn_v2, dense_model_type::deepfm,
                    dense_model_type::wide_deep}) {
    compare_with_cpu(criteo_config(type), 256, 2, 1e-4);
  }
}

// ---- mixed precision -----------------------------------------------------------------------------

// bf16 rounds every GEMM input to 8 significant bits (relative error 2^-9 per value), fp16 to 11;
// with fp32 accumulation the loss of a batch moves by far less. Stated tolerances: the loss within
// 1% (bf16) / 0.2% (fp16) of fp32 (relative), the gradients within 5% / 1% (relative L2), and
// 50 training steps keep the losses within 2% / 0.5% of each other.
TEST_CASE("bf16 and fp16 GEMMs: loss and gradients within the stated tolerance of fp32") {
  struct want {
    dense_precision p;
    double loss, grads, trained;
  };
  for (want w : {want{dense_precision::bf16, 1e-2, 5e-2, 2e-2},
                 want{dense_precision::fp16, 2e-3, 1e-2, 5e-3}}) {
    for (auto type : {dense_model_type::dlrm, dense_model_type::dcn_v2}) {
      INFO("precision " << dense_precision_name(w.p) << " model " << dense_model_type_name(type));
      auto config = criteo_config(type);
      auto fp32 = make_cuda_dense_model(config, 3);
      config.precision = w.p;
      auto half = make_cuda_dense_model(config, 3);
      REQUIRE_OK(fp32);
      REQUIRE_OK(half);
      CHECK(half.value()->precision() == w.p);
      const int batch = 1024;
      dense_optimizer_options o;
      o.kind = dense_optimizer_kind::adagrad;
      o.learning_rate = 0.01f;
      REQUIRE_OK(fp32.value()->set_optimizer(o));
      REQUIRE_OK(half.value()->set_optimizer(o));
      std::vector<float> logits(batch), pg(size_t(batch) * config.slots * config.dim);
      double loss32 = 0, loss16 = 0;
      for (int step = 0; step < 50; ++step) {
        batch_inputs in(config, batch, 200 + step, 0.1f);
        auto a = fp32.value()->try_forward_backward(batch, in.dense.data(), in.pooled.data(),
                                                    in.labels.data(), 1.0f / batch, logits.data(),
                                                    pg.data());
        auto b = half.value()->try_forward_backward(batch, in.dense.data(), in.pooled.data(),
                                                    in.labels.data(), 1.0f / batch, logits.data(),
                                                    pg.data());
        REQUIRE_OK(a);
        REQUIRE_OK(b);
        if (step == 0) {
          CHECK(std::abs(b.value() - a.value()) <= w.loss * a.value());
          check_rel_l2("grads at step 0", copy_of(half.value()->grads()),
                       copy_of(fp32.value()->grads()), w.grads);
        }
        loss32 += a.value();
        loss16 += b.value();
        REQUIRE_OK(fp32.value()->optimizer_step());
        REQUIRE_OK(half.value()->optimizer_step());
      }
      MESSAGE(dense_precision_name(w.p)
              << " " << dense_model_type_name(type) << ": mean loss " << loss16 / (50.0 * batch)
              << " vs fp32 " << loss32 / (50.0 * batch) << ", loss scale "
              << half.value()->loss_scale() << ", skipped steps " << half.value()->skipped_steps());
      CHECK(std::abs(loss16 - loss32) <= w.trained * loss32);
      CHECK(half.value()->skipped_steps() <= 2);  // the scale finds its level in a step or two
    }
  }
}
