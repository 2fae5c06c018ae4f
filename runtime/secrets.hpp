// secrets: the admin token and the node tokens, as the head and its clients handle them.
//
// token_equal compares in time that depends only on the lengths, so a remote caller cannot learn
// a token byte by byte from reply times; use it for every token check (the admin's, and the HTTP
// routes that change state). Tokens are never logged. random_token reads /dev/urandom.
// secret_file_read/write keep a token in a file of mode 0600.
// Threading: plain functions.
#pragma once

#include <string>

namespace satrap {

// True when `given` equals `expected` and `expected` is not empty.
bool token_equal(const std::string& given, const std::string& expected);

// `bytes` random bytes as hex.
std::string random_token(size_t bytes = 16);

// The first line of `path`, "" when it cannot be read.
std::string secret_file_read(const std::string& path);
// Writes `secret` to `path` with mode 0600 (created so; never world-readable in between).
bool secret_file_write(const std::string& path, const std::string& secret);

}  // namespace satrap
