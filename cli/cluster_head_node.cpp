// `satrap head` and `satrap node`: the two long-running cluster processes.
#include "cli/cluster_commands.hpp"

#include "runtime/actor_meter.hpp"

#include "actors/node_agent/node_agent.hpp"
#include "actors/node_agent/node_link.hpp"
#include "cli/admin_http.hpp"
#include "cli/certs_command.hpp"
#include "cli/cli_timing.hpp"
#include "cli/cluster_common.hpp"
#include "cli/process_record.hpp"
#include "runtime/error.hpp"
#include "runtime/http_server.hpp"
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

int sys_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Whether the scheduler threads of this host's cluster processes (its nodes, `threads` each, and
// the head when it runs here) outnumber its cores.
bool oversubscribed_host(const manifest& m, int cores, int threads) {
  int wanted = host_is_local(m.head.host) ? 1 : 0;
  for (auto& n : m.nodes)
    if (host_is_local(n.host))
      wanted += threads;
  return wanted > cores;
}

// Ends the admin. The exit must come from an actor of this process: the admin drops exit messages
// without a local sender (actors/peer_guard.hpp), and an admin that never ends keeps the actor
// system's destructor waiting, so a head that failed to start used to hang there instead of
// exiting (its SIGTERM blocked, see block_stop_signals).
void stop_admin(caf::actor_system& sys, const admin_actor& admin) {
  caf::scoped_actor { sys } -> send_exit(admin, caf::exit_reason::user_shutdown);
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
  // A state dir made here is the owner's only: it holds tokens, keys and jobs.json (job specs).
  if (fs::create_directories(dir, ec))
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
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
  auto why =
    http.start(listen_.empty() ? listen : listen_, m->head.status_port,
               [&sys, admin](const http_request& req) { return admin_http(sys, admin, {}, req); });
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
  if (node_name_.empty()) {
    if (!under_slurm()) {
      std::cerr << "satrap node: --name is required (outside `satrap slurm`'s batch job)\n";
      return 2;
    }
    auto name = slurm_node_name(*m, slurm_env_of_process());
    if (!name) {
      std::cerr << "satrap node: " << error_text(name.error()) << "\n";
      return 2;
    }
    node_name_ = *name;
  }
  auto spec =
    std::find_if(m->nodes.begin(), m->nodes.end(), [&](auto& n) { return n.name == node_name_; });
  if (spec == m->nodes.end()) {
    std::cerr << "satrap node: no node '" << node_name_ << "' in the manifest of cluster '"
              << m->cluster << "'\n";
    return 2;
  }
  if (under_slurm())
    spdlog::info("slurm_node name={} host={} port={} head={}:{}", spec->name, spec->host,
                 spec->port, m->head.host, m->head.port);
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
  // When the manifest puts more scheduler threads on this host than it has cores (a test cluster
  // of several nodes on one machine), an idle worker parks at once instead of polling for
  // `satrap.scheduler-spin` first: its polls yield the core, and with every core taken each
  // yield was a context switch to another process's polling worker (perf, tests/bench/README.md,
  // issue 51: sched_yield was ~12% of the cluster's CPU on 2 cores).
  if (oversubscribed_host(*m, sys_cores(), std::max(1, spec->resources.cores)))
    cfg.set("satrap.scheduler-spin", caf::timespan{0});
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
  while (!wait_for_stop_signal(static_cast<int>(cli_timing::node_poll_ms)))
    if (ended >= 0) {
      std::cerr << "satrap node: could not join the head of cluster '" << m->cluster
                << "' (see the log above)\n";
      std::_Exit(1);
    }
  std::_Exit(0);
}

}  // namespace satrap
