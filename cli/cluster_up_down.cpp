// `satrap up` and `satrap down`: start a manifest's local processes (head, nodes, their
// supervisors) detached, and stop the ones the pid records still describe.
#include "models/env.hpp"
#include "cli/cli_timing.hpp"
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

bool pid_alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// For a child of this process: false once it exited (reaping it: a zombie still answers kill 0,
// which once hid a head that had died).
bool child_alive(pid_t pid) {
  return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0 && pid_alive(pid);
}

}  // namespace

int cluster_commands::run_up() {
  std::string path;
  auto m = cluster_manifest_file(manifest_file_, path);
  if (!m) {
    std::cerr << "satrap up: " << error_text(m.error()) << "\n";
    return 2;
  }
  auto dir = fs::absolute(cluster_state_dir(state_dir_, *m)).string();
  // A state dir made here is the owner's only: it holds tokens, keys and jobs.json (job specs).
  if (fs::create_directories(dir))
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
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
  auto common =
    std::vector<std::string>{"--manifest", path, "--state-dir", dir, "--token-file", token_path};
  auto launch = [&](std::vector<std::string> args, const std::string& name) {
    auto log = dir + "/" + name + ".log";
    args.insert(args.begin(), "satrap");
    args.insert(args.end(), common.begin(), common.end());
    for (auto& a : log_args(log))  // rotated by size (runtime/log.hpp)
      args.push_back(a);
    auto pid = satrap_start(args, log, true);
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
    auto until = default_env().steady_now() + ms(cli_timing::supervisor_stop_ms);
    while ((child_alive(supervisor_pid) || child_alive(head_pid))
           && default_env().steady_now() < until)
      std::this_thread::sleep_for(ms(cli_timing::exit_poll_ms));
  };
  fs::create_directories(".satrap");
  std::ofstream(".satrap/current") << path << "\n";
  auto deadline = default_env().steady_now() + std::chrono::seconds(wait_s_);
  // Only the head this command started counts as an answer: another cluster's head on the same
  // status port once made a second `up` report success while all its processes had died.
  const auto ours = "ready pid=" + std::to_string(head_pid) + "\n";
  std::string other;
  while (default_env().steady_now() < deadline) {
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
    auto r = http_get(m->head.host, m->head.status_port, "/readyz",
                      static_cast<int>(cli_timing::ready_request_ms));
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
    std::this_thread::sleep_for(ms(cli_timing::ready_poll_ms));
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
    auto until = default_env().steady_now() + ms(cli_timing::supervisor_stop_ms);
    while (pid_alive(pid) && default_env().steady_now() < until)
      std::this_thread::sleep_for(ms(cli_timing::exit_poll_ms));
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
  auto deadline = default_env().steady_now() + ms(cli_timing::process_stop_ms);
  auto any_alive = [&] {
    return std::any_of(procs.begin(), procs.end(), [](auto& p) { return pid_alive(p.first); });
  };
  while (any_alive() && default_env().steady_now() < deadline)
    std::this_thread::sleep_for(ms(cli_timing::down_poll_ms));
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
