// model.precision and model.dense_optimizer.ema_decay: parsed like every key, and refused at
// submission unless the dense trainers run on CUDA (precision: the CPU dense path computes in fp32
// only) or on the CPU (ema_decay: the device optimizer keeps no weight average).
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <doctest/doctest.h>

using namespace satrap;

TEST_CASE("model.precision: fp32 anywhere, bf16 / fp16 only with training.device cuda") {
  auto spec = job_spec_defaults();
  CHECK(spec.model.network.precision == dense_precision::fp32);
  REQUIRE(!job_spec_load_text("model: {precision: bf16}\n", "job.yaml", spec));
  CHECK(spec.model.network.precision == dense_precision::bf16);
  auto err = job_spec_finalize(spec);
  REQUIRE(err);
  CHECK(error_text(err).find("model.precision: bf16 needs training.device cuda")
        != std::string::npos);

  spec = job_spec_defaults();
  REQUIRE(
    !job_spec_load_text("model: {precision: fp16}\ntraining: {device: cuda}\n", "job.yaml", spec));
  CHECK(!job_spec_finalize(spec));  // the spec is fine; a node without a GPU says so at spawn
  CHECK(spec.model.network.precision == dense_precision::fp16);

  spec = job_spec_defaults();
  auto bad = job_spec_load_text("model: {precision: fp8}\n", "job.yaml", spec);
  REQUIRE(bad);
  CHECK(error_text(bad).find("model.precision: expected one of fp32 bf16 fp16, got 'fp8'")
        != std::string::npos);
}

TEST_CASE("model.dense_optimizer.ema_decay: from 0 to below 1, and only with training.device cpu") {
  auto spec = job_spec_defaults();
  CHECK(spec.model.dense.ema_decay == doctest::Approx(0.9995));  // the default job averages
  REQUIRE(!job_spec_load_text("model: {dense_optimizer: {ema_decay: 0.999}}\n", "job.yaml", spec));
  CHECK(spec.model.dense.ema_decay == doctest::Approx(0.999));
  CHECK(!job_spec_finalize(spec));

  spec = job_spec_defaults();
  REQUIRE(!job_spec_load_text(
    "model: {dense_optimizer: {ema_decay: 0.99}}\ntraining: {device: cuda}\n", "job.yaml", spec));
  auto err = job_spec_finalize(spec);
  REQUIRE(err);
  CHECK(error_text(err).find("model.dense_optimizer.ema_decay: expected training.device cpu")
        != std::string::npos);

  spec = job_spec_defaults();
  CHECK(job_spec_load_text("model: {dense_optimizer: {ema_decay: 1}}\n", "job.yaml", spec));
}

// The default job's DLRM settings (linear top over dot_cat, the weight average) give way where
// they do not apply, unless a key asked for them.
TEST_CASE("the default job's DLRM settings give way for other model types and for device cuda") {
  auto spec = job_spec_defaults();
  REQUIRE(!job_spec_finalize(spec));
  CHECK(spec.model.network.top.empty());
  CHECK(spec.model.network.interaction == dlrm_interaction::dot_cat);
  CHECK(spec.model.dense.ema_decay == doctest::Approx(0.9995));

  spec = job_spec_defaults();
  REQUIRE(!job_spec_load_text("model: {type: deepfm}\n", "job.yaml", spec));
  REQUIRE(!job_spec_finalize(spec));
  CHECK(spec.model.network.top == std::vector<int>{64, 32});
  CHECK(spec.model.network.interaction == dlrm_interaction::dot);
  CHECK(spec.model.dense.ema_decay
        == doctest::Approx(0.9995));  // the CPU trainer averages any model

  spec = job_spec_defaults();
  REQUIRE(!job_spec_load_text("model: {type: deepfm, top: [8]}\n", "job.yaml", spec));
  REQUIRE(!job_spec_finalize(spec));
  CHECK(spec.model.network.top == std::vector<int>{8});

  spec = job_spec_defaults();
  REQUIRE(
    !job_spec_load_text("model: {type: wide_deep, interaction: dot_cat}\n", "job.yaml", spec));
  auto err = job_spec_finalize(spec);
  REQUIRE(err);
  CHECK(error_text(err).find("model.interaction") != std::string::npos);

  spec = job_spec_defaults();
  REQUIRE(!job_spec_load_text("training: {device: cuda}\n", "job.yaml", spec));
  REQUIRE(!job_spec_finalize(spec));
  CHECK(spec.model.network.top == std::vector<int>{64, 32});
  CHECK(spec.model.network.interaction == dlrm_interaction::dot);
  CHECK(spec.model.dense.ema_decay == 0.0f);

  spec = job_spec_defaults();  // a top with no hidden layer has nothing to drop
  REQUIRE(!job_spec_load_text("model: {dropout: 0.1}\n", "job.yaml", spec));
  err = job_spec_finalize(spec);
  REQUIRE(err);
  CHECK(error_text(err).find("model.dropout: the top MLP has no hidden layers")
        != std::string::npos);
}
