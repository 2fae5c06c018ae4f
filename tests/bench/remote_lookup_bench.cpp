// Embedding lookups between two processes (CAF middleman over loopback TCP) against a raw TCP
// loopback copy of the same bytes, measured in one run, interleaved.
//
// A child process runs an embedding_shard behind `publish`; the parent asks it for rows of
// batches of unique ids (LookupRequest -> EmbeddingRows, the aggregator's request) and times the
// bytes that cross: ids out, rows back. The reference sends the same request and reply sizes
// (byte for byte the sizes of the same 8 batches, in the same order) over a plain TCP connection
// to a second child that answers every request with a reply of the rows' size. Both keep up to
// `window` requests in flight (the aggregators have several batches out at once; window=1 is one
// request at a time), both connections stay open for the whole run, and the two alternate in
// short slices of `requests` requests, `reps` times, so that both see the same machine load.
// Figures are medians over the slices.
//
// Last line: key=value pairs. lookup_ratio = remote lookup bytes/s over raw TCP bytes/s (the
// goal of issue 4: >= 0.5); remote_MBps, raw_tcp_MBps; remote_cpu_ms and raw_tcp_cpu_ms: CPU
// time (user + system, both processes, all threads) per request, less sensitive to other load
// than wall time; store_ms: the store's own lookup of one request (embedding_table::lookup in
// this process, same ids, same table shape), the part no transport can hide.
// usage: remote_lookup_bench [ids_per_request=65536] [requests=16] [reps=15] [dim=16] [window=4]
//                            [port=10000 + pid % 9998]  (the shard's port; the raw server's is port + 1)
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
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <semaphore>
#include <thread>
#include <vector>

