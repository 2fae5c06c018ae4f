// Inside engines/k8s_objects (not for other code): the pieces the Kubernetes objects are made
// of, by concern:
//   k8s_yaml.cpp       a JSON tree as YAML (quoting what YAML would read as something else)
//   k8s_groups.cpp     manifest entries as workloads (names, labels, accelerators) and the
//                      manifest as the pods see it
//   k8s_objects.cpp    the shared parts (metadata, env, security, volumes, Secrets) and k8s_render
//   k8s_workloads.cpp  the head, the nodes (StatefulSets or podman's one Pod) and the submit Job
// Threading: pure functions.
#pragma once

#include "engines/k8s_objects.hpp"

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace satrap::k8s_detail {

using obj = nlohmann::ordered_json;

inline constexpr const char* state_dir = "/var/lib/satrap";

// The tree as a YAML document (block style, indent 2; multi-line strings as literals).
std::string to_yaml(const obj& j);

// Whether `s` is a DNS label of at most `max` characters (lower-case letters, digits, '-').
bool dns_label(const std::string& s, size_t max);

// One manifest entry as a workload.
struct group {
  node_spec first;        // resources, labels, port
  std::string workload;   // StatefulSet / headless Service name
  bool templated = true;  // pod name == node name; else one replica named <workload>-0
  int32_t count = 1;
  std::vector<std::string> names;
};

// The entries of `m` as workloads, or an error naming the entry that cannot be one.
caf::expected<std::vector<group>> groups_of(const manifest& m);
// The GKE accelerator a node entry asks for ("" for none): its label, else implied by its machine.
std::string gke_accelerator(const node_spec& n);

// Renders the objects of one manifest with one set of options.
struct renderer {
  const manifest& m;
  const k8s_options& o;
  std::string ns;
  bool podman;

  obj labels(const std::string& component) const;
  obj meta(const std::string& name, obj extra_labels = obj::object()) const;
  // $SATRAP_MANIFEST_YAML from the ConfigMap and, with admin_token (the head and the submit Job;
  // never a node), $SATRAP_ADMIN_TOKEN from the Secret.
  obj env(bool admin_token = true) const;
  obj pod_security() const;
  obj container_security() const;
  obj resources(const std::string& cpu, const std::string& memory, int32_t gpus) const;
  // /tmp, writable (TMPDIR: the data cache) under a read-only root file system.
  obj tmp_volume() const;
  obj tmp_mount() const;
  obj state_volume(const std::string& name = "state") const;
  obj state_mount(const std::string& name = "state") const;
  obj manifest_config() const;
  // A Secret, or for podman (kube play 4.3 mounts no Secrets) a ConfigMap, of text files.
  obj secret_object(const std::string& name, const obj& files) const;
  // The podman Pod's name; kube play keeps a ConfigMap's volume after `kube down` under the
  // ConfigMap's name, so the certificates' one is named after the cluster, not shared.
  std::string pod_name() const {
    return dns_label(m.cluster, 63) ? m.cluster : std::string("satrap");
  }
  std::string certs_name() const { return podman ? pod_name() + "-certs" : "satrap-certs"; }
  obj secret_objects() const;
  // The certificates and node tokens, read-only; `items` limits them to those files.
  obj certs_volume(const std::vector<std::string>& items = {}) const;
  obj certs_mount() const;
  // The shared checkpoint storage, when options name one.
  bool storage() const { return !o.storage_size.empty() || !o.storage_claim.empty(); }
  std::string storage_claim_name() const {
    return o.storage_claim.empty() ? std::string("satrap-checkpoints") : o.storage_claim;
  }
  obj storage_volume() const;
  obj storage_mount() const;
  obj storage_claim_object() const;
  obj head_container(const std::string& volume) const;
  obj head_objects() const;
  obj node_container(const group& g, const std::string& container_name,
                     const std::string& node_name, uint16_t port, const std::string& volume) const;
  obj node_pod_spec(const group& g, const std::string& node_name, uint16_t port) const;
  // Flavor podman: the whole cluster as one Pod with host networking. One Pod, sharing its
  // process namespace, because CAF names a process by its host (network interfaces, root file
  // system) and pid: with host networking, pods of their own would all run satrap as pid 1 and
  // every node would take the head for itself. Each container restarts on its own.
  obj podman_pod(const std::vector<group>& groups) const;
  obj pod_labels(const group& g) const;
  obj node_objects(const std::vector<group>& groups) const;
  obj job_objects() const;
  // Who may reach the pods (the cluster's own pods; the status port also from
  // `status_from`) and how many node pods a drain may take at once (one).
  obj policy_objects() const;
};

}  // namespace satrap::k8s_detail
