// The dashboard's files (web/dashboard/ and uPlot from web/node_modules), compiled into the
// binary by web/embed.cmake, and the HTTP answers that serve them.
// Protocol: GET / is the page; it loads /dashboard.js, /dashboard.css, /uPlot.min.js and
// /uPlot.min.css from the same server and polls /status (the admin's JSON, or the embedded
// job's). Controls (cancel, checkpoint) POST to /jobs/<id>/cancel and /jobs/<id>/checkpoint with
// the admin token in the X-Satrap-Token header (see cli/cluster_processes.cpp).
// Threading: immutable data; call from any thread.
#pragma once

#include "runtime/http_server.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace satrap {

struct web_asset {
  std::string_view path;  // as requested, e.g. "/" or "/uPlot.min.js"
  std::string_view content_type;
  std::string_view body;
};

// Every embedded file (web_assets_data.cpp, generated).
const std::vector<web_asset>& web_assets();

// The answer to a GET or HEAD of one of the dashboard's files; nullopt for any other request.
std::optional<http_response> dashboard_response(const http_request& req);

// The header that carries the admin token on the dashboard's POSTs.
inline constexpr const char* admin_token_header = "X-Satrap-Token";

}  // namespace satrap
