// Reading a small input file (a job file, a manifest, a token) with its size checked before a
// byte is read: it must be a regular file (not /dev/zero, a FIFO or a folder) of at most
// `max_bytes`. The errors are invalid_config ("bad input") and name the file.
// Threading: plain function; blocking file I/O.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace satrap {

inline constexpr uint64_t job_file_max_bytes = 1 << 20;       // a job file: 1 MiB
inline constexpr uint64_t manifest_file_max_bytes = 1 << 20;  // a manifest: 1 MiB

// The whole text of `path`; `what` names the file in errors ("job file", "manifest").
caf::expected<std::string> read_text_file(const std::string& path, uint64_t max_bytes,
                                          const std::string& what);

}  // namespace satrap
