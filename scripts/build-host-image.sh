#!/usr/bin/env bash
# Build the sandbox host image locally (no registry is reachable): a Debian 12
# root filesystem made by debootstrap, imported into Docker, booting systemd.
# The image tag carries a hash of this script, so an image built from the same
# recipe is reused and a changed recipe builds a new one.
set -euo pipefail
name=${RAYVLLM_HOST_IMAGE_NAME:-rayvllm-host}
recipe_hash=$(sha256sum "$0" | cut -c1-12)
tag="${name}:bookworm-${recipe_hash}"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
# Packages the roles would install anyway are baked in so a converge is quick;
# host_prep still declares them (and installs them on real hosts).
packages=systemd,systemd-sysv,python3,python3-venv,python3-apt,python3-packaging,sudo,iproute2,procps,ca-certificates,dbus,curl,libnuma1,g++,python3-dev,rsync
command -v debootstrap >/dev/null 2>&1 || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
}
rootfs=$(mktemp -d /var/tmp/rayvllm-rootfs.XXXXXX)
cleanup() {
  # debootstrap mounts /proc and /sys inside the target: unmount before removing,
  # and never let rm cross into another filesystem.
  local m
  awk -v r="$rootfs" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$rootfs"
}
trap cleanup EXIT
echo "building $tag with debootstrap in $rootfs" >&2
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
# Small, deterministic fixes for a container that boots systemd.
rm -f "$rootfs"/etc/machine-id && : >"$rootfs"/etc/machine-id
ln -sf /dev/null "$rootfs"/etc/systemd/system/getty@tty1.service
ln -sf /dev/null "$rootfs"/etc/systemd/system/systemd-udevd.service
ln -sf /dev/null "$rootfs"/etc/systemd/system/systemd-logind.service
# Keep the APT lists: with none, apt's cache_valid_time would still call the cache fresh.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb
tar -C "$rootfs" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' - "$tag" >/dev/null
docker tag "$tag" "${name}:latest"
echo "$tag"
