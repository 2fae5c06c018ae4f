// peer_guard: who sent the message an actor is handling, and a guard against remote exits.
//
// With CAF 0.17 anyone connected to a published port can send any message to the published
// actor, exit messages included, and `exit_reason::kill` ends an actor whatever its exit handler
// says. exit_guard<Base> wraps an actor implementation (use it as the self pointer's type) and
// drops, before they reach the mailbox, exit messages that do not come from an actor of this
// process (a remote sender or none, which is what a remote anon_send_exit carries); local
// links and supervisors keep working. Counted in exits_dropped().
// sender_is_local / sender_node / peer_text tell handlers where the current message came from
// (remote senders are proxies whose node() is the sender's process).
// Threading: enqueue runs on the sender's thread; the counter is atomic.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/node_id.hpp>
#include <caf/system_messages.hpp>

#include "runtime/log.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <string>

namespace satrap {

inline std::atomic<uint64_t>& exits_dropped_counter() {
  static std::atomic<uint64_t> n{0};
  return n;
}
inline uint64_t exits_dropped() { return exits_dropped_counter(); }

template <class Base>
class exit_guard : public Base {
 public:
  using Base::Base;

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    if (ptr && ptr->content().template match_elements<caf::exit_msg>()) {
      auto& from = ptr->sender;
      if (!from || from->node() != this->home_system().node()) {
        auto n = ++exits_dropped_counter();
        static log_rate rate{10};
        uint64_t unlogged = 0;
        if (rate.allow(unlogged))
          spdlog::warn("remote_exit_dropped actor={} peer={} dropped_total={} unlogged_before={}",
                       this->name(), from ? to_string(from->node()) : std::string("anonymous"), n,
                       unlogged);
        return;
      }
    }
    Base::enqueue(std::move(ptr), eu);
  }
};

// The node of the current message's sender (none for an anonymous message).
template <class Self>
caf::node_id sender_node(Self* self) {
  auto& s = self->current_sender();
  return s ? s->node() : caf::node_id{};
}

template <class Self>
bool sender_is_local(Self* self) {
  auto& s = self->current_sender();
  return s && s->node() == self->node();
}

// For logs: the sender's node id (process id and host hash), or "anonymous".
template <class Self>
std::string peer_text(Self* self) {
  auto& s = self->current_sender();
  return s ? to_string(s->node()) : std::string("anonymous");
}

}  // namespace satrap
