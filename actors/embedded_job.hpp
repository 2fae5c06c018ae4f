// A job embedded in one process (`satrap train`, the tests): one in-process node agent that
// spawns every role, and a job supervisor over it; the agent ends with the supervisor.
// Threading: call from any thread; the actors run on `sys`.
#pragma once

#include "actors/job_supervisor/job_supervisor.hpp"

namespace satrap {

job_supervisor_actor spawn_embedded_job(caf::actor_system& sys, job_supervisor_config config);

}  // namespace satrap
