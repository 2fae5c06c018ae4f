// security_probe: an outsider on the cluster's network, for tests/security/security_test.py.
//
//   security_probe handshake HOST PORT [CA CERT KEY]
//       connects with CAF (over TLS with CAF's OpenSSL module when CA is given; with CERT/KEY
//       empty strings, TLS without a client certificate); prints "connected" (exit 0) or
//       "refused: ..." (exit 1).
//   security_probe attack MANIFEST CERTS_DIR
//       with the client certificate of CERTS_DIR (valid, but not a node's and without the admin
//       token) sends every message an attacker would: register as a node, forged heartbeat and
//       progress, nodes/list/get/submit/cancel/checkpoint without the token, bare and forged ticks,
//       exit(kill) to the admin and to each node agent, spawn on each node agent. Prints one line
//       per probe; exit 0 when each was refused (an error reply, or no effect where there is no
//       reply), 1 otherwise.
//   security_probe frames HOST PORT CERTS_DIR
//       opens TLS connections with the client certificate (OpenSSL directly) and sends: garbage
//       bytes, a truncated frame, and a BASP header announcing a 4 GiB payload. Exit 0 when sent.
//   security_probe bigframes HOST PORT CERTS_DIR CONNECTIONS MIB HOLD_S MODE
//       with the client certificate, opens CONNECTIONS connections (BASP by hand) and on each
//       announces a direct message of MIB MiB to an actor id nobody published; MODE `raw`: right
//       after the server's handshake; `handshake`: after our own BASP handshake, then 4 KiB of
//       the payload; `delivered`: after our handshake, the whole payload, 1.5 s before the next
//       connection (so the server has read it). Holds them HOLD_S
//       seconds, then prints "bigframes open=N closed=M" (M: closed by the server). Exit 0, or 2
//       when no connection could be made.
// Threading: one thread (CAF's own aside).
#include "actors/admin/admin.hpp"
#include "actors/type_registry.hpp"
#include "spec/manifest.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

using namespace satrap;

