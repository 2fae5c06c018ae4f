// A job embedded in one process (`satrap train`, the tests): one in-process node agent that
// spawns every role, and a job supervisor over it; the agent ends with the supervisor.
// `satrap train` runs it under an admin of its own (admin_embedded in actors/admin/admin.hpp),
// whose cluster is embedded_manifest(): one node, "local", this process.
// Threading: call from any thread; the actors run on `sys`.
#pragma once

#include "actors/job_supervisor/job_supervisor.hpp"
#include "spec/manifest.hpp"

namespace satrap {

job_supervisor_actor spawn_embedded_job(caf::actor_system& sys, job_supervisor_config config);

// Cluster "embedded": the node "local" (127.0.0.1, label embedded=true) with this machine's cores
// and memory, and no GPU.
manifest embedded_manifest();

}  // namespace satrap
