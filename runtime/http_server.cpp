#include "runtime/http_server.hpp"

#include "runtime/log.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstring>
#include <string_view>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

namespace satrap {

std::string http_request::header(const std::string& name) const {
  for (auto& [k, v] : headers)
    if (k.size() == name.size() && ::strncasecmp(k.c_str(), name.c_str(), k.size()) == 0)
      return v;
  return "";
}

namespace {

// A task queue whose pool grows when every worker is busy (see http_limits). The workers share
// its state, so a worker still stuck with a slow client when the server stops (shutdown waits
// 2 s for them) outlives the queue safely and ends when its connection does.
class elastic_pool : public httplib::TaskQueue {
 public:
  elastic_pool(size_t keep, size_t max) : st_(std::make_shared<state>()) {
    st_->keep = std::max<size_t>(1, keep);
    st_->max = std::max(st_->keep, max);
  }
  ~elastic_pool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    auto& st = *st_;
    std::unique_lock<std::mutex> lock(st.mu);
    st.jobs.push_back(std::move(fn));
    if (st.idle == 0 && st.threads < st.max) {
      ++st.threads;
      std::thread([st = st_] { work(*st); }).detach();
    }
    st.cv.notify_one();
  }

  void shutdown() override {
    auto& st = *st_;
    std::unique_lock<std::mutex> lock(st.mu);
    st.stop = true;
    st.cv.notify_all();
    st.done.wait_for(lock, std::chrono::seconds(2), [&] { return st.threads == 0; });
  }

 private:
  struct state {
    size_t keep = 1, max = 1;
    std::mutex mu;
    std::condition_variable cv, done;
    std::deque<std::function<void()>> jobs;
    size_t threads = 0, idle = 0;
    bool stop = false;
  };

  static void work(state& st) {
    std::unique_lock<std::mutex> lock(st.mu);
    for (;;) {
      ++st.idle;
      bool woke =
        st.cv.wait_for(lock, std::chrono::seconds(30), [&] { return st.stop || !st.jobs.empty(); });
      --st.idle;
      if (st.stop || (!woke && st.threads > st.keep))
        break;
      if (st.jobs.empty())
        continue;
      auto fn = std::move(st.jobs.front());
      st.jobs.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
    --st.threads;
    st.done.notify_all();
  }

  std::shared_ptr<state> st_;
};

std::atomic<uint64_t> over_cap_total{0}, past_deadline_total{0}, over_body_budget_total{0};

void log_refusal(const char* what, const std::string& addr, uint64_t total) {
  static log_rate rate{10};
  uint64_t unlogged = 0;
  if (rate.allow(unlogged))
    spdlog::warn("http_refused reason={} peer={} refused_total={} unlogged_before={}", what, addr,
                 total, unlogged);
}

// The connections of one server: per client address (the cap), and each connection's deadline
// for its current request, enforced by a watchdog thread that shuts the socket down.
class connection_guard {
 public:
  // Bodies this small are always taken (counted, never refused): under a flood of large bodies
  // ordinary requests keep being answered.
  static constexpr size_t small_body_bytes = 65536;

  explicit connection_guard(const http_limits& l) : limits_(l) {
    watchdog_ = std::thread([this] { watch(); });
  }
  ~connection_guard() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }

  // False when `addr` holds the cap already, or the server is stopping. `fd` is a dup of the
  // connection's socket, kept open by the caller until leave(): the watchdog shuts down only a
  // socket still served.
  bool enter(const std::string& addr, int port, int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_)
      return false;
    auto& n = per_address_[addr];
    if (n >= limits_.max_connections_per_address)
      return false;
    ++n;
    conns_[{addr, port}] = {fd, clock::now() + limits_.request_deadline, false};
    return true;
  }

