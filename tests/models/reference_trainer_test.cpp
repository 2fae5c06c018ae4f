// A short run of the reference training loop: it learns and is deterministic.
#include <doctest/doctest.h>

#include <cmath>

#include "models/reference_trainer.hpp"

using namespace satrap;

TEST_CASE("reference_train smoke: losses finite and falling, AUC above chance, deterministic") {
  synthetic_options data;
  data.vocab = 2000;
  synthetic_generator g(data);
  reference_options o;
  o.batch_size = 256;
  o.train_batches = 60;
  o.test_batches = 8;
  auto r = reference_train(g, o);
  REQUIRE(r.batch_losses.size() == 60);
  double first = 0.0, last = 0.0;
  for (int i = 0; i < 10; ++i) {
    first += r.batch_losses[i] / 10;
    last += r.batch_losses[50 + i] / 10;
  }
  for (double l : r.batch_losses)
    CHECK(std::isfinite(l));
  CHECK(last < first);
  CHECK(r.test_auc > 0.6);
  CHECK(r.oracle_auc > r.test_auc - 0.02);
  CHECK(std::isfinite(r.test_logloss));
  CHECK(r.samples_per_sec > 0.0);
  auto again = reference_train(g, o);
  CHECK(again.batch_losses == r.batch_losses);
  CHECK(again.test_auc == r.test_auc);
}
