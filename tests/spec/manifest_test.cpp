// Node manifests: the shipped examples load; bad ones are refused naming line and field.
#include "runtime/error.hpp"
#include "spec/manifest.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

std::string load_error(const std::string& yaml) {
  manifest m;
  auto err = manifest_load_text(yaml, "m.yaml", m);
  return err ? error_text(err) : std::string{};
}

const char* good = R"(cluster: test
head: {host: 127.0.0.1, port: 5000, status_port: 5001}
nodes:
  - name: big
    host: 10.0.0.1
    port: 5002
    resources: {cores: 64, memory: 1TB, gpus: 0}
    labels: {tier: memory}
  - name: w-{i}
    count: 3
    host: 127.0.0.1
    port: 5010
    resources: {cores: 2, memory: 4GiB}
)";

}  // namespace

TEST_CASE("a manifest loads, with counts expanded and sizes parsed") {
  manifest m;
  auto err = manifest_load_text(good, "m.yaml", m);
  REQUIRE_MESSAGE(!err, error_text(err));
  CHECK(m.cluster == "test");
  CHECK(m.head.status_port == 5001);
  REQUIRE(m.nodes.size() == 4);
  CHECK(m.nodes[0].resources.memory_bytes == 1000000000000ULL);
  CHECK(m.nodes[0].labels.at("tier") == "memory");
  CHECK(m.nodes[3].name == "w-2");
  CHECK(m.nodes[3].port == 5012);
  CHECK(m.nodes[3].resources.memory_bytes == 4ULL << 30);
  CHECK(m.nodes[3].resources.gpus == 0);
}

TEST_CASE("the shipped manifests load") {
  for (auto path : {"ops/manifests/local-3node.yaml", "ops/manifests/gcp-persia-100t.yaml"}) {
    CAPTURE(path);
    manifest m;
    auto err = manifest_load_file(std::string(SATRAP_SOURCE_DIR) + "/" + path, m);
    CHECK_MESSAGE(!err, error_text(err));
  }
}

TEST_CASE("bad manifests name the line and the field") {
  auto e = load_error(
    "cluster: x\nhead: {host: h, port: 1, status_port: 2}\nnodes:\n"
    "  - {name: a, host: h, port: 3, resources: {cores: 2, memory: lots}}\n");
  CHECK(e.find("m.yaml:4:") != std::string::npos);
  CHECK(
    e.find(
      "nodes[0].resources.memory: expected a size such as 64GiB or 12TB (at most 1EiB), got 'lots'")
    != std::string::npos);
  CHECK(load_error("cluster: x\nhead: {host: h, port: 1, status_port: 2}\nnodes:\n"
                   "  - {name: a, host: h, port: 3, resources: {cores: 2, memory: 1GB}, zone: b}\n")
          .find("unknown key 'nodes[0].zone'")
        != std::string::npos);
  CHECK(load_error("cluster: x\nhead: {host: h, port: 99999, status_port: 2}\nnodes: []\n")
          .find("head.port: expected an integer in [1, 65535], got '99999'")
        != std::string::npos);
  CHECK(load_error("head: {host: h, port: 1, status_port: 2}\nnodes: []\n").find("cluster: missing")
        != std::string::npos);
  CHECK(load_error("cluster: x\nhead: {host: h, port: 1, status_port: 2}\nnodes: []\n")
          .find("nodes: expected a non-empty list")
        != std::string::npos);
  CHECK(load_error("cluster: x\nhead: {host: h, port: 1, status_port: 2}\nnodes:\n"
                   "  - {name: a, host: h, port: 3, resources: {cores: 2, memory: 1GB}}\n"
                   "  - {name: a, host: h, port: 4, resources: {cores: 2, memory: 1GB}}\n")
          .find("node name 'a' appears twice")
        != std::string::npos);
  CHECK(load_error("cluster: x\nhead: {host: h, port: 1, status_port: 2}\nnodes:\n"
                   "  - {name: a, host: h, port: 2, resources: {cores: 2, memory: 1GB}}\n")
          .find("already taken")
        != std::string::npos);
  CHECK(load_error("cluster: [x\n").find("not valid YAML") != std::string::npos);
}

