// Registers every message type of every role with CAF. Call it on every node's config before
// the actor system starts: an unregistered type crosses the wire as an empty message.
#pragma once

#include <caf/actor_system_config.hpp>

namespace satrap {

void register_types(caf::actor_system_config& cfg);

// The config every satrap process uses: its types registered, the io module loaded, and the
// "satrap" error category rendered.
class satrap_config : public caf::actor_system_config {
 public:
  satrap_config();
};

}  // namespace satrap
