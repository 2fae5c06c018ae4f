#include "cli/cluster_common.hpp"

#include "runtime/error.hpp"

#include <caf/io/middleman.hpp>

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

namespace satrap {

caf::expected<manifest> cluster_manifest(const std::string& flag, std::string* path_out) {
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
      return make_error(errc::invalid_config, "SATRAP_NODE_RESTARTS: expected a count, got '"
                                                + std::string(env) + "'");
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
    return make_error(errc::invalid_config, "--starts-file " + starts_file + ": cannot write "
                                              + tmp + " (is its folder writable?)");
  if (std::rename(tmp.c_str(), starts_file.c_str()) != 0)
    return make_error(errc::invalid_config, "--starts-file " + starts_file + ": cannot replace it");
  return n;
}

void cluster_config_setup(satrap_config& cfg) {
  using namespace std::chrono;
  cfg.set("middleman.heartbeat-interval", caf::timespan{duration_cast<nanoseconds>(seconds(1))});
  cfg.set("middleman.connection-timeout", caf::timespan{duration_cast<nanoseconds>(seconds(5))});
}

caf::expected<admin_actor> head_connect(caf::actor_system& sys, const manifest& m) {
  auto admin = sys.middleman().remote_actor<admin_actor>(m.head.host, m.head.port);
  if (!admin)
    return make_error(errc::peer_failure, "cannot reach the head of cluster '" + m.cluster
                                            + "' at " + m.head.host + ":"
                                            + std::to_string(m.head.port) + ": "
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
  if (timeout_ms < 0)
    return sigwaitinfo(&set, nullptr) > 0;
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  return sigtimedwait(&set, nullptr, &ts) > 0;
}

}  // namespace satrap
