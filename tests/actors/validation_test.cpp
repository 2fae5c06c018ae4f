// Validation while training, end to end on the embedded pipeline: validation points at cuts,
// early stopping restoring the best model exactly, the target AUC, schedules in the history, and
// validation next to checkpoints. Deterministic: data seed 1234, model seed 7, staleness 0.
#include "actors/embedded_job.hpp"
#include "actors/type_registry.hpp"
#include "runtime/error.hpp"

#include <caf/scoped_actor.hpp>
#include <cblas.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>

using namespace satrap;

namespace {

job_spec validated_job() {
  auto spec = job_spec_defaults();
  spec.data.synthetic.slots = 6;
  spec.data.synthetic.vocab = 5000;
  spec.data.synthetic.seed = 1234;
  spec.training.batch_size = 128;
  spec.training.train_batches = 120;
  spec.training.test_batches = 8;
  spec.training.staleness = 0;
  spec.training.validation_batches = 6;
  spec.training.eval_every = 20;
  spec.placement.shards = 2;
  spec.placement.aggregators = 2;
  spec.placement.loaders = 2;
  spec.placement.trainers = 2;
  spec.placement.partitions = 64;
  return spec;
}

job_result run_job(job_spec spec) {
  INFO("data seed=1234 model seed=7");
  auto err = job_spec_finalize(spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  openblas_set_num_threads(1);
  satrap_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  job_supervisor_config config;
  config.spec = spec;
  auto sup = spawn_embedded_job(sys, config);
  caf::scoped_actor self{sys};
  job_result out;
  self->request(sup, caf::infinite, run_atom::value)
    .receive([&](job_result& r) { out = std::move(r); },
             [&](caf::error& e) { FAIL("job failed: " << error_text(e)); });
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  return out;
}

std::vector<nlohmann::json> history_of(const job_result& r) {
  std::vector<nlohmann::json> h;
  for (auto& line : r.validation_history)
    h.push_back(nlohmann::json::parse(line));
  return h;
}

}  // namespace

TEST_CASE("validation every N steps, and at the end - the history holds every point") {
  auto spec = validated_job();
  spec.model.dense.schedule = {lr_schedule_kind::step, 0, 40, 0.5, 0.0};
  auto r = run_job(spec);
  auto h = history_of(r);
  REQUIRE(h.size() == 3);  // 20, 40, 60 per trainer = 60 steps of 2 trainers
  CHECK(h[0]["step"] == 20);
  CHECK(h[2]["step"] == 60);
  CHECK(r.steps == 60);
  CHECK(r.stop_reason.empty());
  for (auto& p : h) {
    CHECK(p["validation_samples"] == 6 * 128);
    CHECK(p["validation_auc"].get<double>() > 0.5);
  }
  CHECK(h[0]["dense_lr"].get<double>() == doctest::Approx(spec.model.dense.learning_rate));
  CHECK(h[1]["dense_lr"].get<double>() == doctest::Approx(spec.model.dense.learning_rate * 0.5));
  CHECK(r.best_step >= 20);
  CHECK(r.validation_auc > 0.5);
  CHECK(r.test_auc > 0.5);
  CHECK(std::isfinite(r.test_ne));
  CHECK(r.test_calibration > 0.0);
}

TEST_CASE("early stopping stops after `patience` evaluations and restores the best model exactly") {
  auto spec = validated_job();
  spec.training.eval_every = 10;
  spec.training.early_stopping.patience = 2;
  spec.training.early_stopping.min_delta = 1.0;  // nothing improves on the first evaluation
  auto r = run_job(spec);
  auto h = history_of(r);
  REQUIRE(h.size() == 3);
  CHECK(r.stop_reason == "early_stopping");
  CHECK(r.steps == 30);
  CHECK(r.best_step == 10);
  CHECK(r.validation_auc == h[0]["validation_auc"].get<double>());
  // The restored model measured again gives the recorded best, bit for bit.
  CHECK(r.restored_validation_auc == r.validation_auc);
  CHECK(h[2]["validation_auc"].get<double>() != r.validation_auc);
}

TEST_CASE("early stopping with a dense weight average restores the average exactly") {
  auto spec = validated_job();
  spec.training.eval_every = 10;
  spec.training.early_stopping.patience = 2;
  spec.training.early_stopping.min_delta = 1.0;
  spec.model.dense.ema_decay = 0.0f;  // (the default job averages)
  auto plain = run_job(spec);
  spec.model.dense.ema_decay = 0.9f;
  auto r = run_job(spec);
  auto h = history_of(r);
  REQUIRE(h.size() == 3);
  CHECK(r.best_step == 10);
  // Validation reads the average (another AUC than the trained weights'); training does not
  // (pipeline_test checks its losses bit for bit; two trainers' loss figure varies in the 5th digit).
  CHECK(r.validation_auc != plain.validation_auc);
  CHECK(h[0]["train_loss"].get<double>()
        == doctest::Approx(history_of(plain)[0]["train_loss"].get<double>()).epsilon(1e-3));
  CHECK(r.restored_validation_auc == r.validation_auc);
}

TEST_CASE("training.target_auc stops at the first validation that reaches it") {
  auto spec = validated_job();
  spec.training.target_auc = 0.55;
  auto r = run_job(spec);
  CHECK(r.stop_reason == "target_auc");
  CHECK(r.steps == 20);
  CHECK(r.target_samples == 20 * 2 * 128);
  CHECK(r.target_seconds > 0.0);
}

TEST_CASE("validation cuts and checkpoint cuts together: the checkpoints still resume") {
  auto dir = std::filesystem::temp_directory_path()
             / ("satrap-validation-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto spec = validated_job();
  spec.placement.trainers = 1;  // one trainer: the shards apply gradients in one order, bit-exact
  spec.training.train_batches = 60;
  auto plain = run_job(spec);
  spec.checkpoint.dir = dir.string();
  spec.checkpoint.every_steps = 15;
  spec.training.early_stopping.patience = 5;
  auto r = run_job(spec);
  CHECK(r.checkpoints == 3);  // 15, 30, 45
  CHECK(history_of(r).size() == 3);
  // Same training with or without the extra cuts and best-model snapshots (staleness 0).
  REQUIRE(r.step_losses.size() == plain.step_losses.size());
  for (size_t i = 0; i < r.step_losses.size(); ++i)
    CHECK(r.step_losses[i] == doctest::Approx(plain.step_losses[i]).epsilon(1e-6));
  std::filesystem::remove_all(dir);
}
