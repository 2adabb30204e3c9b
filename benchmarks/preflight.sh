#!/usr/bin/env bash
# Time playbooks/preflight.yml on N hosts of this machine (local connection, each Ray node with its own
# loopback address 127.0.0.N as ray_node_ip, as the integration tests do), for N = 4, 8, 16, 32 (or the
# sizes given): clusters of 4 (a head and 3 workers), monitoring and the router on the first head, forks 10,
# no GPU checks. Prints per N the wall-clock seconds, the controller's CPU seconds (ansible-playbook and
# its forks: user + system) and both per host. Needs root (it adds the loopback addresses, and removes
# those it added).
#   benchmarks/preflight.sh [N ...]
# LOGS=DIR keeps each timed run's ansible-playbook output there (DIR/run-<N>.log), e.g. with
# ANSIBLE_CALLBACKS_ENABLED=profile_tasks.
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYBOOK=${PLAYBOOK:-playbooks/preflight.yml}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(4 8 16 32)
PY=.venv/bin/python
work=$(mktemp -d)
added=()
cleanup() {
  for a in "${added[@]}"; do ip addr del "$a/8" dev lo 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
max=0
for n in "${SIZES[@]}"; do [ "$n" -gt "$max" ] && max=$n; done
# Read once, not piped into `grep -q` (with pipefail, grep's early exit fails the pipe, and the address would be
# added twice).
have=$(ip -4 -o addr show dev lo)
for i in $(seq 2 "$max"); do
  a=127.0.0.$i
  if ! grep -q "inet $a/" <<<"$have"; then
    ip addr add "$a/8" dev lo
    added+=("$a")
  fi
done
echo "preflight on N local hosts: clusters of 4, monitoring and router on the first head, forks 10, $(nproc) cores," \
  "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+changes'), $(date -u +%F)"
printf '%6s %10s %10s %14s %14s\n' N wall_s cpu_s wall_s/host cpu_s/host
for n in "${SIZES[@]}"; do
  inv=$work/inv-$n
  "$PY" - "$n" "$inv" <<'PYEOF'
import sys
from pathlib import Path

import yaml

n, inv = int(sys.argv[1]), Path(sys.argv[2])
(inv / "group_vars").mkdir(parents=True)
names = ["node-%02d" % i for i in range(n)]


def host(i):
    return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "ray_node_ip": "127.0.0.%d" % (i + 1), "ray_cluster_name": "c%d" % (i // 4)}


heads = {names[i]: host(i) for i in range(n) if i % 4 == 0}
workers = {names[i]: host(i) for i in range(n) if i % 4}
hosts = {"all": {"children": {"ray_head": {"hosts": heads}, "ray_workers": {"hosts": workers},
                              "monitoring": {"hosts": {names[0]: None}}, "router": {"hosts": {names[0]: None}}}}}
(inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
group_vars = {
    "ray_version": "2.60.0", "vllm_version": "0.32.0", "preflight_min_shm_mib": 1, "preflight_gpu_check": False,
    "model_source": "shared", "model_path": "/srv/models/example", "vllm_served_model_name": "example",
    "grafana_admin_password": "benchmark-not-a-secret", "ray_num_gpus": 1,
}
(inv / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
PYEOF
  log=$work/run-$n.log
  # Once to generate the inventory's credentials (the password lookups write them), then timed.
  ANSIBLE_CACHE_PLUGIN=memory .venv/bin/ansible-playbook -i "$inv" "$PLAYBOOK" >"$log" 2>&1 || {
    tail -n 30 "$log"
    exit 1
  }
  /usr/bin/time -f '%e %U %S' -o "$work/time-$n" env ANSIBLE_CACHE_PLUGIN=memory \
    .venv/bin/ansible-playbook -i "$inv" "$PLAYBOOK" >"$log" 2>&1 || {
    tail -n 30 "$log"
    exit 1
  }
  [ -z "${LOGS:-}" ] || { mkdir -p "$LOGS" && cp "$log" "$LOGS/"; }
  read -r wall user sys <"$work/time-$n"
  awk -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" \
    'BEGIN { printf "%6d %10.1f %10.1f %14.2f %14.2f\n", n, w, u + s, w / n, (u + s) / n }'
done
