// Logging: named events with key=value fields, e.g.
//   spdlog::info("shard_started shard={} rows={}", id, rows);
// Logs go to stderr so that stdout carries only results (the --json line).
#pragma once

#include <string>

namespace satrap {

// Sets up the default spdlog logger on stderr at `level` (trace, debug, info, warn, error, off).
// Returns false when the level name is unknown.
bool log_setup(const std::string& level);

}  // namespace satrap
