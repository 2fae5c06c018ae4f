#include "engines/k8s_objects.hpp"

#include "runtime/error.hpp"
#include "engines/k8s_parts.hpp"

#include <sstream>

namespace satrap {

namespace k8s_detail {

obj renderer::labels(const std::string& component) const {
  return obj{{"app.kubernetes.io/name", "satrap"},
             {"app.kubernetes.io/instance", m.cluster},
             {"app.kubernetes.io/component", component}};
}

obj renderer::meta(const std::string& name, obj extra_labels) const {
  obj md{{"name", name}};
  if (!podman)
    md["namespace"] = ns;
  obj l = labels(extra_labels.value("app.kubernetes.io/component", std::string("config")));
  for (auto& [k, v] : extra_labels.items())
    l[k] = v;
  md["labels"] = l;
  return md;
}

// $SATRAP_MANIFEST_YAML from the ConfigMap and, for what needs it (the head, the submit Job; never
// a node: it has its node token), $SATRAP_ADMIN_TOKEN from the Secret.
obj renderer::env(bool admin_token) const {
  obj out = obj::array(
    {{{"name", "SATRAP_MANIFEST_YAML"},
      {"valueFrom",
       {{"configMapKeyRef", {{"name", "satrap-manifest"}, {"key", "manifest.yaml"}}}}}}});
  if (admin_token) {
    obj token_ref = podman
                      ? obj{{"configMapKeyRef", {{"name", "satrap-admin"}, {"key", "admin.token"}}}}
                      : obj{{"secretKeyRef", {{"name", "satrap-admin"}, {"key", "admin.token"}}}};
    out.push_back({{"name", "SATRAP_ADMIN_TOKEN"}, {"valueFrom", token_ref}});
  }
  return out;
}

// Pod Security "restricted": non-root, no privilege escalation, every capability dropped, the
// runtime's default seccomp profile; besides, a read-only root file system (satrap writes only
// to its volumes: the state dir and /tmp). podman's kube play (4.3) gets the same but seccomp,
// which it takes from its own annotations.
obj renderer::pod_security() const {
  obj s{{"runAsNonRoot", true}, {"runAsUser", 10001}, {"runAsGroup", 10001}, {"fsGroup", 10001}};
  if (!podman)
    s["seccompProfile"] = {{"type", "RuntimeDefault"}};
  return s;
}

obj renderer::container_security() const {
  obj s{{"allowPrivilegeEscalation", false}, {"capabilities", {{"drop", obj::array({"ALL"})}}}};
  if (!podman) {
    s["readOnlyRootFilesystem"] = true;
    s["runAsNonRoot"] = true;
    s["seccompProfile"] = {{"type", "RuntimeDefault"}};
  }
  return s;
}

obj renderer::tmp_volume() const { return {{"name", "tmp"}, {"emptyDir", obj::object()}}; }

obj renderer::tmp_mount() const { return {{"name", "tmp"}, {"mountPath", "/tmp"}}; }

obj renderer::resources(const std::string& cpu, const std::string& memory, int32_t gpus) const {
  obj r{{"cpu", cpu}, {"memory", memory}};
  if (gpus > 0 && !podman)
    r["nvidia.com/gpu"] = gpus;
  return {{"requests", r}, {"limits", r}};
}

obj renderer::state_volume(const std::string& name) const {
  return {{"name", name}, {"emptyDir", obj::object()}};
}

obj renderer::state_mount(const std::string& name) const {
  return {{"name", name}, {"mountPath", state_dir}};
}

obj renderer::manifest_config() const {
  std::string header = "# The node manifest of cluster '" + m.cluster + "' as its pods see it"
                       + (o.source.empty() ? "" : " (from " + o.source + ")")
                       + "; rendered by satrap k8s.\n";
  return {
    {"apiVersion", "v1"},
    {"kind", "ConfigMap"},
    {"metadata", meta("satrap-manifest")},
    {"data", {{"manifest.yaml", header + k8s_manifest_yaml(m, podman ? "" : ns, k8s_certs_dir)}}}};
}

// A Secret, or for podman (kube play 4.3 mounts no Secrets) a ConfigMap, of text files.
obj renderer::secret_object(const std::string& name, const obj& files) const {
  if (podman)
    return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta(name)}, {"data", files}};
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", meta(name)},
          {"type", "Opaque"},
          {"stringData", files}};
}

