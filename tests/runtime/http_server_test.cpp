// The status endpoints' HTTP server (runtime/http_server.hpp): stopping it while a request is
// being handled still answers that request.
#include "runtime/http_server.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace satrap;
using namespace std::chrono_literals;

TEST_CASE("stop lets a request in flight write its response") {
  // A cancel POSTed to `satrap train --status-port` ends the job, and the process stops its
  // server at once: the handler's answer must still reach the client.
  std::atomic<bool> entered{false};
  http_server server;
  uint16_t port = 0;
  for (uint16_t p = 5702; p < 5712 && port == 0; ++p)
    if (server.start("127.0.0.1", p, [&](const http_request&) {
          entered = true;
          std::this_thread::sleep_for(300ms);
          return http_response{200, "text/plain", "done\n"};
        }).empty())
      port = p;
  REQUIRE_MESSAGE(port != 0, "no free port in 5702-5711");
  http_response got;
  std::thread client([&] { got = http_get("127.0.0.1", port, "/slow", 5000); });
  auto until = std::chrono::steady_clock::now() + 5s;
  while (!entered && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  REQUIRE(entered);
  server.stop();  // while the handler sleeps
  client.join();
  CHECK(got.status == 200);
  CHECK(got.body == "done\n");
}

TEST_CASE("a stopped server admits no new request") {
  http_server server;
  uint16_t port = 0;
  for (uint16_t p = 5702; p < 5712 && port == 0; ++p)
    if (server.start("127.0.0.1", p, [](const http_request&) {
          return http_response{200, "text/plain", "up\n"};
        }).empty())
      port = p;
  REQUIRE_MESSAGE(port != 0, "no free port in 5702-5711");
  CHECK(http_get("127.0.0.1", port, "/", 5000).status == 200);
  server.stop();
  CHECK(http_get("127.0.0.1", port, "/", 1000).status == 0);
}
