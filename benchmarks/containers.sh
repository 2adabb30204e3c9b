# shellcheck shell=bash
# shellcheck disable=SC2154 # prefix, net and work: set by the script that sources this file
# Sourced by the benchmarks that start plain containers of the sandbox's host image (scale.sh, distribution.sh),
# after they set `prefix` (their containers' name prefix), `net` (their Docker network) and `work` (a scratch
# directory): the containers, the network and the directory are removed when the benchmark exits.
remove_hosts() {
  docker ps -aq --filter "name=^${prefix}" | xargs -r docker rm -f >/dev/null 2>&1 || true
}
cleanup() {
  remove_hosts
  docker network rm "$net" >/dev/null 2>&1 || true
  rm -rf "$work"
}
: "${prefix:?}" "${net:?}" "${work:?}"
trap cleanup EXIT

# derived_image IMAGE CMD PACKAGES [SHELL]: IMAGE, the host image with Debian's PACKAGES (and SHELL run after
# them), whose command is CMD (a JSON list); built once, then kept in Docker's store.
derived_image() {
  local image=$1 cmd=$2 packages=$3 extra=${4:-true} build=${prefix}build
  docker image inspect "$image" >/dev/null 2>&1 && return 0
  echo "building $image (the host image with $packages)" >&2
  docker rm -f "$build" >/dev/null 2>&1 || true
  docker run -d --name "$build" "$(cat .cache/host-image)" sleep infinity >/dev/null
  docker exec "$build" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends '"$packages"' >/dev/null && rm -rf /var/cache/apt/archives/*.deb && '"$extra"
  docker commit -c "CMD $cmd" "$build" "$image" >/dev/null
  docker rm -f "$build" >/dev/null
}
