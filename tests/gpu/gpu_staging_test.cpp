// The overlapped path of cuda_dense_model (stage_batch + forward_backward_staged: pinned buffers,
// a copy stream, double buffering) against its synchronous path (try_forward_backward), bit for
// bit: the same kernels on the same inputs, only the buffers and the stream of the copies differ.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/cuda/cuda_dense_model.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace satrap;
using namespace satrap::gpu_test;

namespace {

struct step_inputs {
  int batch;
  std::vector<float> dense, pooled, labels;
  step_inputs(const dense_model_config& c, int b, uint32_t seed)
      : batch(b),
        dense(random_floats(size_t(b) * c.dense_features, seed)),
        pooled(random_floats(size_t(b) * c.slots * c.dim, seed + 1)),
        labels(random_floats(b, seed + 2, 0.0f, 1.0f)) {
    for (float& y : labels)
      y = y < 0.3f ? 1.0f : 0.0f;
  }
};

std::vector<float> copy_of(std::span<const float> s) { return {s.begin(), s.end()}; }

void check_bits(const std::string& what, const std::vector<float>& a, const std::vector<float>& b) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i)
    differ += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  CHECK_MESSAGE(differ == 0, what << ": " << differ << " of " << a.size() << " values differ");
}

dense_model_config small_config(dense_model_type type, dense_precision precision) {
  dense_model_config c;
  c.type = type;
  c.dense_features = 13;
  c.slots = 6;
  c.dim = 8;
  c.bottom = {32, 16};
  c.top = {48, 24};
  c.cross_layers = 2;
  c.precision = precision;
  return c;
}

// Four steps of two twins (same seed), one synchronous, one staged in the trainer's order:
// stage 0, stage 1, compute 0, stage 2 (3 refused: both slots busy), compute 1, stage 3,
// compute 2, compute 3; SGD on the device after each. Everything equal bit for bit.
void compare_paths(const dense_model_config& config) {
  auto sync_model = make_cuda_dense_model(config, 11);
  auto staged_model = make_cuda_dense_model(config, 11);
  REQUIRE_OK(sync_model);
  REQUIRE_OK(staged_model);
  cuda_dense_model& s = *sync_model.value();
  cuda_dense_model& o = *staged_model.value();
  dense_optimizer_options opt;
  opt.kind = dense_optimizer_kind::sgd;
  opt.learning_rate = 0.05f;
  REQUIRE_OK(s.set_optimizer(opt));
  REQUIRE_OK(o.set_optimizer(opt));
  std::vector<step_inputs> steps;
  for (int k = 0; k < 4; ++k)
    steps.emplace_back(config, k == 2 ? 64 : 129, 300 + 10 * k);
  auto stage = [&](int k) {
    auto& in = steps[size_t(k)];
    return o.stage_batch(k, in.batch, in.dense.data(), in.pooled.data(), in.labels.data());
  };
  auto staged_ok = [&](int k) {
    auto r = stage(k);
    REQUIRE_OK(r);
    CHECK(r.value());
    CHECK(o.staged(k));
  };
  staged_ok(0);
  staged_ok(1);
  for (int k = 0; k < 4; ++k) {
    INFO("model " << dense_model_type_name(config.type) << " precision "
                  << dense_precision_name(config.precision) << " step " << k);
    auto& in = steps[size_t(k)];
    const size_t pooled_n = size_t(in.batch) * config.slots * config.dim;
    std::vector<float> sl(in.batch), ol(in.batch), spg(pooled_n), opg(pooled_n);
    const float scale = 1.0f / in.batch;
    auto sloss = s.try_forward_backward(in.batch, in.dense.data(), in.pooled.data(),
                                        in.labels.data(), scale, sl.data(), spg.data());
    // Mutating the caller's inputs after staging must not matter (they were copied).
    std::fill(in.pooled.begin(), in.pooled.end(), 0.0f);
    auto oloss = o.forward_backward_staged(k, scale, ol.data(), opg.data());
    REQUIRE_OK(sloss);
    REQUIRE_OK(oloss);
    CHECK(!o.staged(k));
    CHECK(std::memcmp(&sloss.value(), &oloss.value(), sizeof(double)) == 0);
    check_bits("logits", ol, sl);
    check_bits("pooled_grad", opg, spg);
    check_bits("grads", copy_of(o.grads()), copy_of(s.grads()));
    if (k == 0) {
      staged_ok(2);
      auto refused = stage(3);  // 1 and 2 hold the slots
      REQUIRE_OK(refused);
      CHECK_FALSE(refused.value());
      CHECK_FALSE(o.staged(3));
    } else if (k == 1) {
      staged_ok(3);
    }
    REQUIRE_OK(s.optimizer_step());
    REQUIRE_OK(o.optimizer_step());
    check_bits("params after step", copy_of(std::as_const(o).params()),
               copy_of(std::as_const(s).params()));
  }
  CHECK(o.loss_scale() == s.loss_scale());
  CHECK(o.skipped_steps() == s.skipped_steps());
}

}  // namespace

