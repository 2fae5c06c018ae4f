// The exit statuses of every `satrap` command, one mapping (README "Exit statuses"):
//   0  done (and --help, --version)
//   1  the work failed: a job FAILED, a peer did not answer, a file could not be written
//   2  bad input: a flag, the command line, a job file, a manifest or a data file is wrong
// Threading: plain functions.
#pragma once

#include "runtime/error.hpp"

namespace satrap {

inline constexpr int exit_done = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_bad_input = 2;

// The status for an error value: invalid_config (bad input of any kind) -> 2, else 1.
inline int exit_status_of(const caf::error& e) {
  if (e.category() == caf::atom("satrap") && static_cast<errc>(e.code()) == errc::invalid_config)
    return exit_bad_input;
  return exit_failed;
}

}  // namespace satrap
