// Logging: named events with key=value fields, e.g.
//   spdlog::info("shard_started shard={} rows={}", id, rows);
// Logs go to stderr so that stdout carries only results (the --json line); a process that
// `satrap up` starts logs to a file in the state dir instead, rotated by size (log_setup with a
// file).
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

// How a log file rotates: when it would pass max_bytes it becomes NAME.1.EXT (NAME.1 becomes
// NAME.2, ...) and a new one starts; at most `files` files are kept (the current one included),
// so a process's log never takes more than max_bytes * files (plus what is written to stderr
// directly, see log_setup). Set by `--log-max-mb` and `--log-files` of the cluster commands.
struct log_rotation {
  uint64_t max_bytes = uint64_t{64} << 20;
  size_t files = 5;
};

// Sets up the default spdlog logger at `level` (trace, debug, info, warn, error, off): on stderr,
// or with `file`, into that file, rotated as `rotation` says (spdlog's rotating_file_sink); then
// this process's stdout and stderr are the current file too (moved to each new one at its
// rotation), so what is written there without spdlog (CAF, a crash's last words) lands in the
// same file. Returns "" or what is wrong (an unknown level, a file that cannot be opened).
std::string log_setup(const std::string& level, const std::string& file,
                      const log_rotation& rotation = {});
// The same on stderr; false when the level name is unknown.
bool log_setup(const std::string& level);

}  // namespace satrap
