// frame_limit: bounds on the memory CAF (BASP) frames can make a process allocate, checked before
// CAF allocates it: per frame, and per peer.
//
// CAF 0.17 reads a BASP header (fixed size), then resizes its receive buffer to the header's
// payload_len (up to 4 GiB) before anything else looks at the frame: one 32-byte header made a
// process allocate 4 GB. CAF has no option for this. libcaf_io checks every header it reads with
// caf::io::basp::valid(const header&), called through the PLT; frame_limit.cpp defines that symbol
// in the satrap executable, so the dynamic linker binds libcaf_io's calls to it (ELF symbol
// interposition). It refuses a header whose payload_len exceeds the limit and otherwise returns
// libcaf_io's own verdict (looked up with dlsym(RTLD_NEXT)). A refused header makes CAF close the
// connection (malformed_basp_message) before any allocation.
//
// A bound per frame is not one per peer: 3 connections from one client announcing 511 MiB each
// took the head to 1.6 GB, and a delivered frame's buffer stayed allocated as long as its
// connection. So frame_limit.cpp also interposes libcaf_io's
// basp::instance::handle(ctx, new_data_msg&, header&, bool) (which reads each header and payload
// of a connection) and basp_broker::connection_cleanup (a connection's end), and:
//  - before a connection's BASP handshake, refuses frames over handshake_frame_bytes (a handshake
//    is a few hundred bytes; nobody unidentified makes the process allocate more);
//  - counts, per peer, the payload bytes announced by headers and not yet delivered over all its
//    connections, and refuses (closes) a connection whose header would take its peer past the
//    per-frame limit (so a peer holds at most one largest frame in flight, however many
//    connections it opens); frames of at most 64 KiB after the handshake are not counted (no
//    lock for most messages);
//  - refuses a peer's connection past max_connections_per_peer open at once;
//  - after a payload over retained_buffer_bytes is handled, frees the connection's receive
//    buffer (CAF would keep it at the largest frame's size until the connection closes).
// A peer is the verified certificate's CN (runtime/peer_identity.hpp) at the remote IP address
// (`node-a@10.0.0.5`), or the IP address alone without TLS.
// Refusals are counted in peer_refusals() (`satrap_peer_refused_total{reason=frame_budget|
// handshake_frame|peer_connections}`) and logged at most 10 lines a second.
// frame_limit_install() must be called once by every process that opens CAF connections (it
// also checks that the interpositions are in effect).
// Threading: the limit is an atomic; the hooks run on CAF's multiplexer thread; the per-peer
// tables are behind one mutex.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace satrap {

// Default: the largest frame a job sends (a dense model's state or a shard's rows in one
// message stay well under this); settable as security.max_frame_bytes in the manifest. It is
// also each peer's budget of announced, undelivered payload bytes.
constexpr uint64_t default_max_frame_bytes = uint64_t{512} << 20;
// The largest frame accepted before a connection's BASP handshake completed (CAF's handshakes
// carry a node id, application ids and a published actor's interface: well under this).
constexpr uint64_t handshake_frame_bytes = uint64_t{1} << 20;
// Connections one peer may hold open to a process at once (a node holds one or two, each CLI
// call one while it runs).
constexpr size_t max_connections_per_peer = 32;
// A connection's receive buffer is freed after a payload larger than this (smaller ones keep
// it, so the common small frames reuse one allocation).
constexpr uint64_t retained_buffer_bytes = uint64_t{2} << 20;

// Sets the bound; returns "" or why the guard is not in effect.
std::string frame_limit_install(uint64_t max_payload_bytes);

uint64_t frame_limit();
// Frames refused so far (for /metrics).
uint64_t frames_refused();

// Refusals of the per-peer bounds so far, by reason (listed by peer_refusals()).
std::vector<std::pair<std::string, uint64_t>> frame_peer_refusals();

// Announced, undelivered payload bytes of all peers now (for tests and /metrics).
uint64_t frame_pending_bytes();

}  // namespace satrap
