// liveness: whether an actor of this process still runs, without asking it anything (a busy
// actor is alive; a liveness probe must not fail because a request queued behind work).
// Threading: any thread; spawns nothing (a scoped actor for the monitor).
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/system_messages.hpp>

#include <chrono>
#include <string>

namespace satrap {

// "" while `handle` runs; else why not (its exit reason, or "no actor").
template <class Handle>
std::string actor_down_reason(caf::actor_system& sys, const Handle& handle) {
  if (!handle)
    return "no actor";
  caf::scoped_actor self{sys};
  // Monitoring a terminated actor enqueues its down message at once, before monitor returns.
  self->monitor(handle);
  std::string why;
  self->receive([&](caf::down_msg& dm) { why = dm.reason ? sys.render(dm.reason) : "exited"; },
                caf::after(std::chrono::milliseconds(0)) >> [] {});
  self->demonitor(handle.address());
  return why;
}

}  // namespace satrap
