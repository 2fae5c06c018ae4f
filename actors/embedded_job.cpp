#include "actors/embedded_job.hpp"

#include "actors/node_agent/node_agent.hpp"

#include <unistd.h>

#include <thread>

namespace satrap {

job_supervisor_actor spawn_embedded_job(caf::actor_system& sys, job_supervisor_config config) {
  config.nodes = {spawn_node_agent(sys, {"local"})};
  config.node_names = {"local"};
  config.own_nodes = true;
  return spawn_job_supervisor(sys, config);
}

manifest embedded_manifest() {
  manifest m;
  m.cluster = "embedded";
  node_spec n;
  n.name = "local";
  n.host = "127.0.0.1";
  n.labels = {{"embedded", "true"}};
  auto pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  n.resources.cores = static_cast<int>(std::thread::hardware_concurrency());
  n.resources.memory_bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  n.resources.gpus = 0;
  m.nodes.push_back(n);
  return m;
}

}  // namespace satrap
