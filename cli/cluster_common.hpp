// What the cluster subcommands share: finding the manifest, the state dir and the token,
// connecting to the head, and the actor-system settings of cluster processes.
#pragma once

#include "actors/admin/admin.hpp"
#include "actors/type_registry.hpp"
#include "runtime/manifest.hpp"
#include "runtime/version.hpp"

#include <caf/expected.hpp>

#include <string>

namespace satrap {

// --manifest, else $SATRAP_MANIFEST (a file), else $SATRAP_MANIFEST_YAML (the text; path_out
// is then ""), else .satrap/current; loaded and validated.
caf::expected<manifest> cluster_manifest(const std::string& flag, std::string* path_out = nullptr);

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

// Connects to the head's admin actor: an error names the address when it cannot be reached.
caf::expected<admin_actor> head_connect(caf::actor_system& sys, const manifest& m);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts, so that
// wait_for_stop_signal can take them; call before creating an actor system.
void block_stop_signals();
// Waits up to `timeout_ms` (-1: forever) for SIGINT or SIGTERM; true when one came.
bool wait_for_stop_signal(int timeout_ms);

}  // namespace satrap
