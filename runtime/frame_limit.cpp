#include "runtime/frame_limit.hpp"

#include "runtime/log.hpp"
#include "runtime/peer_identity.hpp"

#include <caf/io/basp/header.hpp>
#include <caf/io/basp/instance.hpp>
#include <caf/io/basp_broker.hpp>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace satrap {

namespace {

std::atomic<uint64_t> limit{default_max_frame_bytes};
std::atomic<uint64_t> refused{0};

// Frames at most this large, on a connection past its BASP handshake, are not counted against
// their peer's budget (a peer's 32 connections hold at most 2 MiB of them).
constexpr uint64_t small_frame_bytes = uint64_t{64} << 10;

constexpr const char* valid_symbol = "_ZN3caf2io4basp5validERKNS1_6headerE";
constexpr const char* data_symbol =
  "_ZN3caf2io4basp8instance6handleEPNS_14execution_unitERNS0_12new_data_msgERNS1_6headerEb";
constexpr const char* cleanup_symbol =
  "_ZN3caf2io11basp_broker18connection_cleanupENS0_17connection_handleENS_3secE";

using valid_fn = bool (*)(const caf::io::basp::header&);
using data_fn = caf::io::basp::connection_state (*)(caf::io::basp::instance*, caf::execution_unit*,
                                                    caf::io::new_data_msg&, caf::io::basp::header&,
                                                    bool);
using cleanup_fn = void (*)(caf::io::basp_broker*, caf::io::connection_handle, caf::sec);

template <class Fn>
Fn next(const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, symbol));
}

valid_fn original() {
  static valid_fn fn = next<valid_fn>(valid_symbol);
  return fn;
}

data_fn original_data() {
  static data_fn fn = next<data_fn>(data_symbol);
  return fn;
}

cleanup_fn original_cleanup() {
  static cleanup_fn fn = next<cleanup_fn>(cleanup_symbol);
  return fn;
}

// The address of a non-virtual member function, as the dynamic linker sees it.
template <class M>
void* member_address(M m) {
  void* p = nullptr;
  static_assert(sizeof(M) >= sizeof(void*));
  std::memcpy(&p, &m, sizeof p);
  return p;
}

enum reason : size_t { r_budget, r_handshake_frame, r_connections, r_count };
constexpr std::array<const char*, r_count> reason_names{"frame_budget", "handshake_frame",
                                                        "peer_connections"};

struct connection {
  std::string peer;      // "CN@address" or "address"
  uint64_t pending = 0;  // payload bytes announced by its last header, not yet delivered
};

struct peer_state {
  uint64_t pending = 0;
  size_t connections = 0;
};

struct budget {
  std::mutex mtx;
  std::unordered_map<int64_t, connection> by_connection;
  std::unordered_map<std::string, peer_state> by_peer;
  uint64_t pending = 0;
  std::array<std::atomic<uint64_t>, r_count> refused{};
};

budget& bst() {
  static budget b;
  return b;
}

log_rate& refusal_log() {
  static log_rate rate{10};
  return rate;
}

std::string remote_address(int64_t fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return "unknown";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  else
    return "local";
  return buf;
}

void forget_locked(budget& b, int64_t hdl) {
  auto it = b.by_connection.find(hdl);
  if (it == b.by_connection.end())
    return;
  auto p = b.by_peer.find(it->second.peer);
  if (p != b.by_peer.end()) {
    p->second.pending -= it->second.pending;
    if (--p->second.connections == 0)
      b.by_peer.erase(p);
  }
  b.pending -= it->second.pending;
  b.by_connection.erase(it);
}

bool refuse(reason r, int64_t hdl, const std::string& peer, uint64_t bytes, uint64_t held,
            size_t connections) {
  auto n = ++bst().refused[r];
  uint64_t unlogged = 0;
  if (refusal_log().allow(unlogged))
    spdlog::warn(
      "peer_refused reason={} connection={} peer={} payload_bytes={} "
      "peer_pending_bytes={} peer_connections={} limit_bytes={} refused_total={} "
      "unlogged_before={}",
      reason_names[r], hdl, peer, bytes, held, connections, limit.load(), n, unlogged);
  return false;
}

// A header announcing `bytes` of payload arrived on `hdl`; false: close the connection.
bool announced(int64_t hdl, uint64_t bytes, bool handshaken) {
  auto& b = bst();
  std::lock_guard<std::mutex> lock{b.mtx};
  auto it = b.by_connection.find(hdl);
  if (it == b.by_connection.end()) {
    // A connection's first frame: whose is it?
    auto address = remote_address(hdl);
    auto cn = peer_connection_certificate(hdl);
    connection c{cn.empty() ? address : cn + "@" + address, 0};
    auto& p = b.by_peer[c.peer];
    if (p.connections >= max_connections_per_peer) {
      auto held = p.pending;
      auto conns = p.connections;
      if (conns == 0)
        b.by_peer.erase(c.peer);
      return refuse(r_connections, hdl, c.peer, bytes, held, conns);
    }
    ++p.connections;
    it = b.by_connection.emplace(hdl, std::move(c)).first;
  }
  auto& c = it->second;
  auto& p = b.by_peer[c.peer];
  // A header while a payload is pending cannot happen on one connection; stay exact anyway.
  p.pending -= c.pending;
  b.pending -= c.pending;
  c.pending = 0;
  if (!handshaken && bytes > handshake_frame_bytes) {
    auto peer = c.peer;
    auto held = p.pending;
    auto conns = p.connections;
    forget_locked(b, hdl);
    return refuse(r_handshake_frame, hdl, peer, bytes, held, conns);
  }
  if (p.pending + bytes > limit.load(std::memory_order_relaxed)) {
    auto peer = c.peer;
    auto held = p.pending;
    auto conns = p.connections;
    forget_locked(b, hdl);
    return refuse(r_budget, hdl, peer, bytes, held, conns);
  }
  c.pending = bytes;
  p.pending += bytes;
  b.pending += bytes;
  return true;
}

