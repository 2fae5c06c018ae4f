// Learning-rate schedules: values at chosen steps, computed by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "models/lr_schedule.hpp"

using namespace satrap;

TEST_CASE("lr schedules: values at chosen steps") {
  lr_schedule s;
  CHECK(lr_factor(s, 0) == 1.0);
  CHECK(lr_factor(s, 100000) == 1.0);

  s.kind = lr_schedule_kind::warmup;
  s.warmup_steps = 4;
  CHECK(lr_factor(s, 0) == doctest::Approx(0.25));
  CHECK(lr_factor(s, 1) == doctest::Approx(0.5));
  CHECK(lr_factor(s, 3) == doctest::Approx(1.0));
  CHECK(lr_factor(s, 50) == doctest::Approx(1.0));

  s = {};
  s.kind = lr_schedule_kind::step;
  s.decay_steps = 10;
  s.decay_rate = 0.5;
  CHECK(lr_factor(s, 9) == doctest::Approx(1.0));
  CHECK(lr_factor(s, 10) == doctest::Approx(0.5));
  CHECK(lr_factor(s, 25) == doctest::Approx(0.25));

  s.kind = lr_schedule_kind::exponential;
  CHECK(lr_factor(s, 5) == doctest::Approx(std::sqrt(0.5)));
  CHECK(lr_factor(s, 20) == doctest::Approx(0.25));

  s = {};
  s.kind = lr_schedule_kind::cosine;
  s.decay_steps = 100;
  s.min_factor = 0.1;
  CHECK(lr_factor(s, 0) == doctest::Approx(1.0));
  CHECK(lr_factor(s, 50) == doctest::Approx(0.55));  // 0.1 + 0.9 * 0.5
  CHECK(lr_factor(s, 100) == doctest::Approx(0.1));
  CHECK(lr_factor(s, 1000) == doctest::Approx(0.1));

  s = {};
  s.kind = lr_schedule_kind::inverse_sqrt;
  s.warmup_steps = 4;
  CHECK(lr_factor(s, 1) == doctest::Approx(0.5));   // warming up: 2/4
  CHECK(lr_factor(s, 4) == doctest::Approx(1.0));   // t = 0: sqrt(4/4)
  CHECK(lr_factor(s, 16) == doctest::Approx(0.5));  // sqrt(4/16)
  CHECK(lr_factor(s, 12) == doctest::Approx(std::sqrt(4.0 / 12.0)));

  s = {};
  s.kind = lr_schedule_kind::cosine;
  s.warmup_steps = 10;
  s.decay_steps = 10;
  CHECK(lr_factor(s, 4) == doctest::Approx(0.5));   // warm-up to the cosine's start
  CHECK(lr_factor(s, 15) == doctest::Approx(0.5));  // t = 5 of 10: (1 + cos(pi/2)) / 2
}

TEST_CASE("lr schedules: bad parameters are named") {
  lr_schedule s;
  s.kind = lr_schedule_kind::step;
  CHECK(lr_schedule_check(s, "model.embedding.schedule").find("decay_steps") != std::string::npos);
  s.decay_steps = 3;
  s.decay_rate = 0.0;
  CHECK(lr_schedule_check(s, "x").find("decay_rate") != std::string::npos);
  s.decay_rate = 0.9;
  CHECK(lr_schedule_check(s, "x").empty());
  s = {};
  s.kind = lr_schedule_kind::warmup;
  CHECK(lr_schedule_check(s, "x").find("warmup_steps") != std::string::npos);
}
