// Per-actor counters for the status endpoint: messages handled and mailbox depth.
//
// Each role actor registers a meter when it starts (a meter_handle in its state, below) and calls
// on_message(self) at the top of every handler; the registration ends with the actor's state. A node reports
// meters_snapshot() with its heartbeats, and the head turns the totals into messages/s.
// Threading: a meter is written by its actor and read by any thread (relaxed atomics);
// the registry is guarded by a mutex.
#pragma once

#include <caf/meta/type_name.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace satrap {

struct actor_stat {
  std::string role;
  int32_t index = 0;
  std::string job;
  int64_t messages = 0;  // handled since the actor started
  int64_t mailbox = 0;   // messages waiting, as of the last one handled
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_stat& x) {
  return f(caf::meta::type_name("actor_stat"), x.role, x.index, x.job, x.messages, x.mailbox);
}

class actor_meter {
 public:
  actor_meter(std::string role, int32_t index, std::string job)
      : role_(std::move(role)), index_(index), job_(std::move(job)) {}

  // Call from the actor's own handlers only (reading the mailbox is the owner's right).
  template <class Self>
  void on_message(Self* self) {
    messages_.fetch_add(1, std::memory_order_relaxed);
    mailbox_.store(static_cast<int64_t>(self->mailbox().size()), std::memory_order_relaxed);
  }

  actor_stat stat() const {
    return {role_, index_, job_, messages_.load(std::memory_order_relaxed),
            mailbox_.load(std::memory_order_relaxed)};
  }

 private:
  std::string role_;
  int32_t index_;
  std::string job_;
  std::atomic<int64_t> messages_{0};
  std::atomic<int64_t> mailbox_{0};
};

// Registered for as long as the returned handle lives (keep it in the actor's state).
class meter_handle {
 public:
  meter_handle() = default;
  meter_handle(std::string role, int32_t index, std::string job);
  meter_handle(meter_handle&&) = default;
  meter_handle& operator=(meter_handle&&) = default;
  ~meter_handle();
  template <class Self>
  void on_message(Self* self) {
    if (meter_)
      meter_->on_message(self);
  }

 private:
  std::shared_ptr<actor_meter> meter_;
};

// Every registered meter of this process.
std::vector<actor_stat> meters_snapshot();

}  // namespace satrap