TEST_CASE("sizes parse with decimal and binary units") {
  uint64_t b = 0;
  CHECK((parse_bytes("12TB", b) && b == 12000000000000ULL));
  CHECK((parse_bytes("680 GiB", b) && b == 680ULL << 30));
  CHECK((parse_bytes("1.5KiB", b) && b == 1536));
  CHECK((parse_bytes("4096", b) && b == 4096));
  CHECK(!parse_bytes("12 parsecs", b));
  CHECK(!parse_bytes("-1GB", b));
  CHECK(format_bytes(1536) == "1.5 KiB");
}

TEST_CASE("the manifest's timing section sets the cluster knobs - bad or unknown keys are errors") {
  manifest m;
  REQUIRE(manifest_load_text(good, "m.yaml", m) == caf::none);
  CHECK(m.timing.heartbeat_interval_ms == 1000);  // spec/knobs.hpp defaults
  CHECK(m.timing.heartbeat_timeout_ms == 5000);
  auto timed =
    std::string(good) + "timing: {heartbeat_interval_ms: 200, heartbeat_timeout_ms: 900}\n";
  manifest t;
  auto err = manifest_load_text(timed, "m.yaml", t);
  REQUIRE_MESSAGE(!err, error_text(err));
  CHECK(t.timing.heartbeat_interval_ms == 200);
  CHECK(t.timing.heartbeat_timeout_ms == 900);
  CHECK(t.timing.admin_tick_ms == 500);
  CHECK(load_error(std::string(good) + "timing: {heartbeat_interval: 200}\n").find("unknown key")
        != std::string::npos);
  CHECK(load_error(std::string(good) + "timing: {heartbeat_timeout_ms: 0}\n")
          .find("timing.heartbeat_timeout_ms: expected an integer")
        != std::string::npos);
  CHECK(load_error(std::string(good)
                   + "timing: {heartbeat_interval_ms: 5000, heartbeat_timeout_ms: 5000}\n")
          .find("must exceed timing.heartbeat_interval_ms")
        != std::string::npos);
}

TEST_CASE("security, bind and the cluster name") {
  manifest m;
  auto err = manifest_load_text(
    std::string(good) + "security: {tls: off, max_frame_bytes: 64MiB}\n", "m.yaml", m);
  REQUIRE_MESSAGE(!err, error_text(err));
  CHECK(m.security.tls == tls_mode::off);
  CHECK(m.security.max_frame_bytes == 64ULL << 20);
  CHECK(listen_address(m.head.host, m.head.bind) == "127.0.0.1");  // host unless bind is given
  REQUIRE(!manifest_load_text(good, "m.yaml", m));
  CHECK(m.security.tls == tls_mode::required);  // the default
  std::string with_bind = good;
  with_bind.replace(with_bind.find("status_port: 5001}"), 18, "status_port: 5001, bind: 0.0.0.0}");
  REQUIRE(!manifest_load_text(with_bind, "m.yaml", m));
  CHECK(listen_address(m.head.host, m.head.bind) == "0.0.0.0");
  CHECK(load_error(std::string(good) + "security: {tls: maybe}\n")
          .find("security.tls: expected 'required' or 'off'")
        != std::string::npos);
  CHECK(load_error(std::string(good) + "security: {max_frame_bytes: 10}\n")
          .find("security.max_frame_bytes")
        != std::string::npos);
  std::string hostile = good;
  hostile.replace(0, 13, "cluster: ../../victim");
  CHECK(load_error(hostile).find("no path separators") != std::string::npos);
  CHECK(cluster_name_problem("..") != "");
  CHECK(cluster_name_problem("a/b") != "");
  CHECK(cluster_name_problem("prod-1.eu_west") == "");
}
