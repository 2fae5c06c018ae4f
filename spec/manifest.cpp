#include "spec/manifest.hpp"

#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace satrap {

bool parse_bytes(const std::string& text, uint64_t& out) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0) || !std::isfinite(v))  // no inf, nan or 1e999
    return false;
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::pair<const char*, double> units[] = {
    {"", 1.0},       {"B", 1.0},      {"KB", 1e3},     {"MB", 1e6},
    {"GB", 1e9},     {"TB", 1e12},    {"PB", 1e15},    {"KiB", 0x1p10},
    {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"PiB", 0x1p50},
  };
  for (auto& [name, scale] : units)
    if (unit == name) {
      if (v * scale > bytes_max)  // 1e300PiB is no size (it was once read as 8 EiB)
        return false;
      out = static_cast<uint64_t>(std::llround(v * scale));
      return true;
    }
  return false;
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string cluster_name_problem(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return "expected 1 to 64 characters, got " + std::to_string(name.size());
  if (name == "." || name == "..")
    return "'" + name + "' cannot name a cluster";
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-'))
      return "'" + name + "' may use only letters, digits, '.', '_' and '-' (it names the "
             "cluster's state directory; no path separators)";
  return "";
}

namespace {

struct loader {
  std::string origin;

  caf::error fail(const YAML::Node& at, const std::string& what) const {
    auto m = at.Mark();
    return make_error(errc::invalid_config, origin + ":" + std::to_string(m.line + 1) + ":"
                                              + std::to_string(m.column + 1) + ": " + what);
  }

  // Every key of `map` must be one of `allowed`.
  caf::error check_keys(const YAML::Node& map, const std::string& where,
                        std::initializer_list<const char*> allowed) const {
    if (!map.IsMap())
      return fail(map, where + ": expected a map");
    for (auto it = map.begin(); it != map.end(); ++it) {
      YAML::Node key = it->first;
      auto name = key.as<std::string>();
      bool ok = false;
      for (auto* a : allowed)
        ok = ok || name == a;
      if (!ok) {
        std::string list;
        for (auto* a : allowed)
          list += std::string(list.empty() ? "" : ", ") + a;
        return fail(key, "unknown key '" + where + (where.empty() ? "" : ".") + name
                           + "' (expected one of: " + list + ")");
      }
    }
    return caf::none;
  }

  caf::error get_string(const YAML::Node& map, const char* key, const std::string& where,
                        std::string& out, bool required) const {
    YAML::Node v = map[key];
    if (!v) {
      if (required)
        return fail(map, where + "." + key + ": missing (expected a string)");
      return caf::none;
    }
    if (!v.IsScalar() || v.Scalar().empty())
      return fail(v, where + "." + key + ": expected a non-empty string");
    out = v.Scalar();
    return caf::none;
  }

  template <class T>
  caf::error get_int(const YAML::Node& map, const char* key, const std::string& where, T& out,
                     long long lo, long long hi, bool required) const {
    YAML::Node v = map[key];
    if (!v) {
      if (required)
        return fail(map, where + "." + key + ": missing (expected an integer in ["
                           + std::to_string(lo) + ", " + std::to_string(hi) + "])");
      return caf::none;
    }
    long long x = 0;
    char* end = nullptr;
    auto text = v.IsScalar() ? v.Scalar() : std::string{};
    if (!text.empty())
      x = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || x < lo || x > hi)
      return fail(v, where + "." + key + ": expected an integer in [" + std::to_string(lo) + ", "
                       + std::to_string(hi) + "], got '" + text + "'");
    out = static_cast<T>(x);
    return caf::none;
  }

  caf::error load_head(const YAML::Node& h, head_spec& out) const {
    if (auto e = check_keys(h, "head", {"host", "bind", "port", "status_port"}))
      return e;
    if (auto e = get_string(h, "host", "head", out.host, true))
      return e;
    if (auto e = get_string(h, "bind", "head", out.bind, false))
      return e;
    if (auto e = get_int(h, "port", "head", out.port, 1, 65535, true))
      return e;
    return get_int(h, "status_port", "head", out.status_port, 1, 65535, true);
  }

