#!/usr/bin/env bash
# Build the wheelhouse the sandbox hosts install from (they get no index access,
# like an air-gapped fleet). Wheels are built for this machine's platform and
# Python X.Y, which match the Debian 12 host image (Python 3.11, glibc 2.36).
#   scripts/wheelhouse.sh DIR REQUIREMENT...
# Re-running with the same requirements downloads nothing new; an added one resolves that one alone.
set -euo pipefail
dest=$1; shift
mkdir -p "$dest"
stamp="$dest/.requirements"
want=$(printf '%s\n' "$@" | sort)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "wheelhouse $dest: up to date"
  exit 0
fi
# One resolution per requirement: two versions of one package cannot share a resolve. A requirement the
# wheelhouse already resolved (listed in its stamp) is not resolved again.
have=$(cat "$stamp" 2>/dev/null || true)
for req in "$@"; do
  grep -qxF -- "$req" <<<"$have" && continue
  python3 -m pip wheel --quiet --wheel-dir "$dest" "$req"
done
# A new file, not a rewrite: the wheelhouse may be hard links to scripts/sandbox-prereqs.sh's machine cache.
printf '%s\n' "$want" >"$stamp.new"
mv "$stamp.new" "$stamp"
wheels=("$dest"/*.whl)
echo "wheelhouse $dest: ${#wheels[@]} wheels, $(du -sh "$dest" | cut -f1)"
