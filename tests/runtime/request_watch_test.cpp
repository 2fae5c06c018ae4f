#include "runtime/request_watch.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace satrap;

TEST_CASE("request watch: overdue requests fail once with request_timeout, answered ones never") {
  request_watch w;
  const auto t0 = request_watch::time_point{} + std::chrono::seconds(100);
  std::vector<int> failed;
  auto on = [&](int which) {
    return [&failed, which](const caf::error& e) {
      CHECK(e == caf::sec::request_timeout);
      failed.push_back(which);
    };
  };
  auto a = w.open(t0 + std::chrono::milliseconds(50), on(1));
  CHECK(w.arm());
  CHECK_FALSE(w.arm());  // one tick pending is enough
  auto b = w.open(t0 + std::chrono::milliseconds(20), on(2));
  auto c = w.open(t0 + std::chrono::milliseconds(80), on(3));
  CHECK(w.close(c));  // answered in time
  CHECK(w.tick(t0 + std::chrono::milliseconds(10)));
  CHECK(failed.empty());
  CHECK(w.tick(t0 + std::chrono::milliseconds(30)));  // b is overdue, a still open
  CHECK(failed == std::vector<int>{2});
  CHECK_FALSE(w.close(b));                                  // its late answer is dropped
  CHECK_FALSE(w.tick(t0 + std::chrono::milliseconds(60)));  // a fails; nothing left: no next tick
  CHECK(failed == std::vector<int>{2, 1});
  CHECK_FALSE(w.close(a));
  CHECK(w.size() == 0);
  CHECK(w.arm());  // the next request arms a tick again
}

TEST_CASE("request watch: the tick period follows the timeout within its bounds") {
  CHECK(request_watch::period(caf::duration{std::chrono::seconds(60)})
        == request_watch::period_max);
  CHECK(request_watch::period(caf::duration{std::chrono::milliseconds(400)})
        == std::chrono::milliseconds(50));
  CHECK(request_watch::period(caf::duration{std::chrono::milliseconds(1)})
        == request_watch::period_min);
  CHECK(request_watch::period(caf::infinite) == request_watch::period_max);
  auto now = request_watch::time_point{} + std::chrono::seconds(1);
  CHECK(request_watch::deadline(now, caf::duration{std::chrono::seconds(2)})
        == now + std::chrono::seconds(2));
  CHECK(request_watch::deadline(now, caf::infinite) == request_watch::time_point::max());
}
