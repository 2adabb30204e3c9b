#!/usr/bin/env bash
# promtool from Debian's prometheus package, unpacked under .cache (no daemon installed):
#   scripts/promtool.sh check rules FILE... | test rules FILE...
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.cache/promtool
if [ ! -x "$dir/x/usr/bin/promtool" ]; then
  mkdir -p "$dir"
  (cd "$dir" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }; })
  dpkg -x "$dir"/prometheus_*.deb "$dir/x"
fi
exec "$dir/x/usr/bin/promtool" "$@"
