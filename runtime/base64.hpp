// Base64 (RFC 4648, standard alphabet, padded): bytes inside text, e.g. a job's TorchScript module
// inside the job spec's YAML that travels to every node.
// Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace satrap {

std::string base64_encode(std::string_view bytes);
// The bytes, or nullopt when `text` is not padded base64 of the standard alphabet.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace satrap
