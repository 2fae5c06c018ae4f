#include "models/env.hpp"
#include "cli/cli_timing.hpp"
#include "cli/cluster_common.hpp"

#include "runtime/error.hpp"
#include "runtime/frame_limit.hpp"
#include "runtime/peer_identity.hpp"
#include "runtime/tls_guard.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace satrap {

namespace {

caf::expected<manifest> manifest_as_written(const std::string& flag, std::string* path_out) {
  std::string path = flag;
  if (path.empty())
    if (auto* env = std::getenv("SATRAP_MANIFEST"))
      path = env;
  if (path.empty())
    if (auto* text = std::getenv("SATRAP_MANIFEST_YAML"); text && *text) {
      // The manifest itself, as `satrap k8s` hands it to the pods.
      manifest m;
      if (auto err = manifest_load_text(text, "$SATRAP_MANIFEST_YAML", m))
        return err;
      if (path_out)
        *path_out = "";
      return m;
    }
  if (path.empty()) {
    std::ifstream current(".satrap/current");
    std::getline(current, path);
  }
  if (path.empty())
    return make_error(errc::invalid_config,
                      "which cluster? give --manifest FILE, set SATRAP_MANIFEST, or run "
                      "`satrap up --manifest FILE` in this directory first");
  manifest m;
  if (auto err = manifest_load_file(path, m))
    return err;
  if (path_out)
    *path_out = path;
  return m;
}

}  // namespace

slurm_env slurm_env_of_process() {
  slurm_env env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos && (kv.rfind("SLURM", 0) == 0 || kv.rfind("SATRAP_SLURM", 0) == 0))
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

bool under_slurm() {
  auto* v = std::getenv("SATRAP_SLURM");
  return v && std::string(v) == "1";
}

caf::expected<manifest> cluster_manifest(const std::string& flag, std::string* path_out) {
  auto m = manifest_as_written(flag, path_out);
  if (m && under_slurm())
    if (auto err = slurm_apply_allocation(*m, slurm_env_of_process()))
      return err;
  return m;
}

caf::expected<manifest> cluster_manifest_file(const std::string& flag, std::string& path) {
  auto m = cluster_manifest(flag, &path);
  if (m && path.empty())
    return make_error(errc::invalid_config,
                      "give the manifest as a file (--manifest or $SATRAP_MANIFEST): the "
                      "processes it starts read it from there");
  if (m)
    path = std::filesystem::absolute(path).string();
  return m;
}

std::string cluster_state_dir(const std::string& flag, const manifest& m) {
  return flag.empty() ? ".satrap/" + m.cluster : flag;
}

std::string cluster_token(const std::string& flag, const std::string& state_dir) {
  if (flag.empty())
    if (auto* env = std::getenv("SATRAP_ADMIN_TOKEN"))
      return env;
  std::ifstream in(flag.empty() ? state_dir + "/admin.token" : flag);
  std::string token;
  std::getline(in, token);
  return token;
}

caf::expected<int64_t> node_restarts(const std::string& starts_file) {
  auto parse = [](const std::string& text, int64_t& out) {
    char* end = nullptr;
    out = std::strtoll(text.c_str(), &end, 10);
    return !text.empty() && end && *end == '\0' && out >= 0;
  };
  int64_t n = 0;
  if (auto* env = std::getenv("SATRAP_NODE_RESTARTS")) {
    if (!parse(env, n))
      return make_error(errc::invalid_config,
                        "SATRAP_NODE_RESTARTS: expected a count, got '" + std::string(env) + "'");
    return n;
  }
  if (starts_file.empty())
    return int64_t{0};
  std::string text;
  if (std::ifstream in(starts_file); in)
    std::getline(in, text);
  if (!text.empty() && !parse(text, n))
    return make_error(errc::invalid_config, "--starts-file " + starts_file
                                              + ": expected a count, got '" + text
                                              + "'; remove the file to count again from 0");
  auto tmp = starts_file + ".tmp";
  if (std::ofstream out(tmp, std::ios::trunc); !(out << n + 1 << "\n"))
    return make_error(errc::invalid_config, "--starts-file " + starts_file + ": cannot write " + tmp
                                              + " (is its folder writable?)");
  if (std::rename(tmp.c_str(), starts_file.c_str()) != 0)
    return make_error(errc::invalid_config, "--starts-file " + starts_file + ": cannot replace it");
  return n;
}

