#!/usr/bin/env bash
# Builds a minimal Debian 12 base image from Debian's packages, for machines that cannot pull
# from an image registry: debootstrap (variant minbase) into a folder, trim it, `podman import`.
# The root file system is kept as a tarball in the cache folder, so that a second run (or a fresh
# podman storage) only imports it again; nothing is done when the image already exists.
#
# usage: ops/container/base-image.sh [--tag TAG] [--cache DIR] [--mirror URL] [--force]
#   --tag     image name (default localhost/debian:12-slim)
#   --cache   where the root file system tarball is kept (default build/container-cache)
#   --mirror  Debian mirror (default: $SATRAP_DEBIAN_MIRROR, else http://deb.debian.org/debian)
#   --force   debootstrap again even when the tarball or the image exist
# Needs root (debootstrap), debootstrap and podman (ops/setup.sh installs both).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tag=localhost/debian:12-slim
cache="$root/build/container-cache"
mirror=${SATRAP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift ;;
    --cache) cache=$2; shift ;;
    --mirror) mirror=$2; shift ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "base-image.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
for tool in debootstrap podman; do
  command -v "$tool" >/dev/null || { echo "base-image.sh: $tool is missing; run ops/setup.sh" >&2; exit 2; }
done
if [ "$force" = 0 ] && podman image exists "$tag"; then
  echo "base-image: $tag exists"
  exit 0
fi
mkdir -p "$cache"
tarball="$cache/debian-12-minbase.tar"
if [ "$force" = 1 ] || [ ! -s "$tarball" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "base-image.sh: debootstrap needs root" >&2; exit 2; }
  rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  start=$(date +%s)
  debootstrap --variant=minbase --components=main bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/debootstrap.log" >&2; echo "base-image.sh: debootstrap failed (log: $cache/debootstrap.log)" >&2; exit 1; }
  # Trim what a runtime image does not need (as the official slim images do).
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
         "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  echo "base-image: debootstrap took $(( $(date +%s) - start )) s"
fi
podman import --change 'CMD ["/bin/bash"]' --message "Debian 12 minbase (ops/container/base-image.sh)" \
  "$tarball" "$tag" >/dev/null
echo "base-image: $tag ($(podman image inspect --format '{{.Size}}' "$tag") bytes)"
