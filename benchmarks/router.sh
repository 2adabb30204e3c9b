#!/usr/bin/env bash
# Throughput at saturation of the router against each cluster alone (issue 26), on the sandbox: vLLM's own client
# (`vllm bench serve`: random prompts of 32 tokens, 16 generated with --ignore-eos, CONCURRENCY at a time) run on
# ray-head, first straight at each cluster's vLLM, then through vllm-router with each policy in POLICIES, set the way
# an operator sets it (playbooks/router.yml -e router_policy=P). Each cluster is pinned to a core of its own so that
# one cluster's work does not slow the other: default's three containers (with the router and the client, which run
# on ray-head) on CPU 0, b on CPU 1. PLACEMENT=apart keeps cluster default's core to its own processes: ray-head's
# container gets both cores, every process in it is pinned to CPU 0 (taskset; what they start later inherits it) but
# the router's, pinned to CPU 1 beside cluster b, and the client runs on ray-b-head (CPU 1): the router and the client
# then take their CPU from the slower cluster, as a router on a host of its own would take none from either. At the
# end the router gets the inventory's policy back (router.yml) and the containers every core. Prints one line per
# run: requests/s, median and p99 latency, failed requests.
# Converges a fresh sandbox fleet first and destroys it at the end; REUSE=1 runs on the fleet molecule's `default`
# scenario already converged (and keeps it).
#   [POLICIES="cache_aware power_of_two round_robin"] [PROMPTS=200] [CONCURRENCY=16] [PLACEMENT=shared|apart] \
#     benchmarks/router.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet router
POLICIES=${POLICIES:-cache_aware power_of_two round_robin}
PROMPTS=${PROMPTS:-200}
CONCURRENCY=${CONCURRENCY:-16}
PLACEMENT=${PLACEMENT:-shared}
case $PLACEMENT in
shared) CLIENT=ray-head ;;
apart) CLIENT=ray-b-head ;;
*)
  echo "PLACEMENT must be shared or apart, not '$PLACEMENT'" >&2
  exit 2
  ;;
esac
DEFAULT_URL=http://10.77.0.10:8000
B_URL=http://10.77.0.13:8000
ROUTER_URL=http://10.77.0.10:30000
export ANSIBLE_CONFIG=$PWD/ansible.cfg MOLECULE_PROJECT_DIRECTORY=$PWD

pin() {
  docker update --cpuset-cpus "$1" ray-head ray-worker-1 ray-worker-2 >/dev/null
  docker update --cpuset-cpus "$2" ray-b-head >/dev/null
}
# Every thread of ray-head's processes on CPU $1 but the routers' (vllm-router), on CPU $2, set from this machine
# (inside the container, taskset may not move another user's process). Again after each router restart: systemd,
# pinned with the rest, starts the new router on CPU $1.
pin_inside() {
  local pid name t
  docker top ray-head -eo pid,comm | tail -n +2 | while read -r pid name; do
    for t in /proc/"$pid"/task/[0-9]*; do
      taskset -p -c "$([ "$name" = vllm::router ] && echo "$2" || echo "$1")" "${t##*/}" >/dev/null 2>&1 || true
    done
  done
}
place() {
  pin 0 1
  if [ "$PLACEMENT" = apart ]; then
    docker update --cpuset-cpus 0-1 ray-head >/dev/null
    pin_inside 0 1
  fi
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
  [ "$PLACEMENT" != apart ] || pin_inside "$all" "$all" || true
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

# One run of vLLM's client on CLIENT against URL; the API key from the vLLM environment file on ray-head (both
# clusters serve the model with the same key, the one the router's clients send), never shown.
API_KEY=$(docker exec ray-head sed -n 's/^VLLM_API_KEY="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/vllm/vllm.env)
bench() {
  # -e with the name alone: docker takes the value from its environment, so it is not on its command line.
  OPENAI_API_KEY=$API_KEY docker exec -i -e OPENAI_API_KEY "$CLIENT" bash -s "$1" "$PROMPTS" "$CONCURRENCY" <<'EOF'
set -euo pipefail
export HF_HUB_OFFLINE=1
timeout 900 /opt/vllm/current/bin/vllm bench serve --backend openai --base-url "$1" --endpoint /v1/completions \
  --model tiny-llama --tokenizer /srv/models/tiny-llama --dataset-name random --random-input-len 32 \
  --random-output-len 16 --ignore-eos --num-prompts "$2" --max-concurrency "$3" --seed 1 \
  --percentile-metrics e2el --metric-percentiles 50,99 2>&1 \
  | awk '/Failed requests:/ {f=$NF} /Request throughput/ {t=$NF} /P50 E2EL/ {p50=$NF} /P99 E2EL/ {p99=$NF}
         END {if (t == "") exit 1; printf "%8.2f req/s   p50 %7.0f ms   p99 %7.0f ms   failed %s\n", t, p50, p99, f}'
EOF
}

if [ "$PLACEMENT" = apart ]; then
  where="cluster default (3 hosts, tensor parallel across them) alone on CPU 0; cluster b (1 host), the router and"
  where="$where the client on CPU 1"
else
  where="cluster default (3 hosts, tensor parallel across them), the router and the client on CPU 0, cluster b"
  where="$where (1 host) on CPU 1"
fi
echo "router at saturation: vllm bench serve from $CLIENT, random 32 in / 16 out, concurrency $CONCURRENCY," \
  "$PROMPTS prompts; $where; commit $(git rev-parse --short HEAD), $(date -u +%F)"
place
sleep 5
# A run that fails stops the script (set -e applies to an assignment, not to $(...) inside printf's arguments).
result=$(bench "$B_URL")
printf '%-34s %s\n' "cluster b alone" "$result"
result=$(bench "$DEFAULT_URL")
printf '%-34s %s\n' "cluster default alone" "$result"
for policy in $POLICIES; do
  policy_changed=1
  router_policy -e "router_policy=$policy"
  [ "$PLACEMENT" != apart ] || pin_inside 0 1 # the restarted router
  sleep 10                                      # the router's first health checks
  result=$(bench "$ROUTER_URL")
  printf '%-34s %s\n' "router, policy $policy" "$result"
done