namespace {

struct tls_files {
  std::string ca, cert, key;
};

std::unique_ptr<satrap_config> make_config(const tls_files* tls) {
  auto cfg = std::make_unique<satrap_config>();
  cfg->set("logger.verbosity", caf::atom("quiet"));
  if (tls) {
    cfg->load<caf::openssl::manager>();
    cfg->openssl_cafile = tls->ca;
    cfg->openssl_certificate = tls->cert;
    cfg->openssl_key = tls->key;
  }
  return cfg;
}

// Connects through the (TLS or plain) middleman actor, whatever the remote actor's interface.
caf::expected<caf::strong_actor_ptr> connect(caf::actor_system& sys, const std::string& host,
                                             uint16_t port) {
  auto mm = sys.has_openssl_manager() ? sys.openssl_manager().actor_handle()
                                      : sys.middleman().actor_handle();
  caf::scoped_actor self{sys};
  caf::expected<caf::strong_actor_ptr> out{caf::error{}};
  self->request(mm, std::chrono::seconds(10), caf::connect_atom::value, host, port)
    .receive([&](const caf::node_id&, caf::strong_actor_ptr& p,
                 const std::set<std::string>&) { out = std::move(p); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

SSL* tls_connect(SSL_CTX* ctx, const std::string& host, uint16_t port, int& fd);

// TLS without a client certificate (CAF cannot be configured so): the server's verdict comes
// as an alert on the first read (TLS 1.3).
int handshake_without_certificate(const std::string& host, uint16_t port, const std::string& ca) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  int fd = -1;
  SSL* ssl = tls_connect(ctx, host, port, fd);
  if (!ssl) {
    std::printf("refused: at the handshake: %s\n", ERR_error_string(ERR_get_error(), nullptr));
    return 1;
  }
  char buf[64];
  int n = SSL_read(ssl, buf, sizeof buf);
  if (n > 0) {
    std::printf("connected: the server sent %d bytes\n", n);
    return 0;
  }
  std::printf("refused: %s\n", ERR_error_string(ERR_get_error(), nullptr));
  return 1;
}

int handshake(int argc, char** argv) {
  std::string host = argv[2];
  auto port = static_cast<uint16_t>(std::stoi(argv[3]));
  tls_files tls;
  if (argc >= 7)
    tls = {argv[4], argv[5], argv[6]};
  if (argc >= 7 && tls.cert.empty())
    return handshake_without_certificate(host, port, tls.ca);
  auto cfg = make_config(argc >= 7 ? &tls : nullptr);
  caf::actor_system sys{*cfg};
  auto a = connect(sys, host, port);
  if (a && *a) {
    std::printf("connected\n");
    std::fflush(stdout);
    std::_Exit(0);
  }
  std::printf("refused: %s\n", a ? "no actor" : caf::to_string(a.error()).c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

int failures = 0;

// An error reply is a refusal.
template <class... Ts>
void expect_refused(caf::scoped_actor& self, const caf::actor& to, const char* what, Ts&&... xs) {
  bool refused = false;
  std::string detail = "answered";
  self->request(to, std::chrono::seconds(10), std::forward<Ts>(xs)...)
    .receive([&](caf::message&) {},
             [&](caf::error& e) {
               refused = true;
               detail = self->system().render(e);
             });
  std::printf("%-34s %s (%s)\n", what, refused ? "refused" : "ACCEPTED", detail.c_str());
  failures += refused ? 0 : 1;
}

int attack(char** argv) {
  manifest m;
  if (auto e = manifest_load_file(argv[2], m)) {
    std::cerr << "manifest: " << caf::to_string(e) << "\n";
    return 2;
  }
  std::string dir = argv[3];
  tls_files tls{dir + "/ca.pem", dir + "/client.pem", dir + "/client.key"};
  auto cfg = make_config(&tls);
  caf::actor_system sys{*cfg};
  auto head = connect(sys, m.head.host, m.head.port);
  if (!head || !*head) {
    std::printf("cannot reach the head: %s\n",
                head ? "no actor" : caf::to_string(head.error()).c_str());
    return 2;
  }
  auto admin = caf::actor_cast<caf::actor>(*head);
  caf::scoped_actor self{sys};
  // A node agent of this process, to register in a member's name.
  auto fake_agent = caf::actor_cast<node_agent_actor>(
    sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int) {}}; }));
  auto& victim = m.nodes.front().name;
  expect_refused(self, admin, "register as a member (no token)", register_atom::value,
                 node_info{m.cluster, "0.1.0", victim, fake_agent, ""});
  expect_refused(self, admin, "register as a member (bad token)", register_atom::value,
                 node_info{m.cluster, "0.1.0", victim, fake_agent, std::string(32, '0')});
  expect_refused(self, admin, "nodes without token", nodes_atom::value);
  expect_refused(self, admin, "list without token", list_atom::value, std::string("wrong"));
  expect_refused(self, admin, "get without token", get_atom::value, std::string(""),
                 std::string("j1"));
  expect_refused(self, admin, "submit without token", submit_atom::value, std::string("x"),
                 std::string("name: evil\n"));
  expect_refused(self, admin, "cancel without token", cancel_atom::value, std::string("x"),
                 std::string("j1"));
  expect_refused(self, admin, "checkpoint without token", checkpoint_atom::value, std::string("x"),
                 std::string("j1"));
  // Messages without a reply: counted by the head (checked in /metrics by the test).
  for (int i = 0; i < 1000; ++i) {
    self->send(admin, heartbeat_atom::value, victim, std::vector<actor_stat>{});
    self->send(admin, progress_atom::value, std::string("j1"), job_progress{}, uint64_t(i));
    self->send(admin, tick_atom::value, uint64_t(i));
  }
  self->send(admin, heartbeat_atom::value);  // the old bare tick: not in the interface
  self->send_exit(admin, caf::exit_reason::kill);
  caf::anon_send_exit(admin, caf::exit_reason::kill);
  std::printf("%-34s sent\n", "heartbeats, progress, ticks, exit(kill) to the admin");
  // The node agents: reachable on their own ports.
  for (auto& n : m.nodes) {
    auto a = connect(sys, n.host, n.port);
    if (!a || !*a) {
      std::printf("node %s: cannot connect (%s)\n", n.name.c_str(),
                  a ? "no actor" : caf::to_string(a.error()).c_str());
      ++failures;
      continue;
    }
    auto agent = caf::actor_cast<caf::actor>(*a);
    expect_refused(self, agent, ("spawn on " + n.name).c_str(), spawn_atom::value,
                   shard_atom::value, std::string("name: evil\n"), int32_t{0});
    self->send(agent, head_atom::value, self->node());
    self->send_exit(agent, caf::exit_reason::kill);
    caf::anon_send_exit(agent, caf::exit_reason::kill);
    std::printf("%-34s sent\n", ("head claim, exit(kill) to " + n.name).c_str());
  }
  // Let the one-way messages land before the connections close.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::printf("failures=%d\n", failures);
  std::fflush(stdout);
  std::_Exit(failures == 0 ? 0 : 1);
}

// A TLS connection with the client certificate; nullptr when the handshake failed.
SSL* tls_connect(SSL_CTX* ctx, const std::string& host, uint16_t port, int& fd) {
  fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return nullptr;
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

int frames(char** argv) {
  std::string host = argv[2];
  auto port = static_cast<uint16_t>(std::stoi(argv[3]));
  std::string dir = argv[4];
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr);
  SSL_CTX_use_certificate_chain_file(ctx, (dir + "/client.pem").c_str());
  SSL_CTX_use_PrivateKey_file(ctx, (dir + "/client.key").c_str(), SSL_FILETYPE_PEM);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // A BASP header (32 bytes, network order): direct_message, payload_len 0xffffffff.
  std::vector<unsigned char> big(32, 0);
  big[0] = 2;
  big[4] = big[5] = big[6] = big[7] = 0xff;
  big[31] = 1;
  std::vector<unsigned char> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<unsigned char> truncated(big.begin(), big.begin() + 13);
  int sent = 0;
  for (auto* bytes : {&garbage, &truncated, &big, &big}) {
    int fd = -1;
    SSL* ssl = tls_connect(ctx, host, port, fd);
    if (!ssl) {
      std::printf("tls handshake failed: %s\n", ERR_error_string(ERR_get_error(), nullptr));
      if (fd >= 0)
        ::close(fd);
      continue;
    }
    // The server speaks first (its BASP handshake); read a little, then send.
    char buf[256];
    SSL_read(ssl, buf, sizeof buf);
    if (SSL_write(ssl, bytes->data(), static_cast<int>(bytes->size())) > 0)
      ++sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    SSL_shutdown(ssl);
    SSL_free(ssl);
    ::close(fd);
  }
  std::printf("frames sent=%d\n", sent);
  return sent == 4 ? 0 : 1;
}

}  // namespace

