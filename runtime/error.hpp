// satrap's one error enum. Expected failures (bad input, a peer that did not answer) travel as
// caf::error values with category "satrap" and a human-readable context string; bugs assert.
// Add a code only when a caller reacts to it differently.
#pragma once

#include "models/result.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace satrap {

// `text` safe to print: control bytes (NUL, ESC, newline, ...), DEL and bytes that are not valid
// UTF-8 become \xNN escapes; printable ASCII and valid UTF-8 stay as they are. Idempotent (a
// backslash is left alone), so escaping twice changes nothing.
std::string printable(std::string_view text);

enum class errc : uint8_t {
  ok = 0,
  invalid_config,   // a job file, flag or manifest is wrong: the message names key and expectation
  io_failure,       // a file could not be read or written
  peer_failure,     // an actor did not answer or answered with an error
  invalid_payload,  // a bulk message did not decode or had the wrong shape
  unauthorized,     // a remote request without the token or identity it needs
  no_resource,      // the machine cannot: disk full, a read-only or unwritable folder, no memory
};

const char* to_string(errc x);

// Error messages often echo input (a value, a key, a path): the context is made printable here,
// once, so no raw byte of a job file reaches a terminal, a log or a job record.
inline caf::error make_error(errc x, std::string_view context) {
  return caf::error(static_cast<uint8_t>(x), caf::atom("satrap"),
                    caf::make_message(printable(context)));
}

// A failure a restart would meet again (a configuration or resource error: invalid_config,
// no_resource): the job fails at once with it instead of restarting (actors/README.md).
bool failure_is_deterministic(const caf::error& e);

// e's satrap code, or `fallback` when e is not a satrap error.
inline errc errc_of(const caf::error& e, errc fallback) {
  return e && e.category() == caf::atom("satrap") ? static_cast<errc>(e.code()) : fallback;
}

// The code for a failed file operation from its message (which carries strerror's text): disk
// full, quota, file too large (RLIMIT_FSIZE), read-only file system, permission, not a
// directory, name too long -> no_resource (a retry fails the same way); else io_failure.
errc io_errc_of(std::string_view message);

// A models/ failure (models/result.hpp) at the edge to the actors: the input's fault (bad_input,
// e.g. a malformed checkpoint manifest) -> invalid_config; else a failed file operation, coded
// from its message by io_errc_of (disk full, read-only -> no_resource; else io_failure).
inline caf::error make_error(const model_error& e) {
  return make_error(e.bad_input ? errc::invalid_config : io_errc_of(e.message), e.message);
}

// An actor's exception handler: the exception as an error with its message (CAF's default says
// only "runtime_error"); std::bad_alloc -> no_resource, anything else -> peer_failure.
caf::error exception_error(const std::exception_ptr& e, std::string_view role);

// Text for a user: the satrap context string when there is one, else CAF's rendering.
std::string error_text(const caf::error& e);

}  // namespace satrap