void delivered(int64_t hdl) {
  auto& b = bst();
  std::lock_guard<std::mutex> lock{b.mtx};
  auto it = b.by_connection.find(hdl);
  if (it == b.by_connection.end() || it->second.pending == 0)
    return;
  if (auto p = b.by_peer.find(it->second.peer); p != b.by_peer.end())
    p->second.pending -= it->second.pending;
  b.pending -= it->second.pending;
  it->second.pending = 0;
}

void closed(int64_t hdl) {
  auto& b = bst();
  std::lock_guard<std::mutex> lock{b.mtx};
  forget_locked(b, hdl);
}

}  // namespace

std::string frame_limit_install(uint64_t max_payload_bytes) {
  limit = max_payload_bytes;
  if (!original() || !original_data() || !original_cleanup())
    return "libcaf_io's caf::io::basp::valid, basp::instance::handle or "
           "basp_broker::connection_cleanup was not found: frames are not bounded";
  // The executable's definitions must be the ones the dynamic linker resolves.
  if (dlsym(RTLD_DEFAULT, valid_symbol)
        != reinterpret_cast<void*>(static_cast<valid_fn>(&caf::io::basp::valid))
      || dlsym(RTLD_DEFAULT, data_symbol)
           != member_address(
             static_cast<caf::io::basp::connection_state (caf::io::basp::instance::*)(
               caf::execution_unit*, caf::io::new_data_msg&, caf::io::basp::header&, bool)>(
               &caf::io::basp::instance::handle))
      || dlsym(RTLD_DEFAULT, cleanup_symbol)
           != member_address(&caf::io::basp_broker::connection_cleanup))
    return "the frame bounds are not interposed on libcaf_io: frames are not bounded";
  return "";
}

uint64_t frame_limit() { return limit; }

uint64_t frames_refused() { return refused; }

std::vector<std::pair<std::string, uint64_t>> frame_peer_refusals() {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t r = 0; r < r_count; ++r)
    out.emplace_back(reason_names[r], bst().refused[r].load());
  return out;
}

uint64_t frame_pending_bytes() {
  auto& b = bst();
  std::lock_guard<std::mutex> lock{b.mtx};
  return b.pending;
}

}  // namespace satrap

// The interposed checks (see frame_limit.hpp).
namespace caf::io {

namespace basp {

bool valid(const header& hdr) {
  if (hdr.payload_len > satrap::limit.load(std::memory_order_relaxed)) {
    auto n = ++satrap::refused;
    if (n <= 10 || n % 1000 == 0)
      spdlog::warn("frame_refused payload_bytes={} limit_bytes={} refused_total={}",
                   hdr.payload_len, satrap::limit.load(), n);
    return false;
  }
  auto fn = satrap::original();
  return fn ? fn(hdr) : false;
}

connection_state instance::handle(execution_unit* ctx, new_data_msg& dm, header& hdr,
                                  bool is_payload) {
  auto fn = satrap::original_data();
  auto hdl = dm.handle.id();
  if (is_payload) {
    // The header's decision (announced): a handshaken connection's small frames are not counted.
    if (hdr.payload_len > satrap::small_frame_bytes || !tbl().lookup_direct(dm.handle))
      satrap::delivered(hdl);
    auto result = fn(this, ctx, dm, hdr, true);
    // dm.buf is the connection's receive buffer (swapped in by the scribe): CAF would keep it
    // at this frame's size until the connection closes.
    if (dm.buf.capacity() > satrap::retained_buffer_bytes)
      std::vector<char>().swap(dm.buf);
    return result;
  }
  auto result = fn(this, ctx, dm, hdr, false);
  if (result != await_payload)
    return result;
  bool handshaken = static_cast<bool>(tbl().lookup_direct(dm.handle));
  // Small frames of a handshaken connection pass uncounted (most messages: no lock taken); a
  // connection's first frames (its handshake) are counted, so its peer's connections are.
  if (handshaken && hdr.payload_len <= satrap::small_frame_bytes)
    return result;
  return satrap::announced(hdl, hdr.payload_len, handshaken) ? result : close_connection;
}

}  // namespace basp

void basp_broker::connection_cleanup(connection_handle hdl, sec code) {
  satrap::closed(hdl.id());
  satrap::original_cleanup()(this, hdl, code);
}

}  // namespace caf::io
