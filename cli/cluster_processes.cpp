// satrap head, node, up, down; and the subcommand table of the cluster commands.
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

void cluster_commands::add_to(CLI::App& app) {
  auto shared = [this](CLI::App* sub) {
    sub->add_option("--manifest", manifest_file_, "node manifest (default: $SATRAP_MANIFEST, else "
                                                  "the last `satrap up` here)");
    sub->add_option("--state-dir", state_dir_, "logs, pid files, token, job table "
                                               "(default .satrap/<cluster>)");
    sub->add_option("--token-file", token_file_, "admin token (default: $SATRAP_ADMIN_TOKEN, "
                                                 "else <state dir>/admin.token)");
    sub->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  };
  head_ = app.add_subcommand("head", "Run the head of a cluster: admin actor, node registry, "
                                     "job table, HTTP status endpoint (/status /metrics /healthz "
                                     "/readyz). Runs until SIGINT or SIGTERM.");
  shared(head_);
  node_ = app.add_subcommand("node", "Run one node of a cluster: joins the head, spawns role "
                                     "actors on request, sends heartbeats.");
  shared(node_);
  node_->add_option("--name", node_name_, "this node's name in the manifest")->required();
  node_->add_option("--wait", wait_s_, "seconds to keep trying to reach the head")
    ->capture_default_str();
  node_->add_option("--starts-file", starts_file_,
                    "count this node's starts in FILE and report the restarts to the head (for "
                    "containers restarted by their runtime; `satrap supervise` sets "
                    "$SATRAP_NODE_RESTARTS instead)");
  head_->add_option("--listen", listen_, "address the status endpoint binds (default: the "
                                         "manifest's head host; 0.0.0.0 in a container)");
  supervise_ = app.add_subcommand(
    "supervise", "Run this host's nodes and restart one whose process exits, with backoff and a "
                 "restart intensity (at most --max-restarts within --period); past it, give up "
                 "on that node and tell the head. `satrap up` starts it; `satrap down` stops it "
                 "first, and it stops its nodes.");
  shared(supervise_);
  supervise_->add_option("--max-restarts", max_restarts_, "restarts allowed within --period")
    ->capture_default_str()->check(CLI::Range(0, 1000));
  supervise_->add_option("--period", period_s_, "seconds of the restart intensity window")
    ->capture_default_str()->check(CLI::Range(1, 86400));
  supervise_->add_option("--backoff-ms", backoff_ms_, "delay before the first restart, doubled for "
                                                      "each restart within the period")
    ->capture_default_str()->check(CLI::Range(0, 600000));
  supervise_->add_option("--backoff-max-ms", backoff_max_ms_, "largest delay before a restart")
    ->capture_default_str()->check(CLI::Range(0, 600000));
  up_ = app.add_subcommand("up", "Start the head and every node whose host is this machine, in "
                                 "the background (logs and pid files in the state dir); wait "
                                 "until every node has joined.");
  shared(up_);
  up_->add_option("--wait", wait_s_, "seconds to wait for the cluster to be ready")
    ->capture_default_str();
  down_ = app.add_subcommand("down", "Stop every process `satrap up` started for the cluster.");
  shared(down_);
  submit_ = app.add_subcommand("submit", "Submit a job file to the cluster; prints its id.");
  shared(submit_);
  submit_->add_option("job", job_file_, "job file (YAML)")->required()->check(CLI::ExistingFile);
  submit_->add_flag("--follow", follow_, "show progress until the job ends; exit status 0 only "
                                         "when it SUCCEEDED");
  submit_->add_flag("--json", json_, "with --follow: end with the job's record as one JSON line");
  submit_->add_option("--resume", resume_dir_, "continue from the newest checkpoint in this "
                                               "directory (a job's checkpoint.dir)");
  jobs_ = app.add_subcommand("jobs", "List the cluster's jobs.");
  shared(jobs_);
  jobs_->add_flag("--json", json_, "one JSON object per job");
  cancel_ = app.add_subcommand("cancel", "Cancel a pending or running job.");
  shared(cancel_);
  cancel_->add_option("id", job_id_, "job id (see satrap jobs)")->required();
  status_ = app.add_subcommand("status", "Nodes, actors and jobs of the cluster.");
  shared(status_);
  status_->add_flag("--json", json_, "the head's /status document");
  checkpoint_ = app.add_subcommand("checkpoint", "Take a consistent checkpoint of a running job "
                                                 "now (into its checkpoint.dir); prints its step.");
  shared(checkpoint_);
  checkpoint_->add_option("id", job_id_, "job id (see satrap jobs)")->required();
}