  void leave(const std::string& addr, int port) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      conns_.erase({addr, port});
      if (auto it = per_address_.find(addr); it != per_address_.end() && --it->second == 0)
        per_address_.erase(it);
    }
    drained_.notify_all();
  }

  bool closing() {
    std::lock_guard<std::mutex> lock(mu_);
    return closing_;
  }

  // The handler has started on a request (responding) or its response was written in full
  // (cpp-httplib's logger runs after the write): stop() waits for the responding ones.
  void responding(const std::string& addr, int port, bool on) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = conns_.find({addr, port}); it != conns_.end())
        it->second.responding = on;
    }
    if (!on)
      drained_.notify_all();
  }

  // Stopping, first step: no connection is admitted any more, and those not responding (waiting
  // for a request, or reading one) are shut down.
  void close_idle() {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (auto& [key, c] : conns_)
      if (c.fd >= 0 && !c.responding) {
        ::shutdown(c.fd, SHUT_RDWR);
        c.fd = -1;
      }
  }

  // Then: wait up to `limit` for the responses being computed or written, and shut down every
  // connection left, so no worker waits on a client.
  void drain_and_close(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait_for(lock, limit, [&] {
      for (auto& [key, c] : conns_)
        if (c.responding)
          return false;
      return true;
    });
    for (auto& [key, c] : conns_)
      if (c.fd >= 0) {
        ::shutdown(c.fd, SHUT_RDWR);
        c.fd = -1;
      }
  }

  // A body of `bytes` may be read and handled (http_limits::max_inflight_body_bytes): false when
  // it would pass the budget while other bodies are in flight. Then release(bytes) when done.
  bool admit_body(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (limits_.max_inflight_body_bytes > 0 && inflight_body_ > 0 && bytes > small_body_bytes
        && inflight_body_ + bytes > limits_.max_inflight_body_bytes)
      return false;
    inflight_body_ += bytes;
    return true;
  }

  void release_body(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_body_ -= std::min(bytes, inflight_body_);
  }

  // A request was read in full: no deadline while it is handled. Done: the next one has
  // request_deadline from now (the response's write, the keep-alive wait and its reading).
  void handling(const std::string& addr, int port, bool busy) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = conns_.find({addr, port}); it != conns_.end()) {
      it->second.busy = busy;
      it->second.deadline = clock::now() + limits_.request_deadline;
    }
  }

 private:
  using clock = std::chrono::steady_clock;
  struct conn {
    int fd = -1;
    clock::time_point deadline;
    bool busy = false;        // a request was read and is being handled: no deadline
    bool responding = false;  // from the handler's start to the response written
  };

  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    auto tick = std::min<std::chrono::milliseconds>(limits_.request_deadline / 10,
                                                    std::chrono::milliseconds(100));
    while (!cv_.wait_for(lock, tick, [&] { return stop_; })) {
      auto now = clock::now();
      for (auto& [key, c] : conns_)
        if (!c.busy && c.deadline < now && c.fd >= 0) {
          ::shutdown(c.fd, SHUT_RDWR);  // the worker's read fails; it closes the connection
          c.fd = -1;
          log_refusal("request_deadline", key.first, ++past_deadline_total);
        }
    }
  }

  http_limits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::string, int>, conn> conns_;
  std::map<std::string, size_t> per_address_;
  size_t inflight_body_ = 0;  // bytes of the bodies admitted and not yet released
  bool stop_ = false;
  bool closing_ = false;  // stop() began: no new connection is admitted
  std::condition_variable drained_;
  std::thread watchdog_;
};

