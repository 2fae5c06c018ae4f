#include "actors/job_data_opener.hpp"

#include <caf/actor_system.hpp>
#include <caf/spawn_options.hpp>

namespace satrap {

bool job_data_open_blocks(const job_spec& spec) {
  return spec.data.source != data_source::synthetic;
}

caf::actor spawn_job_data_opener(caf::actor_system& sys, job_spec spec) {
  return sys.spawn<caf::detached>([spec = std::move(spec)](caf::event_based_actor* self) {
    return caf::behavior{
      [self, spec](caf::atom_value) -> opened_job_data {
        self->quit();
        return std::make_shared<const caf::expected<job_data>>(job_data_open(spec));
      },
    };
  });
}

}  // namespace satrap
