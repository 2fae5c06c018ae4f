#include "runtime/k8s_objects.hpp"

#include "runtime/error.hpp"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

namespace satrap {

namespace {

using obj = nlohmann::ordered_json;

constexpr const char* state_dir = "/var/lib/satrap";

// A string YAML would read as something else (a bool, a null, a number) is quoted.
bool needs_quotes(const std::string& s) {
  if (s.empty())
    return true;
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  for (auto* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"})
    if (lower == word)
      return true;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end && *end == '\0')
    return true;
  return std::isspace(static_cast<unsigned char>(s.front()))
         || std::isspace(static_cast<unsigned char>(s.back()))
         || std::string_view("-?:,[]{}#&*!|>'\"%@`$").find(s.front()) != std::string_view::npos
         || s.find(": ") != std::string::npos || s.find(" #") != std::string::npos;
}

void emit(YAML::Emitter& out, const obj& j) {
  switch (j.type()) {
    case obj::value_t::object:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      for (auto& [k, v] : j.items()) {
        out << YAML::Key << k << YAML::Value;
        emit(out, v);
      }
      out << YAML::EndMap;
      break;
    case obj::value_t::array:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::BeginSeq;
      for (auto& v : j)
        emit(out, v);
      out << YAML::EndSeq;
      break;
    case obj::value_t::string: {
      auto& s = j.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos)
        out << YAML::Literal << s;
      else if (needs_quotes(s))
        out << YAML::DoubleQuoted << s;
      else
        out << s;
      break;
    }
    case obj::value_t::boolean:
      out << j.get<bool>();
      break;
    case obj::value_t::number_integer:
      out << j.get<int64_t>();
      break;
    case obj::value_t::number_unsigned:
      out << j.get<uint64_t>();
      break;
    case obj::value_t::number_float:
      out << j.get<double>();
      break;
    default:
      out << YAML::Null;
  }
}

std::string to_yaml(const obj& j) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  emit(out, j);
  return std::string(out.c_str()) + "\n";
}

// Sizes the manifest loader reads back: "680GB", "6GiB", else bytes.
std::string manifest_bytes(uint64_t b) {
  if (b == 0)
    return "0";
  for (auto [unit, scale] : {std::pair{"TiB", uint64_t{1} << 40}, {"TB", uint64_t{1000000000000}},
                             {"GiB", uint64_t{1} << 30}, {"GB", uint64_t{1000000000}},
                             {"MiB", uint64_t{1} << 20}, {"MB", uint64_t{1000000}}})
    if (b % scale == 0 && b / scale < 100000)
      return std::to_string(b / scale) + unit;
  return std::to_string(b);
}

bool dns_label(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || s.front() == '-' || s.back() == '-')
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
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

struct group {
  node_spec first;      // resources, labels, port
  std::string workload; // StatefulSet / headless Service name
  bool templated = true;  // pod name == node name; else one replica named <workload>-0
  int32_t count = 1;
  std::vector<std::string> names;
};

