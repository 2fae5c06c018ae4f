// What the cluster subcommands share: finding the manifest, the state dir and the token,
// connecting to the head, and the actor-system settings of cluster processes.
#pragma once

#include "actors/admin/admin.hpp"
#include "actors/type_registry.hpp"
#include "engines/slurm_script.hpp"
#include "spec/manifest.hpp"
#include "runtime/version.hpp"

#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/publish.hpp>

#include <string>

namespace satrap {

// --manifest, else $SATRAP_MANIFEST (a file), else $SATRAP_MANIFEST_YAML (the text; path_out
// is then ""), else .satrap/current; loaded and validated. Under `satrap slurm`'s batch job
// ($SATRAP_SLURM=1) with the addresses of the Slurm allocation (engines/slurm_script.hpp).
caf::expected<manifest> cluster_manifest(const std::string& flag, std::string* path_out = nullptr);
// $SATRAP_SLURM is 1: a process of `satrap slurm`'s batch job.
bool under_slurm();
// This process's SLURM* and SATRAP_SLURM* environment variables.
slurm_env slurm_env_of_process();

// For the commands that start processes which read the manifest from its file (up, supervise):
// cluster_manifest, given as a file (not $SATRAP_MANIFEST_YAML); `path` is its absolute path.
caf::expected<manifest> cluster_manifest_file(const std::string& flag, std::string& path);

// --state-dir, else .satrap/<cluster>.
std::string cluster_state_dir(const std::string& flag, const manifest& m);

// --token-file, else $SATRAP_ADMIN_TOKEN, else <state dir>/admin.token; "" when none.
std::string cluster_token(const std::string& flag, const std::string& state_dir);

// How often this node process was restarted: $SATRAP_NODE_RESTARTS (set by `satrap supervise`),
// else, with a starts file, the starts it counted before this one (the file is incremented),
// else 0.
caf::expected<int64_t> node_restarts(const std::string& starts_file);

// A config for head and node processes: heartbeats on between connected nodes.
void cluster_config_setup(satrap_config& cfg);

// Where the cluster's certificates and node tokens are: security.certs, else <state dir>/certs.
std::string cluster_certs_dir(const manifest& m, const std::string& state_dir);

// Security settings of a cluster process, before its actor system exists: the frame bound
// (runtime/frame_limit.hpp) and, unless security.tls is off, CAF's OpenSSL module with the
// certificate of `role` (head, node-<name> or client) and the cluster CA. "" or what is wrong.
std::string cluster_security_setup(satrap_config& cfg, const manifest& m,
                                   const std::string& state_dir, const std::string& role);

// The middleman actor that makes the cluster's connections: the OpenSSL one with TLS.
caf::io::middleman_actor cluster_connector(caf::actor_system& sys);

// Publishes `h` on addr:port, over TLS when the system has the OpenSSL module.
template <class Handle>
caf::expected<uint16_t> cluster_publish(caf::actor_system& sys, const Handle& h, uint16_t port,
                                        const std::string& addr) {
  if (sys.has_openssl_manager())
    return caf::openssl::publish(h, port, addr.c_str(), true);
  return sys.middleman().publish(h, port, addr.c_str(), true);
}

// Connects to the head's admin actor: an error names the address when it cannot be reached.
caf::expected<admin_actor> head_connect(caf::actor_system& sys, const manifest& m);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts, so that
// wait_for_stop_signal can take them; call before creating an actor system.
void block_stop_signals();
// Waits up to `timeout_ms` (-1: forever) for SIGINT or SIGTERM; true when one came.
bool wait_for_stop_signal(int timeout_ms);

}  // namespace satrap