// ---- A BASP peer by hand: OpenSSL for the connection, CAF's own serializer for the frames. ----

struct basp_peer {
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  int fd = -1;
  int last_error = SSL_ERROR_NONE;  // of the last failed SSL_read
  int last_errno = 0;
  // From the server's handshake.
  caf::node_id server_node;
  caf::actor_id published = 0;

  ~basp_peer() {
    if (ssl)
      SSL_free(ssl);
    if (fd >= 0)
      ::close(fd);
  }

  bool read_exact(char* p, size_t n) {
    while (n > 0) {
      int r = SSL_read(ssl, p, static_cast<int>(n));
      if (r <= 0) {
        last_errno = errno;
        last_error = SSL_get_error(ssl, r);
        return false;
      }
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  // One frame; false when the connection ended (or the socket timeout passed).
  bool read_frame(caf::actor_system& sys, caf::io::basp::header& hdr, std::vector<char>& payload) {
    std::vector<char> head(caf::io::basp::header_size);
    if (!read_exact(head.data(), head.size()))
      return false;
    caf::binary_deserializer bd{sys, head};
    if (bd(hdr))
      return false;
    payload.resize(hdr.payload_len);
    return hdr.payload_len == 0 || read_exact(payload.data(), payload.size());
  }

  bool write_frame(caf::actor_system& sys, caf::io::basp::header hdr,
                   const std::vector<char>& payload) {
    hdr.payload_len = static_cast<uint32_t>(payload.size());
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    if (sink(hdr))
      return false;
    buf.insert(buf.end(), payload.begin(), payload.end());
    return SSL_write(ssl, buf.data(), static_cast<int>(buf.size())) == static_cast<int>(buf.size());
  }

  // TLS with the client certificate, then the server's BASP handshake; then ours, claiming
  // `claimed` as our node id (select_connection_flag: "route your traffic for it here").
  std::string open(caf::actor_system& sys, const std::string& dir, const std::string& host,
                   uint16_t port) {
    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr);
    SSL_CTX_use_certificate_chain_file(ctx, (dir + "/client.pem").c_str());
    SSL_CTX_use_PrivateKey_file(ctx, (dir + "/client.key").c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    ssl = tls_connect(ctx, host, port, fd);
    if (!ssl)
      return "tls handshake failed";
    timeval tv{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    caf::io::basp::header hdr;
    std::vector<char> payload;
    if (!read_frame(sys, hdr, payload)
        || hdr.operation != caf::io::basp::message_type::server_handshake)
      return "no server handshake";
    caf::binary_deserializer bd{sys, payload};
    std::vector<std::string> app_ids;
    std::set<std::string> sigs;
    if (bd(server_node, app_ids, published, sigs))
      return "unreadable server handshake";
    return "";
  }

  bool hello(caf::actor_system& sys, const caf::node_id& claimed) {
    std::vector<char> payload;
    caf::binary_serializer sink{sys, payload};
    if (sink(claimed))
      return false;
    caf::io::basp::header hdr{caf::io::basp::message_type::client_handshake,
                              caf::io::basp::header::select_connection_flag,
                              0,
                              0,
                              0,
                              0};
    return write_frame(sys, hdr, payload);
  }

  // A routed message claiming (source, source_actor) as its sender.
  bool routed(caf::actor_system& sys, const caf::node_id& source, caf::actor_id source_actor,
              const caf::node_id& dest, caf::actor_id dest_actor, const caf::message& msg) {
    std::vector<char> payload;
    caf::binary_serializer sink{sys, payload};
    std::vector<caf::strong_actor_ptr> stages;
    if (sink(const_cast<caf::node_id&>(source), const_cast<caf::node_id&>(dest), stages,
             const_cast<caf::message&>(msg)))
      return false;
    caf::io::basp::header hdr{caf::io::basp::message_type::routed_message,
                              0,
                              0,
                              caf::make_message_id().integer_value(),
                              source_actor,
                              dest_actor};
    return write_frame(sys, hdr, payload);
  }

  // Whether the connection is closed by the other side within the socket timeout; counts the
  // frames that arrive meanwhile.
  bool closed_soon(caf::actor_system& sys, int& frames) {
    caf::io::basp::header hdr;
    std::vector<char> payload;
    frames = 0;
    for (;;) {
      if (!read_frame(sys, hdr, payload)) {
        // The socket's receive timeout (nothing more came, the connection is still open) reads
        // as WANT_READ, or as SYSCALL with EAGAIN; anything else is the peer closing it.
        bool timeout = last_error == SSL_ERROR_WANT_READ
                       || (last_error == SSL_ERROR_SYSCALL
                           && (last_errno == EAGAIN || last_errno == EWOULDBLOCK));
        return !timeout;
      }
      if (hdr.operation != caf::io::basp::message_type::heartbeat)
        ++frames;
    }
  }
};

// security_probe basp MANIFEST CERTS_DIR ATTACK: the attacks, with the client
// certificate, as a hand-written BASP peer (claimed node ids learnt from the servers' own
// handshakes). Prints what it did; exit 0 when sent (or, for the claim_* attacks, when the
// connection was refused), 1 when a claim was accepted, 2 when the cluster could not be reached.
//   claim_head     : to the first node, a handshake claiming the head's node id
//   claim_own      : to the head, a handshake claiming the head's own node id
//   claim_node     : to the head, a handshake claiming the first node's node id
//   forged_down    : to the head, a down message of the first node's agent, claiming that node
//   routed_kill    : to the head, exit(kill) for the admin, claiming the admin as its sender
//   forged_heartbeat: to the head, a heartbeat for the first node with a fake role, claiming
//                    the first node's agent as its sender
int basp_attack(char** argv) {
  manifest m;
  if (auto e = manifest_load_file(argv[2], m)) {
    std::cerr << "manifest: " << caf::to_string(e) << "\n";
    return 2;
  }
  std::string dir = argv[3], what = argv[4];
  auto cfg = make_config(nullptr);
  caf::actor_system sys{*cfg};
  auto& victim = m.nodes.front();
  basp_peer head, node;
  if (auto e = head.open(sys, dir, m.head.host, m.head.port); !e.empty()) {
    std::printf("head: %s\n", e.c_str());
    return 2;
  }
  // A node sends its BASP handshake (its node id, its agent's actor id) as soon as the TLS
  // handshake is done, before it reads anything: any holder of a CA-signed certificate learns
  // them.
  if (auto e = node.open(sys, dir, victim.host, victim.port); !e.empty()) {
    std::printf("node %s: %s\n", victim.name.c_str(), e.c_str());
    return 2;
  }
  auto finish = [](bool refused, const std::string& text) {
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
    std::_Exit(refused ? 0 : 1);
  };
  if (what == "claim_head" || what == "claim_own" || what == "claim_node") {
    auto& to = what == "claim_head" ? node : head;
    auto claimed = what == "claim_node" ? node.server_node : head.server_node;
    to.hello(sys, claimed);
    int frames = 0;
    bool closed = to.closed_soon(sys, frames);
    finish(closed, what
                     + (closed ? ": refused (connection closed)"
                               : ": ACCEPTED (connection kept; " + std::to_string(frames)
                                   + " frames for the claimed node received)"));
  }
  // The rest speak to the head, as themselves at the handshake (this process's node id).
  if (!head.hello(sys, sys.node())) {
    std::printf("head: handshake not sent\n");
    return 2;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (what == "forged_down") {
    std::vector<char> payload;
    caf::binary_serializer sink{sys, payload};
    caf::error reason = caf::exit_reason::kill;
    sink(node.server_node, head.server_node, reason);
    caf::io::basp::header hdr{
      caf::io::basp::message_type::down_message, 0, 0, 0, node.published, 0};
    head.write_frame(sys, hdr, payload);
  } else if (what == "routed_kill") {
    head.routed(sys, head.server_node, head.published, head.server_node, head.published,
                caf::make_message(caf::exit_msg{caf::actor_addr{}, caf::exit_reason::kill}));
  } else if (what == "forged_heartbeat") {
    // For 4 s, ten a second: the node's own heartbeats (one a second) replace the actor list,
    // so the fake one shows in /status between them (the test polls it meanwhile).
    std::vector<actor_stat> fake{{"forged_role", 7, "forged_job", 1, 0}};
    for (int i = 0; i < 40; ++i) {
      head.routed(sys, node.server_node, node.published, head.server_node, head.published,
                  caf::make_message(heartbeat_atom::value, victim.name, fake));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    std::printf("unknown attack %s\n", what.c_str());
    return 2;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  finish(true, what + ": sent");
  return 0;
}

int big_frames(char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a connection the server closed fails a write, not the probe
  std::string host = argv[2], dir = argv[4], mode = argv[8];
  auto port = static_cast<uint16_t>(std::stoi(argv[3]));
  int connections = std::stoi(argv[5]), hold_s = std::stoi(argv[7]);
  uint64_t bytes = std::stoull(argv[6]) << 20;
  auto cfg = make_config(nullptr);
  caf::actor_system sys{*cfg};
  std::vector<std::unique_ptr<basp_peer>> peers;
  std::vector<char> chunk(1 << 20, 'x');
  for (int i = 0; i < connections; ++i) {
    auto p = std::make_unique<basp_peer>();
    if (auto e = p->open(sys, dir, host, port); !e.empty()) {
      std::printf("connection %d: %s\n", i, e.c_str());
      continue;
    }
    if (mode != "raw" && !p->hello(sys, sys.node()))
      std::printf("connection %d: handshake not sent\n", i);
    std::vector<char> head;
    caf::binary_serializer sink{sys, head};
    caf::io::basp::header hdr{
      caf::io::basp::message_type::direct_message, 0, static_cast<uint32_t>(bytes),
      caf::make_message_id().integer_value(),      0, 987654321};
    if (sink(hdr))
      return 2;
    bool ok = SSL_write(p->ssl, head.data(), static_cast<int>(head.size())) > 0;
    uint64_t body = mode == "delivered" ? bytes : (mode == "handshake" ? 4096 : 0);
    for (uint64_t sent = 0; ok && sent < body;) {
      auto n = static_cast<int>(std::min<uint64_t>(chunk.size(), body - sent));
      ok = SSL_write(p->ssl, chunk.data(), n) == n;
      sent += static_cast<uint64_t>(n);
    }
    if (!ok)
      std::printf("connection %d: closed while sending\n", i);
    peers.push_back(std::move(p));
    // Delivered frames one after another: the server has read this one before the next comes.
    if (mode == "delivered")
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  if (peers.empty())
    return 2;
  std::printf("bigframes sent connections=%zu\n", peers.size());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  int closed = 0;
  for (auto& p : peers) {
    timeval tv{0, 200000};
    ::setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int frames = 0;
    if (p->closed_soon(sys, frames))
      ++closed;
  }
  std::printf("bigframes open=%zu closed=%d\n", peers.size() - static_cast<size_t>(closed), closed);
  std::fflush(stdout);
  std::_Exit(0);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "handshake" && argc >= 4)
    return handshake(argc, argv);
  if (mode == "attack" && argc == 4)
    return attack(argv);
  if (mode == "frames" && argc == 5)
    return frames(argv);
  if (mode == "bigframes" && argc == 9)
    return big_frames(argv);
  if (mode == "basp" && argc == 5)
    return basp_attack(argv);
  std::cerr
    << "usage: security_probe handshake HOST PORT [CA CERT KEY] | attack MANIFEST "
       "CERTS_DIR | frames HOST PORT CERTS_DIR | basp MANIFEST CERTS_DIR ATTACK | bigframes HOST "
       "PORT CERTS_DIR CONNECTIONS MIB HOLD_S raw|handshake|delivered\n";
  return 2;
}
