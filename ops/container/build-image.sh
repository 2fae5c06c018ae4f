#!/usr/bin/env bash
# Builds the satrap runtime image (ops/container/Containerfile) from a satrap already built on
# Debian 12 (ops/setup.sh): stages the stripped binary and the shared libraries it links that a
# Debian 12 base lacks, then runs `podman build` (or `docker build`) without pulling.
#
# usage: ops/container/build-image.sh [--build-dir DIR] [--tag IMG] [--base IMAGE] [--tool podman|docker]
#   --build-dir  where bin/satrap is (default build)
#   --tag        image name (default localhost/satrap:latest)
#   --base       base image (default debian:12-slim; offline: localhost/debian:12-slim from
#                ops/container/base-image.sh)
#   --tool       podman (default) or docker
#   --no-torch   leave out the libtorch plugin (model.type torchscript) and libtorch (~500 MB)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir="$root/build"
tag=localhost/satrap:latest
base=debian:12-slim
tool=podman
torch=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift ;;
    --tag) tag=$2; shift ;;
    --base) base=$2; shift ;;
    --tool) tool=$2; shift ;;
    --no-torch) torch=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build-image.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
binary="$build_dir/bin/satrap"
[ -x "$binary" ] || { echo "build-image.sh: no $binary; build satrap first (ops/setup.sh)" >&2; exit 2; }
command -v "$tool" >/dev/null || { echo "build-image.sh: $tool is missing" >&2; exit 2; }
context="$build_dir/container-context"
rm -rf "$context"
mkdir -p "$context/stage/usr/local/bin" "$context/stage/usr/local/lib/satrap" "$context/stage/etc/ld.so.conf.d"
strip -o "$context/stage/usr/local/bin/satrap" "$binary"
# The libraries satrap links, less those every Debian 12 base has (glibc, libstdc++, libgcc, zlib).
stage_libs() {
  ldd "$1" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*|libz.so.*) ;;
      *) cp -L "$lib" "$context/stage/usr/local/lib/satrap/" ;;
    esac
  done
}
stage_libs "$binary"
# The libtorch plugin, opened by satrap from ../lib/satrap beside its binary
# (models/dense/torchscript.hpp), and libtorch with what it links.
plugin="$build_dir/bin/libsatrap_torch.so"
if [ "$torch" = 1 ] && [ -f "$plugin" ]; then
  strip -o "$context/stage/usr/local/lib/satrap/libsatrap_torch.so" "$plugin"
  stage_libs "$plugin"
fi
echo /usr/local/lib/satrap > "$context/stage/etc/ld.so.conf.d/satrap.conf"
cp "$root/ops/container/Containerfile" "$context/Containerfile"
pull=()
[ "$tool" = podman ] && pull=(--pull=never)
"$tool" build "${pull[@]}" --build-arg "BASE=$base" -t "$tag" -f "$context/Containerfile" "$context"
size=$("$tool" image inspect --format '{{.Size}}' "$tag")
echo "build-image: $tag, $(( size / 1000000 )) MB (base $base)"