TEST_CASE(
  "staged (pinned, copy stream, double-buffered) path equals the synchronous one bit for bit") {
  for (auto type : {dense_model_type::dlrm, dense_model_type::dcn_v2, dense_model_type::deepfm,
                    dense_model_type::wide_deep})
    compare_paths(small_config(type, dense_precision::fp32));
  compare_paths(small_config(dense_model_type::dlrm, dense_precision::bf16));
  compare_paths(small_config(dense_model_type::dlrm, dense_precision::fp16));
}

TEST_CASE("staged path: a batch not staged, and dropped batches, are errors, not aborts") {
  auto config = small_config(dense_model_type::dlrm, dense_precision::fp32);
  auto m = make_cuda_dense_model(config, 5);
  REQUIRE_OK(m);
  cuda_dense_model& g = *m.value();
  step_inputs in(config, 32, 7);
  std::vector<float> logits(32), pg(size_t(32) * config.slots * config.dim);
  auto none = g.forward_backward_staged(0, 1.0f, logits.data(), pg.data());
  CHECK_FALSE(none.ok());
  REQUIRE_OK(g.stage_batch(4, 32, in.dense.data(), in.pooled.data(), in.labels.data()));
  REQUIRE_OK(g.stage_batch(5, 32, in.dense.data(), in.pooled.data(), in.labels.data()));
  g.drop_staged_before(5);
  CHECK_FALSE(g.staged(4));
  CHECK(g.staged(5));
  g.drop_staged();
  CHECK_FALSE(g.staged(5));
  auto dropped = g.forward_backward_staged(5, 1.0f, logits.data(), pg.data());
  CHECK_FALSE(dropped.ok());
  // Usable again after the errors.
  REQUIRE_OK(g.stage_batch(6, 32, in.dense.data(), in.pooled.data(), in.labels.data()));
  REQUIRE_OK(g.forward_backward_staged(6, 1.0f, logits.data(), pg.data()));
  auto bad = g.stage_batch(7, 0, in.dense.data(), in.pooled.data(), in.labels.data());
  CHECK_FALSE(bad.ok());
}

TEST_CASE("device optimizer_step follows the learning-rate schedule as dense_optimizer does") {
  auto config = small_config(dense_model_type::dlrm, dense_precision::fp32);
  auto m = make_cuda_dense_model(config, 9);
  REQUIRE_OK(m);
  cuda_dense_model& g = *m.value();
  step_inputs in(config, 64, 21);
  std::vector<float> logits(64), pg(size_t(64) * config.slots * config.dim);
  REQUIRE_OK(g.try_forward_backward(64, in.dense.data(), in.pooled.data(), in.labels.data(),
                                    1.0f / 64, logits.data(), pg.data()));
  for (auto kind :
       {dense_optimizer_kind::sgd, dense_optimizer_kind::adagrad, dense_optimizer_kind::adam}) {
    INFO("optimizer " << int(kind));
    dense_optimizer_options o;
    o.kind = kind;
    o.learning_rate = 0.01f;
    o.schedule.kind = lr_schedule_kind::cosine;
    o.schedule.warmup_steps = 2;
    o.schedule.decay_steps = 4;
    REQUIRE_OK(g.set_optimizer(o));
    const auto grads = copy_of(g.grads());
    const auto start = copy_of(std::as_const(g).params());
    auto params = start;
    dense_optimizer cpu(o, params.size());
    for (int step = 0; step < 6; ++step) {  // the same gradients every step
      cpu.step(params, grads);
      REQUIRE_OK(g.optimizer_step());
    }
    check_close("params after 6 scheduled steps", copy_of(std::as_const(g).params()), params, 1e-7,
                1e-5);
    auto p = g.params();  // back to the same start for the next kind
    std::copy(start.begin(), start.end(), p.begin());
  }
}
