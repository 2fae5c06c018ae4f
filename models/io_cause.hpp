// io_cause: the cause at the end of an env error message (models/env.hpp: "<path>: cannot
// <operation>: <strerror's text>", the same in every env), for a caller whose own message already
// names the file and what it was doing: "x.snap: cannot write snapshot file: No space left on
// device", as before the env. The cause keeps strerror's text, which runtime's io_errc_of reads.
// Threading: a pure function.
#pragma once

#include <string>

namespace satrap {

inline std::string io_cause(const std::string& env_message) {
  auto at = env_message.rfind(": ");
  return at == std::string::npos ? env_message : env_message.substr(at + 2);
}

}  // namespace satrap