int cluster_commands::run() {
  if (!head_ || !(head_->parsed() || node_->parsed() || up_->parsed() || down_->parsed()
                  || submit_->parsed() || jobs_->parsed() || cancel_->parsed() || status_->parsed()
                  || checkpoint_->parsed() || supervise_->parsed()))
    return -1;
  if (!log_setup(log_level_)) {
    std::cerr << "satrap: --log-level: expected trace, debug, info, warn, error or off\n";
    return 2;
  }
  if (head_->parsed()) return run_head();
  if (node_->parsed()) return run_node();
  if (up_->parsed()) return run_up();
  if (down_->parsed()) return run_down();
  if (submit_->parsed()) return run_submit();
  if (jobs_->parsed()) return run_jobs();
  if (cancel_->parsed()) return run_cancel();
  if (checkpoint_->parsed()) return run_checkpoint();
  if (supervise_->parsed()) return run_supervise();
  return run_status();
}

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
    caf::anon_send_exit(admin, caf::exit_reason::user_shutdown);
    return 1;
  }
  http_server http;
  auto why = http.start(listen_.empty() ? listen : listen_, m->head.status_port,
                        [&sys, admin](const http_request& req) { return head_http(sys, admin, req); });
  if (!why.empty()) {
    std::cerr << "satrap head: status endpoint: " << why << "\n";
    caf::anon_send_exit(admin, caf::exit_reason::user_shutdown);
    return 1;
  }
  spdlog::info("head_started cluster={} listen={} port={} status_port={} tls={} state_dir={}",
               m->cluster, listen, m->head.port, m->head.status_port,
               m->security.tls == tls_mode::off ? "off" : "required", dir);
  wait_for_stop_signal(-1);
  spdlog::info("head_stopping cluster={}", m->cluster);
  http.stop();
  // From an actor of this process: the admin drops exit messages without a local sender.
  caf::scoped_actor{sys}->send_exit(admin, caf::exit_reason::user_shutdown);
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

namespace {

bool host_is_local(const std::string& host) {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name);
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == name;
}

bool pid_alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// For a child of this process: false once it exited (reaping it: a zombie still answers kill 0,
// which once hid a head that had died).
bool child_alive(pid_t pid) {
  return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0 && pid_alive(pid);
}

// Starts `satrap ARGS...` detached, output to `log`; returns its pid.
pid_t start_process(const std::vector<std::string>& args, const std::string& log) {
  auto exe = satrap_executable();  // its real path: the process is named satrap, not exe
  auto pid = ::fork();
  if (pid != 0)
    return pid;
  ::setsid();
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull, 0);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  std::_Exit(127);
}

}  // namespace

