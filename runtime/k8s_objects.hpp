// k8s_objects: the Kubernetes objects that run the cluster a node manifest describes
// (`satrap k8s`), rendered as one multi-document YAML stream with yaml-cpp's emitter.
//
// Flavor kubernetes (a real cluster, e.g. GKE):
//   - ConfigMap `satrap-manifest`: the manifest as the pods see it: the head's host is the head
//     Service (`head.<ns>.svc`), node i of entry `mem-{i}` is `mem-i.mem.<ns>.svc` (its pod);
//   - Secret `satrap-admin`: the admin token;
//   - Deployment `head` (one replica; liveness /healthz, readiness /readyz; Prometheus scrape
//     annotations for /metrics) and Service `head` (admin and status ports; it publishes the
//     head before it is ready, since the head is ready only once every node has joined);
//   - per manifest entry `<g>-{i}` with count n: a headless Service `<g>` and a StatefulSet `<g>`
//     of n replicas (the pod name is the node name), requests = limits from the entry's cores,
//     memory and GPUs (nvidia.com/gpu), node selectors and tolerations from its labels (below),
//     restartPolicy Always, a termination grace period, a per-pod emptyDir where the node counts
//     its starts (so /status shows container restarts);
//   - ConfigMap `satrap-job` and Job `satrap-submit` running `satrap submit --follow` for it
//     (suspended unless a job file was given).
// Flavor podman (`podman kube play`, which runs Pods and Deployments but not StatefulSets,
// Services or Jobs, cannot mount Secrets and keeps ConfigMap volumes after `kube down`): the
// same containers from the same code, in one Pod named after the cluster (a container for the
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

#include "runtime/manifest.hpp"

#include <caf/expected.hpp>

#include <string>

namespace satrap {

enum class k8s_flavor { kubernetes, podman };

struct k8s_options {
  std::string image = "localhost/satrap:latest";
  std::string ns;                        // "" = the cluster's name
  k8s_flavor flavor = k8s_flavor::kubernetes;
  std::string token;                     // the admin token (required)
  std::string job_yaml;                  // the submit Job's job file ("" = suspended, {} job)
  std::string source;                    // named in the header comment (the manifest file)
  std::string head_cpu = "2";            // the head's requests and limits
  std::string head_memory = "4Gi";
  int node_wait_s = 600;                 // how long a node keeps trying to reach the head
  int termination_grace_s = 30;
};

// The objects, or an error that names what in the manifest cannot be deployed and what to do.
caf::expected<std::string> k8s_render(const manifest& m, const k8s_options& options);

// The manifest as YAML (one entry per manifest entry, `count` and `{i}` kept); with
// `rewrite_for` non-empty, the addresses are those of the pods and Services in that namespace.
std::string k8s_manifest_yaml(const manifest& m, const std::string& rewrite_for);

// A Kubernetes quantity for bytes: "680G", "6Gi", "123456".
std::string k8s_memory_quantity(uint64_t bytes);

}  // namespace satrap
