#!/usr/bin/env bash
# The local sandbox fleet: 4 systemd hosts in Docker (cluster default: 1 Ray head, 2 workers; cluster b:
# 1 head), vllm-router on ray-head in front of both.
#   scripts/sandbox.sh up     build what is missing, start the hosts, run site.yml, print the dashboard URL
#   scripts/sandbox.sh down   remove the hosts
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/controller-venv.sh
export PATH="$PWD/.venv/bin:$PATH"
case "${1:-up}" in
  up)
    bash scripts/sandbox-prereqs.sh
    RAYVLLM_HOST_IMAGE=$(cat .cache/host-image)
    export RAYVLLM_HOST_IMAGE
    molecule create -s default
    molecule converge -s default
    echo
    echo "Ray dashboard: http://10.77.0.10:8265"
    echo "Re-run the deployment: .venv/bin/ansible-playbook site.yml -i inventories/sandbox"
    ;;
  down)
    molecule destroy -s default
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