int cluster_commands::run_up() {
  std::string path;
  auto m = cluster_manifest(manifest_file_, &path);
  if (!m) {
    std::cerr << "satrap up: " << error_text(m.error()) << "\n";
    return 2;
  }
  if (path.empty()) {
    std::cerr << "satrap up: give the manifest as a file (--manifest or $SATRAP_MANIFEST): the "
                 "processes it starts read it from there\n";
    return 2;
  }
  path = fs::absolute(path).string();
  auto dir = fs::absolute(cluster_state_dir(state_dir_, *m)).string();
  fs::create_directories(dir);
  for (auto* file : {"/head.pid", "/supervisor.pid"})
    if (process_record_live(dir + file)) {
      std::cerr << "satrap up: cluster '" << m->cluster << "' is already up (" << dir << file
                << "); `satrap down` first\n";
      return 1;
    }
  auto token_path = token_file_.empty() ? dir + "/admin.token" : token_file_;
  if (cluster_token(token_file_, dir).empty() && !secret_file_write(token_path, random_token())) {
    std::cerr << "satrap up: cannot write " << token_path << "\n";
    return 1;
  }
  // The cluster CA, each role's certificate and the node tokens (what is missing).
  if (auto e = make_cluster_certs(*m, cluster_certs_dir(*m, dir), false); !e.empty()) {
    std::cerr << "satrap up: " << e << "\n";
    return 1;
  }
  auto common = std::vector<std::string>{"--manifest", path, "--state-dir", dir, "--token-file",
                                         token_path, "--log-level", log_level_};
  auto launch = [&](std::vector<std::string> args, const std::string& name) {
    args.insert(args.begin(), "satrap");
    args.insert(args.end(), common.begin(), common.end());
    auto pid = start_process(args, dir + "/" + name + ".log");
    process_record_write(dir + "/" + name + ".pid", pid, args);
    return pid;
  };
  auto head_pid = launch({"head"}, "head");
  // This host's nodes run under a per-host supervisor that restarts them when they exit
  // (cluster_supervisor.cpp); it writes their pid files.
  int local = 0;
  for (auto& n : m->nodes)
    local += host_is_local(n.host) ? 1 : 0;
  pid_t supervisor_pid = local > 0 ? launch({"supervise"}, "supervisor") : 0;
  // After a failed start: what this command started goes (the supervisor stops its nodes).
  auto stop_started = [&] {
    for (auto pid : {supervisor_pid, head_pid})
      if (child_alive(pid))
        ::kill(pid, SIGTERM);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while ((child_alive(supervisor_pid) || child_alive(head_pid))
           && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  fs::create_directories(".satrap");
  std::ofstream(".satrap/current") << path << "\n";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s_);
  // Only the head this command started counts as an answer: another cluster's head on the same
  // status port once made a second `up` report success while all its processes had died.
  const auto ours = "ready pid=" + std::to_string(head_pid) + "\n";
  std::string other;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!child_alive(head_pid)) {
      std::cerr << "satrap up: the head exited; see " << dir << "/head.log"
                << (other.empty() ? std::string{}
                                  : " (port " + std::to_string(m->head.status_port)
                                      + " answers for another head, " + other
                                      + ": is another cluster using this manifest's ports?)")
                << "\n";
      stop_started();
      return 1;
    }
    auto r = http_get(m->head.host, m->head.status_port, "/readyz", 1000);
    if (r.status == 200 && r.body != ours) {
      auto at = r.body.find("pid=");
      other = at == std::string::npos ? "one without a pid" : r.body.substr(at);
      while (!other.empty() && other.back() == '\n')
        other.pop_back();
    }
    if (r.status == 200 && r.body == ours) {
      std::cout << "cluster '" << m->cluster << "' up: head pid " << head_pid << ", " << local
                << " local node(s) of " << m->nodes.size() << "; status http://" << m->head.host
                << ":" << m->head.status_port << "/status; logs in " << dir << "\n";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::cerr << "satrap up: the cluster was not ready within " << wait_s_
            << " s (not every node joined); see the logs in " << dir
            << (other.empty() ? std::string{}
                              : "; port " + std::to_string(m->head.status_port)
                                  + " answers for another head (" + other + ")")
            << "\n";
  if (!other.empty())  // not this cluster's to keep: stop what was started
    stop_started();
  return 1;
}

int cluster_commands::run_down() {
  auto m = cluster_manifest(manifest_file_);
  if (!m) {
    std::cerr << "satrap down: " << error_text(m.error()) << "\n";
    return 2;
  }
  auto dir = cluster_state_dir(state_dir_, *m);
  std::vector<std::pair<pid_t, std::string>> procs;
  std::error_code ec;
  // The supervisor first, so that it does not restart the nodes stopped below; it stops its
  // nodes itself.
  if (auto pid = process_record_live(dir + "/supervisor.pid"); pid > 0) {
    ::kill(pid, SIGTERM);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (pid_alive(pid) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".pid") {
      // Only a process that is still the one `satrap up` recorded is signalled.
      auto pid = process_record_live(e.path().string());
      if (!pid)
        spdlog::warn("pid_file_stale file={} action=ignored", e.path().string());
      procs.emplace_back(pid, e.path().string());
    }
  for (auto& [pid, _] : procs)
    if (pid_alive(pid))
      ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto any_alive = [&] {
    return std::any_of(procs.begin(), procs.end(), [](auto& p) { return pid_alive(p.first); });
  };
  while (any_alive() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int killed = 0;
  for (auto& [pid, _] : procs)
    if (pid_alive(pid)) {
      ::kill(pid, SIGKILL);
      ++killed;
    }
  for (auto& [pid, file] : procs)
    if (pid > 0)  // a stale file is left alone (and was named in the log)
      fs::remove(file, ec);
  auto stopped = std::count_if(procs.begin(), procs.end(), [](auto& p) { return p.first > 0; });
  std::cout << "cluster '" << m->cluster << "' down: " << stopped << " process(es) stopped"
            << (killed ? " (" + std::to_string(killed) + " with SIGKILL)" : std::string{}) << "\n";
  return 0;
}

}  // namespace satrap
