// `satrap head` and `satrap node`: the two long-running cluster processes.
#include "cli/cluster_commands.hpp"

#include "runtime/actor_meter.hpp"

#include "actors/node_agent/node_agent.hpp"
#include "actors/node_agent/node_link.hpp"
#include "cli/certs_command.hpp"
#include "cli/cluster_common.hpp"
#include "cli/process_record.hpp"
#include "runtime/error.hpp"
#include "runtime/http_server.hpp"
#include "web/web_assets.hpp"
#include "runtime/log.hpp"
#include "runtime/secrets.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <cblas.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <atomic>
#include <thread>


namespace fs = std::filesystem;

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
    bool token_refused = why.find("token") != std::string::npos;
    spdlog::warn("http_control_refused job={} action={} from={} reason=\"{}\"", id, action,
                 req.remote_addr, why);
    r = {token_refused ? 403 : 409, "text/plain", "refused: " + why + "\n"};
  };
  if (action == "cancel")
    self->request(admin, std::chrono::seconds(10), cancel_atom::value, token, id)
      .receive([&](job_record& j) { r = {200, "application/json", job_record_json(j).dump()}; },
               refused);
  else
    self->request(admin, std::chrono::seconds(60), checkpoint_atom::value, token, id)
      .receive(
        [&](int64_t step) {
          r = {200, "application/json", nlohmann::json{{"checkpoint_step", step}}.dump()};
        },
        refused);
  if (r.status == 200)
    spdlog::info("http_control job={} action={} from={}", id, action, req.remote_addr);
  return r;
}

http_response head_http(caf::actor_system& sys, const admin_actor& admin, const http_request& req) {
  auto& path = req.path;
  if (auto page = dashboard_response(req))  // the dashboard (web/): GET /
    return *page;
  if (req.method == "POST")
    return head_http_control(sys, admin, req);
  if (req.method != "GET")
    return {405, "text/plain", "only GET, and POST to /jobs/<id>/cancel or /checkpoint\n"};
  caf::scoped_actor self{sys};
  http_response r;
  auto ask = [&](auto atom, const char* type) {
    self->request(admin, std::chrono::seconds(5), atom)
      .receive([&](std::string& body) { r = {200, type, std::move(body)}; },
               [&](caf::error& e) { r = {503, "text/plain", error_text(e) + "\n"}; });
  };
  if (path == "/status") {
    ask(status_atom::value, "application/json");
  } else if (path == "/metrics") {
    ask(metrics_atom::value, "text/plain; version=0.0.4");
  } else if (path == "/healthz") {
    // With the head's pid: `satrap up` checks that the head it started is the one answering.
    r = {200, "text/plain", "ok pid=" + std::to_string(::getpid()) + "\n"};
  } else if (path == "/readyz") {
    // Ready when every node of the manifest has joined and is alive.
    self->request(admin, std::chrono::seconds(5), ready_atom::value)
      .receive(
        [&](bool ready, std::string& waiting) {
          r = {ready ? 200 : 503, "text/plain",
               ready ? "ready pid=" + std::to_string(::getpid()) + "\n"
                     : "waiting for nodes: " + waiting + "\n"};
        },
        [&](caf::error& e) { r = {503, "text/plain", error_text(e) + "\n"}; });
  } else {
    r = {404, "text/plain", "not found: try / (the dashboard) /status /metrics /healthz /readyz\n"};
  }
  return r;
}

// Ends the admin. The exit must come from an actor of this process: the admin drops exit messages
// without a local sender (actors/peer_guard.hpp), and an admin that never ends keeps the actor
// system's destructor waiting, so a head that failed to start used to hang there instead of
// exiting (its SIGTERM blocked, see block_stop_signals).
void stop_admin(caf::actor_system& sys, const admin_actor& admin) {
  caf::scoped_actor{sys}->send_exit(admin, caf::exit_reason::user_shutdown);
}

}  // namespace

