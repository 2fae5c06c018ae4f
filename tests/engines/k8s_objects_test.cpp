// satrap k8s: the manifest the pods read back names their DNS names and keeps every node's
// resources; quantities; names Kubernetes cannot take are refused; both flavors render.
#include "runtime/error.hpp"
#include "engines/job_checkpoints.hpp"
#include "engines/k8s_objects.hpp"
#include "spec/manifest.hpp"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

using namespace satrap;

namespace {

manifest load(const std::string& yaml) {
  manifest m;
  auto err = manifest_load_text(yaml, "m.yaml", m);
  REQUIRE_MESSAGE(!err, error_text(err));
  return m;
}

const char* cluster = R"(cluster: demo
head: {host: 127.0.0.1, port: 5000, status_port: 5009}
nodes:
  - name: big
    host: 10.0.0.1
    port: 5002
    resources: {cores: 64, memory: 1TB, gpus: 0}
    labels: {tier: memory}
  - name: gpu-{i}
    count: 2
    host: 127.0.0.1
    port: 5010
    resources: {cores: 8, memory: 6GiB, gpus: 2}
    labels: {machine: a2-highgpu-2g}
)";

}  // namespace

TEST_CASE("k8s: the pods' manifest names their DNS names and keeps every node") {
  auto m = load(cluster);
  auto rewritten = load(k8s_manifest_yaml(m, "ns1"));
  CHECK(rewritten.cluster == "demo");
  CHECK(rewritten.head.host == "head.ns1.svc");
  CHECK(rewritten.head.status_port == 5009);
  REQUIRE(rewritten.nodes.size() == 3);
  CHECK(rewritten.nodes[0].name == "big");
  CHECK(rewritten.nodes[0].host == "big-0.big.ns1.svc");
  CHECK(rewritten.nodes[0].resources.memory_bytes == 1000000000000ull);
  CHECK(rewritten.nodes[2].name == "gpu-1");
  CHECK(rewritten.nodes[2].host == "gpu-1.gpu.ns1.svc");
  CHECK(rewritten.nodes[2].port == 5010);  // own hosts: one port for all
  CHECK(rewritten.nodes[2].resources.gpus == 2);
  CHECK(rewritten.nodes[2].labels.at("machine") == "a2-highgpu-2g");
  // Without a namespace (podman: host networking) the addresses stay as written.
  auto same = load(k8s_manifest_yaml(m, ""));
  CHECK(same.nodes[2].host == "127.0.0.1");
  CHECK(same.nodes[2].port == 5011);
}

TEST_CASE("k8s: memory quantities") {
  CHECK(k8s_memory_quantity(6ull << 30) == "6Gi");
  CHECK(k8s_memory_quantity(680000000000ull) == "680G");
  CHECK(k8s_memory_quantity(1000000000000ull) == "1T");
  CHECK(k8s_memory_quantity(12345) == "12345");
}

