#include "serving/model_router.hpp"

#include "models/data/feature_cross.hpp"
#include "models/serving/exported_model.hpp"
#include "models/serving/predict_request.hpp"
#include "runtime/http_server.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstring>
#include <future>
#include <map>
#include <mutex>

namespace satrap {

namespace {

http_response router_error(int status, const std::string& message) {
  return {status, "application/json", nlohmann::json{{"error", message}}.dump()};
}

// One partition server: its address, what it holds (for messages) and idle kept-alive clients.
struct partition_server {
  std::string host;
  uint16_t port = 0;
  std::string label;  // "host:port (partitions a-b, ...)"
  std::mutex mu;
  std::vector<std::unique_ptr<httplib::Client>> idle;

  std::unique_ptr<httplib::Client> take(std::chrono::milliseconds timeout) {
    {
      std::lock_guard lk(mu);
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    auto c = std::make_unique<httplib::Client>(host, port);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);  // headers and body go in two writes: no Nagle wait
    c->set_connection_timeout(timeout);
    c->set_read_timeout(timeout);
    c->set_write_timeout(timeout);
    return c;
  }
  void give(std::unique_ptr<httplib::Client> c) {
    std::lock_guard lk(mu);
    idle.push_back(std::move(c));
  }
};

}  // namespace

struct model_router::impl {
  model_router_options o;
  std::shared_ptr<const exported_model> model;
  std::vector<std::unique_ptr<partition_server>> servers;
  std::vector<int32_t> owner;  // partition -> index into servers
  std::mutex scorers_mu;
  std::vector<std::unique_ptr<model_scorer>> scorers;
  std::mutex counts_mu;
  std::map<int, uint64_t> by_code;
  http_server http;

  http_response counted(http_response r) {
    std::lock_guard lk(counts_mu);
    ++by_code[r.status];
    return r;
  }

