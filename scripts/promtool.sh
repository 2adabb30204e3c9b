#!/usr/bin/env bash
# promtool from Debian's prometheus package, unpacked under .cache (no daemon installed):
#   scripts/promtool.sh check rules FILE... | test rules FILE...
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.cache/promtool
[ -x "$dir/x/usr/bin/promtool" ] || bash scripts/debian-unpack.sh "$dir" prometheus
exec "$dir/x/usr/bin/promtool" "$@"
