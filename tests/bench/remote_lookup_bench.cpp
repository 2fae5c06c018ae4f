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
// Two more legs (added 2026-12-07) bound what any transport could reach. `store_tcp`: a plain
// TCP server that holds an embedding_table of the shard's shape and answers each request (the
// real LookupRequest bytes, read in place) by gathering its rows with embedding_table::lookup into
// one of two reused reply buffers while a second thread sends the other (store_server). No
// framework, no serialising copy, no hop: the store's gather and the kernel's copies only. Its
// bytes/s over raw TCP's is the ceiling for lookups through this store on this machine
// (`store_tcp_ceiling`), and the remote lookups' bytes/s over its own says how much of that
// ceiling CAF keeps (`remote_vs_store_tcp`). `flat_tcp`: the same server gathering from a flat
// array with the row numbers known (`flat_tcp_ceiling`: a store with a perfect index).
//
// Last line: key=value pairs. lookup_ratio = remote lookup bytes/s over raw TCP bytes/s (the
// goal of issue 4: >= 0.5); remote_MBps, raw_tcp_MBps; remote_cpu_ms and raw_tcp_cpu_ms: CPU
// time (user + system, both processes, all threads) per request, less sensitive to other load
// than wall time; store_ms: the store's own lookup of one request (embedding_table::lookup in
// this process, same ids, same table shape), the part no transport can hide; store_tcp_MBps,
// store_tcp_cpu_ms, store_tcp_ceiling, remote_vs_store_tcp, flat_tcp_ceiling, flat_tcp_cpu_ms:
// the two legs above.
// usage: remote_lookup_bench [ids_per_request=65536] [requests=16] [reps=15] [dim=16] [window=4]
//                            [port=10000 + pid % 9996]  (the shard's port; the raw server's is
//                            port + 1, the store-backed one's port + 2, the flat one's port + 3)
#include "actors/embedding_shard/embedding_shard.hpp"
#include "actors/type_registry.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <unordered_map>
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

