// AUC (with ties), log loss and the running AUC window, against hand computations.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "models/metrics.hpp"

using namespace satrap;

TEST_CASE("auc_exact on a hand-computed case with ties") {
  std::vector<float> scores = {0.1f, 0.4f, 0.4f, 0.8f, 0.8f, 0.3f};
  std::vector<float> labels = {0, 1, 0, 1, 0, 1};
  // Positives 0.4, 0.8, 0.3; negatives 0.1, 0.4, 0.8; 9 pairs, a win 1, a tie 1/2:
  //   pos 0.4: > 0.1, = 0.4, < 0.8 -> 1.5
  //   pos 0.8: > 0.1, > 0.4, = 0.8 -> 2.5
  //   pos 0.3: > 0.1, < 0.4, < 0.8 -> 1
  // AUC = (1.5 + 2.5 + 1) / 9 = 5/9.
  CHECK(auc_exact(scores, labels) == doctest::Approx(5.0 / 9.0));
}

TEST_CASE("auc_exact extremes and a single class") {
  std::vector<float> s = {0.1f, 0.2f, 0.3f, 0.4f};
  CHECK(auc_exact(s, std::vector<float>{0, 0, 1, 1}) == doctest::Approx(1.0));
  CHECK(auc_exact(s, std::vector<float>{1, 1, 0, 0}) == doctest::Approx(0.0));
  CHECK(auc_exact(s, std::vector<float>{1, 1, 1, 1}) == 0.5);
  CHECK(auc_exact(s, std::vector<float>{0, 0, 0, 0}) == 0.5);
  std::vector<float> same = {0.5f, 0.5f, 0.5f};
  CHECK(auc_exact(same, std::vector<float>{0, 1, 1}) == doctest::Approx(0.5));
}

TEST_CASE("logloss_from_logits by hand and stable at large logits") {
  // logit 0, label 1: -log(1/2) = log 2. logit log 3 (p = 3/4), label 0: -log(1/4) = log 4.
  // Mean = (log 2 + log 4) / 2 = 1.5 log 2.
  std::vector<float> logits = {0.0f, static_cast<float>(std::log(3.0))}, labels = {1, 0};
  CHECK(logloss_from_logits(logits, labels) == doctest::Approx(1.5 * std::log(2.0)));
  std::vector<float> big = {200.0f, -200.0f}, right = {1, 0}, wrong = {0, 1};
  CHECK(logloss_from_logits(big, right) == doctest::Approx(0.0));
  CHECK(logloss_from_logits(big, wrong) == doctest::Approx(200.0));
}

TEST_CASE("sigmoid is stable and symmetric") {
  CHECK(sigmoid(0.0f) == 0.5f);
  CHECK(sigmoid(-1000.0f) == 0.0f);
  CHECK(sigmoid(1000.0f) == 1.0f);
  CHECK(sigmoid(2.0f) + sigmoid(-2.0f) == doctest::Approx(1.0));
}

TEST_CASE("running_auc covers only the last window") {
  running_auc r(4);
  CHECK(r.value() == 0.5);
  std::vector<float> bad_s = {0.9f, 0.1f}, bad_l = {0, 1};  // perfectly wrong
  r.add(bad_s, bad_l);
  CHECK(r.value() == doctest::Approx(0.0));
  std::vector<float> good_s = {0.2f, 0.8f, 0.3f, 0.7f}, good_l = {0, 1, 0, 1};
  r.add(good_s, good_l);  // pushes the wrong pair out
  CHECK(r.count() == 4);
  CHECK(r.value() == doctest::Approx(1.0));
}
