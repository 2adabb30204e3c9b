#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine; install and start one if not.
# Needs root. Idempotent: does nothing when `docker info` already works.
set -euo pipefail
if docker info >/dev/null 2>&1; then
  echo "docker engine: already running"
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker engine: installing docker.io from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
echo "docker engine: starting dockerd"
mkdir -p /var/log
nohup dockerd >/var/log/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "docker engine: up ($(docker info --format '{{.Driver}}/{{.CgroupDriver}}'))"
    exit 0
  fi
  sleep 1
done
echo "docker engine: dockerd did not answer within 60 s; see /var/log/dockerd.log" >&2
tail -n 20 /var/log/dockerd.log >&2 || true
exit 1