using namespace satrap;
using clock_type = std::chrono::steady_clock;

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    auto k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0)
      std::_Exit(1);
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    auto k = ::recv(fd, p, n, 0);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// CPU seconds (user + system, all threads, those that have exited included) a process has used
// so far, to the nanosecond: its process CPU clock (clock_getcpuclockid). /proc/PID/stat's
// utime + stime, used until 2026-12-05, count 10 ms ticks, which over a slice of 16 requests
// (~70 ms of CPU) rounded every per-request figure to a multiple of 0.625 ms (4.38 = 7 ticks,
// 1.25 = 2 ticks in every run of 2026-12-03).
double cpu_seconds(pid_t pid) {
  clockid_t clock;
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct slice_figures {
  double bytes_per_sec = 0;
  double cpu_ms_per_request = 0;  // both processes
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int listen_on(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  return fd;
}

int connect_to(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// The raw TCP reference's server: request k has req[k % 8] bytes and gets rep[k % 8] back.
[[noreturn]] void raw_server(int lfd, const std::vector<size_t>& req, const std::vector<size_t>& rep) {
  int fd = ::accept(lfd, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> in(*std::max_element(req.begin(), req.end()));
  std::vector<char> out(*std::max_element(rep.begin(), rep.end()), 1);
  for (size_t k = 0;; ++k)
    if (!read_all(fd, in.data(), req[k % req.size()]))
      std::_Exit(0);
    else
      write_all(fd, out.data(), rep[k % rep.size()]);
}

capnp_payload lookup_request(const std::vector<uint64_t>& ids) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<schema::LookupRequest>();
  r.setIds(data_of(ids));
  return payload_encode(mb);
}

// The size of the shard's reply to `ids` (an EmbeddingRows payload), built the way the shard does.
size_t reply_size(size_t ids, int dim) {
  auto bytes = ids * static_cast<size_t>(dim) * sizeof(float);
  payload_builder mb(payload_builder::words_for(2, 1, {bytes}));
  auto out = mb.initRoot<schema::EmbeddingRows>();
  out.setDim(static_cast<uint32_t>(dim));
  out.initRows(bytes);
  return mb.finish().bytes.size();
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;
  int requests = argc > 2 ? std::max(1, std::atoi(argv[2])) : 16;
  int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 15;
  int dim = argc > 4 ? std::atoi(argv[4]) : 16;
  int window = argc > 5 ? std::max(1, std::atoi(argv[5])) : 4;
  auto base = static_cast<uint16_t>(argc > 6 ? std::atoi(argv[6]) : 10000 + getpid() % 9998);
  // Eight batches of unique ids, made before any fork so both children know their sizes.
  std::mt19937_64 rng(42);
  std::vector<std::vector<uint64_t>> id_batches;
  std::vector<capnp_payload> batches;
  std::vector<size_t> req_sizes, rep_sizes;
  for (int i = 0; i < 8; ++i) {
    std::vector<uint64_t> ids(n);
    for (auto& id : ids)
      id = rng() % 10'000'000;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    batches.push_back(lookup_request(ids));
    req_sizes.push_back(batches.back().bytes.size());
    rep_sizes.push_back(reply_size(ids.size(), dim));
    id_batches.push_back(std::move(ids));
  }
  // The raw TCP server process.
  int lfd = listen_on(static_cast<uint16_t>(base + 1));
  auto raw_pid = ::fork();
  if (raw_pid == 0)
    raw_server(lfd, req_sizes, rep_sizes);
  ::close(lfd);
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
  auto stop_children = [&] {
    ::kill(shard_pid, SIGKILL);
    ::kill(raw_pid, SIGKILL);
    ::waitpid(shard_pid, nullptr, 0);
    ::waitpid(raw_pid, nullptr, 0);
  };
  int raw_fd = connect_to(static_cast<uint16_t>(base + 1));
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::expected<embedding_shard_actor> shard{caf::error{}};
  for (int i = 0; i < 100 && !shard; ++i) {
    ::usleep(50000);
    shard = sys.middleman().remote_actor<embedding_shard_actor>("127.0.0.1", base);
  }
  if (!shard) {
    std::fprintf(stderr, "cannot reach the shard process\n");
    stop_children();
    return 1;
  }
  caf::scoped_actor self{sys};
  // Remote: up to `window` requests in flight, answered in order (one shard, one mailbox).
  using handle_type = decltype(self->request(*shard, std::chrono::seconds(30), lookup_atom::value,
                                             batches[0]));
  size_t remote_next = 0;
  auto remote = [&](int count) {
    auto cpu0 = cpu_seconds(::getpid()) + cpu_seconds(shard_pid);
    auto t0 = clock_type::now();
    size_t bytes = 0;
    std::deque<std::pair<handle_type, size_t>> in_flight;
    int sent = 0;
    for (int done = 0; done < count; ++done) {
      while (sent < count && in_flight.size() < static_cast<size_t>(window)) {
        auto& req = batches[remote_next++ % batches.size()];
        ++sent;
        in_flight.emplace_back(
          self->request(*shard, std::chrono::seconds(30), lookup_atom::value, req),
          req.bytes.size());
      }
      auto [h, req_bytes] = std::move(in_flight.front());
      in_flight.pop_front();
      h.receive([&](capnp_payload& rows) { bytes += req_bytes + rows.bytes.size(); },
                [&](caf::error& e) {
                  std::fprintf(stderr, "lookup failed: %s\n", sys.render(e).c_str());
                  stop_children();
                  std::_Exit(1);
                });
    }
    auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    auto cpu = cpu_seconds(::getpid()) + cpu_seconds(shard_pid) - cpu0;
    return slice_figures{static_cast<double>(bytes) / secs, cpu * 1e3 / count};
  };
  // Raw TCP: a writer thread sends a request whenever fewer than `window` replies are
  // outstanding; this thread reads the replies.
  size_t raw_next = 0;
  std::vector<char> raw_out(*std::max_element(req_sizes.begin(), req_sizes.end()), 2);
  std::vector<char> raw_in(*std::max_element(rep_sizes.begin(), rep_sizes.end()));
  auto raw = [&](int count) {
    auto cpu0 = cpu_seconds(::getpid()) + cpu_seconds(raw_pid);
    std::counting_semaphore<> slots(window);
    auto first = raw_next;
    auto t0 = clock_type::now();
    std::thread writer([&] {
      for (int i = 0; i < count; ++i) {
        slots.acquire();
        write_all(raw_fd, raw_out.data(), req_sizes[(first + i) % req_sizes.size()]);
      }
    });
    size_t bytes = 0;
    for (int i = 0; i < count; ++i) {
      auto k = (first + i) % rep_sizes.size();
      if (!read_all(raw_fd, raw_in.data(), rep_sizes[k]))
        std::_Exit(1);
      bytes += req_sizes[k] + rep_sizes[k];
      slots.release();
    }
    auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    writer.join();
    raw_next += static_cast<size_t>(count);
    auto cpu = cpu_seconds(::getpid()) + cpu_seconds(raw_pid) - cpu0;
    return slice_figures{static_cast<double>(bytes) / secs, cpu * 1e3 / count};
  };
  remote(static_cast<int>(batches.size()));  // warm-up: inserts the rows
  raw(static_cast<int>(batches.size()));
  std::vector<double> ratios, remote_bps, raw_bps, remote_cpu, raw_cpu;
  for (int r = 0; r < reps; ++r) {
    auto rem = remote(requests);
    auto ref = raw(requests);
    remote_bps.push_back(rem.bytes_per_sec);
    raw_bps.push_back(ref.bytes_per_sec);
    ratios.push_back(rem.bytes_per_sec / ref.bytes_per_sec);
    remote_cpu.push_back(rem.cpu_ms_per_request);
    raw_cpu.push_back(ref.cpu_ms_per_request);
    std::printf("rep %d: remote lookups %.1f MB/s, raw tcp %.1f MB/s, ratio %.3f; cpu ms per "
                "request: remote %.2f, raw tcp %.2f\n",
                r, rem.bytes_per_sec / 1e6, ref.bytes_per_sec / 1e6, ratios.back(),
                rem.cpu_ms_per_request, ref.cpu_ms_per_request);
    std::fflush(stdout);
  }
  ::close(raw_fd);
  stop_children();
  // The store alone, in this process: the same batches through a table of the same shape.
  embedding_options o;
  o.dim = dim;
  embedding_table table(o);
  std::vector<float> rows(n * static_cast<size_t>(dim));
  for (auto& ids : id_batches)
    table.lookup(ids, rows.data());
  std::vector<double> store_ms;
  for (int i = 0; i < 4 * static_cast<int>(id_batches.size()); ++i) {
    auto& ids = id_batches[static_cast<size_t>(i) % id_batches.size()];
    auto t0 = clock_type::now();
    table.lookup(ids, rows.data());
    store_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  }
  std::printf("lookup_ratio=%.3f remote_MBps=%.1f raw_tcp_MBps=%.1f ids_per_request=%zu dim=%d "
              "requests=%d reps=%d window=%d remote_cpu_ms=%.2f raw_tcp_cpu_ms=%.2f "
              "store_ms=%.2f\n",
              median(ratios), median(remote_bps) / 1e6, median(raw_bps) / 1e6, n, dim, requests,
              reps, window, median(remote_cpu), median(raw_cpu), median(store_ms));
  std::fflush(stdout);
  std::_Exit(0);  // the shard process is gone: do not wait for its connection to wind down
}
