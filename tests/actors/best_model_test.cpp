// The best-model state machine, driven by hand: validation points, the best kept, early
// stopping, the target AUC, restore at the end, rollback.
#include "actors/job_supervisor/best_model.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

eval_metrics auc(double a) {
  eval_metrics m;
  m.auc = a;
  m.logloss = 1.0 - a;
  return m;
}

best_model make(int32_t patience, double target = 0.0) {
  best_model b;
  best_model::policy p;
  p.steps = 100;
  p.validation_batches = 4;
  p.every = 20;
  p.early_stopping.patience = patience;
  p.target_auc = target;
  b.configure(p);
  return b;
}

capnp_payload dense(uint8_t x) {
  capnp_payload p;
  p.bytes.push_back(static_cast<char>(x));
  return p;
}

}  // namespace

TEST_CASE("best_model: validation points") {
  auto b = make(0);
  CHECK(b.next_validation_cut(0) == 20);
  CHECK(b.next_validation_cut(90) == 100);
  CHECK(b.next_validation_cut(100) == -1);
  CHECK(b.is_validation_cut(40));
  CHECK_FALSE(b.is_validation_cut(41));
  CHECK(b.is_validation_cut(100));  // the last step
  CHECK_FALSE(b.is_validation_cut(0));
  best_model none;
  CHECK(none.next_validation_cut(0) == -1);
}

TEST_CASE("best_model: training loss between validations") {
  auto b = make(0);
  CHECK(std::isnan(b.take_train_loss()));
  b.on_trained(10, 5.0);
  b.on_trained(10, 3.0);
  CHECK(b.take_train_loss() == doctest::Approx(0.4));
  CHECK(std::isnan(b.take_train_loss()));
  CHECK(b.record("{}"));
  CHECK_FALSE(b.record("{}"));
  CHECK(b.history().size() == 2);
}

TEST_CASE("best_model: keeps the best, stops after patience, restores it at the end") {
  auto b = make(2);
  CHECK(b.keeps());
  auto v = b.on_validated(20, auc(0.70), 1.0, 100, dense(1));
  CHECK(v.improved);
  CHECK(v.snapshot);
  CHECK(b.snapshot_kept(1) == 0);
  v = b.on_validated(40, auc(0.75), 2.0, 200, dense(2));
  CHECK(v.snapshot);
  CHECK(b.snapshot_kept(2) == 1);  // the previous best goes
  v = b.on_validated(60, auc(0.74), 3.0, 300, dense(3));
  CHECK_FALSE(v.improved);
  CHECK_FALSE(b.stopping());
  v = b.on_validated(80, auc(0.73), 4.0, 400, dense(4));
  CHECK(v.early_stopped);
  CHECK(b.stopping());
  CHECK(b.stop_reason() == "early_stopping");
  CHECK(b.best_step() == 40);
  REQUIRE(b.best_dense().bytes.size() == 1);
  CHECK(b.best_dense().bytes[0] == 2);
  CHECK(b.must_restore(80));
  CHECK_FALSE(b.must_restore(40));
}

TEST_CASE("best_model: the best at the last step is the live model: nothing to restore") {
  auto b = make(3);
  b.on_validated(20, auc(0.70), 1.0, 100, dense(1));
  b.snapshot_kept(1);
  auto v = b.on_validated(100, auc(0.80), 5.0, 500, dense(5));
  CHECK(v.improved);
  CHECK_FALSE(v.snapshot);
  CHECK(b.best_snapshot() == 0);
  CHECK_FALSE(b.must_restore(100));
}

TEST_CASE("best_model: target AUC stops training once, a rollback forgets the stop") {
  auto b = make(0, 0.72);
  CHECK_FALSE(b.keeps());
  auto v = b.on_validated(20, auc(0.71), 1.0, 100, dense(1));
  CHECK_FALSE(v.target_reached);
  CHECK_FALSE(v.snapshot);  // no best kept without patience
  v = b.on_validated(40, auc(0.73), 2.5, 200, dense(2));
  CHECK(v.target_reached);
  CHECK(b.stopping());
  CHECK(b.stop_reason() == "target_auc");
  CHECK(b.target_seconds() == 2.5);
  CHECK(b.target_samples() == 200);
  b.roll_back();
  CHECK_FALSE(b.stopping());
  CHECK(b.stop_reason().empty());
  v = b.on_validated(40, auc(0.74), 3.0, 200, dense(2));
  CHECK_FALSE(v.target_reached);  // reached once
  CHECK(b.target_seconds() == 2.5);
}
