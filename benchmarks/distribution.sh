#!/usr/bin/env bash
# How the controller's copy of the weights reaches N nodes (roles/model, model_source: controller), each way of
# model_distribution: `direct` (a copy from the controller to every node) against `peers` (the controller's copy
# to one node, the others fetching from each other in a chain that streams). N plain containers of the host image with
# sshd (Ansible over real SSH, so the controller's bytes cross a network link), every link capped with tc: each
# node's upload at RATE_MBIT (its eth0), and the controller's link at RATE_MBIT too (the bridge's egress, which carries
# what this machine sends into the network). An artifact of SIZE_MB (a config.json and one file of random bytes).
# Per mode and N: the bytes that left the controller (the bridge's transmit counter over the run) as a multiple of
# the artifact, and the run's wall time; then a re-run that must change nothing and move nothing; then a projection to
# 64 and 500 nodes from the measured figures, the arithmetic shown.
#   benchmarks/distribution.sh [N ...]          (default 2 4 8; SIZE_MB=64, RATE_MBIT=100)
# BWLIMIT=<Mbit/s> adds a third way, `peers` with model_distribution_bwlimit at that rate (the cap on what a serving
# node takes), and what it should cost against plain `peers`: each node's receive at BWLIMIT instead of RATE_MBIT.
# MODES="peers" (default "direct peers") measures fewer ways.
# Needs the sandbox's host image (scripts/sandbox-prereqs.sh) and Docker; removes its containers and network at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 ANSIBLE_CACHE_PLUGIN=memory
export ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_HOST_KEY_CHECKING=false ANSIBLE_STDOUT_CALLBACK=default
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(2 4 8)
SIZE_MB=${SIZE_MB:-64}
RATE_MBIT=${RATE_MBIT:-100}
base=$(cat .cache/host-image)
image=rayvllm-dist:${base##*:}
net=rayvllm-dist
prefix=dist-
work=$(mktemp -d)
# shellcheck source=benchmarks/containers.sh
. benchmarks/containers.sh
derived_image "$image" '["/usr/sbin/sshd", "-D", "-e"]' openssh-server 'mkdir -p /run/sshd'
docker network inspect "$net" >/dev/null 2>&1 || docker network create --subnet 10.79.0.0/24 "$net" >/dev/null
bridge=br-$(docker network inspect -f '{{.Id}}' "$net" | cut -c1-12)
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

# The artifact: what the controller holds (model_controller_path).
mkdir -p "$work/model"
echo '{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}' >"$work/model/config.json"
head -c "$((SIZE_MB * 1024 * 1024))" /dev/urandom >"$work/model/model.safetensors"
artifact=$(du -sb "$work/model" | cut -f1)

start_hosts() {
  local n=$1 i name
  remove_hosts
  for i in $(seq 0 $((n - 1))); do
    name=${prefix}$(printf %02d "$i")
    docker run -d --name "$name" --hostname "$name" --cap-add NET_ADMIN --network "$net" --ip "10.79.0.$((10 + i))" \
      "$image" >/dev/null
    docker exec -i "$name" bash -c "mkdir -p /root/.ssh && chmod 700 /root/.ssh && cat >/root/.ssh/authorized_keys && \
      tc qdisc add dev eth0 root tbf rate ${RATE_MBIT}mbit burst 64kb latency 400ms" <"$work/key.pub"
  done
  {
    echo "all:"
    echo "  vars: {ansible_user: root, ansible_ssh_private_key_file: $work/key, ansible_python_interpreter: /usr/bin/python3}"
    echo "  children:"
    echo "    ray_head: {hosts: {${prefix}00: {ansible_host: 10.79.0.10, ray_node_ip: 10.79.0.10}}}"
    echo "    ray_workers:"
    echo "      hosts:"
    for i in $(seq 1 $((n - 1))); do
      echo "        ${prefix}$(printf %02d "$i"): {ansible_host: 10.79.0.$((10 + i)), ray_node_ip: 10.79.0.$((10 + i))}"
    done
  } >"$work/hosts.yml"
  for i in $(seq 0 $((n - 1))); do
    until ssh -q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i "$work/key" "root@10.79.0.$((10 + i))" \
      true 2>/dev/null; do sleep 0.5; done
  done
}

cat >"$work/stage.yml" <<'EOF'
- hosts: all
  gather_facts: false
  roles: [rayvllm.fleet.fleet_facts, rayvllm.fleet.model]
EOF

run() { # mode -> seconds, controller bytes
  local mode=$1 began tx0 tx1 rc=0 cap=0
  if [ "$mode" = peers-cap ]; then mode=peers cap=$BWLIMIT; fi
  tx0=$(cat "/sys/class/net/$bridge/statistics/tx_bytes")
  began=$(date +%s.%N)
  ansible-playbook -i "$work/hosts.yml" "$work/stage.yml" -e "@$work/vars.yml" -e "model_distribution=$mode" \
    -e "model_distribution_bwlimit=$cap" >"$work/run.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    tail -n 40 "$work/run.log" >&2
    exit "$rc"
  fi
  tx1=$(cat "/sys/class/net/$bridge/statistics/tx_bytes")
  echo "$(echo "$(date +%s.%N) - $began" | bc) $((tx1 - tx0)) $(grep -oE 'changed=[0-9]+' "$work/run.log" |
    cut -d= -f2 | paste -sd+ | bc)"
}

