#include "runtime/http_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <cctype>

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

struct http_server::impl {
  httplib::Server server;
};

http_server::http_server() : impl_(std::make_unique<impl>()) {}

http_server::~http_server() { stop(); }

std::string http_server::start(const std::string& host, uint16_t port, handler h,
                               http_limits limits) {
  auto& s = impl_->server;
  auto threads = std::max<size_t>(1, limits.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  auto secs = [](std::chrono::milliseconds d) { return d.count() / 1000; };
  auto usecs = [](std::chrono::milliseconds d) { return (d.count() % 1000) * 1000; };
  s.set_read_timeout(secs(limits.read_timeout), usecs(limits.read_timeout));
  s.set_write_timeout(secs(limits.write_timeout), usecs(limits.write_timeout));
  s.set_keep_alive_timeout(std::max<time_t>(1, secs(limits.keep_alive)));
  s.set_payload_max_length(limits.max_body_bytes);
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
  if (!s.bind_to_port(host, port))
    return "cannot listen on " + host + ":" + std::to_string(port)
           + " (in use, or not an address of this machine)";
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
