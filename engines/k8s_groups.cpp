#include "engines/k8s_parts.hpp"

#include "runtime/error.hpp"

#include <algorithm>
#include <cctype>

namespace satrap {

using namespace k8s_detail;

namespace {

// Sizes the manifest loader reads back: "680GB", "6GiB", else bytes.
std::string manifest_bytes(uint64_t b) {
  if (b == 0)
    return "0";
  for (auto [unit, scale] : {std::pair{"TiB", uint64_t{1} << 40},
                             {"TB", uint64_t{1000000000000}},
                             {"GiB", uint64_t{1} << 30},
                             {"GB", uint64_t{1000000000}},
                             {"MiB", uint64_t{1} << 20},
                             {"MB", uint64_t{1000000}}})
    if (b % scale == 0 && b / scale < 100000)
      return std::to_string(b / scale) + unit;
  return std::to_string(b);
}

bool label_value(const std::string& s) {
  if (s.size() > 63)
    return false;
  if (s.empty())
    return true;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  return alnum(s.front()) && alnum(s.back()) && std::all_of(s.begin(), s.end(), [&](char c) {
           return alnum(c) || c == '-' || c == '_' || c == '.';
         });
}

}  // namespace

namespace k8s_detail {

bool dns_label(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || s.front() == '-' || s.back() == '-')
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

caf::expected<std::vector<group>> groups_of(const manifest& m) {
  std::vector<group> out;
  for (auto& n : m.nodes) {
    auto it =
      std::find_if(out.begin(), out.end(), [&](auto& g) { return g.first.group == n.group; });
    if (it != out.end()) {
      it->names.push_back(n.name);
      continue;
    }
    group g;
    g.first = n;
    g.count = n.group_count;
    g.names.push_back(n.name);
    auto p = n.group.find("{i}");
    if (p == std::string::npos && n.group_count == 1) {
      g.workload = n.group;
      g.templated = false;
    } else if (p != std::string::npos && p + 3 == n.group.size() && p >= 2 && n.group[p - 1] == '-'
               && n.group.find("{i}") == p) {
      g.workload = n.group.substr(0, p - 1);
    } else {
      return make_error(errc::invalid_config,
                        "node entry '" + n.group + "': satrap k8s runs each entry as a "
                        "StatefulSet whose pods are the nodes, so name it '<group>-{i}' (for "
                        "example 'mem-{i}')");
    }
    if (!dns_label(g.workload, 52))
      return make_error(errc::invalid_config,
                        "node entry '" + n.group + "': '" + g.workload + "' is not a Kubernetes "
                        "name (lower-case letters, digits and '-', at most 52 characters)");
    if (g.workload == "head")
      return make_error(errc::invalid_config, "node entry '" + n.group + "': the name 'head' is "
                                              "taken by the head's Deployment and Service");
    for (auto& [k, v] : n.labels)
      if (!label_value(v) || !dns_label(k, 63))
        return make_error(errc::invalid_config,
                          "node entry '" + n.group + "': label " + k + ": " + v
                            + " cannot be a Kubernetes label (keys: lower-case letters, digits, "
                              "'-'; values: at most 63 letters, digits, '-', '_', '.')");
    out.push_back(std::move(g));
  }
  return out;
}

std::string gke_accelerator(const node_spec& n) {
  if (auto it = n.labels.find("accelerator"); it != n.labels.end())
    return it->second;
  if (n.resources.gpus == 0)
    return "";
  auto it = n.labels.find("machine");
  if (it == n.labels.end())
    return "";
  auto& t = it->second;
  auto starts = [&](const char* p) { return t.rfind(p, 0) == 0; };
  if (starts("a2-highgpu") || starts("a2-megagpu"))
    return "nvidia-tesla-a100";
  if (starts("a2-ultragpu"))
    return "nvidia-a100-80gb";
  if (starts("a3-"))
    return "nvidia-h100-80gb";
  if (starts("g2-"))
    return "nvidia-l4";
  return "";
}

}  // namespace k8s_detail

std::string k8s_memory_quantity(uint64_t bytes) {
  if (bytes == 0)
    return "0";
  for (auto [unit, scale] : {std::pair{"Ti", uint64_t{1} << 40},
                             {"T", uint64_t{1000000000000}},
                             {"Gi", uint64_t{1} << 30},
                             {"G", uint64_t{1000000000}},
                             {"Mi", uint64_t{1} << 20},
                             {"M", uint64_t{1000000}},
                             {"Ki", uint64_t{1} << 10},
                             {"k", uint64_t{1000}}})
    if (bytes % scale == 0)
      return std::to_string(bytes / scale) + unit;
  return std::to_string(bytes);
}

std::vector<std::string> k8s_cert_file_names(const manifest& m) {
  std::vector<std::string> files{"ca.pem", "head.pem", "head.key", "client.pem", "client.key"};
  for (auto& n : m.nodes)
    for (auto* ext : {".pem", ".key", ".token"})
      files.push_back("node-" + n.name + ext);
  return files;
}

std::string k8s_manifest_yaml(const manifest& m, const std::string& rewrite_for,
                              const std::string& certs_dir) {
  bool pods = !rewrite_for.empty();
  obj head{{"host", pods ? "head." + rewrite_for + ".svc" : m.head.host},
           {"port", m.head.port},
           {"status_port", m.head.status_port}};
  if (pods)
    head["bind"] = "0.0.0.0";
  else if (!m.head.bind.empty())
    head["bind"] = m.head.bind;
  obj nodes = obj::array();
  std::vector<std::string> seen;
  auto groups = groups_of(m);
  for (auto& n : m.nodes) {
    if (std::find(seen.begin(), seen.end(), n.group) != seen.end())
      continue;
    seen.push_back(n.group);
    std::string host = n.group_host;
    if (!rewrite_for.empty() && groups) {
      auto& g = *std::find_if(groups->begin(), groups->end(),
                              [&](auto& g) { return g.first.group == n.group; });
      host = (g.templated ? g.workload + "-{i}" : g.workload + "-0") + "." + g.workload + "."
             + rewrite_for + ".svc";
    }
    obj entry{{"name", n.group}};
    if (n.group_count > 1)
      entry["count"] = n.group_count;
    entry["host"] = host;
    if (pods)
      entry["bind"] = "0.0.0.0";
    else if (!n.bind.empty())
      entry["bind"] = n.bind;
    entry["port"] = n.port;
    entry["resources"] = {{"cores", n.resources.cores},
                          {"memory", manifest_bytes(n.resources.memory_bytes)},
                          {"gpus", n.resources.gpus}};
    if (!n.labels.empty()) {
      obj l = obj::object();
      for (auto& [k, v] : n.labels)
        l[k] = v;
      entry["labels"] = l;
    }
    nodes.push_back(entry);
  }
  obj timing{{"heartbeat_interval_ms", m.timing.heartbeat_interval_ms},
             {"heartbeat_timeout_ms", m.timing.heartbeat_timeout_ms},
             {"admin_tick_ms", m.timing.admin_tick_ms},
             {"register_timeout_ms", m.timing.register_timeout_ms}};
  obj security{{"tls", m.security.tls == tls_mode::off ? "off" : "required"},
               {"max_frame_bytes", m.security.max_frame_bytes}};
  auto certs = certs_dir.empty() ? m.security.certs : certs_dir;
  if (!certs.empty())
    security["certs"] = certs;
  return to_yaml(obj{{"cluster", m.cluster},
                     {"head", head},
                     {"nodes", nodes},
                     {"timing", timing},
                     {"security", security}});
}

}  // namespace satrap
