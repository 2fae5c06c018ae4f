// Deadlines of an actor's outstanding requests, kept by the actor itself instead of one CAF
// request timeout per request.
//
// Why: CAF 0.17 hands every request timeout to its clock thread (a ring buffer and a condition
// variable), so each request wakes that thread with a futex and costs two task switches. The
// default embedded job makes about seven requests per batch (trainer: batch, pooled rows,
// gradients; aggregator: a lookup and an update per shard): with per-request timeouts its system
// CPU was 0.70-1.05 s of ~7 s for 4,000 batches, without them 0.27-0.32 s (tests/bench/README.md,
// pipeline_overhead). Here a request is sent with caf::infinite and registered with a deadline;
// one self-addressed tick per period (armed only while requests are open) fails the ones past
// their deadline with caf::sec::request_timeout, through the same error handler CAF would have
// called. A late response after that is dropped by close() returning false.
//
// Use, inside the requesting actor:
//   auto t = st.watch.open(request_watch::deadline(self->clock().now(), timeout), on_error);
//   if (st.watch.arm()) self->delayed_send(self, request_watch::period(timeout), watch_atom::value);
//   self->request(dest, caf::infinite, ...).then(
//     [..](R r) { if (!st.watch.close(t)) return; ... },
//     [..](caf::error& e) { if (st.watch.close(t)) on_error(e); });
//   handler: [self](watch_atom) { if (st.watch.tick(self->clock().now()))
//              self->delayed_send(self, period, watch_atom::value); }
// Threading: one owner (the actor's state).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>

#include <caf/actor_clock.hpp>
#include <caf/duration.hpp>
#include <caf/error.hpp>
#include <caf/sec.hpp>

#include "runtime/atoms.hpp"

namespace satrap {

class request_watch {
 public:
  using time_point = caf::actor_clock::time_point;
  using on_timeout = std::function<void(const caf::error&)>;

  // How often the tick looks, for requests of this timeout: an eighth of it, within
  // [period_min, period_max]; a request fails at most one period after its deadline.
  static constexpr std::chrono::milliseconds period_min{10};
  static constexpr std::chrono::milliseconds period_max{1000};
  static std::chrono::milliseconds period(const caf::duration& timeout) {
    auto t = timeout.valid() ? std::chrono::duration_cast<std::chrono::milliseconds>(nanoseconds(timeout))
                             : period_max * 8;
    return std::clamp(t / 8, period_min, period_max);
  }
  static time_point deadline(time_point now, const caf::duration& timeout) {
    return timeout.valid() ? now + nanoseconds(timeout) : time_point::max();
  }

  // Registers a request; `f` runs with request_timeout when it is still open past `deadline`.
  uint64_t open(time_point deadline, on_timeout f) {
    open_.emplace(++next_, entry{deadline, std::move(f)});
    return next_;
  }
  // The response (or error) of ticket t arrived: true when it was still open (handle it), false
  // when the watch already failed it (drop it).
  bool close(uint64_t t) { return open_.erase(t) == 1; }
  // True when the caller must schedule the first tick (none is pending).
  bool arm() {
    if (armed_) return false;
    armed_ = true;
    return true;
  }
  // The tick: fails what is past its deadline; true when requests remain (schedule the next tick).
  bool tick(time_point now) {
    for (auto it = open_.begin(); it != open_.end();) {
      if (it->second.deadline <= now) {
        auto f = std::move(it->second.f);
        it = open_.erase(it);
        f(caf::make_error(caf::sec::request_timeout));
      } else {
        ++it;
      }
    }
    armed_ = !open_.empty();
    return armed_;
  }
  size_t size() const { return open_.size(); }

 private:
  static std::chrono::nanoseconds nanoseconds(const caf::duration& d) {
    auto n = static_cast<int64_t>(d.count);
    switch (d.unit) {
      case caf::time_unit::minutes: return std::chrono::minutes(n);
      case caf::time_unit::seconds: return std::chrono::seconds(n);
      case caf::time_unit::milliseconds: return std::chrono::milliseconds(n);
      case caf::time_unit::microseconds: return std::chrono::microseconds(n);
      default: return std::chrono::nanoseconds(n);
    }
  }
  struct entry {
    time_point deadline;
    on_timeout f;
  };
  std::map<uint64_t, entry> open_;
  uint64_t next_ = 0;
  bool armed_ = false;
};

// Opens a ticket for a request of `timeout` and schedules the first tick when none is pending.
template <class Self>
uint64_t watch_open(Self* self, request_watch& w, const caf::duration& timeout,
                    request_watch::on_timeout f) {
  auto t = w.open(request_watch::deadline(self->clock().now(), timeout), std::move(f));
  if (w.arm())
    self->delayed_send(self, request_watch::period(timeout), watch_atom::value);
  return t;
}

// The watch_atom handler's body: fails the overdue requests, schedules the next tick if any remain.
template <class Self>
void watch_tick(Self* self, request_watch& w, const caf::duration& timeout) {
  if (w.tick(self->clock().now()))
    self->delayed_send(self, request_watch::period(timeout), watch_atom::value);
}

}  // namespace satrap
