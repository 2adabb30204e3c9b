#!/usr/bin/env bash
# How a run grows with the fleet: the control-plane phases on N lightweight sandbox hosts (systemd containers of the
# host image, without Ray or vLLM installs; nftables, the node exporter and Prometheus baked into a derived image so
# that no phase downloads), in clusters of 4 with Prometheus on the first host, for N = 8, 16, 32, 64 (or the sizes
# given), at the forks of ansible.cfg. Prints, per N and phase, the wall time, the time per host, the controller's
# CPU time (ansible-playbook and its forks, with the docker exec clients they start; not the modules, which run on
# the hosts) and its peak memory (the sum of the RSS of every ansible-playbook process, sampled every 0.5 s). Then,
# from the largest N, a projection for PROJECT_HOSTS hosts (500) of preflight, host_prep, firewall and monitoring:
# the controller's CPU time, and the minutes it takes at 4, 8 and 16 controller cores with the controller as the
# bottleneck (forks at least twice its cores).
#   benchmarks/scale.sh [N ...]
# Phases: preflight (playbooks/preflight.yml), fleet facts (benchmarks/scale-facts.yml), host_prep, firewall
# (nftables), monitoring (node exporter on every host, then Prometheus with every target: --tags
# node_exporter,prometheus). The containers and their network are removed at the end.
#   PHASES="host_prep firewall" runs only those phases (the names above, fleet facts as facts); LOGS=DIR keeps each
#   phase's ansible-playbook output there (DIR/<phase>-<N>.log), e.g. with ANSIBLE_CALLBACKS_ENABLED=profile_tasks.
#   SAME_LOAD=1 starts as many hosts for every N as for the largest, the ones past N idle and outside the inventory:
#   the sandbox's hosts share this machine's cores and kernel, and an idle host's systemd still costs the others; with
#   the same hosts up at every N, the ratio of two runs shows how the playbooks grow, not how the machine copes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 ANSIBLE_CACHE_PLUGIN=memory
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(8 16 32 64)
base=$(cat .cache/host-image)
packages="nftables prometheus-node-exporter prometheus"
image=rayvllm-scale:${base##*:}-$(echo "$packages" | sha256sum | cut -c1-8)
net=rayvllm-scale
prefix=scale-
work=$(mktemp -d)
# shellcheck source=benchmarks/containers.sh
. benchmarks/containers.sh
derived_image "$image" '["/lib/systemd/systemd"]' "$packages"
docker network inspect "$net" >/dev/null 2>&1 || docker network create --subnet 10.78.0.0/24 "$net" >/dev/null

start_hosts() {
  local n=$1 i name waited
  remove_hosts
  # Each host's systemd takes a few inotify instances, and Linux allows 128 per user by default: past about 26
  # hosts, the next ones exit at once (exit 255; seen at 32). Raise the limit for the run, and say so.
  local need=$((8 * n + 256))
  if [ "$(cat /proc/sys/fs/inotify/max_user_instances)" -lt "$need" ]; then
    echo "raising fs.inotify.max_user_instances from $(cat /proc/sys/fs/inotify/max_user_instances) to $need" \
      "(systemd in each of $n containers)" >&2
    sysctl -q -w fs.inotify.max_user_instances="$need"
  fi
  for i in $(seq 0 $((n - 1))); do
    docker run -d --name "${prefix}$(printf %02d "$i")" --hostname "${prefix}$(printf %02d "$i")" \
      --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
      --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock \
      --network "$net" --ip "10.78.0.$((10 + i))" "$image" /lib/systemd/systemd >/dev/null
  done
  for i in $(seq 0 $((n - 1))); do
    name=${prefix}$(printf %02d "$i") waited=0
    until docker exec "$name" systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded'; do
      if [ "$(docker inspect -f '{{.State.Running}}' "$name")" != true ] || [ "$waited" -ge 300 ]; then
        echo "host $name did not come up (state: $(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' \
          "$name"), waited $waited s); its log:" >&2
        docker logs --tail 20 "$name" >&2
        exit 1
      fi
      sleep 1
      waited=$((waited + 1))
    done
  done
}

write_inventory() {
  local n=$1 inv=$2
  mkdir -p "$inv/group_vars"
  python3 - "$n" "$inv" "$prefix" <<'PYEOF'
import json
import sys
from pathlib import Path

n, inv, prefix = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
names = ["%s%02d" % (prefix, i) for i in range(n)]


def host(i):
    return {"ray_node_ip": "10.78.0.%d" % (10 + i), "ray_cluster_name": "c%d" % (i // 4)}


inventory = {"all": {
    "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    "children": {
        "ray_head": {"hosts": {names[i]: host(i) for i in range(n) if i % 4 == 0}},
        "ray_workers": {"hosts": {names[i]: host(i) for i in range(n) if i % 4}},
        "monitoring": {"hosts": {names[0]: None}},
    },
}}
(inv / "hosts.yml").write_text(json.dumps(inventory, indent=1))
group_vars = {
    "ray_version": "2.60.0", "vllm_version": "0.32.0", "ray_num_gpus": 2, "preflight_gpu_check": False,
    "preflight_min_shm_mib": 1, "host_prep_sysctl_apply": False, "model_source": "shared",
    "model_path": "/srv/models/example", "vllm_served_model_name": "example", "vllm_tensor_parallel_size": 2,
    "grafana_install_source": "none", "grafana_admin_password": "benchmark-not-a-secret",
    "firewall_admin_cidrs": ["10.78.0.1/32"], "vllm_allowed_cidrs": ["10.78.0.0/24"],
}
(inv / "group_vars" / "all.yml").write_text(json.dumps(group_vars, indent=1))
PYEOF
}

# The sum of the RSS of every ansible-playbook process (the controller and its forks), in MiB, sampled until $1 ends.
peak_rss() {
  local pid=$1 peak=0 now
  while kill -0 "$pid" 2>/dev/null; do
    now=$(ps -eo rss=,args= | awk '/[a]nsible-playbook/ {s += $1} END {print int(s / 1024)}')
    [ "$now" -gt "$peak" ] && peak=$now
    sleep 0.5
  done
  echo "$peak"
}

phase() {
  local n=$1 name=$2 inv=$3 log t0 t1 pid peak cpu
  shift 3
  [[ " ${PHASES:-preflight facts host_prep firewall monitoring} " == *" $name "* ]] || return 0
  log=$work/$name-$n.log
  t0=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$log.cpu" ansible-playbook -i "$inv" "$@" >"$log" 2>&1 &
  pid=$!
  peak=$(peak_rss "$pid")
  if ! wait "$pid"; then
    tail -n 40 "$log"
    exit 1
  fi
  t1=$(date +%s.%N)
  [ -z "${LOGS:-}" ] || { mkdir -p "$LOGS" && cp "$log" "$LOGS/"; }
  cpu=$(awk 'END { print $1 + $2 }' "$log.cpu")
  echo "$n $name $cpu" >>"$work/cpu"
  awk -v n="$n" -v p="$name" -v t="$(echo "$t1 - $t0" | bc)" -v m="$peak" -v c="$cpu" \
    'BEGIN { printf "%5d  %-12s %8.1f s %8.2f s/host %8.2f CPU-s/host %8d MiB\n", n, p, t, t / n, c / n, m }'
}

largest=$(printf '%s\n' "${SIZES[@]}" | sort -n | tail -n 1)
echo "scale: clusters of 4, Prometheus on the first host, forks $(awk -F' *= *' '/^forks/ {print $2}' ansible.cfg)," \
  "$(nproc) cores, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+changes'), $(date -u +%F)" \
  "$([ "${SAME_LOAD:-0}" = 1 ] && echo "(SAME_LOAD: $largest hosts up at every N)")"
printf '%5s  %-12s %10s %15s %19s %12s\n' N phase wall per_host controller_cpu peak_rss
for n in "${SIZES[@]}"; do
  if [ "${SAME_LOAD:-0}" = 1 ]; then start_hosts "$largest"; else start_hosts "$n"; fi
  inv=$work/inv-$n
  write_inventory "$n" "$inv"
  phase "$n" preflight "$inv" playbooks/preflight.yml
  phase "$n" facts "$inv" benchmarks/scale-facts.yml
  phase "$n" host_prep "$inv" playbooks/host_prep.yml
  phase "$n" firewall "$inv" playbooks/firewall.yml
  phase "$n" monitoring "$inv" playbooks/monitoring.yml --tags node_exporter,prometheus
done
# The projection: the controller's CPU time per host of the largest run, summed over the phases but fleet facts
# (each phase's playbook gathers them itself, so the sum is an upper bound for one run that holds all of them).
awk -v hosts="${PROJECT_HOSTS:-500}" '
  { n[$2] = $1; cpu[$2] = $3; if ($1 > largest) largest = $1 }
  END {
    for (p in n) if (n[p] == largest && p != "facts") per_host += cpu[p] / largest
    total = per_host * hosts
    printf "projection for %d hosts from the %d-host run: controller CPU %.2f s per host, %.0f CPU-min in all;", hosts, largest, per_host, total / 60
    printf " with the controller as the bottleneck: %.0f min on 4 cores, %.0f on 8, %.0f on 16\n", total / 60 / 4, total / 60 / 8, total / 60 / 16
  }' "$work/cpu"