caf::expected<std::vector<group>> groups_of(const manifest& m) {
  std::vector<group> out;
  for (auto& n : m.nodes) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](auto& g) { return g.first.group == n.group; });
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
    } else if (p != std::string::npos && p + 3 == n.group.size() && p >= 2
               && n.group[p - 1] == '-' && n.group.find("{i}") == p) {
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

struct renderer {
  const manifest& m;
  const k8s_options& o;
  std::string ns;
  bool podman;

  obj labels(const std::string& component) const {
    return obj{{"app.kubernetes.io/name", "satrap"},
               {"app.kubernetes.io/instance", m.cluster},
               {"app.kubernetes.io/component", component}};
  }

  obj meta(const std::string& name, obj extra_labels = obj::object()) const {
    obj md{{"name", name}};
    if (!podman)
      md["namespace"] = ns;
    obj l = labels(extra_labels.value("app.kubernetes.io/component", std::string("config")));
    for (auto& [k, v] : extra_labels.items())
      l[k] = v;
    md["labels"] = l;
    return md;
  }

  // $SATRAP_MANIFEST_YAML and $SATRAP_ADMIN_TOKEN from the ConfigMap and the Secret.
  obj env() const {
    obj token_ref = podman ? obj{{"configMapKeyRef", {{"name", "satrap-admin"}, {"key", "admin.token"}}}}
                           : obj{{"secretKeyRef", {{"name", "satrap-admin"}, {"key", "admin.token"}}}};
    return obj::array(
      {{{"name", "SATRAP_MANIFEST_YAML"},
        {"valueFrom", {{"configMapKeyRef", {{"name", "satrap-manifest"}, {"key", "manifest.yaml"}}}}}},
       {{"name", "SATRAP_ADMIN_TOKEN"}, {"valueFrom", token_ref}}});
  }

  obj pod_security() const {
    return {{"runAsNonRoot", true}, {"runAsUser", 10001}, {"runAsGroup", 10001},
            {"fsGroup", 10001}};
  }

  obj container_security() const {
    return {{"allowPrivilegeEscalation", false}, {"capabilities", {{"drop", obj::array({"ALL"})}}}};
  }

  obj resources(const std::string& cpu, const std::string& memory, int32_t gpus) const {
    obj r{{"cpu", cpu}, {"memory", memory}};
    if (gpus > 0 && !podman)
      r["nvidia.com/gpu"] = gpus;
    return {{"requests", r}, {"limits", r}};
  }

  obj state_volume(const std::string& name = "state") const {
    return {{"name", name}, {"emptyDir", obj::object()}};
  }
  obj state_mount(const std::string& name = "state") const {
    return {{"name", name}, {"mountPath", state_dir}};
  }

  obj manifest_config() const {
    std::string header = "# The node manifest of cluster '" + m.cluster + "' as its pods see it"
                         + (o.source.empty() ? "" : " (from " + o.source + ")")
                         + "; rendered by satrap k8s.\n";
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", meta("satrap-manifest")},
            {"data", {{"manifest.yaml",
                       header + k8s_manifest_yaml(m, podman ? "" : ns, k8s_certs_dir)}}}};
  }

  // A Secret, or for podman (kube play 4.3 mounts no Secrets) a ConfigMap, of text files.
  obj secret_object(const std::string& name, const obj& files) const {
    if (podman)
      return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta(name)}, {"data", files}};
    return {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", meta(name)},
            {"type", "Opaque"},
            {"stringData", files}};
  }

  // The podman Pod's name; kube play keeps a ConfigMap's volume after `kube down` under the
  // ConfigMap's name, so the certificates' one is named after the cluster, not shared.
  std::string pod_name() const { return dns_label(m.cluster, 63) ? m.cluster : std::string("satrap"); }
  std::string certs_name() const { return podman ? pod_name() + "-certs" : "satrap-certs"; }

  obj secret_objects() const {
    obj certs = obj::object();
    for (auto& [file, text] : o.cert_files)
      certs[file] = text;
    return obj::array({secret_object("satrap-admin", {{"admin.token", o.token}}),
                       secret_object(certs_name(), certs)});
  }

  // The certificates and node tokens, read-only; `items` limits them to those files.
  obj certs_volume(const std::vector<std::string>& items = {}) const {
    obj source = podman ? obj{{"name", certs_name()}} : obj{{"secretName", certs_name()}};
    source["defaultMode"] = 0440;  // the satrap group (fsGroup) reads them, no one else
    if (!items.empty()) {
      obj list = obj::array();
      for (auto& f : items)
        list.push_back({{"key", f}, {"path", f}});
      source["items"] = list;
    }
    return {{"name", "certs"}, {podman ? "configMap" : "secret", source}};
  }
  obj certs_mount() const {
    return {{"name", "certs"}, {"mountPath", k8s_certs_dir}, {"readOnly", true}};
  }

  obj head_container(const std::string& volume) const {
    auto probe = [&](const char* path, int period, int failures) {
      return obj{{"httpGet", {{"path", path}, {"port", "status"}}},
                 {"initialDelaySeconds", 2},
                 {"periodSeconds", period},
                 {"timeoutSeconds", 3},
                 {"failureThreshold", failures}};
    };
    obj container{
      {"name", "head"},
      {"image", o.image},
      {"imagePullPolicy", "IfNotPresent"},
      {"args", obj::array({"head", "--state-dir", state_dir, "--listen", "0.0.0.0"})},
      {"env", env()},
      {"resources", resources(o.head_cpu, o.head_memory, 0)},
      {"securityContext", container_security()},
      {"volumeMounts", obj::array({state_mount(volume), certs_mount()})}};
    if (!podman) {
      // kube play turns ports into host port mappings (refused with host networking) and probes
      // into commands run inside the container under systemd timers: neither here.
      container["ports"] = obj::array({{{"name", "admin"}, {"containerPort", m.head.port}},
                                       {{"name", "status"}, {"containerPort", m.head.status_port}}});
      container["livenessProbe"] = probe("/healthz", 10, 3);
      container["readinessProbe"] = probe("/readyz", 5, 1);
    }
    return container;
  }

  obj head_objects() const {
    auto component = obj{{"app.kubernetes.io/component", "head"}};
    obj scrape{{"prometheus.io/scrape", "true"},
               {"prometheus.io/port", std::to_string(m.head.status_port)},
               {"prometheus.io/path", "/metrics"}};
    obj pod_spec{{"restartPolicy", "Always"},
                 {"terminationGracePeriodSeconds", o.termination_grace_s},
                 {"securityContext", pod_security()},
                 {"containers", obj::array({head_container("state")})},
                 {"volumes", obj::array({state_volume(), certs_volume()})}};
    obj template_md{{"labels", labels("head")}, {"annotations", scrape}};
    obj deployment{{"apiVersion", "apps/v1"},
                   {"kind", "Deployment"},
                   {"metadata", meta("head", component)},
                   {"spec",
                    {{"replicas", 1},
                     {"strategy", {{"type", "Recreate"}}},  // never two heads at once
                     {"selector", {{"matchLabels", labels("head")}}},
                     {"template", {{"metadata", template_md}, {"spec", pod_spec}}}}}};
    auto service_md = meta("head", component);
    service_md["annotations"] = scrape;
    obj service{{"apiVersion", "v1"},
                {"kind", "Service"},
                {"metadata", service_md},
                {"spec",
                 {{"selector", labels("head")},
                  // Nodes must reach the head before it is ready: it is ready once they joined.
                  {"publishNotReadyAddresses", true},
                  {"ports", obj::array({{{"name", "admin"}, {"port", m.head.port},
                                         {"targetPort", "admin"}},
                                        {{"name", "status"}, {"port", m.head.status_port},
                                         {"targetPort", "status"}}})}}}};
    return obj::array({deployment, service});
  }

  obj node_container(const group& g, const std::string& container_name,
                     const std::string& node_name, uint16_t port,
                     const std::string& volume) const {
    auto& n = g.first;
    obj args = obj::array({"node", "--name", node_name, "--wait", std::to_string(o.node_wait_s),
                           "--starts-file", std::string(state_dir) + "/starts"});
    obj env_list = env();
    if (node_name.find("$(") != std::string::npos)
      env_list.insert(env_list.begin(),
                      obj{{"name", "SATRAP_POD_NAME"},
                          {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
    obj container{
      {"name", container_name},
      {"image", o.image},
      {"imagePullPolicy", "IfNotPresent"},
      {"args", args},
      {"env", env_list},
      {"resources", resources(std::to_string(n.resources.cores),
                              k8s_memory_quantity(n.resources.memory_bytes), n.resources.gpus)},
      {"securityContext", container_security()},
      {"volumeMounts", obj::array({state_mount(volume), certs_mount()})}};
    if (!podman)
      container["ports"] = obj::array({{{"name", "node"}, {"containerPort", port}}});
    return container;
  }

  obj node_pod_spec(const group& g, const std::string& node_name, uint16_t port) const {
    auto& n = g.first;
    obj spec{{"restartPolicy", "Always"},
             {"terminationGracePeriodSeconds", o.termination_grace_s},
             {"securityContext", pod_security()}};
    {
      obj selector = obj::object();
      if (auto it = n.labels.find("machine"); it != n.labels.end())
        selector["node.kubernetes.io/instance-type"] = it->second;
      if (auto it = n.labels.find("pool"); it != n.labels.end())
        selector["cloud.google.com/gke-nodepool"] = it->second;
      if (auto acc = gke_accelerator(n); !acc.empty())
        selector["cloud.google.com/gke-accelerator"] = acc;
      if (!selector.empty())
        spec["nodeSelector"] = selector;
      if (n.resources.gpus > 0)
        spec["tolerations"] = obj::array({{{"key", "nvidia.com/gpu"},
                                           {"operator", "Exists"},
                                           {"effect", "NoSchedule"}}});
    }
    spec["containers"] = obj::array({node_container(g, "node", node_name, port, "state")});
    spec["volumes"] = obj::array({state_volume(), certs_volume()});
    return spec;
  }

  // Flavor podman: the whole cluster as one Pod with host networking. One Pod, sharing its
  // process namespace, because CAF names a process by its host (network interfaces, root file
  // system) and pid: with host networking, pods of their own would all run satrap as pid 1 and
  // every node would take the head for itself. Each container restarts on its own.
  obj podman_pod(const std::vector<group>& groups) const {
    obj containers = obj::array({head_container("state-head")});
    obj volumes = obj::array({state_volume("state-head"), certs_volume()});
    for (auto& g : groups)
      for (auto& name : g.names) {
        auto& spec = *std::find_if(m.nodes.begin(), m.nodes.end(),
                                   [&](auto& n) { return n.name == name; });
        containers.push_back(node_container(g, name, name, spec.port, "state-" + name));
        volumes.push_back(state_volume("state-" + name));
      }
    auto name = pod_name();
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", meta(name, obj{{"app.kubernetes.io/component", "cluster"}})},
            {"spec",
             {{"hostNetwork", true},
              {"shareProcessNamespace", true},
              {"restartPolicy", "Always"},
              {"terminationGracePeriodSeconds", o.termination_grace_s},
              {"securityContext", pod_security()},
              {"containers", containers},
              {"volumes", volumes}}}};
  }

  obj pod_labels(const group& g) const {
    obj l = labels("node");
    l["satrap.io/group"] = g.workload;
    for (auto& [k, v] : g.first.labels)
      l["satrap.io/" + k] = v;
    return l;
  }

  obj node_objects(const std::vector<group>& groups) const {
    obj out = obj::array();
    for (auto& g : groups) {
      auto component = obj{{"app.kubernetes.io/component", "node"},
                           {"satrap.io/group", g.workload}};
      obj service{{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", meta(g.workload, component)},
                  {"spec",
                   {{"clusterIP", "None"},  // headless: a DNS name per pod
                    {"publishNotReadyAddresses", true},
                    {"selector", {{"app.kubernetes.io/instance", m.cluster},
                                  {"satrap.io/group", g.workload}}},
                    {"ports", obj::array({{{"name", "node"}, {"port", g.first.port},
                                           {"targetPort", "node"}}})}}}};
      obj selector{{"app.kubernetes.io/instance", m.cluster}, {"satrap.io/group", g.workload}};
      auto node_name = g.templated ? std::string("$(SATRAP_POD_NAME)") : g.names.front();
      obj sts{{"apiVersion", "apps/v1"},
              {"kind", "StatefulSet"},
              {"metadata", meta(g.workload, component)},
              {"spec",
               {{"serviceName", g.workload},
                {"replicas", g.count},
                {"podManagementPolicy", "Parallel"},  // nodes start together, in any order
                {"selector", {{"matchLabels", selector}}},
                {"template",
                 {{"metadata", {{"labels", pod_labels(g)}}},
                  {"spec", node_pod_spec(g, node_name, g.first.port)}}}}}};
      out.push_back(service);
      out.push_back(sts);
    }
    return out;
  }

  obj job_objects() const {
    std::string job = o.job_yaml.empty()
                        ? "# The default synthetic job; replace it with yours (satrap train "
                          "--help lists the keys).\n{}\n"
                        : o.job_yaml;
    if (job.back() != '\n')
      job += '\n';
    obj cm{{"apiVersion", "v1"},
           {"kind", "ConfigMap"},
           {"metadata", meta("satrap-job")},
           {"data", {{"job.yaml", job}}}};
    auto component = obj{{"app.kubernetes.io/component", "submit"}};
    obj container{
      {"name", "submit"},
      {"image", o.image},
      {"imagePullPolicy", "IfNotPresent"},
      {"args", obj::array({"submit", "/etc/satrap/job/job.yaml", "--follow"})},
      {"env", env()},
      {"resources", resources("100m", "256Mi", 0)},
      {"securityContext", container_security()},
      {"volumeMounts", obj::array({{{"name", "job"}, {"mountPath", "/etc/satrap/job"},
                                    {"readOnly", true}},
                                   certs_mount()})}};
    obj jobobj{{"apiVersion", "batch/v1"},
               {"kind", "Job"},
               {"metadata", meta("satrap-submit", component)},
               {"spec",
                {{"suspend", o.job_yaml.empty()},  // resume it once satrap-job holds your job
                 {"backoffLimit", 0},              // a retry would submit the job twice
                 {"template",
                  {{"metadata", {{"labels", labels("submit")}}},
                   {"spec",
                    {{"restartPolicy", "Never"},
                     {"securityContext", pod_security()},
                     {"containers", obj::array({container})},
                     {"volumes", obj::array({{{"name", "job"},
                                              {"configMap", {{"name", "satrap-job"}}}},
                                             certs_volume({"ca.pem", "client.pem",
                                                           "client.key"})})}}}}}}}};
    return obj::array({cm, jobobj});
  }
};

}  // namespace

std::string k8s_memory_quantity(uint64_t bytes) {
  if (bytes == 0)
    return "0";
  for (auto [unit, scale] : {std::pair{"Ti", uint64_t{1} << 40}, {"T", uint64_t{1000000000000}},
                             {"Gi", uint64_t{1} << 30}, {"G", uint64_t{1000000000}},
                             {"Mi", uint64_t{1} << 20}, {"M", uint64_t{1000000}},
                             {"Ki", uint64_t{1} << 10}, {"k", uint64_t{1000}}})
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
  return to_yaml(obj{{"cluster", m.cluster}, {"head", head}, {"nodes", nodes},
                     {"timing", timing}, {"security", security}});
}

caf::expected<std::string> k8s_render(const manifest& m, const k8s_options& o) {
  renderer r{m, o, o.ns.empty() ? m.cluster : o.ns, o.flavor == k8s_flavor::podman};
  if (!dns_label(r.ns, 63))
    return make_error(errc::invalid_config,
                      "namespace '" + r.ns + "' is not a Kubernetes name (lower-case letters, "
                      "digits and '-'); give --namespace");
  auto groups = groups_of(m);
  if (!groups)
    return groups.error();
  if (o.secrets != k8s_secrets::external) {
    if (o.token.empty())
      return make_error(errc::invalid_config, "no admin token for the Secret");
    for (auto& f : k8s_cert_file_names(m))
      if (!o.cert_files.count(f))
        return make_error(errc::invalid_config,
                          "no " + f + " for the satrap-certs Secret: run `satrap certs`");
  }
  obj docs = obj::array();
  if (!r.podman)
    docs.push_back({{"apiVersion", "v1"},
                    {"kind", "Namespace"},
                    {"metadata", {{"name", r.ns}, {"labels", r.labels("namespace")}}}});
  if (o.secrets != k8s_secrets::only)
    docs.push_back(r.manifest_config());
  if (o.secrets != k8s_secrets::external)
    for (auto& d : r.secret_objects())
      docs.push_back(d);
  if (o.secrets == k8s_secrets::only) {
    // the Namespace and the Secrets alone
  } else if (r.podman) {
    docs.push_back(r.podman_pod(*groups));
  } else {
    for (auto& d : r.head_objects())
      docs.push_back(d);
    for (auto& d : r.node_objects(*groups))
      docs.push_back(d);
    for (auto& d : r.job_objects())
      docs.push_back(d);
  }
  std::ostringstream os;
  os << "# Kubernetes objects for satrap cluster '" << m.cluster << "'"
     << (o.source.empty() ? "" : " (" + o.source + ")") << ", flavor "
     << (r.podman ? "podman (podman kube play)" : "kubernetes") << ".\n"
     << "# Rendered by `satrap k8s`; see runtime/k8s_objects.hpp for what each object is.\n";
  for (auto& d : docs)
    os << "---\n" << to_yaml(d);
  return os.str();
}

}  // namespace satrap
