// The model server's HTTP routes and its Prometheus text.
#include "serving/model_server_impl.hpp"
#include "runtime/secrets.hpp"

#include <nlohmann/json.hpp>

#include <cstring>

namespace satrap {

http_response serve_detail::json_error(int status, const std::string& message) {
  std::string body = "{\"error\":\"";
  for (char c : message) {
    if (c == '"' || c == '\\')
      body += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    body += c;
  }
  body += "\"}";
  return {status, "application/json", body};
}

std::string model_server::impl::metrics_text() const {
  std::ostringstream os;
  os << "# TYPE satrap_serve_requests_total counter\n";
  {
    std::lock_guard lk(const_cast<std::mutex&>(counters_mu));
    for (auto& [code, n] : requests_by_code)
      os << "satrap_serve_requests_total{code=\"" << code << "\"} " << n << "\n";
    os << "# TYPE satrap_serve_errors_total counter\n";
    for (auto& [reason, n] : errors_by_reason)
      os << "satrap_serve_errors_total{reason=\"" << reason << "\"} " << n << "\n";
  }
  os << "# TYPE satrap_serve_request_seconds histogram\n";
  latency.render(os, "satrap_serve_request_seconds", latency_bounds);
  os << "# TYPE satrap_serve_batch_instances histogram\n";
  batches.render(os, "satrap_serve_batch_instances", batch_bounds);
  os << "# TYPE satrap_serve_instances_total counter\nsatrap_serve_instances_total "
     << instances.load() << "\n";
  os << "# TYPE satrap_serve_reloads_total counter\nsatrap_serve_reloads_total " << reloads.load()
     << "\nsatrap_serve_reload_failures_total " << reload_failures.load() << "\n";
  os << "# TYPE satrap_serve_versions_mapped gauge\nsatrap_serve_versions_mapped "
     << versions_mapped.load() << "\n";
  // The HTTP guards (runtime/http_server.hpp): connections closed, requests refused.
  auto http = http_guard_refusals();
  os << "# TYPE satrap_http_refused_total counter\n"
     << "satrap_http_refused_total{reason=\"connections_per_address\"} " << http.over_address_cap
     << "\nsatrap_http_refused_total{reason=\"request_deadline\"} " << http.past_deadline
     << "\nsatrap_http_refused_total{reason=\"inflight_body_bytes\"} " << http.over_body_budget
     << "\n";
  if (auto v = now())
    os << "satrap_serve_model_info{name=\"" << v->model->meta().name << "\",version=\""
       << v->model->meta().version << "\"} 1\n";
  return os.str();
}

http_response model_server::impl::handle(const http_request& req) {
  auto started = options.environment->steady_now();
  auto res = route(req);
  if ((req.path.rfind("/v1/models/", 0) == 0 || req.path.rfind("/v2/models/", 0) == 0)
      && req.method == "POST")
    latency.observe(
      std::chrono::duration<double>(options.environment->steady_now() - started).count(),
      latency_bounds);
  return res;
}

http_response model_server::impl::route(const http_request& req) {
  const auto& path = req.path;
  if (path == "/healthz")
    return {200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/readyz") {
    auto v = now();
    return v ? http_response{200, "text/plain; charset=utf-8",
                             "ready " + v->model->meta().version + "\n"}
             : http_response{503, "text/plain; charset=utf-8", "no model loaded\n"};
  }
  if (path == "/metrics")
    return {200, "text/plain; version=0.0.4", metrics_text()};
  if (path == "/v2" || path.rfind("/v2/", 0) == 0)
    return v2_route(req);
  if (path == "/admin/reload") {
    if (req.method != "POST")
      return json_error(405, "use POST /admin/reload");
    if (options.admin_token.empty())
      return count(403, "admin"),
             json_error(403, "reloading on request is off (start serve with --admin-token-file)");
    auto auth = req.header("Authorization");
    auto given = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : std::string();
    if (!token_equal(given, options.admin_token))  // constant time (runtime/secrets.hpp)
      return count(401, "admin"),
             json_error(401, "wrong or missing admin token (Authorization: Bearer <token>)");
    std::string dir;
    if (auto it = req.params.find("dir"); it != req.params.end())
      dir = it->second;
    else if (!options.watch_dir.empty())
      dir = newest_in_watch();
    if (dir.empty())
      return json_error(400, "give ?dir=<model folder> (no watched folder, or nothing in it)");
    auto err = load(dir);
    if (!err.empty())
      return json_error(422, "reload failed, still serving the previous version: " + err);
    return {200, "application/json", "{\"version\":\"" + now()->model->meta().version + "\"}"};
  }
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) == 0) {
    auto rest = path.substr(prefix.size());
    if (auto slash = rest.find('/'); slash != std::string::npos)
      return partition_route(req, rest.substr(0, slash), rest.substr(slash + 1));
    auto colon = rest.find(':');
    if (colon != std::string::npos) {
      if (rest.substr(colon) != ":predict")
        return count(404, "unknown_path"),
               json_error(404, "unknown verb '" + rest.substr(colon + 1) + "' (use :predict)");
      if (req.method != "POST")
        return count(405, "method"), json_error(405, "use POST for :predict");
      return predict(req, rest.substr(0, colon));
    }
    auto v = now();
    if (!v)
      return json_error(503, "no model loaded yet");
    if (rest != v->model->meta().name)
      return json_error(404, "no model named '" + rest + "'");
    return {200, "application/json",
            "{\"model_version_status\":[{\"version\":\"" + v->model->meta().version
              + "\",\"state\":\"AVAILABLE\"}]}"};
  }
  count(404, "unknown_path");
  return json_error(404, "unknown path " + path
                           + " (POST /v1/models/<name>:predict, POST /v2/models/<name>/infer, GET /healthz, "
                             "/readyz, /metrics, /v2/health/ready)");
}