int cluster_commands::run_head() {
  auto m = cluster_manifest(manifest_file_);
  if (!m) {
    std::cerr << "satrap head: " << error_text(m.error()) << "\n";
    return 2;
  }
  auto dir = cluster_state_dir(state_dir_, *m);
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto token = cluster_token(token_file_, dir);
  if (token.empty()) {
    std::cerr << "satrap head: no admin token: give --token-file, set SATRAP_ADMIN_TOKEN, or "
                 "write one to "
              << dir << "/admin.token (satrap up does)\n";
    return 2;
  }
  block_stop_signals();
  openblas_set_num_threads(1);
  satrap_config cfg;
  cluster_config_setup(cfg);
  if (auto why = cluster_security_setup(cfg, *m, dir, "head"); !why.empty()) {
    std::cerr << "satrap head: " << why << "\n";
    return 2;
  }
  // The node tokens, made here when missing (a head started by hand on a fresh state dir).
  admin_config ac{*m, satrap_version, token, dir, m->timing, {}};
  auto secrets = cluster_certs_dir(*m, dir);
  for (auto& n : m->nodes) {
    auto file = secrets + "/node-" + n.name + ".token";
    auto t = secret_file_read(file);
    if (t.empty()) {
      fs::create_directories(secrets, ec);
      t = random_token();
      if (!secret_file_write(file, t)) {
        std::cerr << "satrap head: cannot write " << file << "\n";
        return 1;
      }
    }
    ac.node_tokens[n.name] = t;
  }
  caf::actor_system sys{cfg};
  auto admin = spawn_admin(sys, ac);
  auto& listen = listen_address(m->head.host, m->head.bind);
  auto port = cluster_publish(sys, admin, m->head.port, listen);
  if (!port) {
    std::cerr << "satrap head: cannot listen on " << listen << ":" << m->head.port << ": "
              << error_text(port.error()) << "\n";
    stop_admin(sys, admin);
    return 1;
  }
  http_server http;
  auto why = http.start(listen_.empty() ? listen : listen_, m->head.status_port,
                        [&sys, admin](const http_request& req) { return head_http(sys, admin, req); });
  if (!why.empty()) {
    std::cerr << "satrap head: status endpoint: " << why << "\n";
    stop_admin(sys, admin);
    return 1;
  }
  spdlog::info("head_started cluster={} listen={} port={} status_port={} tls={} state_dir={}",
               m->cluster, listen, m->head.port, m->head.status_port,
               m->security.tls == tls_mode::off ? "off" : "required", dir);
  wait_for_stop_signal(-1);
  spdlog::info("head_stopping cluster={}", m->cluster);
  http.stop();
  stop_admin(sys, admin);
  std::_Exit(0);  // peers may still hold connections; nothing is left to flush
}

int cluster_commands::run_node() {
  auto m = cluster_manifest(manifest_file_);
  if (!m) {
    std::cerr << "satrap node: " << error_text(m.error()) << "\n";
    return 2;
  }
  auto spec = std::find_if(m->nodes.begin(), m->nodes.end(),
                           [&](auto& n) { return n.name == node_name_; });
  if (spec == m->nodes.end()) {
    std::cerr << "satrap node: no node '" << node_name_ << "' in the manifest of cluster '"
              << m->cluster << "'\n";
    return 2;
  }
  auto restarts = node_restarts(starts_file_);
  if (!restarts) {
    std::cerr << "satrap node: " << error_text(restarts.error()) << "\n";
    return 2;
  }
  auto dir = cluster_state_dir(state_dir_, *m);
  auto token_file = cluster_certs_dir(*m, dir) + "/node-" + spec->name + ".token";
  auto token = secret_file_read(token_file);
  if (token.empty()) {
    std::cerr << "satrap node: no node token in " << token_file << ": copy it from the head's "
              << "state dir (`satrap certs` or the head make it)\n";
    return 2;
  }
  block_stop_signals();
  openblas_set_num_threads(1);
  satrap_config cfg;
  cluster_config_setup(cfg);
  cfg.set("scheduler.max-threads", std::max(1, spec->resources.cores));
  if (auto why = cluster_security_setup(cfg, *m, dir, "node-" + spec->name); !why.empty()) {
    std::cerr << "satrap node: " << why << "\n";
    return 2;
  }
  caf::actor_system sys{cfg};
  auto agent = spawn_node_agent(sys, {spec->name});
  auto& bind = listen_address(spec->host, spec->bind);
  if (auto port = cluster_publish(sys, agent, spec->port, bind); !port) {
    std::cerr << "satrap node: cannot listen on " << bind << ":" << spec->port << ": "
              << error_text(port.error()) << "\n";
    return 1;
  }
  // Membership (register, heartbeats, re-register after losing the head) is the node_link
  // actor's; this thread waits for a stop signal or for the link to give up.
  std::atomic<int> ended{-1};
  node_link_config lc;
  lc.cluster = *m;
  lc.node = spec->name;
  lc.version = satrap_version;
  lc.token = token;
  lc.restarts = *restarts;
  lc.agent = agent;
  lc.connector = cluster_connector(sys);
  lc.heartbeat_interval = ms(m->timing.heartbeat_interval_ms);
  lc.register_timeout = ms(m->timing.register_timeout_ms);
  lc.give_up_after = std::chrono::seconds(wait_s_);
  lc.connect_peers = sys.has_openssl_manager();
  lc.on_end = [&ended](int status) { ended = status; };
  auto link = spawn_node_link(sys, std::move(lc));
  while (!wait_for_stop_signal(200))
    if (ended >= 0) {
      std::cerr << "satrap node: could not join the head of cluster '" << m->cluster
                << "' (see the log above)\n";
      std::_Exit(1);
    }
  std::_Exit(0);
}

}  // namespace satrap
