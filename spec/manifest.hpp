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
//       resources: {cores: 2, memory: 8GiB, gpus: 0}   # and disk: 2TB (local SSD, optional)
//       labels: {tier: cpu}
//   timing: {heartbeat_interval_ms: 1000, heartbeat_timeout_ms: 5000}   # optional; knobs.hpp
//   security:                  # optional
//     tls: required            # required (default) | off: mutual TLS on every CAF connection
//     certs: certs             # where `satrap certs` wrote them (default <state dir>/certs)
//     max_frame_bytes: 512MiB  # the largest CAF frame a process accepts (runtime/frame_limit.hpp)
//
// `bind:` (head and nodes) is the address to listen on when it must differ from `host` (the
// address others connect to), e.g. 0.0.0.0 inside a container; by default a process listens on
// `host` only. The cluster name is a file name (letters, digits, . _ -): it names the state dir.
//
// Memory takes a byte count or a number with a unit: KB MB GB TB (powers of 1000) or KiB MiB
// GiB TiB (powers of 1024).
// Threading: plain values and pure functions.
#pragma once

#include "spec/knobs.hpp"

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
  uint64_t disk_bytes = 0;    // local disk (SSD) for the embedding tier (`disk`; 0: none)
};

struct node_spec {
  std::string name;  // unique in the cluster
  std::string host;  // where its node agent listens
  std::string bind;  // address to listen on ("" = host)
  uint16_t port = 0;
  node_resources resources;
  std::map<std::string, std::string> labels;  // matched by placement selectors
  // The manifest entry it came from: its name and host as written ("mem-{i}") and its count;
  // `satrap k8s` renders one StatefulSet per entry.
  std::string group;
  std::string group_host;
  int32_t group_count = 1;
};

struct head_spec {
  std::string host = "127.0.0.1";
  std::string bind;             // address to listen on ("" = host)
  uint16_t port = 4710;         // CAF middleman (admin actor, node registration)
  uint16_t status_port = 4780;  // HTTP: /status /metrics /healthz /readyz
};

enum class tls_mode { required, off };

struct security_spec {
  tls_mode tls = tls_mode::required;
  std::string certs;                               // "" = <state dir>/certs
  uint64_t max_frame_bytes = uint64_t{512} << 20;  // runtime/frame_limit.hpp
};

struct manifest {
  std::string cluster;  // nodes refuse to join a cluster of another name
  head_spec head;
  std::vector<node_spec> nodes;
  cluster_timing timing;  // optional `timing:` section (spec/knobs.hpp)
  security_spec security;
};

// The address a process listens on: `bind` when given, else `host`.
inline const std::string& listen_address(const std::string& host, const std::string& bind) {
  return bind.empty() ? host : bind;
}

// "" when `name` can name a cluster (and its state dir), else why not.
std::string cluster_name_problem(const std::string& name);

caf::error manifest_load_text(const std::string& text, const std::string& origin, manifest& out);
caf::error manifest_load_file(const std::string& path, manifest& out);

// "12TB", "680GiB", "1048576" -> bytes; false when the text is not a size (negative, inf, nan,
// or more than bytes_max).
inline constexpr double bytes_max = 0x1p60;  // 1 EiB
bool parse_bytes(const std::string& text, uint64_t& out);
// Bytes for people: "1.5 TiB", "512 MiB".
std::string format_bytes(double bytes);

}  // namespace satrap
