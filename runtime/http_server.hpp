// A small read-only HTTP/1.1 server for the status endpoint: GET only, one request per
// connection, answered by a handler. It runs on its own thread; the handler must be thread-safe
// (the head's handler asks the admin actor with blocking requests).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace satrap {

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class http_server {
 public:
  using handler = std::function<http_response(const std::string& path)>;

  http_server() = default;
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;
  ~http_server() { stop(); }

  // Binds host:port and starts serving; "" on success, else why not.
  std::string start(const std::string& host, uint16_t port, handler h);
  void stop();

 private:
  void serve();
  void answer(int fd);

  int listen_fd_ = -1;
  std::atomic<bool> running_{false};
  std::thread thread_;
  handler handler_;
};

}  // namespace satrap

namespace satrap {

// GET http://host:port/path with a timeout; status 0 when there was no answer.
http_response http_get(const std::string& host, uint16_t port, const std::string& path,
                       int timeout_ms);

}  // namespace satrap
