// job_history: the bounded progress series behind the dashboard's plots.
#include "actors/admin/job_history.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

job_history_sample at(int64_t t_ms, int64_t step, int64_t checkpoints = 0, int64_t restarts = 0) {
  job_history_sample s;
  s.t_ms = t_ms;
  s.step = step;
  s.loss = 1.0 / static_cast<double>(step + 1);
  s.samples_per_sec = 100;
  s.running_auc = 0.7;
  s.checkpoints = checkpoints;
  s.restarts = restarts;
  return s;
}

}  // namespace

TEST_CASE("job_history: points, seconds per step, and no validation series until reported") {
  job_history h;
  h.record(at(1000, 0));
  h.record(at(3000, 10));  // 2 s for 10 steps
  auto j = h.to_json();
  CHECK(j["t_ms"].size() == 2);
  CHECK(j["step_seconds"][0].is_null());
  CHECK(j["step_seconds"][1].get<double>() == doctest::Approx(0.2));
  CHECK_FALSE(j.contains("validation_auc"));
  auto v = at(4000, 20);
  v.validation_auc = 0.75;
  h.record(v);
  j = h.to_json();
  REQUIRE(j.contains("validation_auc"));
  CHECK(j["validation_auc"][0].is_null());
  CHECK(j["validation_auc"][2].get<double>() == 0.75);
  CHECK(j["validation_logloss"][2].is_null());
}

TEST_CASE("job_history: checkpoints and restarts become events once each") {
  job_history h;
  h.record(at(0, 1));
  h.record(at(10, 2, 1));
  h.record(at(20, 3, 1));
  auto r = at(30, 2, 1, 1);
  r.last_failure = "node n1 lost";
  h.record(r);
  auto ev = h.to_json()["events"];
  REQUIRE(ev.size() == 2);
  CHECK(ev[0]["kind"] == "checkpoint");
  CHECK(ev[0]["step"] == 2);
  CHECK(ev[1]["kind"] == "restart");
  CHECK(ev[1]["detail"] == "node n1 lost");
}

TEST_CASE("job_history: bounded, keeping the whole span at lower resolution") {
  job_history h(64, 4);
  for (int64_t i = 0; i < 1000; ++i)
    h.record(at(i * 100, i, i / 100));  // a checkpoint every 100 steps: 9 events
  auto j = h.to_json();
  CHECK(h.size() <= 64);
  CHECK(h.size() >= 32);
  CHECK(j["step"].front() == 0);   // the start is kept
  CHECK(j["step"].back() == 999);  // and the newest
  // Evenly spaced (the last point is the newest report, off the stride).
  auto& step = j["step"];
  auto gap = step[1].get<int64_t>() - step[0].get<int64_t>();
  CHECK(gap > 1);
  for (size_t i = 1; i + 1 < step.size(); ++i)
    CHECK(step[i].get<int64_t>() - step[i - 1].get<int64_t>() == gap);
  for (size_t i = 1; i < j["t_ms"].size(); ++i)
    CHECK(j["t_ms"][i].get<int64_t>() > j["t_ms"][i - 1].get<int64_t>());
  CHECK(j["events"].size() == 4);  // the newest events
  CHECK(j["events"].back()["step"] == 900);
}