// In a child right after fork: killed when the bench process ends, however it ends (an _Exit on
// a failed read included), so no server outlives it holding its port.
void die_with(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent)
    std::_Exit(0);
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
[[noreturn]] void raw_server(int lfd, const std::vector<size_t>& req,
                             const std::vector<size_t>& rep) {
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

// The store-backed reference's server: request k is the real LookupRequest payload of batch k % 8
// (req[k % 8] bytes); it looks the ids up in its own table and answers rep[k % 8] bytes whose
// tail is the rows, where the shard's reply has its Data blob. Two threads, as the shard has
// (its actor gathers while its middleman sends): this one reads a request and gathers its rows
// into one of two reply buffers while a writer thread sends the other.
// With `flat_rows` (row numbers of each batch's ids, computed before the fork), the rows come
// instead from a flat array of the batches' rows (64-byte aligned at dim 16), no index at all: the
// gather of a store with a perfect index, the bound for any store.
[[noreturn]] void store_server(int lfd, int dim, const std::vector<size_t>& req,
                               const std::vector<size_t>& rep,
                               const std::vector<std::vector<uint32_t>>* flat_rows) {
  int fd = ::accept(lfd, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  tune_allocator_for_payloads();
  embedding_options o;
  o.dim = dim;
  embedding_table table(o);
  auto d = static_cast<size_t>(dim);
  std::vector<float> flat;
  if (flat_rows) {
    uint32_t rows = 0;
    for (auto& b : *flat_rows)
      for (auto r : b)
        rows = std::max(rows, r + 1);
    flat.assign(size_t{rows} * d + 64, 0.25f);
  }
  // 64-byte aligned rows when a row is 64 bytes, as the store's weights are.
  auto* flat_base =
    flat.data() + (64 - reinterpret_cast<std::uintptr_t>(flat.data()) % 64) % 64 / sizeof(float);
  capnp_payload in;
  in.bytes.resize(*std::max_element(req.begin(), req.end()));
  auto out_floats = (*std::max_element(rep.begin(), rep.end()) + 3) / sizeof(float);
  std::vector<float> out[2] = {std::vector<float>(out_floats), std::vector<float>(out_floats)};
  std::counting_semaphore<> free_slots(2), full_slots(0);
  std::thread writer([&] {
    for (size_t k = 0;; ++k) {
      full_slots.acquire();
      write_all(fd, reinterpret_cast<const char*>(out[k % 2].data()), rep[k % rep.size()]);
      free_slots.release();
    }
  });
  for (size_t k = 0;; ++k) {
    auto n_in = req[k % req.size()];
    auto n_out = rep[k % rep.size()];
    in.bytes.resize(n_in);
    if (!read_all(fd, in.bytes.data(), n_in))
      std::_Exit(0);
    payload_reader r(in);
    auto ids = data_view<uint64_t>(r.root<schema::LookupRequest>().getIds());
    auto row_bytes = ids.size() * static_cast<size_t>(dim) * sizeof(float);
    SATRAP_ASSERT(row_bytes <= n_out && (n_out - row_bytes) % sizeof(float) == 0);
    free_slots.acquire();
    auto* dst = out[k % 2].data() + (n_out - row_bytes) / sizeof(float);
    if (flat_rows) {
      auto& rows = (*flat_rows)[k % flat_rows->size()];
      SATRAP_ASSERT(rows.size() == ids.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        if (i + 16 < rows.size())
          __builtin_prefetch(flat_base + size_t{rows[i + 16]} * d);
        std::memcpy(dst + i * d, flat_base + size_t{rows[i]} * d, d * sizeof(float));
      }
    } else {
      table.lookup(ids, dst);
    }
    full_slots.release();
  }
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
  auto base = static_cast<uint16_t>(argc > 6 ? std::atoi(argv[6]) : 10000 + getpid() % 9996);
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
  const pid_t parent = ::getpid();
  // The raw TCP server process.
  int lfd = listen_on(static_cast<uint16_t>(base + 1));
  auto raw_pid = ::fork();
  if (raw_pid == 0) {
    die_with(parent);
    raw_server(lfd, req_sizes, rep_sizes);
  }
  ::close(lfd);
  // The store-backed raw TCP server process.
  int store_lfd = listen_on(static_cast<uint16_t>(base + 2));
  auto store_pid = ::fork();
  if (store_pid == 0) {
    die_with(parent);
    store_server(store_lfd, dim, req_sizes, rep_sizes, nullptr);
  }
  ::close(store_lfd);
  // The flat-array raw TCP server process: the batches' ids numbered densely beforehand, in a
  // random order (numbered as they come, a batch's sorted ids would be consecutive rows, a
  // sequential read no store of hashed ids gets).
  std::vector<std::vector<uint32_t>> flat_rows;
  {
    std::vector<uint64_t> all;
    for (auto& ids : id_batches)
      all.insert(all.end(), ids.begin(), ids.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    std::shuffle(all.begin(), all.end(), rng);
    std::unordered_map<uint64_t, uint32_t> number;
    for (auto id : all)
      number.emplace(id, static_cast<uint32_t>(number.size()));
    for (auto& ids : id_batches) {
      auto& rows = flat_rows.emplace_back();
      for (auto id : ids)
        rows.push_back(number.at(id));
    }
  }
  int flat_lfd = listen_on(static_cast<uint16_t>(base + 3));
  auto flat_pid = ::fork();
  if (flat_pid == 0) {
    die_with(parent);
    store_server(flat_lfd, dim, req_sizes, rep_sizes, &flat_rows);
  }
  ::close(flat_lfd);
  // The shard process.
  auto shard_pid = ::fork();
  if (shard_pid == 0) {
    die_with(parent);
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
    ::kill(store_pid, SIGKILL);
    ::kill(flat_pid, SIGKILL);
    ::waitpid(shard_pid, nullptr, 0);
    ::waitpid(raw_pid, nullptr, 0);
    ::waitpid(store_pid, nullptr, 0);
    ::waitpid(flat_pid, nullptr, 0);
  };
  int raw_fd = connect_to(static_cast<uint16_t>(base + 1));
  int store_fd = connect_to(static_cast<uint16_t>(base + 2));
  int flat_fd = connect_to(static_cast<uint16_t>(base + 3));
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
  using handle_type =
    decltype(self->request(*shard, std::chrono::seconds(30), lookup_atom::value, batches[0]));
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
  // outstanding; this thread reads the replies. With `real`, the requests are the batches' own
  // LookupRequest payloads (the store-backed server reads them); otherwise filler of their size.
  std::vector<char> raw_out(*std::max_element(req_sizes.begin(), req_sizes.end()), 2);
  std::vector<char> raw_in(*std::max_element(rep_sizes.begin(), rep_sizes.end()));
  auto raw_leg = [&](int fd, pid_t server, size_t& next, bool real, int count) {
    auto cpu0 = cpu_seconds(::getpid()) + cpu_seconds(server);
    std::counting_semaphore<> slots(window);
    auto first = next;
    auto t0 = clock_type::now();
    std::thread writer([&] {
      for (int i = 0; i < count; ++i) {
        slots.acquire();
        auto k = (first + static_cast<size_t>(i)) % req_sizes.size();
        write_all(fd, real ? batches[k].bytes.data() : raw_out.data(), req_sizes[k]);
      }
    });
    size_t bytes = 0;
    for (int i = 0; i < count; ++i) {
      auto k = (first + static_cast<size_t>(i)) % rep_sizes.size();
      if (!read_all(fd, raw_in.data(), rep_sizes[k]))
        std::_Exit(1);
      bytes += req_sizes[k] + rep_sizes[k];
      slots.release();
    }
    auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    writer.join();
    next += static_cast<size_t>(count);
    auto cpu = cpu_seconds(::getpid()) + cpu_seconds(server) - cpu0;
    return slice_figures{static_cast<double>(bytes) / secs, cpu * 1e3 / count};
  };
  size_t raw_next = 0, store_next = 0, flat_next = 0;
  auto raw = [&](int count) { return raw_leg(raw_fd, raw_pid, raw_next, false, count); };
  auto store_tcp = [&](int count) { return raw_leg(store_fd, store_pid, store_next, true, count); };
  auto flat_tcp = [&](int count) { return raw_leg(flat_fd, flat_pid, flat_next, true, count); };
  remote(static_cast<int>(batches.size()));  // warm-up: inserts the rows
  raw(static_cast<int>(batches.size()));
  store_tcp(static_cast<int>(batches.size()));  // warm-up: inserts the rows
  flat_tcp(static_cast<int>(batches.size()));
  std::vector<double> ratios, remote_bps, raw_bps, remote_cpu, raw_cpu;
  std::vector<double> ceilings, vs_store, store_bps, store_cpu, flat_ceilings, flat_cpu;
  for (int r = 0; r < reps; ++r) {
    auto rem = remote(requests);
    auto ref = raw(requests);
    auto sto = store_tcp(requests);
    auto fla = flat_tcp(requests);
    flat_ceilings.push_back(fla.bytes_per_sec / ref.bytes_per_sec);
    flat_cpu.push_back(fla.cpu_ms_per_request);
    remote_bps.push_back(rem.bytes_per_sec);
    raw_bps.push_back(ref.bytes_per_sec);
    store_bps.push_back(sto.bytes_per_sec);
    ratios.push_back(rem.bytes_per_sec / ref.bytes_per_sec);
    ceilings.push_back(sto.bytes_per_sec / ref.bytes_per_sec);
    vs_store.push_back(rem.bytes_per_sec / sto.bytes_per_sec);
    remote_cpu.push_back(rem.cpu_ms_per_request);
    raw_cpu.push_back(ref.cpu_ms_per_request);
    store_cpu.push_back(sto.cpu_ms_per_request);
    std::printf(
      "rep %d: remote lookups %.1f MB/s, raw tcp %.1f MB/s, store + raw tcp %.1f MB/s; "
      "ratio %.3f, ceiling %.3f (flat %.3f); cpu ms per request: remote %.2f, raw tcp "
      "%.2f, store + raw tcp %.2f, flat + raw tcp %.2f\n",
      r, rem.bytes_per_sec / 1e6, ref.bytes_per_sec / 1e6, sto.bytes_per_sec / 1e6, ratios.back(),
      ceilings.back(), flat_ceilings.back(), rem.cpu_ms_per_request, ref.cpu_ms_per_request,
      sto.cpu_ms_per_request, fla.cpu_ms_per_request);
    std::fflush(stdout);
  }
  ::close(raw_fd);
  ::close(store_fd);
  ::close(flat_fd);
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
  std::printf(
    "lookup_ratio=%.3f remote_MBps=%.1f raw_tcp_MBps=%.1f ids_per_request=%zu dim=%d "
    "requests=%d reps=%d window=%d remote_cpu_ms=%.2f raw_tcp_cpu_ms=%.2f "
    "store_ms=%.2f store_tcp_MBps=%.1f store_tcp_cpu_ms=%.2f store_tcp_ceiling=%.3f "
    "remote_vs_store_tcp=%.3f flat_tcp_ceiling=%.3f flat_tcp_cpu_ms=%.2f\n",
    median(ratios), median(remote_bps) / 1e6, median(raw_bps) / 1e6, n, dim, requests, reps, window,
    median(remote_cpu), median(raw_cpu), median(store_ms), median(store_bps) / 1e6,
    median(store_cpu), median(ceilings), median(vs_store), median(flat_ceilings), median(flat_cpu));
  std::fflush(stdout);
  std::_Exit(0);  // the shard process is gone: do not wait for its connection to wind down
}
