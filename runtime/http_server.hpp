// The HTTP/1.1 server of the status endpoint (and of anything else a process serves over HTTP),
// on cpp-httplib: a pool of worker threads, so one slow or idle client costs one connection, not
// the endpoint; read, write and keep-alive timeouts; a cap on body size. Every request goes to
// one handler with the method, path, query parameters, headers and body.
// Threading: the handler runs on the pool's threads, several at once: it must be thread-safe
// (the head's handler asks the admin actor with blocking requests).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace satrap {

struct http_request {
  std::string method;                         // "GET", "POST", ...
  std::string path;                           // without the query
  std::map<std::string, std::string> params;  // query parameters
  std::multimap<std::string, std::string> headers;
  std::string body;
  std::string remote_addr;  // the peer's address, for logs

  // The value of header `name` (case-insensitive), or "".
  std::string header(const std::string& name) const;
};

struct http_response {
  http_response() = default;
  http_response(int s, std::string type, std::string text)
      : status(s), content_type(std::move(type)), body(std::move(text)) {}

  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
};

// Knobs of the server (see runtime/http_server.cpp for why each default).
// cpp-httplib 0.11 gives each connection a worker thread for as long as reads keep arriving
// within read_timeout (a client sending a header byte every few seconds holds it for hours), and
// has no per-request deadline. So the pool grows: a connection that finds every worker busy gets
// a new thread, up to max_connections; idle threads beyond `threads` end after a while. A slow
// client costs one thread, not the endpoint; only max_connections of them at once stall it
// (the connections after that wait in the queue). Headers are capped at 8 KiB (the library's).
// Two guards on top (http_server.cpp's guarded_server): a whole-request deadline (from accepting
// the connection, or from the end of the previous response on a kept-alive one, to the request
// read in full; past it the connection is shut down), so a client trickling a byte within every
// read_timeout holds a worker for request_deadline, not for hours; and a cap on the connections
// one client address holds at once (more are closed at accept). Refusals are counted
// (http_guard_refusals) and logged at most 10 lines a second.
struct http_limits {
  size_t threads = 8;                                 // workers kept when idle
  size_t max_connections = 512;                       // connections served at once (threads)
  std::chrono::milliseconds read_timeout{5000};       // per read of a request
  std::chrono::milliseconds write_timeout{5000};      // per write of a response
  std::chrono::milliseconds keep_alive{5000};         // an idle kept-alive connection is closed
  size_t max_body_bytes = 1 << 20;                    // larger bodies get 413
  std::chrono::milliseconds request_deadline{10000};  // a whole request, headers and body
  size_t max_connections_per_address = 256;           // held at once by one client address
  // Request bodies being read or handled at once, in bytes (0: no bound; lean loop only): a
  // request whose Content-Length would pass it while another body is in flight gets 503 with
  // Retry-After: 1 (its body read and dropped, the connection closed); one body alone, and any
  // body of at most 64 KiB, is always taken. What a handler allocates from a body (parsed
  // values, scores) is bounded with it.
  size_t max_inflight_body_bytes = 0;
  // stop() closes idle connections at once and waits this long for responses being computed or
  // written (a POST that cancels the job the process serves gets its answer before the exit).
  std::chrono::milliseconds drain{5000};
  // Requests one kept-alive connection may carry before the server closes it (cpp-httplib's
  // default is 5; a model server's clients keep a connection for many).
  size_t keep_alive_max_requests = 5;
  // A lean loop per connection instead of cpp-httplib's (http_server.cpp's lean_connection):
  // HTTP/1.1 and 1.0 with Content-Length bodies (chunked ones get 411), read in large recv calls
  // without a poll before each, the response in one send; the same guards, timeouts and caps.
  // cpp-httplib polls before every read of at most 4 KiB and writes headers and body apart: ~20
  // system calls for a 17 KB request and its answer, against a recv and a send here.
  bool lean = false;
};

// Connections closed so far by every http_server of this process: at accept for the
// per-address cap, past the whole-request deadline, and requests refused for the in-flight body
// budget.
struct http_guard_counts {
  uint64_t over_address_cap = 0;
  uint64_t past_deadline = 0;
  uint64_t over_body_budget = 0;  // 503: max_inflight_body_bytes taken
};
http_guard_counts http_guard_refusals();

class http_server {
 public:
  using handler = std::function<http_response(const http_request&)>;

  http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;
  ~http_server();

  // Binds host:port (the host as given: "127.0.0.1" binds loopback only, "0.0.0.0" every
  // interface) and starts serving; "" on success, else why not.
  std::string start(const std::string& host, uint16_t port, handler h, http_limits limits = {});
  // Stops listening, closes idle connections, lets the requests being handled write their
  // responses (up to http_limits::drain), then closes the rest.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::thread thread_;
  std::chrono::milliseconds drain_{0};
};

// GET http://host:port/path with a timeout; status 0 when there was no answer.
http_response http_get(const std::string& host, uint16_t port, const std::string& path,
                       int timeout_ms);

}  // namespace satrap
