#include "runtime/peer_identity.hpp"

#include "runtime/frame_limit.hpp"
#include "runtime/log.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/io/basp/instance.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace satrap {

namespace {

constexpr const char* handle_symbol =
  "_ZN3caf2io4basp8instance6handleEPNS_14execution_unitENS0_17connection_handleERNS1_6headerEPSt6"
  "vectorIcSaIcEE";

using handle_fn = caf::io::basp::connection_state (*)(caf::io::basp::instance*,
                                                      caf::execution_unit*,
                                                      caf::io::connection_handle,
                                                      caf::io::basp::header&, std::vector<char>*);

handle_fn original() {
  static handle_fn fn = reinterpret_cast<handle_fn>(dlsym(RTLD_NEXT, handle_symbol));
  return fn;
}

enum class role_kind { none, head, node, client };

role_kind kind_of(const std::string& cn) {
  if (cn == "head")
    return role_kind::head;
  if (cn == "client")
    return role_kind::client;
  if (cn.rfind("node-", 0) == 0 && cn.size() > 5)
    return role_kind::node;
  return role_kind::none;
}

struct tls_peer {
  const void* ssl = nullptr;
  std::string cn, ou;
  bool verified = false;  // a certificate was read (cn may still name no role)
  role_kind kind = role_kind::none;
};

// Reasons, in the order /metrics lists them.
enum reason : size_t {
  r_no_certificate,  // a BASP message on a connection without a verified certificate
  r_role,            // the certificate's role may not talk to this process
  r_cluster,         // the certificate names another cluster
  r_own_id,          // a handshake claiming this process's node id
  r_known_id,        // a handshake claiming a node id connected under another certificate
  r_rebind,          // a second handshake on a connection, for another node id
  r_no_handshake,    // a message before the connection's handshake
  r_source,          // a routed/monitor/down message whose source is not the connection's peer
  r_relay,           // a message for another process, sent to a node (only the head relays)
  r_client_scope,    // the client certificate, outside the published actors
  r_count
};
constexpr std::array<const char*, r_count> reason_names{
  "no_certificate", "role",         "cluster", "own_id", "known_id",
  "rebind",         "no_handshake", "source",  "relay",  "client_scope"};

struct state {
  std::atomic<bool> enabled{false};
  std::string own_role;
  std::string cluster;
  role_kind own_kind = role_kind::none;
  std::mutex mtx;
  std::unordered_map<int64_t, tls_peer> by_fd;  // verified certificate per socket
  std::map<caf::node_id, std::string> by_node;  // certificate role per connected node id
  std::array<std::atomic<uint64_t>, r_count> refused{};
};

state& st() {
  static state s;
  return s;
}

log_rate& refusal_log() {
  static log_rate rate{10};
  return rate;
}

void log_refusal(reason r, int64_t hdl, const std::string& detail) {
  auto n = ++st().refused[r];
  uint64_t unlogged = 0;
  if (refusal_log().allow(unlogged))
    spdlog::warn("peer_refused reason={} connection={} {} refused_total={} unlogged_before={}",
                 reason_names[r], hdl, detail, n, unlogged);
}

bool allowed(role_kind own, const std::string& own_role, const tls_peer& p) {
  auto k = kind_of(p.cn);
  switch (own) {
    case role_kind::head: return k == role_kind::node || k == role_kind::client;
    case role_kind::node: return k == role_kind::head || (k == role_kind::node && p.cn != own_role);
    case role_kind::client: return k == role_kind::head;
    case role_kind::none: return false;
  }
  return false;
}

// The claimed node id at the front of a payload (handshakes: the sender's; routed, monitor and
// down messages: the source, then the destination).
bool read_nodes(caf::execution_unit* ctx, const std::vector<char>* payload, caf::node_id& first,
                caf::node_id* second) {
  if (!payload)
    return false;
  caf::binary_deserializer bd{ctx, payload->data(), payload->size()};
  if (second)
    return !bd(first, *second);
  return !bd(first);
}

bool published_id(const caf::io::basp::instance::published_actor_map& published, uint64_t id) {
  for (auto& kvp : published)
    if (kvp.second.first && kvp.second.first->id() == id)
      return true;
  return false;
}

}  // namespace

