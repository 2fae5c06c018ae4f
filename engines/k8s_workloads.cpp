// The workloads of the Kubernetes objects: the head (Deployment and Service), the nodes (a
// headless Service and a StatefulSet per manifest entry, or podman's one Pod) and the submit Job.
#include "engines/job_checkpoints.hpp"
#include "engines/k8s_parts.hpp"

#include <algorithm>

namespace satrap::k8s_detail {

obj renderer::head_container(const std::string& volume) const {
  auto probe = [&](const char* path, int period, int failures) {
    return obj{{"httpGet", {{"path", path}, {"port", "status"}}},
               {"initialDelaySeconds", 2},
               {"periodSeconds", period},
               {"timeoutSeconds", 3},
               {"failureThreshold", failures}};
  };
  obj container{{"name", "head"},
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
    container["startupProbe"] = probe("/healthz", 2, 30);
    container["livenessProbe"] = probe("/healthz", 10, 3);
    container["readinessProbe"] = probe("/readyz", 5, 1);
    container["volumeMounts"].push_back(tmp_mount());
    if (storage())
      container["volumeMounts"].push_back(storage_mount());
  }
  return container;
}

obj renderer::head_objects() const {
  auto component = obj{{"app.kubernetes.io/component", "head"}};
  obj scrape{{"prometheus.io/scrape", "true"},
             {"prometheus.io/port", std::to_string(m.head.status_port)},
             {"prometheus.io/path", "/metrics"}};
  // The job table lives on a claim of its own: a rescheduled head finds its jobs there and
  // resumes them. A StatefulSet of one: never two heads at once, the claim follows the pod.
  obj pod_spec{{"restartPolicy", "Always"},
               {"terminationGracePeriodSeconds", o.termination_grace_s},
               {"automountServiceAccountToken", false},
               {"securityContext", pod_security()},
               {"containers", obj::array({head_container("state")})},
               {"volumes", obj::array({certs_volume(), tmp_volume()})}};
  if (storage())
    pod_spec["volumes"].push_back(storage_volume());
  obj template_md{{"labels", labels("head")}, {"annotations", scrape}};
  obj claim_spec{{"accessModes", obj::array({"ReadWriteOnce"})},
                 {"resources", {{"requests", {{"storage", o.head_state_size}}}}}};
  if (!o.head_storage_class.empty())
    claim_spec["storageClassName"] = o.head_storage_class;
  obj deployment{{"apiVersion", "apps/v1"},
                 {"kind", "StatefulSet"},
                 {"metadata", meta("head", component)},
                 {"spec",
                  {{"serviceName", "head"},
                   {"replicas", 1},
                   {"selector", {{"matchLabels", labels("head")}}},
                   {"template", {{"metadata", template_md}, {"spec", pod_spec}}},
                   {"volumeClaimTemplates",
                    obj::array({{{"metadata", {{"name", "state"}, {"labels", labels("head")}}},
                                 {"spec", claim_spec}}})}}}};
  auto service_md = meta("head", component);
  service_md["annotations"] = scrape;
  obj service{
    {"apiVersion", "v1"},
    {"kind", "Service"},
    {"metadata", service_md},
    {"spec",
     {{"selector", labels("head")},
      // Nodes must reach the head before it is ready: it is ready once they joined.
      {"publishNotReadyAddresses", true},
      {"ports",
       obj::array(
         {{{"name", "admin"}, {"port", m.head.port}, {"targetPort", "admin"}},
          {{"name", "status"}, {"port", m.head.status_port}, {"targetPort", "status"}}})}}}};
  return obj::array({deployment, service});
}

obj renderer::node_container(const group& g, const std::string& container_name,
                             const std::string& node_name, uint16_t port,
                             const std::string& volume) const {
  auto& n = g.first;
  obj args = obj::array({"node", "--name", node_name, "--wait", std::to_string(o.node_wait_s),
                         "--starts-file", std::string(state_dir) + "/starts"});
  obj env_list = env(false);  // the admin token goes only to what needs it: not to nodes
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
  if (!podman) {
    container["ports"] = obj::array({{{"name", "node"}, {"containerPort", port}}});
    // The node agent listens once it has started; a node that stops listening is restarted.
    auto probe = [&](int period, int failures) {
      return obj{{"tcpSocket", {{"port", "node"}}},
                 {"periodSeconds", period},
                 {"timeoutSeconds", 3},
                 {"failureThreshold", failures}};
    };
    container["startupProbe"] = probe(2, 60);
    container["livenessProbe"] = probe(10, 3);
    container["readinessProbe"] = probe(5, 1);
    container["volumeMounts"].push_back(tmp_mount());
    if (storage())
      container["volumeMounts"].push_back(storage_mount());
  }
  return container;
}

obj renderer::node_pod_spec(const group& g, const std::string& node_name, uint16_t port) const {
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
      spec["tolerations"] =
        obj::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  }
  spec["automountServiceAccountToken"] = false;
  spec["containers"] = obj::array({node_container(g, "node", node_name, port, "state")});
  spec["volumes"] = obj::array({state_volume(), certs_volume(), tmp_volume()});
  if (storage())
    spec["volumes"].push_back(storage_volume());
  return spec;
}