  std::string discover();
  http_response handle(const http_request& req);
  http_response predict(const http_request& req);
  // The rows of `ids` from server `s` into rows[positions[k]]; "" or the failure (and its status).
  std::string fetch(partition_server& s, const std::vector<uint64_t>& ids,
                    const std::vector<uint32_t>& positions, float* rows, int& status);
};

std::string model_router::impl::discover() {
  const auto& meta = model->meta();
  owner.assign(meta.partitions, -1);
  for (size_t i = 0; i < servers.size(); ++i) {
    auto& s = *servers[i];
    auto c = s.take(o.timeout);
    auto res = c->Get("/v1/models/" + meta.name + "/partitions");
    if (!res)
      return "partition server " + s.host + ":" + std::to_string(s.port) + " does not answer ("
             + httplib::to_string(res.error()) + ")";
    if (res->status != 200)
      return "partition server " + s.host + ":" + std::to_string(s.port) + ": "
             + std::to_string(res->status) + " " + res->body.substr(0, 200);
    try {
      auto j = nlohmann::json::parse(res->body);
      auto version = j.at("version").get<std::string>();
      if (version != meta.version || j.at("partitions").get<uint32_t>() != meta.partitions
          || j.at("dim").get<int>() != model->dim())
        return "partition server " + s.host + ":" + std::to_string(s.port) + " serves version "
               + version + " of " + std::to_string(j.at("partitions").get<uint32_t>())
               + " partitions, the router's model is " + meta.version + " of "
               + std::to_string(meta.partitions) + " (start both from the same model folder)";
      std::string ranges;
      for (auto& r : j.at("held")) {
        auto a = r.at(0).get<uint32_t>(), b = r.at(1).get<uint32_t>();
        if (a >= b || b > meta.partitions)
          return "partition server " + s.host + ":" + std::to_string(s.port)
                 + ": a bad partition range";
        for (auto p = a; p < b; ++p)
          if (owner[p] < 0)
            owner[p] = static_cast<int32_t>(i);
        ranges += (ranges.empty() ? "" : ", ") + std::to_string(a) + "-" + std::to_string(b - 1);
      }
      s.label = s.host + ":" + std::to_string(s.port) + " (partitions " + ranges + ")";
    } catch (const std::exception& e) {
      return "partition server " + s.host + ":" + std::to_string(s.port)
             + ": a bad partitions answer (" + e.what() + ")";
    }
    s.give(std::move(c));
  }
  for (uint32_t p = 0; p < owner.size(); ++p)
    if (owner[p] < 0) {
      auto q = p;
      while (q < owner.size() && owner[q] < 0)
        ++q;
      return "partitions " + std::to_string(p) + "-" + std::to_string(q - 1)
             + " are held by no server (start servers for every export shard: satrap serve "
               "--shards)";
    }
  return "";
}

std::string model_router::impl::fetch(partition_server& s, const std::vector<uint64_t>& ids,
                                      const std::vector<uint32_t>& positions, float* rows,
                                      int& status) {
  const auto& meta = model->meta();
  const size_t dim = static_cast<size_t>(model->dim());
  std::string body(ids.size() * 8, '\0');
  std::memcpy(body.data(), ids.data(), body.size());
  auto c = s.take(o.timeout);
  httplib::Headers headers{{"X-Satrap-Version", meta.version}};
  auto res =
    c->Post("/v1/models/" + meta.name + "/rows", headers, body, "application/octet-stream");
  if (!res) {
    status = 503;
    return "partition server " + s.label + " did not answer (" + httplib::to_string(res.error())
           + ")";
  }
  if (res->status == 409) {
    status = 503;
    s.give(std::move(c));
    return "partition server " + s.label + " serves another version than the router's "
           + meta.version + " (the fleet is between versions: retry): " + res->body.substr(0, 200);
  }
  if (res->status != 200 || res->body.size() != ids.size() * dim * sizeof(float)) {
    status = 502;
    return "partition server " + s.label + ": " + std::to_string(res->status) + " "
           + res->body.substr(0, 200);
  }
  const auto* got = reinterpret_cast<const float*>(res->body.data());
  for (size_t k = 0; k < ids.size(); ++k)
    std::memcpy(rows + positions[k] * dim, got + k * dim, dim * sizeof(float));
  s.give(std::move(c));
  return "";
}

http_response model_router::impl::predict(const http_request& req) {
  const auto& m = *model;
  const auto& meta = m.meta();
  predict_request_limits limits;
  limits.slots = m.input_slots();
  limits.dense_features = m.dense_features();
  limits.max_instances = o.max_instances;
  limits.weights = meta.value_weights;
  auto parsed = m.named() ? parse_named_predict_request(req.body, m, limits)
                          : parse_predict_request(req.body, limits);
  if (!parsed.error.empty())
    return router_error(400, parsed.error);
  auto& in = parsed.input;
  add_crosses(meta.crosses, in.size, m.input_slots(), in.offsets, in.ids);
  auto dedup = dedup_ids(in.ids);
  // The unique ids by server, and where each one's row goes.
  std::vector<std::vector<uint64_t>> ids(servers.size());
  std::vector<std::vector<uint32_t>> positions(servers.size());
  for (uint32_t k = 0; k < dedup.unique.size(); ++k) {
    auto s = static_cast<size_t>(owner[exported_partition_of(dedup.unique[k], meta.partitions)]);
    ids[s].push_back(dedup.unique[k]);
    positions[s].push_back(k);
  }
  std::vector<float> rows(dedup.unique.size() * static_cast<size_t>(m.dim()));
  std::vector<std::future<std::pair<std::string, int>>> pending;
  std::pair<std::string, int> here;
  int last = -1;
  for (size_t s = 0; s < servers.size(); ++s)
    if (!ids[s].empty())
      last = static_cast<int>(s);
  for (size_t s = 0; s < servers.size(); ++s) {
    if (ids[s].empty())
      continue;
    auto call = [this, s, &ids, &positions, &rows] {
      int status = 200;
      auto why = fetch(*servers[s], ids[s], positions[s], rows.data(), status);
      return std::make_pair(why, status);
    };
    // Small lookups go one after another on this thread (a thread per server costs more than a
    // loopback round trip); large ones in parallel, the last on this thread.
    if (static_cast<int>(s) == last || dedup.unique.size() < o.parallel_ids) {
      if (auto r = call(); !r.first.empty() && here.first.empty())
        here = r;
    } else {
      pending.push_back(std::async(std::launch::async, call));
    }
  }
  std::vector<std::pair<std::string, int>> failed;
  for (auto& f : pending)
    if (auto r = f.get(); !r.first.empty())
      failed.push_back(r);
  if (!here.first.empty())
    failed.push_back(here);
  if (!failed.empty())
    return router_error(failed.front().second, failed.front().first);
  std::unique_ptr<model_scorer> scorer;
  {
    std::lock_guard lk(scorers_mu);
    if (!scorers.empty()) {
      scorer = std::move(scorers.back());
      scorers.pop_back();
    }
  }
  if (!scorer)
    scorer = std::make_unique<model_scorer>(model);
  std::vector<float> logits(static_cast<size_t>(in.size) * m.tasks());
  scorer->score_rows(in.size, in.offsets, dedup, rows.data(), in.weights, in.dense, logits.data());
  {
    std::lock_guard lk(scorers_mu);
    scorers.push_back(std::move(scorer));
  }
  return {
    200, "application/json",
    predict_response_json(meta.name, meta.version, logits.data(), logits.size(), meta.labels)};
}

http_response model_router::impl::handle(const http_request& req) {
  const auto& meta = model->meta();
  if (req.path == "/healthz")
    return {200, "text/plain; charset=utf-8", "ok\n"};
  if (req.path == "/readyz")
    return {200, "text/plain; charset=utf-8", "ready " + meta.version + "\n"};
  if (req.path == "/metrics") {
    std::string out = "# TYPE satrap_route_requests_total counter\n";
    std::lock_guard lk(counts_mu);
    for (auto& [code, n] : by_code)
      out += "satrap_route_requests_total{code=\"" + std::to_string(code) + "\"} "
             + std::to_string(n) + "\n";
    return {200, "text/plain; version=0.0.4", out};
  }
  const std::string want = "/v1/models/" + meta.name + ":predict";
  if (req.path == want) {
    if (req.method != "POST")
      return counted(router_error(405, "use POST for :predict"));
    return counted(predict(req));
  }
  return counted(router_error(404, "unknown path " + req.path + " (this router serves POST " + want
                                     + ", GET /healthz, /readyz, /metrics)"));
}

model_router::model_router() : impl_(std::make_unique<impl>()) {}
model_router::~model_router() { stop(); }

std::string model_router::start(const model_router_options& options) {
  auto& d = *impl_;
  d.o = options;
  auto m = exported_model::open(options.model_dir, {exported_no_shards});
  if (!m)
    return m.error();
  d.model = m.value();
  if (options.servers.empty())
    return "give the partition servers (--servers host:port,...)";
  for (auto& a : options.servers) {
    auto colon = a.rfind(':');
    int port = 0;
    try {
      port = colon == std::string::npos ? 0 : std::stoi(a.substr(colon + 1));
    } catch (const std::exception&) {}
    if (colon == std::string::npos || colon == 0 || port <= 0 || port > 65535)
      return "--servers: expected host:port, got '" + a + "'";
    auto s = std::make_unique<partition_server>();
    s->host = a.substr(0, colon);
    s->port = static_cast<uint16_t>(port);
    s->label = a;
    d.servers.push_back(std::move(s));
  }
  if (auto why = d.discover(); !why.empty())
    return why;
  http_limits limits;
  limits.threads = static_cast<size_t>(std::max(1, options.http_threads / 8));
  limits.max_connections = static_cast<size_t>(options.http_threads);
  limits.max_body_bytes = options.max_body_bytes;
  limits.keep_alive_max_requests = 100000;
  limits.lean = true;
  auto why = d.http.start(
    options.host, options.port, [&d](const http_request& req) { return d.handle(req); }, limits);
  if (!why.empty())
    return why;
  for (auto& s : d.servers)
    spdlog::info("route_partition_server {}", s->label);
  spdlog::info("route_started model={} version={} servers={} port={}", d.model->meta().name,
               d.model->meta().version, d.servers.size(), options.port);
  return "";
}

void model_router::stop() {
  if (impl_)
    impl_->http.stop();
}

std::string model_router::version() const {
  return impl_->model ? impl_->model->meta().version : "";
}

}  // namespace satrap
