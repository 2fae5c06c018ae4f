#!/usr/bin/env bash
# Installs every Debian package satrap needs, then configures and builds it in ./build.
# Safe to run again: packages already present are not reinstalled, the build is incremental.
#
# usage: ops/setup.sh [--bench] [--build-dir DIR] [-- extra cmake arguments]
#   --bench   also install what the reference benchmarks need (PyTorch, scikit-learn)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$root/build"
bench=0
cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=1 ;;
    --build-dir) build_dir=$2; shift ;;
    --) shift; cmake_args=("$@"); break ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

packages=(build-essential cmake ccache pkg-config git
          libcaf-dev capnproto libcapnp-dev libspdlog-dev libfmt-dev doctest-dev
          libopenblas-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
          libcpp-httplib-dev libssl-dev
          libtorch-dev python3-torch  # model.type torchscript: the libtorch plugin; its tests script modules
          protobuf-compiler python3-protobuf  # the TFRecord test writes tf.train.Example with protobuf
          libgrpc++-dev protobuf-compiler-grpc  # `satrap serve --grpc-port`: KServe v2 over gRPC
          python3-grpcio python3-grpc-tools     # its test's client: grpc's Python stub of the proto
          openssl               # `satrap certs` runs the openssl command (cluster CA and certificates)
          curl procps python3   # the cluster test: curl for /status, pgrep, python3 for JSON
          iproute2              # ops/netns (ip netns, veth, tc tbf): the cluster over namespaces
          linux-perf            # tests/bench/cluster_breakdown.sh: perf record of the cluster
          libabsl-dev           # absl::flat_hash_map, a baseline of tests/bench/embedding_store_bench
          librocksdb-dev        # the SSD tier's RocksDB cold store (models/tier/cold_store.hpp)
          librdkafka-dev        # the Kafka stream source (models/data/kafka_source.hpp) and its mock cluster in tests
          chromium chromium-driver fonts-dejavu-core  # the dashboard's browser tests
          # Deployment: the image and the container test (podman with runc, the local pause
          # image needs catatonit; debootstrap makes the base image).
          podman runc catatonit conmon containernetworking-plugins iptables uidmap slirp4netns
          fuse-overlayfs debootstrap binutils
          # Slurm (`satrap slurm`): its test starts a one-host slurmctld + slurmd with munge.
          slurm-wlm munge)
# npm fetches uPlot for the dashboard (web/package.json) and the Kubernetes schema validator
# (ops/k8s/validate/package.json); Debian's nodejs + npm unless a Node.js with npm is there already (a NodeSource nodejs ships its own npm and conflicts with Debian's).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
if [ "$bench" = 1 ]; then
  packages+=(python3 python3-sklearn python3-numpy)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# podman on this kind of machine (Debian 12's podman 4.3 in a container with hybrid cgroups):
# runc (crun refuses the hybrid layout), cgroupfs (no systemd), default ulimits within the hard
# limits (the container test runs `podman kube play`).
conf=/etc/containers/containers.conf.d/50-satrap.conf
if [ ! -f "$conf" ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo mkdir -p "$(dirname "$conf")"
  printf '%s\n' '# Written by satrap ops/setup.sh.' '[containers]' \
    'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]' \
    '[engine]' 'runtime = "runc"' 'cgroup_manager = "cgroupfs"' | $sudo tee "$conf" >/dev/null
  echo "setup: wrote $conf"
fi
# The offline Kubernetes schema validator (tests: deploy/k8s_validate).
if [ ! -d "$root/ops/k8s/validate/node_modules/kubernetes-models" ]; then
  echo "setup: npm ci in ops/k8s/validate (the offline Kubernetes schema validator)"
  (cd "$root/ops/k8s/validate" && npm ci --no-audit --no-fund --loglevel=error)
fi
# The dashboard's charting library, vendored into the binary at build time (web/CMakeLists.txt).
if [ ! -f "$root/web/node_modules/uplot/dist/uPlot.iife.min.js" ]; then
  echo "setup: npm ci in web/ (uPlot for the dashboard)"
  (cd "$root/web" && npm ci --no-audit --no-fund)
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs"
echo "setup: built $build_dir/bin/satrap"