// Flavor podman: the whole cluster as one Pod with host networking. One Pod, sharing its
// process namespace, because CAF names a process by its host (network interfaces, root file
// system) and pid: with host networking, pods of their own would all run satrap as pid 1 and
// every node would take the head for itself. Each container restarts on its own.
obj renderer::podman_pod(const std::vector<group>& groups) const {
  obj containers = obj::array({head_container("state-head")});
  obj volumes = obj::array({state_volume("state-head"), certs_volume()});
  for (auto& g : groups)
    for (auto& name : g.names) {
      auto& spec =
        *std::find_if(m.nodes.begin(), m.nodes.end(), [&](auto& n) { return n.name == name; });
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

obj renderer::pod_labels(const group& g) const {
  obj l = labels("node");
  l["satrap.io/group"] = g.workload;
  for (auto& [k, v] : g.first.labels)
    l["satrap.io/" + k] = v;
  return l;
}

obj renderer::node_objects(const std::vector<group>& groups) const {
  obj out = obj::array();
  for (auto& g : groups) {
    auto component = obj{{"app.kubernetes.io/component", "node"}, {"satrap.io/group", g.workload}};
    obj service{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", meta(g.workload, component)},
      {"spec",
       {{"clusterIP", "None"},  // headless: a DNS name per pod
        {"publishNotReadyAddresses", true},
        {"selector", {{"app.kubernetes.io/instance", m.cluster}, {"satrap.io/group", g.workload}}},
        {"ports",
         obj::array({{{"name", "node"}, {"port", g.first.port}, {"targetPort", "node"}}})}}}};
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

obj renderer::job_objects() const {
  std::string job = o.job_yaml.empty()
                      ? "# The default synthetic job; replace it with yours (satrap train "
                        "--help lists the keys).\n{}\n"
                      : o.job_yaml;
  if (job.back() != '\n')
    job += '\n';
  if (storage())
    job = job_with_checkpoint_dir(job, k8s_checkpoints_dir, 600,
                                  "checkpoint.dir on the shared claim, set by satrap k8s (the job "
                                  "had none)");
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
    {"volumeMounts",
     obj::array({{{"name", "job"}, {"mountPath", "/etc/satrap/job"}, {"readOnly", true}},
                 certs_mount(),
                 tmp_mount()})}};
  obj jobobj{
    {"apiVersion", "batch/v1"},
    {"kind", "Job"},
    {"metadata", meta("satrap-submit", component)},
    {"spec",
     {{"suspend", o.job_yaml.empty()},  // resume it once satrap-job holds your job
      {"backoffLimit", 0},              // a retry would submit the job twice
      {"template",
       {{"metadata", {{"labels", labels("submit")}}},
        {"spec",
         {{"restartPolicy", "Never"},
          {"automountServiceAccountToken", false},
          {"securityContext", pod_security()},
          {"containers", obj::array({container})},
          {"volumes", obj::array({{{"name", "job"}, {"configMap", {{"name", "satrap-job"}}}},
                                  certs_volume({"ca.pem", "client.pem", "client.key"}),
                                  tmp_volume()})}}}}}}}};
  return obj::array({cm, jobobj});
}

obj renderer::policy_objects() const {
  obj own{{"podSelector", {{"matchLabels", {{"app.kubernetes.io/instance", m.cluster}}}}}};
  obj caf_ports = obj::array({{{"protocol", "TCP"}, {"port", m.head.port}}});
  std::vector<uint16_t> seen{m.head.port};
  if (auto groups = groups_of(m))
    for (auto& g : *groups)
      if (std::find(seen.begin(), seen.end(), g.first.port) == seen.end()) {
        seen.push_back(g.first.port);
        caf_ports.push_back({{"protocol", "TCP"}, {"port", g.first.port}});
      }
  obj status_port = obj::array({{{"protocol", "TCP"}, {"port", m.head.status_port}}});
  obj ingress = obj::array({{{"from", obj::array({own})}, {"ports", caf_ports}},
                            {{"from", obj::array({own})}, {"ports", status_port}}});
  if (!o.status_from.empty()) {
    obj from = obj::array();
    for (auto& cidr : o.status_from)
      from.push_back({{"ipBlock", {{"cidr", cidr}}}});
    ingress.push_back({{"from", from}, {"ports", status_port}});
  }
  obj policy{{"apiVersion", "networking.k8s.io/v1"},
             {"kind", "NetworkPolicy"},
             {"metadata", meta("satrap", obj{{"app.kubernetes.io/component", "network"}})},
             {"spec",
              {{"podSelector", {{"matchLabels", {{"app.kubernetes.io/instance", m.cluster}}}}},
               {"policyTypes", obj::array({"Ingress"})},
               {"ingress", ingress}}}};
  // A job survives the loss of a node (re-placed on the others, from its newest checkpoint),
  // not of several at once: a drain takes one node pod at a time.
  obj budget{
    {"apiVersion", "policy/v1"},
    {"kind", "PodDisruptionBudget"},
    {"metadata", meta("satrap-nodes", obj{{"app.kubernetes.io/component", "node"}})},
    {"spec",
     {{"maxUnavailable", 1},
      {"selector",
       {{"matchLabels",
         {{"app.kubernetes.io/instance", m.cluster}, {"app.kubernetes.io/component", "node"}}}}}}}};
  return obj::array({policy, budget});
}

}  // namespace satrap::k8s_detail
