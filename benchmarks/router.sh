#!/usr/bin/env bash
# Throughput at saturation of the router against each cluster alone (issue 26), on the sandbox: vLLM's own client
# (`vllm bench serve`: random prompts of 32 tokens, 16 generated with --ignore-eos, CONCURRENCY at a time) run on
# ray-head, first straight at each cluster's vLLM, then through vllm-router with each policy in POLICIES, set the way
# an operator sets it (playbooks/router.yml -e router_policy=P). Each cluster is pinned to a core of its own so that
# one cluster's work does not slow the other: default's three containers (with the router and the client, which run
# on ray-head) on CPU 0, b on CPU 1. At the end the router gets the inventory's policy back (router.yml) and the
# containers every core. Prints one line per run: requests/s, median and p99 latency, failed requests.
# Converges a fresh sandbox fleet first and destroys it at the end; REUSE=1 runs on the fleet molecule's `default`
# scenario already converged (and keeps it).
#   [POLICIES="cache_aware power_of_two round_robin"] [PROMPTS=200] [CONCURRENCY=16] benchmarks/router.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet router
POLICIES=${POLICIES:-cache_aware power_of_two round_robin}
PROMPTS=${PROMPTS:-200}
CONCURRENCY=${CONCURRENCY:-16}
DEFAULT_URL=http://10.77.0.10:8000
B_URL=http://10.77.0.13:8000
ROUTER_URL=http://10.77.0.10:30000
export ANSIBLE_CONFIG=$PWD/ansible.cfg MOLECULE_PROJECT_DIRECTORY=$PWD

pin() {
  docker update --cpuset-cpus "$1" ray-head ray-worker-1 ray-worker-2 >/dev/null
  docker update --cpuset-cpus "$2" ray-b-head >/dev/null
}
router_policy() {
  ansible-playbook -i inventories/sandbox playbooks/router.yml "$@" >.cache/bench-router-policy.log 2>&1 || {
    tail -n 30 .cache/bench-router-policy.log
    exit 1
  }
}
restore() {
  local all="0-$(($(nproc) - 1))"
  pin "$all" "$all" || true
  if [ "${policy_changed:-0}" = 1 ]; then
    echo "putting the inventory's router policy back (playbooks/router.yml)"
    router_policy
  fi
  # This trap replaces sandbox_fleet's: destroy the fresh fleet here too.
  [ "${REUSE:-0}" = 1 ] || molecule destroy -s default >/dev/null 2>&1 || true
}
trap 'restore' EXIT
[ "$(nproc)" -ge 2 ] || {
  echo "needs 2 cores: one per cluster" >&2
  exit 1
}

# One run of vLLM's client on ray-head against URL; the cluster's API key from the vLLM environment file there
# (both clusters serve the model with the same key, the one the router's clients send).
bench() {
  docker exec -i ray-head bash -s "$1" "$PROMPTS" "$CONCURRENCY" <<'EOF'
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

echo "router at saturation: vllm bench serve from ray-head, random 32 in / 16 out, concurrency $CONCURRENCY, $PROMPTS prompts;" \
  "cluster default (3 hosts, tensor parallel across them) and the router on CPU 0, cluster b (1 host) on CPU 1;" \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
pin 0 1
sleep 5
# A run that fails stops the script (set -e applies to an assignment, not to $(...) inside printf's arguments).
result=$(bench "$B_URL")
printf '%-34s %s\n' "cluster b alone" "$result"
result=$(bench "$DEFAULT_URL")
printf '%-34s %s\n' "cluster default alone" "$result"
for policy in $POLICIES; do
  policy_changed=1
  router_policy -e "router_policy=$policy"
  sleep 10 # the router's first health checks
  result=$(bench "$ROUTER_URL")
  printf '%-34s %s\n' "router, policy $policy" "$result"
done
