// The node manifest: which machines a cluster has, where its head listens, and what each node
// offers (cores, memory, GPUs, labels). Loaded from YAML with errors that name file:line:column
// and the field; unknown keys are errors.
//
//   cluster: local
//   head: {host: 127.0.0.1, port: 4710, status_port: 4780}
//   nodes:
//     - name: cpu-{i}            # with count, {i} expands to 0..count-1 in name and host
//       count: 2
//       host: 127.0.0.1
//       port: 4711               # with count, node i listens on port + i
//       resources: {cores: 2, memory: 8GiB, gpus: 0}
//       labels: {tier: cpu}
//
// Memory takes a byte count or a number with a unit: KB MB GB TB (powers of 1000) or KiB MiB
// GiB TiB (powers of 1024).
// Threading: plain values and pure functions.
#pragma once

#include <caf/error.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace satrap {

struct node_resources {
  int32_t cores = 0;          // CPU cores the node gives satrap
  uint64_t memory_bytes = 0;  // RAM the node gives satrap
  int32_t gpus = 0;           // GPUs the node gives satrap
};

struct node_spec {
  std::string name;                            // unique in the cluster
  std::string host;                            // where its node agent listens
  uint16_t port = 0;
  node_resources resources;
  std::map<std::string, std::string> labels;   // matched by placement selectors
  // The manifest entry it came from: its name and host as written ("mem-{i}") and its count;
  // `satrap k8s` renders one StatefulSet per entry.
  std::string group;
  std::string group_host;
  int32_t group_count = 1;
};

struct head_spec {
  std::string host = "127.0.0.1";
  uint16_t port = 4710;         // CAF middleman (admin actor, node registration)
  uint16_t status_port = 4780;  // HTTP: /status /metrics /healthz /readyz
};

struct manifest {
  std::string cluster;          // nodes refuse to join a cluster of another name
  head_spec head;
  std::vector<node_spec> nodes;
};

caf::error manifest_load_text(const std::string& text, const std::string& origin, manifest& out);
caf::error manifest_load_file(const std::string& path, manifest& out);

// "12TB", "680GiB", "1048576" -> bytes; false when the text is not a size.
bool parse_bytes(const std::string& text, uint64_t& out);
// Bytes for people: "1.5 TiB", "512 MiB".
std::string format_bytes(double bytes);

}  // namespace satrap
