// satrap supervise: the per-host supervisor that `satrap up` leaves behind.
//
// It starts every node of the manifest whose host is this machine (`satrap node`, log
// <state>/node-<name>.log, pid file <state>/node-<name>.pid) and restarts a node whose process
// exits, whatever its exit status (a permanent child, in Erlang/OTP's words). Restart k within
// the period waits backoff * 2^(k-1), at most backoff-max; a restarted node gets
// SATRAP_NODE_RESTARTS=<its restarts so far> and reports it to the head when it registers.
// Restart intensity: a node that would restart more than --max-restarts times within --period
// seconds is given up: the supervisor logs `supervisor_gave_up`, tells the head (gave_up, shown
// in /status and /metrics) and keeps supervising the others; it exits once it has given up on
// every node. SIGTERM or SIGINT: it stops its nodes (SIGTERM, then SIGKILL after 10 s) and exits.
// Threading: one thread; it polls its children every 50 ms. An actor system exists only for the
// moment it tells the head about a node it gave up, so forks never see one.
#include "models/env.hpp"
#include "cli/cli_timing.hpp"
#include "cli/cluster_commands.hpp"
#include "cli/process_record.hpp"

#include "cli/cluster_common.hpp"
#include "runtime/error.hpp"
#include "runtime/restart_intensity.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <filesystem>
#include <fstream>

extern char** environ;

namespace fs = std::filesystem;