void cluster_config_setup(satrap_config& cfg) {
  using namespace std::chrono;
  cfg.set("middleman.heartbeat-interval",
          caf::timespan{duration_cast<nanoseconds>(ms(cli_timing::middleman_heartbeat_ms))});
  cfg.set(
    "middleman.connection-timeout",
    caf::timespan{duration_cast<nanoseconds>(ms(cli_timing::middleman_connection_timeout_ms))});
}

std::string cluster_certs_dir(const manifest& m, const std::string& state_dir) {
  return m.security.certs.empty() ? state_dir + "/certs" : m.security.certs;
}

std::string cluster_security_setup(satrap_config& cfg, const manifest& m,
                                   const std::string& state_dir, const std::string& role) {
  if (auto why = frame_limit_install(m.security.max_frame_bytes); !why.empty())
    return why;
  if (m.security.tls == tls_mode::off) {
    spdlog::warn(
      "tls_off cluster={} role={} note=\"security.tls is off: CAF connections are "
      "plaintext and unauthenticated; anyone who reaches a port can talk to it\"",
      m.cluster, role);
    return "";
  }
  auto dir = cluster_certs_dir(m, state_dir);
  auto ca = dir + "/ca.pem", cert = dir + "/" + role + ".pem", key = dir + "/" + role + ".key";
  for (auto& f : {ca, cert, key})
    if (::access(f.c_str(), R_OK) != 0)
      return "security.tls is required but " + f + " cannot be read: run `satrap certs "
             "--manifest M --out " + dir + "` (satrap up does), copy the files of this role "
             "there, or set security.tls: off";
  if (auto why = tls_guard_check(); !why.empty())
    return why;
  // Bind every CAF peer to its certificate: its role (CN) and cluster (OU).
  if (auto why = peer_identity_install(role, m.cluster); !why.empty())
    return why;
  cfg.load<caf::openssl::manager>();
  // CAF 0.17's automatic node-to-node connections are plain TCP (connection_helper opens a bare
  // scribe): a TLS port refuses them, so with TLS nodes reach each other through the head.
  cfg.set("middleman.enable-automatic-connections", false);
  cfg.openssl_cafile = ca;
  cfg.openssl_certificate = cert;
  cfg.openssl_key = key;
  return "";
}

caf::io::middleman_actor cluster_connector(caf::actor_system& sys) {
  return sys.has_openssl_manager() ? sys.openssl_manager().actor_handle()
                                   : sys.middleman().actor_handle();
}

caf::expected<admin_actor> head_connect(caf::actor_system& sys, const manifest& m) {
  auto admin = sys.has_openssl_manager()
                 ? caf::openssl::remote_actor<admin_actor>(sys, m.head.host, m.head.port)
                 : sys.middleman().remote_actor<admin_actor>(m.head.host, m.head.port);
  if (!admin)
    return make_error(errc::peer_failure, "cannot reach the head of cluster '" + m.cluster + "' at "
                                            + m.head.host + ":" + std::to_string(m.head.port) + ": "
                                            + error_text(admin.error()));
  return *admin;
}

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool wait_for_stop_signal(int timeout_ms) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  // EINTR is not a stop: SIGCONT after SIGSTOP (or any other handled signal) interrupts the
  // wait, which then goes on for the time that is left.
  auto& clock = default_env();
  auto deadline = clock.steady_now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int got;
    if (timeout_ms < 0) {
      got = sigwaitinfo(&set, nullptr);
    } else {
      auto left =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - clock.steady_now()).count();
      if (left < 0)
        left = 0;
      timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
      got = sigtimedwait(&set, nullptr, &ts);
    }
    if (got > 0)
      return true;
    if (errno != EINTR)
      return false;  // EAGAIN: the time is up
  }
}

}  // namespace satrap
