#include "cli/embedded_status.hpp"

#include "runtime/actor_meter.hpp"
#include "spec/placement.hpp"
#include "web/web_assets.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <thread>

namespace satrap {

namespace {

int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string meter_key(const actor_stat& a) { return a.role + "/" + std::to_string(a.index); }

}  // namespace

embedded_status::embedded_status(const job_spec& spec, std::string version)
    : version_(std::move(version)), started_(std::chrono::steady_clock::now()),
      sampled_(started_) {
  job_.id = "embedded";
  job_.name = spec.name;
  job_.state = job_state::running;
  job_.submitted_ms = job_.started_ms = epoch_ms();
}

void embedded_status::on_progress(const job_progress& p) {
  std::lock_guard lock(mu_);
  job_.steps = p.steps;
  job_.steps_total = p.steps_total;
  job_.samples = p.samples;
  job_.samples_per_sec = p.samples_per_sec;
  job_.loss = p.loss;
  job_.running_auc = p.running_auc;
  job_.restarts = p.restarts;
  job_.batches_replayed = p.batches_replayed;
  job_.checkpoints = p.checkpoints;
  job_.checkpoint_step = p.checkpoint_step;
  if (!p.last_failure.empty())
    job_.last_failure = p.last_failure;
  job_history_sample s;
  s.t_ms = epoch_ms();
  s.step = p.steps;
  s.loss = p.loss;
  s.samples_per_sec = p.samples_per_sec;
  s.running_auc = p.running_auc;
  s.checkpoints = p.checkpoints;
  s.restarts = p.restarts;
  s.last_failure = p.last_failure;
  history_.record(s);
}

void embedded_status::on_end(job_state state, const std::string& message,
                             const job_result* r) {
  std::lock_guard lock(mu_);
  job_.state = state;
  job_.message = message;
  job_.ended_ms = epoch_ms();
  if (r) {
    job_.test_auc = r->test_auc;
    job_.oracle_auc = std::isnan(r->oracle_auc) ? -1 : r->oracle_auc;
    job_.test_logloss = r->test_logloss;
    job_.samples = r->samples;
    job_.samples_per_sec = r->samples_per_sec;
    job_.steps = job_.steps_total;
  }
}

std::string embedded_status::render_status() {
  auto metered = meters_snapshot();
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  auto secs = std::chrono::duration<double>(now - sampled_).count();
  if (secs >= 1.0) {  // messages/s over the last second or more, whoever polls
    std::map<std::string, int64_t> counts;
    for (auto& a : metered) {
      auto k = meter_key(a);
      counts[k] = a.messages;
      auto old = messages_.find(k);
      rates_[k] = old != messages_.end() && a.messages >= old->second
                    ? static_cast<double>(a.messages - old->second) / secs
                    : 0.0;
    }
    messages_ = std::move(counts);
    sampled_ = now;
  }
  nlohmann::json actors = nlohmann::json::array();
  for (auto& a : metered) {
    auto rate = rates_.find(meter_key(a));
    actors.push_back({{"role", a.role},
                      {"index", a.index},
                      {"node", "local"},
                      {"job", job_.id},
                      {"state", "running"},
                      {"mailbox", a.mailbox},
                      {"messages_total", a.messages},
                      {"messages_per_sec", rate != rates_.end() ? rate->second : 0.0}});
  }
  auto pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  nlohmann::json node = {
    {"name", "local"},
    {"host", "127.0.0.1"},
    {"port", 0},
    {"labels", nlohmann::json::object({{"embedded", "true"}})},
    {"resources",
     {{"cores", std::thread::hardware_concurrency()},
      {"memory_bytes", pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0},
      {"gpus", 0}}},
    {"joined", true},
    {"alive", true},
    {"heartbeats", 0},
    {"last_heartbeat_ms_ago", 0},
    {"uptime_s", std::chrono::duration<double>(now - started_).count()},
  };
  auto job = job_record_json(job_);
  job["history"] = history_.to_json();
  nlohmann::json doc = {{"cluster", "embedded"},
                        {"version", version_},
                        {"embedded", true},
                        {"read_only", true},
                        {"nodes", nlohmann::json::array({node})},
                        {"actors", actors},
                        {"jobs", nlohmann::json::array({job})}};
  return doc.dump();
}

http_response embedded_status::handle(const http_request& req) {
  if (auto page = dashboard_response(req))
    return *page;
  if (req.method == "POST")
    return {403, "text/plain",
            "refused: an embedded job (satrap train) is read-only; stop it with Ctrl-C, or run "
            "it on a cluster to cancel or checkpoint it from the page\n"};
  if (req.method != "GET")
    return {405, "text/plain", "only GET\n"};
  if (req.path == "/status")
    return {200, "application/json", render_status()};
  if (req.path == "/healthz")
    return {200, "text/plain", "ok\n"};
  return {404, "text/plain", "not found: try / (the dashboard) /status /healthz\n"};
}

}  // namespace satrap
