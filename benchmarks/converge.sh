#!/usr/bin/env bash
# Time the first converge of the sandbox fleet (fresh hosts), then no-op re-runs of
# site.yml limited to 1, 2 and 3 hosts (the fleet model gathers the facts of the
# hosts left out), and print each with its changed count. Uses molecule's `default`
# scenario; the fleet is destroyed at the end.
#   benchmarks/converge.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
trap 'molecule destroy -s default >/dev/null 2>&1 || true' EXIT
molecule destroy -s default >/dev/null 2>&1
molecule create -s default >/dev/null 2>&1
run() {
  local log=$1 label=$2 t0 t1 changed
  shift 2
  t0=$(date +%s.%N)
  molecule converge -s default -- "$@" >"$log" 2>&1
  t1=$(date +%s.%N)
  changed=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -oE 'changed=[0-9]+' | cut -d= -f2 | paste -sd+ | bc)
  printf '%-28s %7.1f s   changed tasks: %s\n' "$label" "$(echo "$t1 - $t0" | bc)" "$changed"
}
echo "sandbox: 3 hosts (1 head, 2 workers), Ray $(awk -F'"' '/^ray_version:/ {print $2}' inventories/sandbox/group_vars/all.yml)," \
  "vLLM $(awk -F'"' '/^vllm_version:/ {print $2}' inventories/sandbox/group_vars/all.yml), monitoring on the head, $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
run .cache/bench-converge-1.log "first converge (3 hosts)"
run .cache/bench-converge-2.log "no-op re-run, 1 host" --limit ray-head
run .cache/bench-converge-3.log "no-op re-run, 2 hosts" --limit ray-head,ray-worker-1
run .cache/bench-converge-4.log "no-op re-run, 3 hosts"
