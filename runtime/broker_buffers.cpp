#include "runtime/broker_buffers.hpp"

#include "runtime/memory_release.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/abstract_broker.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>

#include <spdlog/spdlog.h>

namespace satrap {

void broker_buffers_release(caf::actor_system& sys, std::string why) {
  if (!sys.has_middleman()) {
    memory_release(why);
    return;
  }
  auto& mm = sys.middleman();
  mm.run_later([&mm, why = std::move(why)] {
    // In the event loop: the BASP broker (started with the middleman) runs only here.
    auto basp = mm.named_broker<caf::io::basp_broker>(caf::atom("BASP"));
    if (auto* broker =
          dynamic_cast<caf::io::abstract_broker*>(caf::actor_cast<caf::abstract_actor*>(basp))) {
      auto& spare = broker->wr_buf(caf::io::connection_handle{});  // no such connection
      auto size = spare.size(), capacity = spare.capacity();
      std::vector<char>{}.swap(spare);
      if (capacity > 0)
        spdlog::info("broker_spare_buffer_released bytes={} capacity={}", size, capacity);
    }
    memory_release(why);
  });
}

}  // namespace satrap