std::string peer_identity_install(const std::string& own_role, const std::string& cluster) {
  if (!original())
    return "libcaf_io's caf::io::basp::instance::handle was not found: peers are not bound to "
           "their certificates";
  auto* self = dlsym(RTLD_DEFAULT, handle_symbol);
  using member = caf::io::basp::connection_state (caf::io::basp::instance::*)(
    caf::execution_unit*, caf::io::connection_handle, caf::io::basp::header&, std::vector<char>*);
  member mine = &caf::io::basp::instance::handle;
  void* mine_ptr = nullptr;
  static_assert(sizeof(member) >= sizeof(void*));
  std::memcpy(&mine_ptr, &mine, sizeof mine_ptr);  // a non-virtual member: its address first
  if (self != mine_ptr)
    return "the BASP identity check is not interposed on libcaf_io: peers are not bound to "
           "their certificates";
  auto& s = st();
  {
    std::lock_guard<std::mutex> lock{s.mtx};
    s.own_role = own_role;
    s.cluster = cluster;
    s.own_kind = kind_of(own_role);
  }
  s.enabled = true;
  return "";
}

bool peer_identity_enabled() { return st().enabled.load(std::memory_order_relaxed); }

std::string peer_certificate(const caf::node_id& node) {
  auto& s = st();
  if (!s.enabled)
    return "";
  std::lock_guard<std::mutex> lock{s.mtx};
  auto it = s.by_node.find(node);
  return it == s.by_node.end() ? std::string() : it->second;
}

bool peer_holds(const caf::node_id& node, const std::string& role) {
  return !peer_identity_enabled() || (node && peer_certificate(node) == role);
}

std::vector<std::pair<std::string, uint64_t>> peer_refusals() {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t r = 0; r < r_count; ++r)
    out.emplace_back(reason_names[r], st().refused[r].load());
  for (auto& kvp : frame_peer_refusals())
    out.push_back(std::move(kvp));
  return out;
}

std::string peer_connection_certificate(int64_t connection) {
  auto& s = st();
  std::lock_guard<std::mutex> lock{s.mtx};
  auto it = s.by_fd.find(connection);
  return it != s.by_fd.end() && it->second.verified ? it->second.cn : std::string();
}

void peer_identity_tls_established(void* p) {
  auto* ssl = static_cast<SSL*>(p);
  tls_peer peer{ssl, "", ""};
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    if (X509* cert = SSL_get1_peer_certificate(ssl)) {
      char buf[256];
      auto* name = X509_get_subject_name(cert);
      if (X509_NAME_get_text_by_NID(name, NID_commonName, buf, sizeof buf) > 0)
        peer.cn = buf;
      if (X509_NAME_get_text_by_NID(name, NID_organizationalUnitName, buf, sizeof buf) > 0)
        peer.ou = buf;
      X509_free(cert);
      peer.verified = !peer.cn.empty();
      peer.kind = kind_of(peer.cn);
    }
  }
  auto fd = SSL_get_fd(ssl);
  if (fd < 0)
    return;
  auto& s = st();
  std::lock_guard<std::mutex> lock{s.mtx};
  s.by_fd[fd] = std::move(peer);
}

void peer_identity_tls_freed(void* p) {
  auto* ssl = static_cast<SSL*>(p);
  auto fd = SSL_get_fd(ssl);
  if (fd < 0)
    return;
  auto& s = st();
  std::lock_guard<std::mutex> lock{s.mtx};
  if (auto it = s.by_fd.find(fd); it != s.by_fd.end() && it->second.ssl == ssl)
    s.by_fd.erase(it);
}

}  // namespace satrap

