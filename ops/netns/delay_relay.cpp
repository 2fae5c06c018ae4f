// netns_delay_relay: a learning Ethernet switch in user space that holds every frame for a fixed
// delay before forwarding it. It stands in for the bridge of ops/netns/netns.sh when a latency is
// asked for: this kernel has no netem (and no fq, so no EDT pacing from BPF either).
//
// usage: netns_delay_relay DELAY_US IFACE...   (root; the interfaces are the root-side ends of the
//        namespaces' veth pairs, up, without addresses, in no bridge)
//
// One thread. Every interface has an AF_PACKET socket with PACKET_VNET_HDR, so the kernel hands
// over GSO super-frames (up to 64 KiB) with their checksum-offload state and takes them back the
// same way: no segmentation, no checksums computed here, one read and one write per super-frame.
// A frame read at t goes out at t + DELAY_US, in arrival order (one FIFO: the delay is the same for
// every frame), to the port that its destination MAC was last seen on, or to every other port when
// that is not known yet (ARP, the first frames). The cost per frame is two system calls and one copy;
// the harness measures what that costs the cluster with a zero delay.
// Prints `relay_frames=N relay_bytes=B relay_max_lag_us=L` on SIGTERM/SIGINT, then exits.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t stop_flag = 0;
void on_signal(int) { stop_flag = 1; }

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct frame {
  int64_t due_ns;
  int in_port;
  std::vector<uint8_t> bytes;  // virtio_net_hdr + Ethernet frame
};

// struct virtio_net_hdr (linux/virtio_net.h, which C++ cannot include: a member named `class`):
// flags, gso_type, hdr_len, gso_size, csum_start, csum_offset; passed through untouched.
constexpr size_t hdr_len = 10;
constexpr size_t max_frame = hdr_len + 65536 + 64;

int open_port(const char* name) {
  int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) {
    std::perror("socket(AF_PACKET)");
    std::exit(1);
  }
  int one = 1;
  if (::setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) {
    std::perror("PACKET_VNET_HDR");
    std::exit(1);
  }
  // Frames this socket sends must not come back to it as received ones.
  if (::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
    std::perror("PACKET_IGNORE_OUTGOING");
    std::exit(1);
  }
  int buf = 8 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(if_nametoindex(name));
  if (addr.sll_ifindex == 0) {
    std::fprintf(stderr, "netns_delay_relay: no interface %s\n", name);
    std::exit(1);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: netns_delay_relay DELAY_US IFACE IFACE...\n");
    return 2;
  }
  const int64_t delay_ns = std::atoll(argv[1]) * 1000;
  std::vector<int> fds;
  for (int i = 2; i < argc; ++i)
    fds.push_back(open_port(argv[i]));
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::map<std::array<uint8_t, 6>, int> port_of;  // learned: source MAC -> port
  std::deque<frame> queue;
  std::vector<pollfd> pfds(fds.size());
  for (size_t i = 0; i < fds.size(); ++i)
    pfds[i] = {fds[i], POLLIN, 0};
  uint64_t frames = 0, bytes = 0;
  int64_t max_lag_ns = 0;
  std::vector<uint8_t> spare;
  while (!stop_flag) {
    // Send every frame that is due.
    int64_t t = now_ns();
    while (!queue.empty() && queue.front().due_ns <= t) {
      auto& f = queue.front();
      max_lag_ns = std::max(max_lag_ns, t - f.due_ns);
      std::array<uint8_t, 6> dst;
      std::memcpy(dst.data(), f.bytes.data() + hdr_len, 6);
      auto it = port_of.find(dst);
      for (size_t p = 0; p < fds.size(); ++p) {
        if (static_cast<int>(p) == f.in_port
            || (it != port_of.end() && it->second != static_cast<int>(p)))
          continue;
        // A full socket buffer drops the frame, as a switch's full queue would; TCP resends.
        (void)::send(fds[p], f.bytes.data(), f.bytes.size(), MSG_DONTWAIT);
      }
      spare = std::move(f.bytes);
      queue.pop_front();
    }
    timespec timeout{};
    timespec* tp = nullptr;
    if (!queue.empty()) {
      int64_t wait = std::max<int64_t>(0, queue.front().due_ns - now_ns());
      timeout.tv_sec = wait / 1'000'000'000;
      timeout.tv_nsec = wait % 1'000'000'000;
      tp = &timeout;
    }
    int n = ::ppoll(pfds.data(), pfds.size(), tp, nullptr);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::perror("ppoll");
      return 1;
    }
    if (n == 0)
      continue;
    for (size_t p = 0; p < fds.size(); ++p) {
      if (!(pfds[p].revents & POLLIN))
        continue;
      for (;;) {
        spare.resize(max_frame);
        ssize_t got = ::recv(fds[p], spare.data(), spare.size(), MSG_DONTWAIT);
        if (got < 0)
          break;
        if (static_cast<size_t>(got) < hdr_len + 14)
          continue;
        spare.resize(static_cast<size_t>(got));
        std::array<uint8_t, 6> src;
        std::memcpy(src.data(), spare.data() + hdr_len + 6, 6);
        port_of[src] = static_cast<int>(p);
        ++frames;
        bytes += static_cast<uint64_t>(got) - hdr_len;
        queue.push_back(frame{now_ns() + delay_ns, static_cast<int>(p), std::move(spare)});
        spare = {};
      }
    }
  }
  std::printf("relay_frames=%llu relay_bytes=%llu relay_max_lag_us=%lld\n",
              static_cast<unsigned long long>(frames), static_cast<unsigned long long>(bytes),
              static_cast<long long>(max_lag_ns / 1000));
  return 0;
}