  caf::error load_timing(const YAML::Node& t, cluster_timing& out) const {
    if (!t.IsMap())
      return fail(t, "timing: expected a map of timeouts in milliseconds (spec/knobs.hpp)");
    if (auto e = check_keys(t, "timing",
                            {"heartbeat_interval_ms", "heartbeat_timeout_ms", "admin_tick_ms",
                             "register_timeout_ms"}))
      return e;
    constexpr int64_t hi = int64_t{1} << 40;
    for (auto [key, ptr] : {std::pair{"heartbeat_interval_ms", &out.heartbeat_interval_ms},
                            {"heartbeat_timeout_ms", &out.heartbeat_timeout_ms},
                            {"admin_tick_ms", &out.admin_tick_ms},
                            {"register_timeout_ms", &out.register_timeout_ms}})
      if (auto e = get_int(t, key, "timing", *ptr, int64_t{1}, hi, false))
        return e;
    if (out.heartbeat_timeout_ms <= out.heartbeat_interval_ms)
      return fail(t, "timing.heartbeat_timeout_ms (" + std::to_string(out.heartbeat_timeout_ms)
                       + ") must exceed timing.heartbeat_interval_ms ("
                       + std::to_string(out.heartbeat_interval_ms)
                       + "): every node would be declared dead between two heartbeats");
    return caf::none;
  }

  caf::error load_security(const YAML::Node& s, security_spec& out) const {
    if (auto e = check_keys(s, "security", {"tls", "certs", "max_frame_bytes"}))
      return e;
    std::string tls;
    if (auto e = get_string(s, "tls", "security", tls, false))
      return e;
    if (tls == "off")
      out.tls = tls_mode::off;
    else if (tls.empty() || tls == "required")
      out.tls = tls_mode::required;
    else
      return fail(s["tls"], "security.tls: expected 'required' or 'off', got '" + tls + "'");
    if (auto e = get_string(s, "certs", "security", out.certs, false))
      return e;
    if (YAML::Node m = s["max_frame_bytes"]) {
      if (!m.IsScalar() || !parse_bytes(m.Scalar(), out.max_frame_bytes)
          || out.max_frame_bytes < 65536 || out.max_frame_bytes > 0xffffffffull)
        return fail(m, "security.max_frame_bytes: expected a size from 64KiB to 4GiB, got '"
                         + (m.IsScalar() ? m.Scalar() : std::string("?")) + "'");
    }
    return caf::none;
  }

  caf::error load_resources(const YAML::Node& r, const std::string& where,
                            node_resources& out) const {
    if (auto e = check_keys(r, where, {"cores", "memory", "gpus", "disk"}))
      return e;
    if (YAML::Node d = r["disk"])  // local disk for model.embedding.tier ssd (planning only)
      if (!d.IsScalar() || !parse_bytes(d.Scalar(), out.disk_bytes))
        return fail(d, where + ".disk: expected a size such as 3TB or 375GiB, got '"
                         + (d.IsScalar() ? d.Scalar() : std::string("?")) + "'");
    if (auto e = get_int(r, "cores", where, out.cores, 1, 1 << 20, true))
      return e;
    if (auto e = get_int(r, "gpus", where, out.gpus, 0, 1024, false))
      return e;
    YAML::Node m = r["memory"];
    if (!m)
      return fail(r, where + ".memory: missing (expected a size such as 64GiB or 12TB)");
    if (!m.IsScalar() || !parse_bytes(m.Scalar(), out.memory_bytes) || out.memory_bytes == 0)
      return fail(m, where + ".memory: expected a size such as 64GiB or 12TB (at most 1EiB), got '"
                       + (m.IsScalar() ? m.Scalar() : std::string("?")) + "'");
    return caf::none;
  }

