// Restart intensity, as in Erlang/OTP supervisors: at most `max_restarts` restarts within any
// `window` of time; the restart past that is refused and the supervisor gives up.
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
    while (!recent_.empty() && now - recent_.front() > window_)
      recent_.pop_front();
    if (static_cast<int>(recent_.size()) >= max_)
      return false;
    recent_.push_back(now);
    ++total_;
    return true;
  }

  int total() const { return total_; }   // restarts allowed so far

 private:
  int max_;
  std::chrono::steady_clock::duration window_;
  std::deque<time_point> recent_;
  int total_ = 0;
};

}  // namespace satrap
