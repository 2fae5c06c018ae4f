// The admin's HTTP endpoint (cli/admin_http.hpp): routes, and refusals' statuses by type.
#include "cli/admin_http.hpp"

#include "cli/cli_timing.hpp"
#include "runtime/error.hpp"
#include "runtime/liveness.hpp"
#include "web/web_assets.hpp"

#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

namespace satrap {

namespace {

// The dashboard's controls: POST /jobs/<id>/cancel and /jobs/<id>/checkpoint with the admin
// token in the X-Satrap-Token header (the admin checks it, as for `satrap cancel`). A custom
// header cannot be sent cross-origin without a CORS preflight, which this server never grants.
http_response head_http_control(caf::actor_system& sys, const admin_actor& admin,
                                const http_request& req) {
  std::string id, action;
  if (req.path.rfind("/jobs/", 0) == 0) {
    auto rest = req.path.substr(6);
    auto slash = rest.find('/');
    if (slash != std::string::npos) {
      id = rest.substr(0, slash);
      action = rest.substr(slash + 1);
    }
  }
  if (id.empty() || (action != "cancel" && action != "checkpoint"))
    return {404, "text/plain", "not found: POST /jobs/<id>/cancel or /jobs/<id>/checkpoint\n"};
  auto token = req.header(admin_token_header);
  if (token.empty()) {
    spdlog::warn("http_control_refused job={} action={} from={} reason=no_token", id, action,
                 req.remote_addr);
    return {401, "text/plain",
            "refused: this needs the admin token in the X-Satrap-Token header\n"};
  }
  caf::scoped_actor self{sys};
  http_response r;
  auto refused = [&](caf::error& e) {
    auto why = error_text(e);
    spdlog::warn("http_control_refused job={} action={} from={} reason=\"{}\"", id, action,
                 req.remote_addr, why);
    r = {http_status_of(refusal_of(e)), "text/plain", "refused: " + why + "\n"};
  };
  if (action == "cancel")
    self->request(admin, ms(cli_timing::cancel_request_ms), cancel_atom::value, token, id)
      .receive(
        [&](job_record& j) {
          r = {200, "application/json", job_record_json(j).dump()};
        },
        refused);
  else
    self->request(admin, ms(cli_timing::checkpoint_request_ms), checkpoint_atom::value, token, id)
      .receive(
        [&](int64_t step) {
          r = {200, "application/json", nlohmann::json{{"checkpoint_step", step}}.dump()};
        },
        refused);
  if (r.status == 200)
    spdlog::info("http_control job={} action={} from={}", id, action, req.remote_addr);
  return r;
}

}  // namespace

int http_status_of(admin_refusal r) {
  switch (r) {
    case admin_refusal::unauthorized: return 403;
    case admin_refusal::conflict: return 409;
  }
  return 409;
}

http_response admin_http(caf::actor_system& sys, const admin_actor& admin,
                         const admin_http_options& options, const http_request& req) {
  auto& path = req.path;
  if (auto page = dashboard_response(req))  // the dashboard (web/): GET /
    return *page;
  if (req.method == "POST" && options.read_only)
    return {403, "text/plain",
            "refused: an embedded job (satrap train) is read-only; stop it with Ctrl-C, set "
            "SATRAP_ADMIN_TOKEN for `satrap train` to cancel or checkpoint it from the page, or "
            "run it on a cluster\n"};
  if (req.method == "POST")
    return head_http_control(sys, admin, req);
  if (req.method != "GET")
    return {405, "text/plain", "only GET, and POST to /jobs/<id>/cancel or /checkpoint\n"};
  caf::scoped_actor self{sys};
  http_response r;
  auto ask = [&](auto atom, const char* type) {
    self->request(admin, ms(cli_timing::status_request_ms), atom)
      .receive(
        [&](std::string& body) {
          r = {200, type, std::move(body)};
        },
        [&](caf::error& e) {
          r = {503, "text/plain", error_text(e) + "\n"};
        });
  };
  if (path == "/status") {
    ask(status_atom::value, "application/json");
  } else if (path == "/metrics") {
    ask(metrics_atom::value, "text/plain; version=0.0.4");
  } else if (path == "/healthz") {
    // Alive while the admin actor runs (not asked: a busy admin is alive), so that a liveness
    // probe restarts a head whose admin is gone. With the head's pid: `satrap up` checks that
    // the head it started is the one answering.
    if (auto why = actor_down_reason(sys, admin); !why.empty())
      r = {503, "text/plain", "the admin actor is down: " + why + "\n"};
    else
      r = {200, "text/plain", "ok pid=" + std::to_string(::getpid()) + "\n"};
  } else if (path == "/readyz") {
    // Ready when every node of the manifest has joined and is alive.
    self->request(admin, ms(cli_timing::status_request_ms), ready_atom::value)
      .receive(
        [&](bool ready, std::string& waiting) {
          r = {ready ? 200 : 503, "text/plain",
               ready ? "ready pid=" + std::to_string(::getpid()) + "\n"
                     : "waiting for nodes: " + waiting + "\n"};
        },
        [&](caf::error& e) {
          r = {503, "text/plain", error_text(e) + "\n"};
        });
  } else {
    r = {404, "text/plain", "not found: try / (the dashboard) /status /metrics /healthz /readyz\n"};
  }
  return r;
}

}  // namespace satrap
