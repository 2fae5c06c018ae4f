// satrap head, node, up, down; and the subcommand table of the cluster commands.
#include "cli/cluster_commands.hpp"

#include "runtime/actor_meter.hpp"

#include "actors/node_agent/node_agent.hpp"
#include "cli/cluster_common.hpp"
#include "runtime/error.hpp"
#include "runtime/http_server.hpp"
#include "runtime/log.hpp"

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
#include <random>
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

http_response head_http(caf::actor_system& sys, const admin_actor& admin, const http_request& req) {
  auto& path = req.path;
  if (req.method != "GET")
    return {405, "text/plain", "only GET: this endpoint is read-only\n"};
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
    r = {200, "text/plain", "ok\n"};
  } else if (path == "/readyz") {
    ask(status_atom::value, "application/json");
    if (r.status == 200) {
      // Ready when every node of the manifest has joined and is alive.
      bool ready = r.body.find("\"alive\":false") == std::string::npos;
      r = {ready ? 200 : 503, "text/plain", ready ? "ready\n" : "waiting for nodes\n"};
    }
  } else {
    r = {404, "text/plain", "not found: try /status /metrics /healthz /readyz\n"};
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
  caf::actor_system sys{cfg};
  admin_config ac{*m, satrap_version, token, dir};
  auto admin = spawn_admin(sys, ac);
  auto port = sys.middleman().publish(admin, m->head.port, nullptr, true);
  if (!port) {
    std::cerr << "satrap head: cannot listen on port " << m->head.port << ": "
              << error_text(port.error()) << "\n";
    caf::anon_send_exit(admin, caf::exit_reason::user_shutdown);
    return 1;
  }
  http_server http;
  auto why = http.start(listen_.empty() ? m->head.host : listen_, m->head.status_port,
                        [&sys, admin](const http_request& req) { return head_http(sys, admin, req); });
  if (!why.empty()) {
    std::cerr << "satrap head: status endpoint: " << why << "\n";
    caf::anon_send_exit(admin, caf::exit_reason::user_shutdown);
    return 1;
  }
  spdlog::info("head_started cluster={} port={} status_port={} state_dir={}", m->cluster,
               m->head.port, m->head.status_port, dir);
  wait_for_stop_signal(-1);
  spdlog::info("head_stopping cluster={}", m->cluster);
  http.stop();
  caf::anon_send_exit(admin, caf::exit_reason::user_shutdown);
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
  block_stop_signals();
  openblas_set_num_threads(1);
  satrap_config cfg;
  cluster_config_setup(cfg);
  cfg.set("scheduler.max-threads", std::max(1, spec->resources.cores));
  caf::actor_system sys{cfg};
  auto agent = spawn_node_agent(sys, {spec->name});
  auto bind = spec->host == "127.0.0.1" || spec->host == "localhost" ? "127.0.0.1" : nullptr;
  if (auto port = sys.middleman().publish(agent, spec->port, bind, true); !port) {
    std::cerr << "satrap node: cannot listen on port " << spec->port << ": "
              << error_text(port.error()) << "\n";
    return 1;
  }
  caf::scoped_actor self{sys};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s_);
  for (;;) {
    auto admin = head_connect(sys, *m);
    if (!admin) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "satrap node: " << error_text(admin.error()) << "\n";
        return 1;
      }
      if (wait_for_stop_signal(1000))
        std::_Exit(0);
      continue;
    }
    bool refused = false, joined = false;
    self->request(*admin, std::chrono::seconds(10), register_atom::value,
                  node_info{m->cluster, satrap_version, spec->name, agent, *restarts})
      .receive(
        [&](std::string&) {
          spdlog::info("node_joined cluster={} name={}", m->cluster, spec->name);
          joined = true;
        },
        [&](caf::error& e) {
          // A refusal (another cluster, version or name) is final; a timeout or a dropped
          // connection (a head restarting) is tried again until the deadline.
          refused = e.category() == caf::atom("satrap");
          if (refused || std::chrono::steady_clock::now() > deadline)
            std::cerr << "satrap node: the head refused this node: " << error_text(e) << "\n";
          else
            spdlog::warn("node_register_retry cluster={} name={} error=\"{}\"", m->cluster,
                         spec->name, error_text(e));
        });
    if (refused || (!joined && std::chrono::steady_clock::now() > deadline))
      return 1;
    if (!joined) {
      if (wait_for_stop_signal(1000))
        std::_Exit(0);
      continue;
    }
    self->monitor(*admin);
    bool head_down = false;
    while (!head_down) {
      self->send(*admin, heartbeat_atom::value, spec->name, meters_snapshot());
      self->receive([&](caf::down_msg&) { head_down = true; },
                    caf::after(std::chrono::milliseconds(1000)) >> [] {});
      if (wait_for_stop_signal(0))
        std::_Exit(0);
    }
    spdlog::warn("head_lost cluster={} name={}", m->cluster, spec->name);
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s_);
  }
}

