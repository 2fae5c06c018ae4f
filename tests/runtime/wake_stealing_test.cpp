// wake_stealing (runtime/wake_stealing.hpp): parked workers are woken for work that waits on a busy
// worker's queue, and no message is lost or run twice under load.
#include "runtime/wake_stealing.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/send.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace satrap;

namespace {

using clock_type = std::chrono::steady_clock;

// Two workers that park after 1 us of polling (or at once: spin 0, as nodes on an oversubscribed
// host run) and, unless woken, stay parked for a minute: any
// job that a woken worker did not pick up would wait that long.
class wake_config : public caf::actor_system_config {
 public:
  explicit wake_config(size_t workers,
                       std::chrono::microseconds spin = std::chrono::microseconds(1)) {
    add_scheduler_options(custom_options_);
    set("scheduler.max-threads", workers);
    set("satrap.scheduler-spin", caf::timespan{spin});
    set("satrap.scheduler-park", caf::timespan{std::chrono::seconds(60)});
    set("logger.console", caf::atom("none"));
    load<caf::scheduler::coordinator<wake_stealing>>();
  }
};

// Waits (from the test thread) until flag is set or `limit` passes; true when it was set.
bool wait_for(const std::atomic<bool>& flag, std::chrono::seconds limit) {
  auto until = clock_type::now() + limit;
  while (!flag.load() && clock_type::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return flag.load();
}

}  // namespace

TEST_CASE("wake_stealing: a parked worker is woken for a job queued behind a busy one") {
  for (int spin_us : {1, 0}) {
    CAPTURE(spin_us);
    wake_config cfg(2, std::chrono::microseconds(spin_us));
    caf::actor_system sys{cfg};
    REQUIRE(dynamic_cast<caf::scheduler::coordinator<wake_stealing>*>(&sys.scheduler()) != nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // both workers park
    std::atomic<bool> helper_ran{false}, blocker_done{false};
    auto helper = sys.spawn(
      [&](caf::event_based_actor*) -> caf::behavior { return {[&](int) { helper_ran = true; }}; });
    // The blocker holds its worker until the helper ran. The helper, sent from the blocker, lands
    // on the blocker's own queue: only the other worker can run it, and only if it was woken.
    auto blocker = sys.spawn([&, helper](caf::event_based_actor* self) -> caf::behavior {
      return {[&, self, helper](int) {
        self->send(helper, 1);
        auto until = clock_type::now() + std::chrono::seconds(30);
        while (!helper_ran.load() && clock_type::now() < until)
          std::this_thread::yield();
        blocker_done = true;
      }};
    });
    auto t0 = clock_type::now();
    caf::anon_send(blocker, 1);
    REQUIRE(wait_for(blocker_done, std::chrono::seconds(45)));
    CHECK(helper_ran.load());
    // Woken, not found by the 60 s safety net (nor by the blocker's 30 s give-up).
    CHECK(clock_type::now() - t0 < std::chrono::seconds(20));
    caf::anon_send_exit(blocker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(helper, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("wake_stealing: every message of a relay ring arrives exactly once") {
  for (auto [workers, spin_us] :
       {std::pair{size_t{1}, 1}, std::pair{size_t{2}, 1}, std::pair{size_t{4}, 1},
        std::pair{size_t{2}, 0}, std::pair{size_t{4}, 0}}) {
    CAPTURE(workers);
    CAPTURE(spin_us);
    wake_config cfg(workers, std::chrono::microseconds(spin_us));
    caf::actor_system sys{cfg};
    constexpr int actors = 8, tokens = 16, hops = 20000;
    std::atomic<int> finished{0};
    std::atomic<bool> all_done{false};
    std::vector<std::atomic<int>> seen(actors);
    std::vector<caf::actor> ring;  // filled before the first token: read-only while they run
    // Each actor forwards a token to the next until its hop count runs out; tokens from the test
    // thread (external enqueue) and from actors (internal enqueue) mix.
    for (int i = 0; i < actors; ++i)
      ring.push_back(sys.spawn([&, i](caf::event_based_actor* self) -> caf::behavior {
        return {
          [&, i, self](int left) {
            seen[static_cast<size_t>(i)]++;
            if (left == 0) {
              if (++finished == tokens)
                all_done = true;
              return;
            }
            self->send(ring[static_cast<size_t>((i + 1) % actors)], left - 1);
          },
        };
      }));
    for (int t = 0; t < tokens; ++t)
      caf::anon_send(ring[static_cast<size_t>(t % actors)], hops);
    REQUIRE(wait_for(all_done, std::chrono::seconds(60)));
    int total = 0;
    for (auto& s : seen)
      total += s.load();
    CHECK(total == tokens * (hops + 1));
    for (auto& a : ring)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
}
