// Logging: named events with key=value fields, e.g.
//   spdlog::info("shard_started shard={} rows={}", id, rows);
// Logs go to stderr so that stdout carries only results (the --json line).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace satrap {

// A bound on how many lines one kind of refusal logs: at most `per_second` a second; the lines
// beyond are not logged but counted, and the next line logged says how many (a flood of forged
// messages must not become a flood of log).
// Threading: any thread (atomics).
class log_rate {
 public:
  explicit log_rate(uint32_t per_second = 10) : per_second_(per_second) {}

  // True when this line may be logged; then `unlogged` is how many were not since the last.
  bool allow(uint64_t& unlogged);

 private:
  uint32_t per_second_;
  std::atomic<int64_t> second_{0};
  std::atomic<uint32_t> lines_{0};
  std::atomic<uint64_t> unlogged_{0};
};

// Sets up the default spdlog logger on stderr at `level` (trace, debug, info, warn, error, off).
// Returns false when the level name is unknown.
bool log_setup(const std::string& level);

}  // namespace satrap