namespace {

bool host_is_local(const std::string& host) {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name);
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == name;
}

bool pid_alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

pid_t read_pid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// Starts `satrap ARGS...` detached, output to `log`; returns its pid.
pid_t start_process(const std::vector<std::string>& args, const std::string& log) {
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
  ::execv("/proc/self/exe", argv.data());
  std::_Exit(127);
}

std::string random_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 32; ++i)
    t += "0123456789abcdef"[rd() % 16];
  return t;
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
    if (pid_alive(read_pid(dir + file))) {
      std::cerr << "satrap up: cluster '" << m->cluster << "' is already up (" << dir << file
                << "); `satrap down` first\n";
      return 1;
    }
  auto token_path = token_file_.empty() ? dir + "/admin.token" : token_file_;
  if (cluster_token(token_file_, dir).empty()) {
    std::ofstream out(token_path, std::ios::trunc);
    out << random_token() << "\n";
    out.close();
    ::chmod(token_path.c_str(), 0600);
  }
  auto common = std::vector<std::string>{"--manifest", path, "--state-dir", dir, "--token-file",
                                         token_path, "--log-level", log_level_};
  auto launch = [&](std::vector<std::string> args, const std::string& name) {
    args.insert(args.begin(), "satrap");
    args.insert(args.end(), common.begin(), common.end());
    auto pid = start_process(args, dir + "/" + name + ".log");
    std::ofstream(dir + "/" + name + ".pid") << pid << "\n";
    return pid;
  };
  auto head_pid = launch({"head"}, "head");
  // This host's nodes run under a per-host supervisor that restarts them when they exit
  // (cluster_supervisor.cpp); it writes their pid files.
  int local = 0;
  for (auto& n : m->nodes)
    local += host_is_local(n.host) ? 1 : 0;
  if (local > 0)
    launch({"supervise"}, "supervisor");
  fs::create_directories(".satrap");
  std::ofstream(".satrap/current") << path << "\n";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s_);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!pid_alive(head_pid)) {
      int status = 0;
      ::waitpid(head_pid, &status, WNOHANG);
      std::cerr << "satrap up: the head exited; see " << dir << "/head.log\n";
      return 1;
    }
    auto r = http_get(m->head.host, m->head.status_port, "/readyz", 1000);
    if (r.status == 200) {
      std::cout << "cluster '" << m->cluster << "' up: head pid " << head_pid << ", " << local
                << " local node(s) of " << m->nodes.size() << "; status http://" << m->head.host
                << ":" << m->head.status_port << "/status; logs in " << dir << "\n";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::cerr << "satrap up: the cluster was not ready within " << wait_s_
            << " s (not every node joined); see the logs in " << dir << "\n";
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
  if (auto pid = read_pid(dir + "/supervisor.pid"); pid_alive(pid)) {
    ::kill(pid, SIGTERM);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (pid_alive(pid) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".pid")
      procs.emplace_back(read_pid(e.path().string()), e.path().string());
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
  for (auto& [_, file] : procs)
    fs::remove(file, ec);
  std::cout << "cluster '" << m->cluster << "' down: " << procs.size() << " process(es) stopped"
            << (killed ? " (" + std::to_string(killed) + " with SIGKILL)" : std::string{}) << "\n";
  return 0;
}

}  // namespace satrap