obj renderer::secret_objects() const {
  obj certs = obj::object();
  for (auto& [file, text] : o.cert_files)
    certs[file] = text;
  return obj::array({secret_object("satrap-admin", {{"admin.token", o.token}}),
                     secret_object(certs_name(), certs)});
}

// The certificates and node tokens, read-only; `items` limits them to those files.
obj renderer::certs_volume(const std::vector<std::string>& items) const {
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

obj renderer::storage_volume() const {
  return {{"name", "checkpoints"},
          {"persistentVolumeClaim", {{"claimName", storage_claim_name()}}}};
}

obj renderer::storage_mount() const {
  return {{"name", "checkpoints"}, {"mountPath", k8s_checkpoints_dir}};
}

obj renderer::storage_claim_object() const {
  obj spec{{"accessModes", obj::array({"ReadWriteMany"})},
           {"resources", {{"requests", {{"storage", o.storage_size}}}}}};
  if (!o.storage_class.empty())
    spec["storageClassName"] = o.storage_class;
  return {{"apiVersion", "v1"},
          {"kind", "PersistentVolumeClaim"},
          {"metadata", meta("satrap-checkpoints", obj{{"app.kubernetes.io/component", "storage"}})},
          {"spec", spec}};
}

obj renderer::certs_mount() const {
  return {{"name", "certs"}, {"mountPath", k8s_certs_dir}, {"readOnly", true}};
}

}  // namespace k8s_detail

using namespace k8s_detail;

caf::expected<std::string> k8s_render(const manifest& m, const k8s_options& o) {
  renderer r{m, o, o.ns.empty() ? m.cluster : o.ns, o.flavor == k8s_flavor::podman};
  if (!dns_label(r.ns, 63))
    return make_error(errc::invalid_config,
                      "namespace '" + r.ns + "' is not a Kubernetes name (lower-case letters, "
                      "digits and '-'); give --namespace");
  auto groups = groups_of(m);
  if (!groups)
    return groups.error();
  if (!o.storage_claim.empty() && !o.storage_size.empty())
    return make_error(errc::invalid_config,
                      "give the checkpoint storage as a new claim (size and class) or as an "
                      "existing claim, not both");
  if (!o.storage_class.empty() && o.storage_size.empty())
    return make_error(errc::invalid_config,
                      "a storage class without a size: give the claim's size too");
  if (r.podman && r.storage())
    return make_error(errc::invalid_config,
                      "checkpoint storage is rendered for flavor kubernetes only");
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
    if (r.storage() && o.storage_claim.empty())
      docs.push_back(r.storage_claim_object());
    for (auto& d : r.head_objects())
      docs.push_back(d);
    for (auto& d : r.node_objects(*groups))
      docs.push_back(d);
    for (auto& d : r.job_objects())
      docs.push_back(d);
    for (auto& d : r.policy_objects())
      docs.push_back(d);
  }
  std::ostringstream os;
  os << "# Kubernetes objects for satrap cluster '" << m.cluster << "'"
     << (o.source.empty() ? "" : " (" + o.source + ")") << ", flavor "
     << (r.podman ? "podman (podman kube play)" : "kubernetes") << ".\n"
     << "# Rendered by `satrap k8s`; see engines/k8s_objects.hpp for what each object is.\n";
  for (auto& d : docs)
    os << "---\n" << to_yaml(d);
  return os.str();
}

}  // namespace satrap