// The interposed BASP entry point (see peer_identity.hpp).
namespace caf::io::basp {

connection_state instance::handle(execution_unit* ctx, connection_handle hdl, header& hdr,
                                  std::vector<char>* payload) {
  using namespace satrap;
  auto& s = st();
  auto fn = original();
  if (!s.enabled.load(std::memory_order_relaxed))
    return fn(this, ctx, hdl, hdr, payload);
  if (hdr.operation == message_type::heartbeat)
    return fn(this, ctx, hdl, hdr, payload);
  // Per message only the role's kind is copied; the names only for handshakes and refusals.
  tls_peer peer;
  bool handshake = is_handshake(hdr);
  {
    std::lock_guard<std::mutex> lock{s.mtx};
    auto it = s.by_fd.find(hdl.id());
    if (it != s.by_fd.end()) {
      peer.verified = it->second.verified;
      peer.kind = it->second.kind;
      if (handshake || !peer.verified || peer.kind == role_kind::client) {
        peer.cn = it->second.cn;
        peer.ou = it->second.ou;
      }
    }
  }
  auto refuse = [&](reason r, const std::string& detail) {
    log_refusal(r, hdl.id(),
                "peer_certificate=" + (peer.cn.empty() ? "none" : peer.cn) + " " + detail);
    return close_connection;
  };
  auto drop = [&](reason r, const std::string& detail) {
    if (peer.cn.empty()) {
      std::lock_guard<std::mutex> lock{s.mtx};
      if (auto it = s.by_fd.find(hdl.id()); it != s.by_fd.end())
        peer.cn = it->second.cn;
    }
    log_refusal(r, hdl.id(), "peer_certificate=" + peer.cn + " " + detail);
    return await_header;
  };
  if (!peer.verified)
    return refuse(r_no_certificate, "");
  auto kind = peer.kind;
  auto bound = tbl().lookup_direct(hdl);  // the node id this connection's handshake bound
  if (handshake) {
    if (peer.ou != s.cluster)
      return refuse(r_cluster, "peer_cluster=" + peer.ou);
    if (!allowed(s.own_kind, s.own_role, peer))
      return refuse(r_role, "own_certificate=" + s.own_role);
    node_id claimed;
    if (!read_nodes(ctx, payload, claimed, nullptr))
      return fn(this, ctx, hdl, hdr, payload);  // CAF refuses the malformed handshake
    if (claimed == this_node())
      return refuse(r_own_id, "claimed=" + to_string(claimed));
    if (bound && bound != claimed)
      return refuse(r_rebind, "bound=" + to_string(bound) + " claimed=" + to_string(claimed));
    if (tbl().lookup_direct(claimed)) {
      std::string holder;
      {
        std::lock_guard<std::mutex> lock{s.mtx};
        if (auto it = s.by_node.find(claimed); it != s.by_node.end())
          holder = it->second;
      }
      // The same certificate may connect again (a second connection between two nodes that
      // dialled each other at once); any other is an impostor.
      if (holder != peer.cn)
        return refuse(r_known_id, "claimed=" + to_string(claimed) + " held_by=" + holder);
      // CAF 0.17 would make such a second connection the node's route without entering it as
      // a route of its own (select_connection_flag: select_alternative, no add_alternative), so
      // its messages would have no bound node and the route would die with it. Taken as an
      // alternative route instead: bound to the same node, the first connection stays the route.
      if (hdr.operation == message_type::client_handshake)
        hdr.flags &= static_cast<uint8_t>(~header::select_connection_flag);
    }
    auto result = fn(this, ctx, hdl, hdr, payload);
    if (tbl().lookup_direct(hdl) == claimed) {
      std::lock_guard<std::mutex> lock{s.mtx};
      s.by_node[claimed] = peer.cn;
    }
    return result;
  }
  if (!bound)
    return refuse(r_no_handshake, "operation=" + to_string(hdr.operation));
  switch (hdr.operation) {
    case message_type::direct_message:
      if (kind == role_kind::client) {
        // CAF's own chatter on every new connection (each side asks the other's SpawnServ, a
        // named actor, for its ConfigServ, and answers): dropped without a refusal, so a
        // legitimate client moves no counter. Anything else outside the admin is counted.
        bool spawn_serv = hdr.has(header::named_receiver_flag)
                          && hdr.dest_actor == static_cast<uint64_t>(caf::atom("SpawnServ"));
        bool response = (hdr.operation_data & caf::message_id::response_flag_mask) != 0;
        if (spawn_serv
            || (response && !hdr.has(header::named_receiver_flag)
                && !published_id(published_actors(), hdr.dest_actor)))
          return await_header;
        if (hdr.has(header::named_receiver_flag))
          return drop(r_client_scope, "named_receiver");
        if (!published_id(published_actors(), hdr.dest_actor))
          return drop(r_client_scope, "dest_actor=" + std::to_string(hdr.dest_actor));
      }
      return fn(this, ctx, hdl, hdr, payload);
    case message_type::routed_message:
    case message_type::monitor_message:
    case message_type::down_message: {
      node_id source, dest;
      if (!read_nodes(ctx, payload, source, &dest))
        return fn(this, ctx, hdl, hdr, payload);  // CAF refuses the malformed payload
      if (kind == role_kind::client && hdr.operation == message_type::routed_message)
        return drop(r_client_scope, "routed");
      if (dest != this_node() && (s.own_kind != role_kind::head || kind == role_kind::client))
        return drop(r_relay, "dest=" + to_string(dest));
      // The head relays only what it checked on the way in (source == its peer).
      if (source != bound && !(kind == role_kind::head && dest == this_node()))
        return drop(r_source, "operation=" + to_string(hdr.operation)
                                + " claimed=" + to_string(source) + " peer=" + to_string(bound));
      return fn(this, ctx, hdl, hdr, payload);
    }
    default: return fn(this, ctx, hdl, hdr, payload);
  }
}

}  // namespace caf::io::basp
