#!/usr/bin/env bash
# The core's API change report: gorelease compares the core at this commit
# with its previous version and says which changes are compatible and
# whether the version .ci/versions gives fits them. The previous version is
# the newest core tag (vX.Y.Z) reachable from HEAD; failing that, the
# commit .ci/apibase records, published under the version it names. Against
# a tag a verdict that the version does not fit fails CI; against the
# recorded commit, or with no base at all, it is a report only.
set -euo pipefail
cd "$(dirname "$0")/.."

release=$(awk '$1 == "." { print $2 }' .ci/versions)
base=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null || true)
fatal=1
if [ -n "$base" ]; then
  rev=$base
else
  fatal=0
  read -r rev base < <(grep -v '^#' .ci/apibase 2>/dev/null | head -1) || true
  if [ -z "${rev:-}" ] || ! git cat-file -e "$rev^{commit}" 2>/dev/null; then
    echo "ci: api: no core tag and no recorded base commit: nothing to compare $release with (report skipped)"
    exit 0
  fi
fi
if [ "$base" = "$release" ]; then
  echo "ci: api: $release is tagged already; nothing to report"
  exit 0
fi

command -v gorelease >/dev/null 2>&1 || go install golang.org/x/exp/cmd/gorelease@v0.0.0-20261113113407-e3970619a1a4

work=$(mktemp -d)
. .ci/ourmods.sh
trap 'purge_ours; rm -rf "$work"' EXIT
take_modcache
go build -o "$work/modproxy" ./internal/modproxy
"$work/modproxy" -out "$work/proxy" -rev "$rev" -module . -version "$base"

echo "ci: api: the core at $(git rev-parse --short HEAD) as $release against $base ($(git rev-parse --short "$rev^{commit}"))"
status=0
GOWORK=off GOFLAGS=-mod=mod GOSUMDB=off GOTOOLCHAIN=local GODEBUG=goindex=0 \
  GOPROXY="file://$work/proxy,file://$modcache/cache/download,$(go env GOPROXY)" \
  gorelease -base="$base" -version="$release" || status=$?
if [ "$status" -ne 0 ]; then
  if [ "$fatal" = 1 ]; then
    echo "ci: api: gorelease refuses $release after $base (see above)" >&2
    exit "$status"
  fi
  echo "ci: api: gorelease exited $status; report only, the base $base is not a tag"
fi