// The lean connection loop (http_limits::lean): HTTP/1.1 with Content-Length bodies, read with
// large recv calls under SO_RCVTIMEO (no poll before each read), the response sent in one write.
// It keeps the guard's contract: handling() and responding() as cpp-httplib's path calls them,
// and a socket the watchdog or stop() shuts down ends the loop.
class lean_connection {
 public:
  lean_connection(int sock, std::string addr, int port, connection_guard& guard,
                  const http_limits& limits, const http_server::handler& h)
      : sock_(sock), addr_(std::move(addr)), port_(port), guard_(guard), limits_(limits), h_(h) {
    auto tv = [](std::chrono::milliseconds d) {
      timeval t{};
      t.tv_sec = static_cast<time_t>(d.count() / 1000);
      t.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
      return t;
    };
    auto rt = tv(std::max(limits.read_timeout, limits.keep_alive));
    auto wt = tv(limits.write_timeout);
    ::setsockopt(sock_, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof rt);
    ::setsockopt(sock_, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof wt);
    int one = 1;
    ::setsockopt(sock_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }

  ~lean_connection() { guard_.release_body(body_admitted_); }

  void run() {
    for (size_t served = 0;; ++served) {
      http_request req;
      bool close = false;
      int status = read_request(req, close);
      if (status < 0)
        return;          // the peer went away, timed out, or was shut down
      if (status > 0) {  // refused before the handler
        std::string why = status == 413 ? "request body larger than "
                                            + std::to_string(limits_.max_body_bytes) + " bytes"
                          : status == 431 ? "request headers larger than 8192 bytes"
                          : status == 411 ? "a request body needs Content-Length (chunked "
                                            "bodies are not taken)"
                          : status == 503 ? "busy: request bodies of "
                                              + std::to_string(limits_.max_inflight_body_bytes)
                                              + " bytes are in flight; retry"
                                          : "malformed HTTP request";
        http_response res(status, "text/plain; charset=utf-8", why + "\n");
        if (status == 503)
          res.headers.emplace_back("Retry-After", "1");
        write_response(res, true, false);
        return;
      }
      guard_.handling(addr_, port_, true);
      guard_.responding(addr_, port_, true);
      http_response res;
      try {
        res = h_(req);
      } catch (const std::exception& e) {
        res = http_response(500, "text/plain; charset=utf-8", std::string(e.what()) + "\n");
      }
      std::string().swap(req.body);  // what the handler made of it is gone too
      guard_.release_body(body_admitted_);
      body_admitted_ = 0;
      guard_.handling(addr_, port_, false);
      close = close || served + 1 >= limits_.keep_alive_max_requests;
      bool ok = write_response(res, close, req.method == "HEAD");
      guard_.responding(addr_, port_, false);
      if (!ok || close)
        return;
    }
  }

 private:
  static constexpr size_t max_head = 8192;

  // Appends what the socket has (at least a byte): false when it ended or timed out.
  bool fill() {
    bool room_for_expected = expect_ > buf_.size() && buf_.capacity() >= expect_;
    if (!room_for_expected && buf_.capacity() - buf_.size() < 16384)
      buf_.reserve(std::max<size_t>(buf_.size() * 2, 65536));
    size_t at = buf_.size();
    buf_.resize(buf_.capacity());
    auto n = ::recv(sock_, buf_.data() + at, buf_.size() - at, 0);
    buf_.resize(at + static_cast<size_t>(std::max<ssize_t>(0, n)));
    return n > 0;
  }

  static std::string decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
      };
      if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
        out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
        i += 2;
      } else {
        out += plus_is_space && s[i] == '+' ? ' ' : s[i];
      }
    }
    return out;
  }

  // 0: a request in `req`; > 0: a status to refuse with (then close); < 0: the connection ended.
  int read_request(http_request& req, bool& close) {
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (buf_.size() > max_head)
        return 431;
      if (!fill())
        return -1;
    }
    if (head_end > max_head)
      return 431;
    std::string_view head(buf_.data(), head_end);
    auto line_end = head.find("\r\n");
    auto line = head.substr(0, line_end);
    auto sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 <= sp1)
      return 400;
    req.method = std::string(line.substr(0, sp1));
    auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    auto version = line.substr(sp2 + 1);
    if (req.method.empty() || target.empty() || target[0] != '/'
        || (version != "HTTP/1.1" && version != "HTTP/1.0"))
      return 400;
    bool http10 = version == "HTTP/1.0";
    auto q = target.find('?');
    req.path = decode(target.substr(0, q), false);
    if (q != std::string_view::npos) {
      auto query = target.substr(q + 1);
      while (!query.empty()) {
        auto amp = query.find('&');
        auto pair = query.substr(0, amp);
        auto eq = pair.find('=');
        if (!pair.empty())
          req.params.emplace(
            decode(pair.substr(0, eq), true),
            eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1), true));
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      }
    }
    size_t length = 0;
    bool has_length = false, chunked = false, expect_continue = false, keep_alive = !http10;
    for (size_t at = line_end; at < head.size();) {
      size_t next = head.find("\r\n", at + 2);
      auto h = head.substr(at + 2, (next == std::string_view::npos ? head.size() : next) - at - 2);
      at = next == std::string_view::npos ? head.size() : next;
      auto colon = h.find(':');
      if (colon == std::string_view::npos || colon == 0)
        return 400;
      auto name = h.substr(0, colon);
      auto value = h.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      auto is = [&](const char* n) {
        return name.size() == std::strlen(n) && ::strncasecmp(name.data(), n, name.size()) == 0;
      };
      auto value_is = [&](const char* v) {
        return value.size() == std::strlen(v) && ::strncasecmp(value.data(), v, value.size()) == 0;
      };
      if (is("Content-Length")) {
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (ec != std::errc() || end != value.data() + value.size() || has_length)
          return 400;
        has_length = true;
      } else if (is("Transfer-Encoding")) {
        chunked = true;
      } else if (is("Expect")) {
        expect_continue = value_is("100-continue");
      } else if (is("Connection")) {
        if (value_is("close"))
          keep_alive = false;
        else if (value_is("keep-alive"))
          keep_alive = true;
      }
      req.headers.emplace(std::string(name), std::string(value));
    }
    close = !keep_alive;
    if (chunked)
      return 411;
    size_t body_at = head_end + 4;
    // Read and drop the body (within the request deadline), so the client reads the answer.
    auto drop_body = [&] {
      size_t left = length, have = std::min(length, buf_.size() - body_at);
      left -= have;
      buf_.clear();
      while (left > 0 && fill()) {
        left -= std::min(left, buf_.size());
        buf_.clear();
      }
      std::string().swap(buf_);
    };
    if (length > limits_.max_body_bytes) {
      drop_body();
      return 413;
    }
    if (length > 0 && !guard_.admit_body(length)) {
      log_refusal("inflight_body_bytes", addr_, ++over_body_budget_total);
      drop_body();
      return 503;
    }
    body_admitted_ = length;
    if (expect_continue && length > 0 && buf_.size() - body_at < length) {
      static constexpr char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      if (::send(sock_, cont, sizeof cont - 1, MSG_NOSIGNAL) != sizeof cont - 1)
        return -1;
    }
    if (buf_.size() - body_at < length) {
      buf_.reserve(body_at + length);  // the body once, not a doubled buffer
      expect_ = body_at + length;
    }
    while (buf_.size() - body_at < length)
      if (!fill()) {
        expect_ = 0;
        guard_.release_body(body_admitted_);
        body_admitted_ = 0;
        return -1;
      }
    expect_ = 0;
    if (buf_.size() == body_at + length && length > (size_t{1} << 16)) {
      // The buffer holds just this request: it becomes the body (no second copy).
      buf_.erase(0, body_at);
      req.body.swap(buf_);
      std::string().swap(buf_);
    } else {
      req.body.assign(buf_.data() + body_at, length);
      buf_.erase(0, body_at + length);  // a pipelined next request stays
      if (buf_.capacity() > (size_t{1} << 18))
        buf_.shrink_to_fit();  // an idle connection keeps no large body's buffer
    }
    req.remote_addr = addr_;
    return 0;
  }

  static const char* reason(int status) {
    switch (status) {
      case 100: return "Continue";
      case 200: return "OK";
      case 400: return "Bad Request";
      case 401: return "Unauthorized";
      case 403: return "Forbidden";
      case 404: return "Not Found";
      case 405: return "Method Not Allowed";
      case 411: return "Length Required";
      case 413: return "Payload Too Large";
      case 414: return "URI Too Long";
      case 422: return "Unprocessable Entity";
      case 431: return "Request Header Fields Too Large";
      case 500: return "Internal Server Error";
      case 503: return "Service Unavailable";
      default: return "Status";
    }
  }

  bool write_response(const http_response& res, bool close, bool head_only) {
    std::string out;
    out.reserve(256 + (head_only ? 0 : res.body.size()));
    out += "HTTP/1.1 " + std::to_string(res.status) + " " + reason(res.status) + "\r\n";
    out += "Content-Type: " + res.content_type + "\r\n";
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
    for (auto& [k, v] : res.headers)
      out += k + ": " + v + "\r\n";
    out += close ? "Connection: close\r\n\r\n" : "Keep-Alive: timeout=5\r\n\r\n";
    if (!head_only)
      out += res.body;
    size_t sent = 0;
    while (sent < out.size()) {
      auto n = ::send(sock_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  int sock_;
  std::string addr_;
  int port_;
  connection_guard& guard_;
  const http_limits& limits_;
  const http_server::handler& h_;
  std::string buf_;
  size_t body_admitted_ = 0;  // of the request being read or handled (admit_body)
  size_t expect_ = 0;         // the buffer's size once the body being read is in (no regrowth)
};

// cpp-httplib's server with the guards: process_and_close_socket (virtual, run by a worker for
// each accepted connection) admits the connection and registers it, then runs the library's own
// (private, so called through its symbol in libcpp-httplib).
class guarded_server : public httplib::Server {
 public:
  std::unique_ptr<connection_guard> guard;
  bool lean = false;  // serve connections with lean_connection instead of cpp-httplib's loop
  http_limits limits;
  http_server::handler lean_handler;

 private:
  bool process_and_close_socket(socket_t sock) override {
    using base_fn = bool (*)(httplib::Server*, socket_t);
    static auto base = reinterpret_cast<base_fn>(
      dlsym(RTLD_DEFAULT, "_ZN7httplib6Server24process_and_close_socketEi"));
    std::string addr;
    int port = 0;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
    if (::getpeername(sock, reinterpret_cast<sockaddr*>(&ss), &len) == 0
        && ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv,
                         sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV)
             == 0) {
      addr = host;
      port = std::atoi(serv);
    }
    int fd = ::dup(sock);
    if (!base || fd < 0 || !guard->enter(addr, port, fd)) {
      if (base && fd >= 0 && !guard->closing())
        log_refusal("connections_per_address", addr, ++over_cap_total);
      if (fd >= 0)
        ::close(fd);
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    bool ok = true;
    if (lean) {
      lean_connection(sock, addr, port, *guard, limits, lean_handler).run();
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
    } else {
      ok = base(this, sock);  // closes sock; the connection ends when fd closes too
    }
    guard->leave(addr, port);
    ::close(fd);
    return ok;
  }
};

}  // namespace

http_guard_counts http_guard_refusals() {
  return {over_cap_total.load(), past_deadline_total.load(), over_body_budget_total.load()};
}

struct http_server::impl {
  guarded_server server;
};

http_server::http_server() : impl_(std::make_unique<impl>()) {}

http_server::~http_server() { stop(); }

std::string http_server::start(const std::string& host, uint16_t port, handler h,
                               http_limits limits) {
  auto& s = impl_->server;
  s.guard = std::make_unique<connection_guard>(limits);
  auto* guard = s.guard.get();
  s.new_task_queue = [limits] { return new elastic_pool(limits.threads, limits.max_connections); };
  auto secs = [](std::chrono::milliseconds d) { return d.count() / 1000; };
  auto usecs = [](std::chrono::milliseconds d) { return (d.count() % 1000) * 1000; };
  s.set_read_timeout(secs(limits.read_timeout), usecs(limits.read_timeout));
  s.set_write_timeout(secs(limits.write_timeout), usecs(limits.write_timeout));
  s.set_keep_alive_timeout(std::max<time_t>(1, secs(limits.keep_alive)));
  s.set_keep_alive_max_count(std::max<size_t>(1, limits.keep_alive_max_requests));
  s.set_payload_max_length(limits.max_body_bytes);
  // Small responses on kept-alive connections: without this, Nagle's algorithm meets the peer's
  // delayed ACK and a request-response round trip waits ~40 ms.
  s.set_tcp_nodelay(true);
  // Errors cpp-httplib answers by itself (a body over the cap, a malformed request) get a message.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
    [max = limits.max_body_bytes](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty())
        return httplib::Server::HandlerResponse::Unhandled;
      std::string why;
      if (res.status == 413)
        why = "request body larger than " + std::to_string(max) + " bytes";
      else if (res.status == 400)
        why = "malformed HTTP request";
      else if (res.status == 414)
        why = "request URI too long";
      else
        why = "HTTP error " + std::to_string(res.status);
      res.set_content(why + "\n", "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    }));
  s.lean = limits.lean;
  s.limits = limits;
  if (limits.lean)
    s.lean_handler = h;
  auto serve = [h = std::move(h), guard](const httplib::Request& req, httplib::Response& res) {
    guard->handling(req.remote_addr, req.remote_port, true);
    guard->responding(req.remote_addr, req.remote_port, true);
    struct done {
      connection_guard* g;
      const httplib::Request& req;
      ~done() { g->handling(req.remote_addr, req.remote_port, false); }
    } mark{guard, req};
    http_request r;
    r.method = req.method;
    r.path = req.path;
    for (auto& [k, v] : req.params)
      r.params.emplace(k, v);
    for (auto& [k, v] : req.headers)
      r.headers.emplace(k, v);
    // The body is moved, not copied: cpp-httplib's request is its own non-const local, which it
    // does not read after the handler (the logger below takes only the address and port).
    r.body = std::move(const_cast<httplib::Request&>(req).body);
    r.remote_addr = req.remote_addr;
    auto out = h(r);
    res.status = out.status;
    for (auto& [k, v] : out.headers)
      res.set_header(k, v);
    res.set_content(std::move(out.body), out.content_type);
  };
  // Called by cpp-httplib after a response is written in full (not after a failed write: the
  // connection's leave() ends its wait then).
  s.set_logger([guard](const httplib::Request& req, const httplib::Response&) {
    guard->responding(req.remote_addr, req.remote_port, false);
  });
  s.Get(".*", serve);
  s.Post(".*", serve);
  s.Put(".*", serve);
  s.Delete(".*", serve);
  // cpp-httplib 0.11 listens with a backlog of 5: under a burst of connections the kernel drops
  // SYNs and clients retry after a second. Remember the listening socket and listen again with
  // a real backlog (Linux lets listen() change it on a listening socket).
  auto listener = std::make_shared<socket_t>(INVALID_SOCKET);
  s.set_socket_options([listener](socket_t sock) {
    httplib::default_socket_options(sock);
    *listener = sock;
  });
  if (!s.bind_to_port(host, port))
    return "cannot listen on " + host + ":" + std::to_string(port)
           + " (in use, or not an address of this machine)";
  if (*listener != INVALID_SOCKET)
    ::listen(*listener, static_cast<int>(std::max<size_t>(128, limits.max_connections)));
  drain_ = limits.drain;
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  return "";
}

void http_server::stop() {
  if (!impl_)
    return;
  auto* guard = impl_->server.guard.get();
  if (guard)
    guard->close_idle();
  impl_->server.stop();  // the listening socket
  if (guard)
    guard->drain_and_close(drain_);
  if (thread_.joinable())
    thread_.join();
}

http_response http_get(const std::string& host, uint16_t port, const std::string& path,
                       int timeout_ms) {
  http_response r;
  r.status = 0;
  httplib::Client c(host, port);
  auto t = std::chrono::milliseconds(timeout_ms);
  c.set_connection_timeout(t);
  c.set_read_timeout(t);
  c.set_write_timeout(t);
  if (auto res = c.Get(path)) {
    r.status = res->status;
    r.body = res->body;
    r.content_type = res->get_header_value("Content-Type");
  }
  return r;
}

}  // namespace satrap
