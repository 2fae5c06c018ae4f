// Opens a job's data without blocking a CAF worker thread. Synthetic data opens at once, in the
// calling actor (there is nothing to convert; this also keeps the deterministic simulation on one
// thread). File data may convert a whole data set into its binary cache (spec/job_data.hpp):
// that runs on a detached actor with a thread of its own, and the result comes back as a message.
// Threading: call from inside an actor; `then` runs in that actor.
#pragma once

#include "spec/job_data.hpp"
#include "spec/job_spec.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/expected.hpp>

#include <memory>

namespace satrap {

// The result of opening, shared (local messages only: it holds the mapped data).
using opened_job_data = std::shared_ptr<const caf::expected<job_data>>;

// True when opening `spec`'s data may block (file data, converted or checked on open).
bool job_data_open_blocks(const job_spec& spec);

// A one-shot detached actor that opens `spec`'s data, answers the first message with it and ends.
caf::actor spawn_job_data_opener(caf::actor_system& sys, job_spec spec);

// Opens `spec`'s data for `self` and runs then(opened_job_data) in `self`.
template <class Self, class Then>
void open_job_data(Self* self, const job_spec& spec, Then then) {
  if (!job_data_open_blocks(spec)) {
    then(std::make_shared<const caf::expected<job_data>>(job_data_open(spec)));
    return;
  }
  auto opener = spawn_job_data_opener(self->system(), spec);
  self->request(opener, caf::infinite, caf::atom("open"))
    .then([then](opened_job_data& d) mutable { then(std::move(d)); },
          [then](caf::error& e) mutable {
            then(std::make_shared<const caf::expected<job_data>>(std::move(e)));
          });
}

}  // namespace satrap

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(satrap::opened_job_data)
