#include "web/web_assets.hpp"

namespace satrap {

std::optional<http_response> dashboard_response(const http_request& req) {
  if (req.method != "GET" && req.method != "HEAD")
    return std::nullopt;
  auto path = req.path == "/index.html" ? std::string("/") : req.path;
  for (auto& a : web_assets())
    if (a.path == path) {
      http_response r{200, std::string(a.content_type), std::string(a.body)};
      // The page and the library are part of this binary: a new binary may change them.
      r.headers.push_back({"Cache-Control", "no-cache"});
      r.headers.push_back({"X-Content-Type-Options", "nosniff"});
      if (a.path == "/")
        r.headers.push_back({"Content-Security-Policy",
                             "default-src 'self'; img-src 'self' data:; style-src 'self' "
                             "'unsafe-inline'; frame-ancestors 'none'"});
      return r;
    }
  return std::nullopt;
}

}  // namespace satrap