TEST_CASE("k8s: objects of both flavors") {
  auto m = load(cluster);
  k8s_options o;
  o.token = "t0k";
  for (auto& f : k8s_cert_file_names(m))
    o.cert_files[f] = "contents of " + f + "\n";
  auto yaml = k8s_render(m, o);
  REQUIRE_MESSAGE(yaml, error_text(yaml.error()));
  auto docs = YAML::LoadAll(*yaml);
  std::vector<std::string> kinds;
  for (auto& d : docs)
    kinds.push_back(d["kind"].as<std::string>() + "/" + d["metadata"]["name"].as<std::string>());
  CHECK(kinds
        == std::vector<std::string>{
          "Namespace/demo", "ConfigMap/satrap-manifest", "Secret/satrap-admin",
          "Secret/satrap-certs", "StatefulSet/head", "Service/head", "Service/big",
          "StatefulSet/big", "Service/gpu", "StatefulSet/gpu", "ConfigMap/satrap-job",
          "Job/satrap-submit", "NetworkPolicy/satrap", "PodDisruptionBudget/satrap-nodes"});
  CHECK(docs[3]["stringData"]["node-gpu-1.token"].as<std::string>()
        == "contents of node-gpu-1.token\n");
  CHECK(!docs[3]["stringData"]["ca.key"]);  // the CA key never leaves the operator
  // The pods' manifest: TLS material from the mounted Secret, every process on all interfaces.
  auto pods_manifest = YAML::Load(docs[1]["data"]["manifest.yaml"].as<std::string>());
  CHECK(pods_manifest["security"]["certs"].as<std::string>() == k8s_certs_dir);
  CHECK(pods_manifest["security"]["tls"].as<std::string>() == "required");
  CHECK(pods_manifest["head"]["bind"].as<std::string>() == "0.0.0.0");
  CHECK(pods_manifest["nodes"][0]["bind"].as<std::string>() == "0.0.0.0");
  auto gpu = docs[9]["spec"];
  CHECK(gpu["replicas"].as<int>() == 2);
  auto pod = gpu["template"]["spec"];
  CHECK(pod["nodeSelector"]["cloud.google.com/gke-accelerator"].as<std::string>()
        == "nvidia-tesla-a100");
  CHECK(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].as<int>() == 2);
  CHECK(pod["containers"][0]["resources"]["requests"]["memory"].as<std::string>() == "6Gi");
  // The one-replica entry without {i}: its node name is given literally.
  auto big_args = docs[7]["spec"]["template"]["spec"]["containers"][0]["args"];
  CHECK(big_args[2].as<std::string>() == "big");
  CHECK(pod["volumes"][1]["secret"]["secretName"].as<std::string>() == "satrap-certs");
  CHECK(docs[11]["spec"]["suspend"].as<bool>());  // no job file given
  // The submit Job sees only the client's pair and the CA.
  CHECK(docs[11]["spec"]["template"]["spec"]["volumes"][1]["secret"]["items"].size() == 3);
  // The head's job table on a claim of its own, so that a rescheduled head finds it.
  auto head = docs[4]["spec"];
  CHECK(head["replicas"].as<int>() == 1);
  CHECK(head["volumeClaimTemplates"][0]["metadata"]["name"].as<std::string>() == "state");
  CHECK(head["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"].as<std::string>()
        == "state");
  // Pod Security "restricted" on every pod, a read-only root with /tmp writable, probes.
  for (auto* i : {&docs[4], &docs[7], &docs[9]}) {
    auto spec = (*i)["spec"]["template"]["spec"];
    CHECK(spec["securityContext"]["seccompProfile"]["type"].as<std::string>() == "RuntimeDefault");
    CHECK(spec["securityContext"]["runAsNonRoot"].as<bool>());
    auto c = spec["containers"][0];
    CHECK(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
    CHECK(!c["securityContext"]["allowPrivilegeEscalation"].as<bool>());
    CHECK(c["securityContext"]["capabilities"]["drop"][0].as<std::string>() == "ALL");
    CHECK(c["startupProbe"]);
    CHECK(c["livenessProbe"]);
    CHECK(c["readinessProbe"]);
    bool tmp = false;
    for (auto v : c["volumeMounts"])
      tmp = tmp || v["mountPath"].as<std::string>() == "/tmp";
    CHECK(tmp);
  }
  // Only the cluster's pods reach the CAF ports (head 5000, nodes 5002 and 5010).
  auto policy = docs[12]["spec"];
  CHECK(policy["ingress"].size() == 2);
  CHECK(policy["ingress"][0]["ports"].size() == 3);
  CHECK(policy["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"]
          .as<std::string>()
        == "demo");
  CHECK(docs[13]["spec"]["maxUnavailable"].as<int>() == 1);
  o.status_from = {"10.0.0.0/8"};
  auto opened = YAML::LoadAll(*k8s_render(m, o));
  CHECK(opened[12]["spec"]["ingress"][2]["from"][0]["ipBlock"]["cidr"].as<std::string>()
        == "10.0.0.0/8");
  CHECK(opened[12]["spec"]["ingress"][2]["ports"][0]["port"].as<int>() == 5009);
  o.status_from.clear();
  // Checkpoint storage: a ReadWriteMany claim mounted in the head and the node pods, the
  // submitted job's default checkpoint folder.
  o.storage_size = "100Gi";
  o.storage_class = "standard-rwx";
  o.job_yaml = "name: big-job\ntraining: {train_batches: 10}\n";
  auto stored = YAML::LoadAll(*k8s_render(m, o));
  REQUIRE(stored.size() == 15);
  CHECK(stored[4]["kind"].as<std::string>() == "PersistentVolumeClaim");
  CHECK(stored[4]["spec"]["accessModes"][0].as<std::string>() == "ReadWriteMany");
  CHECK(stored[4]["spec"]["storageClassName"].as<std::string>() == "standard-rwx");
  for (auto i : {5, 8, 10}) {
    auto spec = stored[i]["spec"]["template"]["spec"];
    bool mounted = false;
    for (auto v : spec["containers"][0]["volumeMounts"])
      mounted = mounted || v["mountPath"].as<std::string>() == k8s_checkpoints_dir;
    CHECK(mounted);
    CHECK(spec["volumes"][spec["volumes"].size() - 1]["persistentVolumeClaim"]["claimName"]
            .as<std::string>()
          == "satrap-checkpoints");
  }
  auto job = YAML::Load(stored[11]["data"]["job.yaml"].as<std::string>());
  CHECK(job["checkpoint"]["dir"].as<std::string>() == "/checkpoints/big-job");
  CHECK(job["checkpoint"]["every_seconds"].as<int>() == 600);
  CHECK(job["training"]["train_batches"].as<int>() == 10);
  o.storage_claim = "mine";
  CHECK(!k8s_render(m, o));  // a new claim or an existing one, not both
  o.storage_size.clear();
  o.storage_class.clear();
  auto existing = YAML::LoadAll(*k8s_render(m, o));
  CHECK(existing.size() == 14);  // no claim rendered: it exists
  CHECK(existing[4]["spec"]["template"]["spec"]["volumes"][2]["persistentVolumeClaim"]["claimName"]
          .as<std::string>()
        == "mine");
  o.storage_claim.clear();
  o.job_yaml.clear();

  o.flavor = k8s_flavor::podman;
  auto podman = k8s_render(m, o);
  REQUIRE(podman);
  auto pdocs = YAML::LoadAll(*podman);
  REQUIRE(pdocs.size() == 4);
  CHECK(pdocs[1]["kind"].as<std::string>() == "ConfigMap");  // podman 4.3 mounts no Secrets
  CHECK(pdocs[2]["kind"].as<std::string>() == "ConfigMap");
  auto spec = pdocs[3]["spec"];
  CHECK(spec["hostNetwork"].as<bool>());
  CHECK(spec["shareProcessNamespace"].as<bool>());
  CHECK(spec["containers"].size() == 4);  // the head and three nodes

  // external: no Secret in the output (kept in git); only: the Namespace and the Secrets.
  o.flavor = k8s_flavor::kubernetes;
  o.secrets = k8s_secrets::external;
  auto ext = YAML::LoadAll(*k8s_render(m, o));
  for (auto& d : ext)
    CHECK(d["kind"].as<std::string>() != "Secret");
  o.secrets = k8s_secrets::only;
  auto only = YAML::LoadAll(*k8s_render(m, o));
  REQUIRE(only.size() == 3);
  CHECK(only[2]["metadata"]["name"].as<std::string>() == "satrap-certs");
  // A missing file is named.
  o.cert_files.erase("node-big.key");
  auto missing = k8s_render(m, o);
  REQUIRE(!missing);
  CHECK(error_text(missing.error()).find("node-big.key") != std::string::npos);
}

