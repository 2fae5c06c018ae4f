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
// Use, inside the requesting actor (its typed interface reacts to watch_atom):
//   watched_request<R>(self, st.watch, dest, timeout, on_value, on_error, message...);
//   handler: [self](watch_atom) { watch_tick(self, self->state.watch, timeout); }
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
    auto t = timeout.valid() ? std::chrono::duration_cast<std::chrono::milliseconds>(
               deadline(time_point{}, timeout).time_since_epoch())
                             : period_max * 8;
    return std::clamp(t / 8, period_min, period_max);
  }
  static time_point deadline(time_point now, const caf::duration& timeout) {
    return timeout.valid() ? now += timeout : time_point::max();  // CAF's time_point += duration
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
    if (armed_)
      return false;
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

// self->request(dest, caf::infinite, xs...) under the watch: on_value(R&) with the answer, or
// on_error with the error or with request_timeout past `timeout`; whichever comes first, once.
template <class R, class Self, class Dest, class OnValue, class... Ts>
void watched_request(Self* self, request_watch& w, const Dest& dest, const caf::duration& timeout,
                     OnValue on_value, request_watch::on_timeout on_error, Ts&&... xs) {
  auto t = watch_open(self, w, timeout, on_error);
  self->request(dest, caf::infinite, std::forward<Ts>(xs)...)
    .then(
      [w = &w, t, on_value = std::move(on_value)](R& r) mutable {
        if (w->close(t))
          on_value(r);
      },
      [w = &w, t, on_error = std::move(on_error)](const caf::error& e) {
        if (w->close(t))
          on_error(e);
      });
}

// The watch_atom handler's body: fails the overdue requests, schedules the next tick if any remain.
template <class Self>
void watch_tick(Self* self, request_watch& w, const caf::duration& timeout) {
  if (w.tick(self->clock().now()))
    self->delayed_send(self, request_watch::period(timeout), watch_atom::value);
}

}  // namespace satrap
