#include "runtime/http_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace satrap {

std::string http_request::header(const std::string& name) const {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  auto want = lower(name);
  for (auto& [k, v] : headers)
    if (lower(k) == want)
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

}  // namespace

struct http_server::impl {
  httplib::Server server;
};

http_server::http_server() : impl_(std::make_unique<impl>()) {}

http_server::~http_server() { stop(); }

std::string http_server::start(const std::string& host, uint16_t port, handler h,
                               http_limits limits) {
  auto& s = impl_->server;
  s.new_task_queue = [limits] { return new elastic_pool(limits.threads, limits.max_connections); };
  auto secs = [](std::chrono::milliseconds d) { return d.count() / 1000; };
  auto usecs = [](std::chrono::milliseconds d) { return (d.count() % 1000) * 1000; };
  s.set_read_timeout(secs(limits.read_timeout), usecs(limits.read_timeout));
  s.set_write_timeout(secs(limits.write_timeout), usecs(limits.write_timeout));
  s.set_keep_alive_timeout(std::max<time_t>(1, secs(limits.keep_alive)));
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
  auto serve = [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    http_request r;
    r.method = req.method;
    r.path = req.path;
    for (auto& [k, v] : req.params)
      r.params.emplace(k, v);
    for (auto& [k, v] : req.headers)
      r.headers.emplace(k, v);
    r.body = req.body;
    r.remote_addr = req.remote_addr;
    auto out = h(r);
    res.status = out.status;
    for (auto& [k, v] : out.headers)
      res.set_header(k, v);
    res.set_content(std::move(out.body), out.content_type);
  };
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
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  return "";
}

void http_server::stop() {
  if (!impl_)
    return;
  impl_->server.stop();
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
