// k8s_objects: the Kubernetes objects that run the cluster a node manifest describes
// (`satrap k8s`), rendered as one multi-document YAML stream with yaml-cpp's emitter.
//
// Flavor kubernetes (a real cluster, e.g. GKE):
//   - ConfigMap `satrap-manifest`: the manifest as the pods see it: the head's host is the head
//     Service (`head.<ns>.svc`), node i of entry `mem-{i}` is `mem-i.mem.<ns>.svc` (its pod);
//   - Secret `satrap-admin`: the admin token; Secret `satrap-certs`: the cluster's TLS material
//     and node tokens (what `satrap certs` makes: ca.pem, head/client/node-<name> .pem and .key,
//     node-<name>.token; never ca.key), mounted read-only at /etc/satrap/certs, which the pods'
//     manifest names as `security.certs`. The head and node pods mount all of it (a StatefulSet
//     cannot give each pod its own Secret), the submit Job only ca.pem and the client's pair.
//     With secrets `external` neither Secret is rendered (apply `--secrets only` first, so the
//     rest can be kept in git); with `only`, the Namespace and the two Secrets alone;
//   - StatefulSet `head` (one replica; its state dir, the job table, on a ReadWriteOnce claim so
//     that a rescheduled head resumes its jobs; startup and liveness /healthz, readiness /readyz;
//     Prometheus scrape annotations for /metrics) and Service `head` (admin and status ports; it
//     publishes the head before it is ready, since the head is ready only once every node has
//     joined);
//   - per manifest entry `<g>-{i}` with count n: a headless Service `<g>` and a StatefulSet `<g>`
//     of n replicas (the pod name is the node name), requests = limits from the entry's cores,
//     memory and GPUs (nvidia.com/gpu), node selectors and tolerations from its labels (below),
//     restartPolicy Always, a termination grace period, TCP startup/liveness/readiness probes of
//     the node's port, a per-pod emptyDir where the node counts its starts (so /status shows
//     container restarts);
//   - ConfigMap `satrap-job` and Job `satrap-submit` running `satrap submit --follow` for it
//     (suspended unless a job file was given);
//   - NetworkPolicy `satrap`: only the cluster's pods reach the CAF ports and the status port
//     (and `status_from` CIDRs the status port); PodDisruptionBudget `satrap-nodes`: a drain
//     takes at most one node pod at a time.
//   Every pod: Pod Security "restricted" (non-root, no privilege escalation, capabilities
//   dropped, seccomp RuntimeDefault), a read-only root file system (writable: the state dir and
//   /tmp), no service account token.
// Flavor podman (`podman kube play`, which runs Pods and Deployments but not StatefulSets,
// Services or Jobs, cannot mount Secrets and keeps ConfigMap volumes after `kube down`): the
// same containers from the same code (the two Secrets as ConfigMaps; the certificates' one,
// mounted, is `<cluster>-certs` and its volume outlives `kube down`: `podman volume rm` it), in one Pod named after the cluster (a container for the
// head and one per node, each with its emptyDir), sharing its process namespace, with host
// networking (the manifest's addresses unchanged): CAF names a process by its host's interfaces
// and its pid, and separate pods would all run satrap as pid 1. The token is in a ConfigMap;
// no node selectors, tolerations or GPUs, no container ports (kube play maps them to host
// ports, refused with host networking) and no probes (kube play runs them as commands inside
// the container, under systemd timers).
// Both flavors hand the manifest and the token to satrap as environment variables
// ($SATRAP_MANIFEST_YAML, $SATRAP_ADMIN_TOKEN) from those objects.
//
// Labels: `machine` selects node.kubernetes.io/instance-type, `pool` cloud.google.com/gke-nodepool,
// `accelerator` cloud.google.com/gke-accelerator (for GPU entries without it, known GCE machine
// types imply it: a2-highgpu -> nvidia-tesla-a100, a2-ultragpu -> nvidia-a100-80gb, a3 ->
// nvidia-h100-80gb, g2 -> nvidia-l4); every label also becomes the pod label satrap.io/<key>.
// Threading: pure functions.
#pragma once

#include "spec/manifest.hpp"

#include <caf/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace satrap {

enum class k8s_flavor { kubernetes, podman };
enum class k8s_secrets { include, external, only };

// Where the pods find the cluster's certificates and node tokens (the satrap-certs volume).
inline constexpr const char* k8s_certs_dir = "/etc/satrap/certs";
// Where the pods mount the shared checkpoint storage (k8s_options::storage_*).
inline constexpr const char* k8s_checkpoints_dir = "/checkpoints";

struct k8s_options {
  std::string image = "localhost/satrap:latest";
  std::string ns;  // "" = the cluster's name
  k8s_flavor flavor = k8s_flavor::kubernetes;
  k8s_secrets secrets = k8s_secrets::include;
  std::string token;  // the admin token (required unless secrets external)
  // satrap-certs: file name -> contents (required unless secrets external): ca.pem, head.pem,
  // head.key, client.pem, client.key and per node node-<name>.pem, .key, .token.
  std::map<std::string, std::string> cert_files;
  std::string job_yaml;        // the submit Job's job file ("" = suspended, {} job)
  std::string source;          // named in the header comment (the manifest file)
  std::string head_cpu = "2";  // the head's requests and limits
  std::string head_memory = "4Gi";
  int node_wait_s = 600;  // how long a node keeps trying to reach the head
  // Flavor kubernetes: the head's state claim (ReadWriteOnce; "" class = the cluster's default)
  // and where the status port may be reached from besides the cluster's pods (CIDRs).
  std::string head_state_size = "1Gi";
  // Checkpoint storage every node pod and the head share, mounted at k8s_checkpoints_dir: a
  // ReadWriteMany claim `satrap-checkpoints` of this class and size (storage_size not empty), or
  // an existing claim (storage_claim). The submit Job's job then checkpoints there by default.
  std::string storage_class;
  std::string storage_size;
  std::string storage_claim;
  std::string head_storage_class;
  std::vector<std::string> status_from;
  int termination_grace_s = 30;
};

// The objects, or an error that names what in the manifest cannot be deployed and what to do.
caf::expected<std::string> k8s_render(const manifest& m, const k8s_options& options);

// The files satrap-certs must hold for `m` (README "Security").
std::vector<std::string> k8s_cert_file_names(const manifest& m);

// The manifest as YAML (one entry per manifest entry, `count` and `{i}` kept, its timing and
// security carried, `security.certs` set to `certs_dir` when given); with `rewrite_for` non-empty,
// the addresses are those of the pods and Services in that namespace and every process binds
// 0.0.0.0 (a pod's DNS name is not one of its interfaces' addresses before it is published).
std::string k8s_manifest_yaml(const manifest& m, const std::string& rewrite_for,
                              const std::string& certs_dir = "");

// A Kubernetes quantity for bytes: "680G", "6Gi", "123456".
std::string k8s_memory_quantity(uint64_t bytes);

}  // namespace satrap
