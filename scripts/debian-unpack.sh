#!/usr/bin/env bash
# Debian packages unpacked under DIR/x, nothing installed or started (tools the checks and benchmarks run from
# there: promtool, haproxy): scripts/debian-unpack.sh DIR PACKAGE... The callers run it when their tool is missing.
set -euo pipefail
dir=$1
shift
mkdir -p "$dir"
rm -rf "$dir/x" "$dir"/*.deb
(cd "$dir" && { apt-get download "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "$@" >/dev/null; }; })
for deb in "$dir"/*.deb; do dpkg -x "$deb" "$dir/x"; done
