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

TEST_CASE("running_auc with refresh recomputes only after that many new pairs") {
  running_auc r(4, 3);
  std::vector<float> bad_s = {0.9f, 0.1f}, bad_l = {0, 1};  // perfectly wrong
  r.add(bad_s, bad_l);
  CHECK(r.value() == doctest::Approx(0.0));  // the first call always computes
  std::vector<float> good_s = {0.2f, 0.8f}, good_l = {0, 1};
  r.add(good_s, good_l);  // 2 new pairs < 3: the last figure
  CHECK(r.value() == doctest::Approx(0.0));
  std::vector<float> more_s = {0.3f, 0.7f}, more_l = {0, 1};
  r.add(more_s, more_l);  // 4 new pairs since: recomputed over the window
  CHECK(r.count() == 4);
  CHECK(r.value() == doctest::Approx(1.0));
}

// Hand-computed: logits 0 and ln 3 give probabilities 0.5 and 0.75.
TEST_CASE("eval metrics: logloss, NE, calibration against a hand-computed case") {
  const float l3 = std::log(3.0f);
  std::vector<float> logits{0.0f, l3, l3, 0.0f};
  std::vector<float> labels{0.0f, 1.0f, 0.0f, 1.0f};
  auto m = satrap::compute_eval_metrics(logits, labels);
  // logloss: (ln 2 + ln(4/3) + ln 4 + ln 2) / 4
  double ll = (std::log(2.0) + std::log(4.0 / 3.0) + std::log(4.0) + std::log(2.0)) / 4.0;
  CHECK(m.logloss == doctest::Approx(ll).epsilon(1e-6));
  CHECK(m.ne == doctest::Approx(ll / std::log(2.0)).epsilon(1e-6));  // base rate 0.5: entropy ln 2
  CHECK(m.calibration == doctest::Approx((0.5 + 0.75 + 0.75 + 0.5) / 2.0).epsilon(1e-6));
  // AUC: positives (0.75, 0.5) vs negatives (0.5, 0.75): pairs win 1 + 0.5 + 0.5 + 0 = 2 of 4.
  CHECK(m.auc == doctest::Approx(0.5));
  CHECK(std::isnan(m.gauc));
  CHECK(m.samples == 4);
}

TEST_CASE("grouped AUC: groups with both classes, weighted by their samples") {
  // Group 1: perfect (auc 1) on 3 samples; group 2: inverted (auc 0) on 2; group 3 has one class.
  std::vector<float> scores{0.9f, 0.1f, 0.2f, 0.3f, 0.8f, 0.5f};
  std::vector<float> labels{1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f};
  std::vector<uint64_t> groups{1, 1, 1, 2, 2, 3};
  // group 2: positive 0.8 vs negative 0.3 -> auc 1. Make it inverted:
  scores[4] = 0.2f;
  CHECK(satrap::grouped_auc(scores, labels, groups)
        == doctest::Approx((3.0 * 1.0 + 2.0 * 0.0) / 5.0));
  std::vector<uint64_t> one_class{1, 1, 1, 1, 1, 1};
  std::vector<float> all_pos(6, 1.0f);
  CHECK(std::isnan(satrap::grouped_auc(scores, all_pos, one_class)));
}

TEST_CASE("metrics per task and their weighted mean") {
  // Two tasks, sample-major: task 0 ranked perfectly, task 1 perfectly wrong.
  std::vector<float> logits = {2, -2, -1, 1, 1, -1, -2, 2};
  std::vector<float> labels = {1, 1, 0, 0, 1, 1, 0, 0};
  auto per = compute_task_metrics(logits, labels, {}, 2);
  REQUIRE(per.size() == 2);
  CHECK(per[0].auc == doctest::Approx(1.0));
  CHECK(per[1].auc == doctest::Approx(0.0));
  CHECK(per[0].samples == 4);
  std::vector<float> w = {3.0f, 1.0f};
  auto m = combine_task_metrics(per, w);
  CHECK(m.auc == doctest::Approx(0.75));
  CHECK(m.logloss == doctest::Approx((3 * per[0].logloss + per[1].logloss) / 4));
  CHECK(combine_task_metrics(per, {}).auc == doctest::Approx(0.5));
  // One task: the plain metrics.
  auto single = compute_task_metrics(logits, labels, {}, 1);
  CHECK(single.size() == 1);
  CHECK(combine_task_metrics(single, {}).auc == compute_eval_metrics(logits, labels).auc);
  CHECK(task_column(logits, 2, 1) == std::vector<float>{-2, 1, -1, 2});
}
