#include "runtime/http_server.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace satrap {

std::string http_server::start(const std::string& host, uint16_t port, handler h) {
  handler_ = std::move(h);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0)
    return std::string("socket: ") + std::strerror(errno);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (host == "127.0.0.1" || host == "localhost")
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || ::listen(listen_fd_, 64) != 0) {
    auto why = std::string(std::strerror(errno));
    ::close(listen_fd_);
    listen_fd_ = -1;
    return "cannot listen on port " + std::to_string(port) + ": " + why;
  }
  running_ = true;
  thread_ = std::thread([this] { serve(); });
  return "";
}

void http_server::stop() {
  if (!running_.exchange(false))
    return;
  if (thread_.joinable())
    thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void http_server::serve() {
  while (running_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0)
      continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    answer(fd);
    ::close(fd);
  }
}

namespace {

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

void send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    auto n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

void http_server::answer(int fd) {
  std::string request;
  char buf[4096];
  // Read the request head (we never need a body); give a slow client two seconds.
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 16384) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0)
      return;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    request.append(buf, static_cast<size_t>(n));
  }
  auto line_end = request.find("\r\n");
  auto line = request.substr(0, line_end);
  auto sp1 = line.find(' ');
  auto sp2 = line.find(' ', sp1 + 1);
  http_response r;
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    r = {400, "text/plain", "bad request\n"};
  } else if (line.substr(0, sp1) != "GET") {
    r = {405, "text/plain", "only GET: this endpoint is read-only\n"};
  } else {
    auto path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    r = handler_(path);
  }
  send_all(fd, "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status)
                 + "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: "
                 + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body);
}

}  // namespace satrap

namespace satrap {

http_response http_get(const std::string& host, uint16_t port, const std::string& path,
                       int timeout_ms) {
  http_response r;
  r.status = 0;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    return r;
  int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0;
  ::freeaddrinfo(res);
  if (!ok) {
    if (fd >= 0)
      ::close(fd);
    return r;
  }
  send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
  std::string data;
  char buf[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0)
      break;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto sp = data.find(' ');
  auto body = data.find("\r\n\r\n");
  if (sp == std::string::npos || body == std::string::npos)
    return r;
  r.status = std::atoi(data.c_str() + sp + 1);
  r.body = data.substr(body + 4);
  return r;
}

}  // namespace satrap
