#include "runtime/wake_stealing.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/config_value.hpp>

namespace satrap {

void add_scheduler_options(caf::config_option_set& options) {
  caf::config_option_adder{options, "satrap"}
    .add<caf::timespan>("scheduler-spin", "an idle worker polls this long before it parks")
    .add<caf::timespan>("scheduler-park", "a parked worker looks for work after this unless woken");
}

wake_stealing::worker_data::worker_data(caf::scheduler::abstract_coordinator* parent) {
  const auto& cfg = parent->system().config();
  spin = caf::get_or(cfg, "satrap.scheduler-spin", caf::timespan{default_spin});
  park = caf::get_or(cfg, "satrap.scheduler-park", caf::timespan{default_park});
}

wake_stealing::worker_data::worker_data(const worker_data& other)
    : spin(other.spin), park(other.park) {}

}  // namespace satrap