// A fleet's partition server (model_server.hpp): its partitions, and rows by id.
http_response model_server::impl::partition_route(const http_request& req, const std::string& name,
                                                  const std::string& what) {
  auto v = now();
  if (!v)
    return count(503, "not_ready"), json_error(503, "no model loaded yet");
  const auto& m = *v->model;
  if (name != m.meta().name)
    return count(404, "unknown_model"), json_error(404, "no model named '" + name + "'");
  if (what == "partitions") {
    std::string held;
    for (auto [a, b] : m.held_ranges())
      held += (held.empty() ? "[" : ",[") + std::to_string(a) + "," + std::to_string(b) + "]";
    return {200, "application/json",
            "{\"name\":" + nlohmann::json(m.meta().name).dump()
              + ",\"version\":" + nlohmann::json(m.meta().version).dump()
              + ",\"partitions\":" + std::to_string(m.meta().partitions)
              + ",\"dim\":" + std::to_string(m.dim()) + ",\"held\":[" + held + "]}"};
  }
  if (what != "rows")
    return count(404, "unknown_path"),
           json_error(404, "unknown path (GET .../partitions, POST .../rows)");
  if (req.method != "POST")
    return count(405, "method"), json_error(405, "use POST for rows");
  auto pinned = req.header("X-Satrap-Version");
  if (!pinned.empty() && pinned != m.meta().version)
    return count(409, "version"),
           json_error(409, "this server serves version " + m.meta().version + ", not " + pinned);
  if (req.body.size() % 8 != 0)
    return count(400, "bad_request"),
           json_error(400,
                      "rows: expected the ids as little-endian uint64 (a multiple of 8 "
                      "bytes), got "
                        + std::to_string(req.body.size()) + " bytes");
  const size_t n = req.body.size() / 8;
  const int dim = m.dim();
  http_response res{200, "application/octet-stream", std::string(n * dim * sizeof(float), '\0')};
  auto* out = reinterpret_cast<float*>(res.body.data());
  for (size_t k = 0; k < n; ++k) {
    uint64_t id;
    std::memcpy(&id, req.body.data() + 8 * k, 8);
    if (!m.holds(id))
      return count(400, "partition_not_held"),
             json_error(400, "id " + std::to_string(id) + ": partition "
                               + std::to_string(exported_partition_of(id, m.meta().partitions))
                               + " is not held by this server");
    m.lookup(id, out + k * dim);
  }
  res.headers.emplace_back("X-Satrap-Version", m.meta().version);
  count(200, nullptr);
  return res;
}

}  // namespace satrap
