// frame_limit: a bound on the payload of one CAF (BASP) frame, checked before CAF allocates it.
//
// CAF 0.17 reads a BASP header (fixed size), then resizes its receive buffer to the header's
// payload_len (up to 4 GiB) before anything else looks at the frame: one 32-byte header made a
// process allocate 4 GB. CAF has no option for this. libcaf_io checks every header it reads with
// caf::io::basp::valid(const header&), called through the PLT; frame_limit.cpp defines that symbol
// in the satrap executable, so the dynamic linker binds libcaf_io's calls to it (ELF symbol
// interposition). It refuses a header whose payload_len exceeds the limit and otherwise returns
// libcaf_io's own verdict (looked up with dlsym(RTLD_NEXT)). A refused header makes CAF close the
// connection (malformed_basp_message) before any allocation.
// frame_limit_install() must be called once by every process that opens CAF connections (it
// also checks that the interposition is in effect).
// Threading: the limit is an atomic; valid() runs on CAF's multiplexer thread.
#pragma once

#include <cstdint>
#include <string>

namespace satrap {

// Default: the largest frame a job sends (a dense model's state or a shard's rows in one
// message stay well under this); settable as limits.max_frame_bytes in the manifest.
constexpr uint64_t default_max_frame_bytes = uint64_t{512} << 20;

// Sets the bound; returns "" or why the guard is not in effect.
std::string frame_limit_install(uint64_t max_payload_bytes);

uint64_t frame_limit();
// Frames refused so far (for /metrics).
uint64_t frames_refused();

}  // namespace satrap