TEST_CASE("k8s: what Kubernetes cannot name is refused with what to do") {
  k8s_options o;
  o.token = "t";
  auto bad_entry = load(R"(cluster: demo
head: {host: 127.0.0.1, port: 5000, status_port: 5009}
nodes:
  - name: w{i}
    count: 2
    host: 127.0.0.1
    port: 5010
    resources: {cores: 1, memory: 1GiB}
)");
  auto r = k8s_render(bad_entry, o);
  REQUIRE(!r);
  CHECK(error_text(r.error()).find("name it '<group>-{i}'") != std::string::npos);
  auto bad_ns = load(R"(cluster: Demo_1
head: {host: 127.0.0.1, port: 5000, status_port: 5009}
nodes:
  - name: w-{i}
    count: 2
    host: 127.0.0.1
    port: 5010
    resources: {cores: 1, memory: 1GiB}
)");
  r = k8s_render(bad_ns, o);
  REQUIRE(!r);
  CHECK(error_text(r.error()).find("give --namespace") != std::string::npos);
  o.ns = "demo";
  o.secrets = k8s_secrets::external;  // no certificate files in this test
  CHECK(k8s_render(bad_ns, o));
}

TEST_CASE("k8s: a job's own checkpoint folder is kept, one without gets the shared storage") {
  auto own = job_with_checkpoint_dir("checkpoint: {dir: /data/c, every_steps: 5}\n", "/checkpoints",
                                     600, "n");
  CHECK(own == "checkpoint: {dir: /data/c, every_steps: 5}\n");
  auto scheduled = YAML::Load(
    job_with_checkpoint_dir("checkpoint: {every_steps: 50}\n", "/checkpoints", 600, "n"));
  CHECK(scheduled["checkpoint"]["dir"].as<std::string>() == "/checkpoints/job");
  CHECK(scheduled["checkpoint"]["every_steps"].as<int>() == 50);
  CHECK(!scheduled["checkpoint"]["every_seconds"]);
  auto empty =
    YAML::Load(job_with_checkpoint_dir("# the default job\n{}\n", "/checkpoints", 300, "n"));
  CHECK(empty["checkpoint"]["every_seconds"].as<int>() == 300);
  auto odd_name = YAML::Load(job_with_checkpoint_dir("name: ../x\n", "/checkpoints", 300, "n"));
  CHECK(odd_name["checkpoint"]["dir"].as<std::string>() == "/checkpoints/job");
  CHECK(job_with_checkpoint_dir("[1, 2]\n", "/checkpoints", 300, "n")
        == "[1, 2]\n");  // not a job: submit refuses
}