cat >"$work/vars.yml" <<EOF
ray_version: "2.60.0"
vllm_version: "0.32.0"
preflight_min_shm_mib: 1
preflight_check_ports: false
preflight_gpu_check: false
model_source: controller
model_controller_path: $work/model
model_path: /srv/models/bench
model_owner: root
model_group: root
EOF

# The controller's link: what this machine sends into the network, capped like the nodes' links.
tc qdisc replace dev "$bridge" root tbf rate "${RATE_MBIT}mbit" burst 64kb latency 400ms
echo "artifact $((artifact / 1048576)) MiB, every link ${RATE_MBIT} Mbit/s (one transfer of it: $(echo \
  "scale=1; $artifact * 8 / ($RATE_MBIT * 1000000)" | bc) s)"
read -r -a modes <<<"${MODES:-direct peers}"
if [ -n "${BWLIMIT:-}" ]; then modes+=(peers-cap); fi
printf '%-11s %3s  %9s  %8s  %s\n' mode N "wall (s)" "sent (x)" "re-run: changed, sent (x)"
declare -A wall
for n in "${SIZES[@]}"; do
  start_hosts "$n"
  for mode in "${modes[@]}"; do
    for i in $(seq 0 $((n - 1))); do docker exec "${prefix}$(printf %02d "$i")" rm -rf /srv/models; done
    read -r seconds sent _changed < <(run "$mode")
    read -r _again resent changed < <(run "$mode")
    wall[$mode-$n]=$seconds
    printf '%-11s %3d  %9.1f  %8.2f  %s, %.2f\n' "$mode" "$n" "$seconds" "$(echo "scale=3; $sent / $artifact" | bc)" \
      "$changed" "$(echo "scale=3; $resent / $artifact" | bc)"
  done
done
tc qdisc del dev "$bridge" root 2>/dev/null || true
if [ -n "${BWLIMIT:-}" ] && [ -n "${wall[peers-${SIZES[0]}]:-}" ]; then
  echo
  echo "the cap (model_distribution_bwlimit=$BWLIMIT), N=${SIZES[0]}: each node that fetches receives at $BWLIMIT" \
    "instead of ${RATE_MBIT} Mbit/s, $(echo "scale=1; $artifact * 8 / ($BWLIMIT * 1000000) - $artifact * 8 / \
    ($RATE_MBIT * 1000000)" | bc) s more for one transfer of the artifact; measured:" \
    "$(printf %.1f "$(echo "${wall[peers-cap-${SIZES[0]}]} - ${wall[peers-${SIZES[0]}]}" | bc)") s more than plain" \
    "peers (the wait polls every 5 s, and the cap lets a second's worth through at once)"
fi

# A projection from the smallest and the largest N measured: per extra node, what the wall time grew by.
low=${SIZES[0]} high=${SIZES[-1]}
if [ "$high" -gt "$low" ]; then
  echo
  echo "projection (linear in N from N=$low and N=$high; the same artifact and links):"
  for mode in "${modes[@]}"; do
    slope=$(echo "scale=3; (${wall[$mode-$high]} - ${wall[$mode-$low]}) / ($high - $low)" | bc)
    for target in 64 500; do
      printf '  %s, N=%d: %.1f s + (%d - %d) x %.1f s = %.0f s\n' "$mode" "$target" "${wall[$mode-$low]}" "$target" \
        "$low" "$slope" "$(echo "${wall[$mode-$low]} + ($target - $low) * $slope" | bc)"
    done
  done
  echo "  (sent by the controller: direct N x the artifact, peers 1 x at every N, as measured above)"
fi
