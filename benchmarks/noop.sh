#!/usr/bin/env bash
# Time no-op re-runs of site.yml on the converged sandbox fleet (molecule's `default` scenario, 4 hosts): the whole
# fleet, then `--limit` to cluster b (ray-b-head alone). Prints each run's wall time and changed count, the slowest
# tasks (profile_tasks) and, from one more limited run at -vvv (its log lists each connection; -vvv itself slows a
# run, so the timed runs go without it), the hosts a limited run opened a connection to: none outside the limit.
# Needs the fleet converged; changes nothing.
#   benchmarks/noop.sh            # RUNS=2 full runs, then one limited run
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 MOLECULE_PROJECT_DIRECTORY=$PWD
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=20
runs=${RUNS:-2}
run() {
  local log=$1 label=$2 t0 t1 changed
  shift 2
  t0=$(date +%s.%N)
  ansible-playbook -i inventories/sandbox site.yml "$@" >"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
  t1=$(date +%s.%N)
  changed=$(grep -A8 '^PLAY RECAP' "$log" | grep -oE 'changed=[0-9]+' | cut -d= -f2 | paste -sd+ | bc)
  printf '%-40s %6.1f s   changed=%s\n' "$label" "$(echo "$t1 - $t0" | bc)" "$changed"
}
echo "no-op site.yml on the sandbox: commit $(git rev-parse --short HEAD), $(date -u +%F), $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do run ".cache/bench-noop-$i.log" "no-op, 4 hosts (run $i)"; done
run .cache/bench-noop-limit.log "no-op, --limit ray-b-head (cluster b)" --limit ray-b-head
ansible-playbook -i inventories/sandbox site.yml -vvv --limit ray-b-head >.cache/bench-noop-limit-vvv.log 2>&1 ||
  { tail -n 40 .cache/bench-noop-limit-vvv.log; exit 1; }
echo "hosts the limited run (at -vvv) opened a connection to:" \
  "$(grep -oE '^<[A-Za-z0-9_.-]+> ESTABLISH' .cache/bench-noop-limit-vvv.log | sort -u | tr -d '<>' | cut -d' ' -f1 |
    paste -sd,)"
echo "slowest tasks of the last full run:"
grep -A12 '^TASKS RECAP' ".cache/bench-noop-$runs.log" | tail -n +3 | sed 's/ -\{3,\} / /' | grep -v '^/' | head -n 12