namespace satrap {

namespace {

using clock_type = std::chrono::steady_clock;
clock_type::time_point clock_now() { return default_env().steady_now(); }

struct supervised_node {
  std::string name;
  pid_t pid = 0;
  int64_t restarts = 0;
  restart_intensity intensity;  // restarts within the period
  std::optional<clock_type::time_point> restart_at;
  bool gave_up = false;
};

std::string exit_text(int status) {
  if (WIFEXITED(status))
    return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("signal ") + std::to_string(WTERMSIG(status)) + " ("
           + ::strsignal(WTERMSIG(status)) + ")";
  return "status " + std::to_string(status);
}

// Tells the head that this supervisor gave up on `node`; false (and a log line) when the head
// cannot be reached or refuses.
bool tell_head(const manifest& m, const std::string& dir, const std::string& token,
               const supervised_node& n, const std::string& why) {
  satrap_config cfg;
  cluster_config_setup(cfg);
  if (auto e = cluster_security_setup(cfg, m, dir, "client"); !e.empty()) {
    spdlog::warn("supervisor_head_unreachable error=\"{}\"", e);
    return false;
  }
  caf::actor_system sys{cfg};
  auto admin = head_connect(sys, m);
  if (!admin) {
    spdlog::warn("supervisor_head_unreachable error=\"{}\"", error_text(admin.error()));
    return false;
  }
  caf::scoped_actor self{sys};
  bool told = false;
  self
    ->request(*admin, ms(cli_timing::gave_up_request_ms), gave_up_atom::value, token, n.name,
              n.restarts, why)
    .receive(
      [&](bool) { told = true; },
      [&](caf::error& e) { spdlog::warn("supervisor_head_refused error=\"{}\"", error_text(e)); });
  return told;
}

}  // namespace

int cluster_commands::run_supervise() {
  std::string path;
  auto m = cluster_manifest_file(manifest_file_, path);
  if (!m) {
    std::cerr << "satrap supervise: " << error_text(m.error()) << "\n";
    return 2;
  }
  auto dir = fs::absolute(cluster_state_dir(state_dir_, *m)).string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto token = cluster_token(token_file_, dir);
  // The admin token goes only to what needs it: this supervisor (gave_up), not its nodes (they
  // hold their node tokens). The nodes' environment is this one's, so it loses the variable.
  ::unsetenv("SATRAP_ADMIN_TOKEN");
  std::vector<supervised_node> nodes;
  for (auto& n : m->nodes)
    if (host_is_local(n.host))
      nodes.push_back(supervised_node{
        n.name, 0, 0, restart_intensity(max_restarts_, std::chrono::seconds(period_s_))});
  if (nodes.empty()) {
    std::cerr
      << "satrap supervise: no node of cluster '" << m->cluster
      << "' has this host (127.0.0.1, localhost, its host name or an address of its interfaces)\n";
    return 2;
  }
  block_stop_signals();
  auto start = [&](supervised_node& n) {
    auto log = dir + "/node-" + n.name + ".log";
    std::vector<std::string> args{"satrap",     "node", "--name",      n.name,
                                  "--manifest", path,   "--state-dir", dir};
    for (auto& a : log_args(log))  // rotated by size (runtime/log.hpp)
      args.push_back(a);
    n.pid = satrap_start(args, log, false, "SATRAP_NODE_RESTARTS=" + std::to_string(n.restarts));
    if (!process_record_write(dir + "/node-" + n.name + ".pid", n.pid, args))
      spdlog::warn("supervisor_pid_file_failed name={} pid={}", n.name, n.pid);
    spdlog::info("supervisor_started_node name={} pid={} restarts={}", n.name, n.pid, n.restarts);
  };
  spdlog::info(
    "supervisor_started cluster={} nodes={} max_restarts={} period_s={} backoff_ms={} "
    "backoff_max_ms={}",
    m->cluster, nodes.size(), max_restarts_, period_s_, backoff_ms_, backoff_max_ms_);
  for (auto& n : nodes)
    start(n);
  for (;;) {
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      auto it = std::find_if(nodes.begin(), nodes.end(), [&](auto& n) { return n.pid == pid; });
      if (it == nodes.end())
        continue;
      auto& n = *it;
      n.pid = 0;
      auto now = clock_now();
      if (!n.intensity.may_restart(now)) {
        n.gave_up = true;
        auto why = "node process exited (" + exit_text(status) + ") after "
                   + std::to_string(n.intensity.recent()) + " restart(s) within "
                   + std::to_string(period_s_) + " s (intensity --max-restarts "
                   + std::to_string(max_restarts_) + " --period " + std::to_string(period_s_)
                   + "); see node-" + n.name + ".log";
        spdlog::error("supervisor_gave_up name={} restarts={} reason=\"{}\"", n.name, n.restarts,
                      why);
        fs::remove(dir + "/node-" + n.name + ".pid", ec);
        tell_head(*m, dir, token, n, why);
        continue;
      }
      auto delay = std::chrono::milliseconds(std::min<int64_t>(
        backoff_max_ms_, int64_t{backoff_ms_} << std::min(n.intensity.recent(), 20)));
      n.restart_at = now + delay;
      spdlog::warn("supervisor_node_exited name={} pid={} how=\"{}\" restart_in_ms={}", n.name, pid,
                   exit_text(status), delay.count());
    }
    auto now = clock_now();
    for (auto& n : nodes)
      if (n.restart_at && now >= *n.restart_at) {
        n.restart_at.reset();
        n.intensity.record(now);
        ++n.restarts;
        start(n);
      }
    if (std::all_of(nodes.begin(), nodes.end(), [](auto& n) { return n.gave_up; })) {
      spdlog::error("supervisor_stopped cluster={} reason=\"gave up on every node\"", m->cluster);
      return 1;
    }
    if (wait_for_stop_signal(static_cast<int>(cli_timing::supervise_poll_ms)))
      break;
  }
  spdlog::info("supervisor_stopping cluster={}", m->cluster);
  for (auto& n : nodes)
    if (n.pid > 0)
      ::kill(n.pid, SIGTERM);
  auto deadline = clock_now() + ms(cli_timing::process_stop_ms);
  auto running = [&] {
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
      for (auto& n : nodes)
        if (n.pid == pid)
          n.pid = 0;
    return std::any_of(nodes.begin(), nodes.end(), [](auto& n) { return n.pid > 0; });
  };
  while (running() && clock_now() < deadline)
    std::this_thread::sleep_for(ms(cli_timing::exit_poll_ms));
  for (auto& n : nodes)
    if (n.pid > 0) {
      spdlog::warn("supervisor_kill name={} pid={}", n.name, n.pid);
      ::kill(n.pid, SIGKILL);
      ::waitpid(n.pid, nullptr, 0);
    }
  for (auto& n : nodes)
    fs::remove(dir + "/node-" + n.name + ".pid", ec);
  spdlog::info("supervisor_stopped cluster={}", m->cluster);
  return 0;
}

}  // namespace satrap