TEST_CASE("k8s: the admin token reaches the head and the submit Job, never a node") {
  auto m = load(cluster);
  k8s_options o;
  o.token = "t0k";
  for (auto& f : k8s_cert_file_names(m))
    o.cert_files[f] = "contents of " + f + "\n";
  auto has_token = [](const YAML::Node& container) {
    for (auto e : container["env"])
      if (e["name"].as<std::string>() == "SATRAP_ADMIN_TOKEN")
        return true;
    return false;
  };
  auto docs = YAML::LoadAll(*k8s_render(m, o));
  int heads = 0, nodes = 0, submits = 0;
  for (auto& d : docs) {
    auto kind = d["kind"].as<std::string>(), name = d["metadata"]["name"].as<std::string>();
    if (kind != "StatefulSet" && kind != "Job")
      continue;
    auto spec = d["spec"]["template"]["spec"];
    for (auto c : spec["containers"]) {
      if (name == "head" || name == "satrap-submit") {
        CHECK_MESSAGE(has_token(c), name);
        ++(name == "head" ? heads : submits);
      } else {
        CHECK_MESSAGE(!has_token(c), name);
        ++nodes;
        // Nor through a volume: no node pod names the admin Secret at all.
        YAML::Emitter out;
        out << d;
        CHECK_MESSAGE(std::string(out.c_str()).find("satrap-admin") == std::string::npos, name);
      }
    }
  }
  CHECK(heads == 1);
  CHECK(submits == 1);
  CHECK(nodes == 2);  // the StatefulSets big and gpu
  o.flavor = k8s_flavor::podman;
  auto pod = YAML::LoadAll(*k8s_render(m, o))[3]["spec"]["containers"];
  REQUIRE(pod.size() == 4);
  for (auto c : pod)
    CHECK_MESSAGE(has_token(c) == (c["name"].as<std::string>() == "head"),
                  c["name"].as<std::string>());
}
