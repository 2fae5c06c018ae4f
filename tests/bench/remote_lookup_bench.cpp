// Embedding lookups between two processes (CAF middleman over loopback TCP) against a raw TCP
// loopback copy of the same bytes, measured in one run, interleaved.
//
// A child process runs an embedding_shard behind `publish`; the parent asks it for rows of
// batches of unique ids (LookupRequest -> EmbeddingRows, the aggregator's request) and times the
// bytes that cross: ids out, rows back. The reference sends the same request and reply sizes over
// a plain TCP socket pair between the same two processes (a child echoing a reply of the rows'
// size). Last line: key=value pairs, lookup_ratio = remote lookup bytes/s over raw TCP bytes/s.
// usage: remote_lookup_bench [ids_per_request=65536] [requests=40] [reps=5] [dim=16]
#include "actors/embedding_shard/embedding_shard.hpp"
#include "actors/type_registry.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace satrap;
using clock_type = std::chrono::steady_clock;

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    auto k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0)
      std::exit(1);
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    auto k = ::recv(fd, p, n, 0);
    if (k <= 0)
      std::exit(1);
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Raw TCP: a child that answers every request of `req` bytes with `rep` bytes.
double raw_tcp_bytes_per_sec(uint16_t port, size_t req, size_t rep, int requests) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 1) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  auto pid = ::fork();
  if (pid == 0) {
    int fd = ::accept(lfd, nullptr, nullptr);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<char> in(req), out(rep, 1);
    for (int i = 0; i < requests; ++i) {
      read_all(fd, in.data(), req);
      write_all(fd, out.data(), rep);
    }
    std::_Exit(0);
  }
  ::close(lfd);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  while (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    ::usleep(1000);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> out(req, 2), in(rep);
  auto t0 = clock_type::now();
  for (int i = 0; i < requests; ++i) {
    write_all(fd, out.data(), req);
    read_all(fd, in.data(), rep);
  }
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  ::close(fd);
  ::waitpid(pid, nullptr, 0);
  return static_cast<double>(req + rep) * requests / secs;
}

capnp_payload lookup_request(const std::vector<uint64_t>& ids) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<schema::LookupRequest>();
  r.setIds(data_of(ids));
  return payload_encode(mb);
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;
  int requests = argc > 2 ? std::atoi(argv[2]) : 40;
  int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  int dim = argc > 4 ? std::atoi(argv[4]) : 16;
  auto base = static_cast<uint16_t>(40000 + getpid() % 10000);
  // The shard process.
  auto shard_pid = ::fork();
  if (shard_pid == 0) {
    satrap_config cfg;
    caf::actor_system sys{cfg};
    embedding_shard_config c;
    c.embedding.dim = dim;
    auto shard = spawn_embedding_shard(sys, c);
    if (!sys.middleman().publish(shard, base, "127.0.0.1", true))
      std::_Exit(1);
    ::pause();
    std::_Exit(0);
  }
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::expected<embedding_shard_actor> shard{caf::error{}};
  for (int i = 0; i < 100 && !shard; ++i) {
    ::usleep(50000);
    shard = sys.middleman().remote_actor<embedding_shard_actor>("127.0.0.1", base);
  }
  if (!shard) {
    std::fprintf(stderr, "cannot reach the shard process\n");
    ::kill(shard_pid, SIGKILL);
    return 1;
  }
  std::mt19937_64 rng(42);
  std::vector<capnp_payload> batches;
  for (int i = 0; i < 8; ++i) {
    std::vector<uint64_t> ids(n);
    for (auto& id : ids)
      id = rng() % 10'000'000;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    batches.push_back(lookup_request(ids));
  }
  caf::scoped_actor self{sys};
  size_t reply_bytes = 0;
  auto remote = [&] {
    auto t0 = clock_type::now();
    size_t bytes = 0;
    for (int i = 0; i < requests; ++i) {
      auto& req = batches[static_cast<size_t>(i) % batches.size()];
      self->request(*shard, std::chrono::seconds(30), lookup_atom::value, req)
        .receive([&](capnp_payload& rows) { bytes += req.bytes.size() + rows.bytes.size();
                                            reply_bytes = rows.bytes.size(); },
                 [&](caf::error&) { std::exit(1); });
    }
    return static_cast<double>(bytes) / std::chrono::duration<double>(clock_type::now() - t0).count();
  };
  remote();  // warm-up: inserts the rows
  std::vector<double> ratios, remote_bps, raw_bps;
  for (int r = 0; r < reps; ++r) {
    auto rem = remote();
    auto raw = raw_tcp_bytes_per_sec(static_cast<uint16_t>(base + 1 + r), batches[0].bytes.size(),
                                     reply_bytes, requests);
    remote_bps.push_back(rem);
    raw_bps.push_back(raw);
    ratios.push_back(rem / raw);
    std::fflush(stdout);
    std::printf("rep %d: remote lookups %.1f MB/s, raw tcp %.1f MB/s, ratio %.3f\n", r, rem / 1e6,
                raw / 1e6, rem / raw);
  }
  ::kill(shard_pid, SIGKILL);
  ::waitpid(shard_pid, nullptr, 0);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("lookup_ratio=%.3f remote_MBps=%.1f raw_tcp_MBps=%.1f ids_per_request=%zu dim=%d "
              "requests=%d reps=%d\n",
              median(ratios), median(remote_bps) / 1e6, median(raw_bps) / 1e6, n, dim, requests,
              reps);
  std::fflush(stdout);
  std::_Exit(0);  // the shard process is gone: do not wait for its connection to wind down
}
