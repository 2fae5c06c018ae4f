// peer_identity: a CAF peer is the holder of the TLS certificate it connected with, not the node
// id it claims.
//
// CAF 0.17 takes a peer's word for its node id: in its BASP handshake, and in the source node of
// every routed, monitor and down message. Every identity check above (the admin's, the node
// agents') compares node ids, so a peer that claims another process's id (the head's, a node's,
// or the receiver's own) could speak as it. peer_identity.cpp binds each node id to the
// certificate of the connection that introduced it and checks every incoming BASP message against
// that binding, before CAF handles it:
//  - the TLS wrappers (runtime/tls_guard.cpp) record, per socket, the verified peer certificate's
//    CN (role: `head`, `node-<name>`, `client`) and OU (cluster) when a handshake completes;
//  - peer_identity.cpp defines caf::io::basp::instance::handle(ctx, connection_handle, header&,
//    payload*) in the executable (ELF interposition, as runtime/frame_limit.hpp does for
//    basp::valid; libcaf_io calls it through the PLT) and calls libcaf_io's own after the checks:
//    * handshakes: refused (connection closed) when the certificate's role may not talk to this
//      process (a node takes the head and other nodes; the head takes nodes and the client; the
//      client takes only the head), when it names another cluster, when the claimed node id is
//      this process's own, or when it is already connected under another certificate;
//    * routed, monitor and down messages: dropped when their claimed source node is not the
//      connection's peer (except what the head relays: it checked the source on its way in), and
//      not relayed by a node;
//    * the client certificate reaches only the actors this process published (the admin), with
//      direct messages and its own monitor/down messages;
//    * any other message on a connection without a completed handshake closes it.
//  - peer_certificate(node) then tells actors which certificate a sender's process holds.
// Everything is off until peer_identity_install() (called with TLS on): without TLS no peer has
// an identity to check (README "Security").
// Threading: the BASP checks run on CAF's multiplexer thread; the tables are behind one mutex;
// the counters are atomics.
#pragma once

#include <caf/node_id.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace satrap {

// This process's certificate role (its CN) and cluster (its OU). Returns "" or why the checks are
// not in effect (the interposition not resolved).
std::string peer_identity_install(const std::string& own_role, const std::string& cluster);

bool peer_identity_enabled();

// The certificate role (CN) that `node` connected with directly; "" when the checks are off or
// the node never completed a handshake here (this process's own node id included).
std::string peer_certificate(const caf::node_id& node);

// True when the checks are off (no identities to compare), or `node`'s certificate is `role`.
bool peer_holds(const caf::node_id& node, const std::string& role);

// The verified certificate's CN of the TLS connection `connection` (a CAF connection handle: its
// socket); "" without TLS or before its handshake completed.
std::string peer_connection_certificate(int64_t connection);

// Refused handshakes and dropped messages so far, by reason (for /metrics), then the per-peer
// frame bounds' refusals (runtime/frame_limit.hpp).
std::vector<std::pair<std::string, uint64_t>> peer_refusals();

// Called by the TLS wrappers (tls_guard.cpp): a handshake completed on `ssl`, or `ssl` is freed.
void peer_identity_tls_established(void* ssl);
void peer_identity_tls_freed(void* ssl);

}  // namespace satrap