  caf::error load_node(const YAML::Node& n, size_t index, std::vector<node_spec>& out) const {
    auto where = "nodes[" + std::to_string(index) + "]";
    if (auto e =
          check_keys(n, where, {"name", "host", "bind", "port", "count", "resources", "labels"}))
      return e;
    node_spec base;
    int32_t count = 1;
    if (auto e = get_string(n, "name", where, base.name, true))
      return e;
    if (auto e = get_string(n, "host", where, base.host, true))
      return e;
    if (auto e = get_string(n, "bind", where, base.bind, false))
      return e;
    if (auto e = get_int(n, "port", where, base.port, 1, 65535, true))
      return e;
    if (auto e = get_int(n, "count", where, count, 1, 100000, false))
      return e;
    if (!n["resources"])
      return fail(n, where + ".resources: missing (expected {cores, memory, gpus})");
    if (auto e = load_resources(n["resources"], where + ".resources", base.resources))
      return e;
    if (YAML::Node labels = n["labels"]) {
      if (!labels.IsMap())
        return fail(labels, where + ".labels: expected a map of strings");
      for (auto it = labels.begin(); it != labels.end(); ++it) {
        YAML::Node k = it->first, v = it->second;
        if (!v.IsScalar())
          return fail(v, where + ".labels." + k.as<std::string>() + ": expected a string");
        base.labels[k.as<std::string>()] = v.Scalar();
      }
    }
    if (count > 1 && base.name.find("{i}") == std::string::npos)
      return fail(n["name"], where + ".name: expected '{i}' in the name when count > 1");
    if (base.port + count - 1 > 65535)
      return fail(n["port"], where + ".port: port + count - 1 exceeds 65535");
    for (int32_t i = 0; i < count; ++i) {
      auto node = base;
      auto subst = [i](std::string s) {
        for (auto p = s.find("{i}"); p != std::string::npos; p = s.find("{i}"))
          s.replace(p, 3, std::to_string(i));
        return s;
      };
      node.group = base.name;
      node.group_host = base.host;
      node.group_count = count;
      node.name = subst(base.name);
      node.host = subst(base.host);
      node.port = static_cast<uint16_t>(base.port + (base.host == node.host ? i : 0));
      out.push_back(std::move(node));
    }
    return caf::none;
  }

  caf::error load(const YAML::Node& root, manifest& out) const {
    if (!root.IsMap())
      return fail(root, "expected a map with cluster, head and nodes");
    if (auto e = check_keys(root, "", {"cluster", "head", "nodes", "timing", "security"}))
      return e;
    if (root["timing"])
      if (auto e = load_timing(root["timing"], out.timing))
        return e;
    if (auto e = get_string(root, "cluster", "manifest", out.cluster, true))
      return e;
    if (auto why = cluster_name_problem(out.cluster); !why.empty())
      return fail(root["cluster"], "cluster: " + why);
    if (YAML::Node sec = root["security"])
      if (auto e = load_security(sec, out.security))
        return e;
    if (!root["head"])
      return fail(root, "head: missing (expected {host, port, status_port})");
    if (auto e = load_head(root["head"], out.head))
      return e;
    YAML::Node nodes = root["nodes"];
    if (!nodes || !nodes.IsSequence() || nodes.size() == 0)
      return fail(nodes ? nodes : root, "nodes: expected a non-empty list of nodes");
    for (size_t i = 0; i < nodes.size(); ++i)
      if (auto e = load_node(nodes[i], i, out.nodes))
        return e;
    std::set<std::string> names, endpoints;
    endpoints.insert(out.head.host + ":" + std::to_string(out.head.port));
    endpoints.insert(out.head.host + ":" + std::to_string(out.head.status_port));
    for (auto& n : out.nodes) {
      if (!names.insert(n.name).second)
        return make_error(errc::invalid_config, origin + ": node name '" + n.name
                                                  + "' appears twice (names must be unique)");
      auto ep = n.host + ":" + std::to_string(n.port);
      if (!endpoints.insert(ep).second)
        return make_error(errc::invalid_config, origin + ": node '" + n.name + "' listens on " + ep
                                                  + ", which is already taken");
    }
    return caf::none;
  }
};

}  // namespace

caf::error manifest_load_text(const std::string& text, const std::string& origin, manifest& out) {
  loader l{origin};
  try {
    auto root = YAML::Load(text);
    manifest m;
    if (auto e = l.load(root, m))
      return e;
    out = std::move(m);
    return caf::none;
  } catch (const YAML::Exception& e) {
    return make_error(errc::invalid_config, origin + ":" + std::to_string(e.mark.line + 1) + ":"
                                              + std::to_string(e.mark.column + 1)
                                              + ": not valid YAML: " + e.msg);
  }
}

caf::error manifest_load_file(const std::string& path, manifest& out) {
  auto text = read_text_file(path, manifest_file_max_bytes, "manifest");
  if (!text)
    return text.error();
  return manifest_load_text(*text, path, out);
}

}  // namespace satrap
