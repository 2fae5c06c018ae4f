// Restart intensity, as in Erlang/OTP supervisors: at most `max_restarts` restarts within any
// `window` of time; the restart past that is refused and the supervisor gives up. One policy for
// the job supervisor (on the actor clock) and `satrap supervise` (on the steady clock).
// Threading: a plain value; its owner's thread only. Time is passed in, so tests need no clock.
#pragma once

#include <chrono>
#include <deque>

namespace satrap {

class restart_intensity {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  restart_intensity(int max_restarts, std::chrono::steady_clock::duration window)
      : max_(max_restarts), window_(window) {}

  // Records a restart at `now` and returns true when it is allowed.
  bool allow(time_point now) {
    if (!may_restart(now))
      return false;
    record(now);
    return true;
  }

  // Whether a restart at `now` would be allowed (forgets restarts older than the window). For
  // callers that decide at one time and restart later (after a back-off): may_restart, then record.
  bool may_restart(time_point now) {
    while (!recent_.empty() && now - recent_.front() > window_)
      recent_.pop_front();
    return static_cast<int>(recent_.size()) < max_;
  }
  void record(time_point now) {
    recent_.push_back(now);
    ++total_;
  }

  int recent() const {
    return static_cast<int>(recent_.size());
  }                                     // within the window, as of the last check
  int total() const { return total_; }  // restarts recorded so far

 private:
  int max_;
  std::chrono::steady_clock::duration window_;
  std::deque<time_point> recent_;
  int total_ = 0;
};

}  // namespace satrap
