#!/usr/bin/env bash
# The API report of the modules with no earlier release to compare with:
# the broker hand-offs (handoff/natsjs, handoff/rabbitmq). gorelease takes
# each as a new module (-base=none), as a consumer would fetch it: outside
# the workspace, every module of this commit from a file proxy at the
# version .ci/versions gives. It checks that the version suits a first
# release and that the module builds as published. A report only, until
# the module has a tag to compare with (then add it to .ci/api.sh's way).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gorelease >/dev/null 2>&1 || go install golang.org/x/exp/cmd/gorelease@v0.0.0-20261113113407-e3970619a1a4

work=$(mktemp -d)
. .ci/ourmods.sh
trap 'purge_ours; rm -rf "$work"' EXIT
take_modcache
go build -o "$work/modproxy" ./internal/modproxy
"$work/modproxy" -out "$work/proxy" -rev HEAD

for dir in handoff/natsjs handoff/rabbitmq; do
  version=$(awk -v d="$dir" '$1 == d { print $2 }' .ci/versions)
  echo "ci: api: $dir at $(git rev-parse --short HEAD) as its first release, $version"
  status=0
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=mod GOSUMDB=off GOTOOLCHAIN=local GODEBUG=goindex=0 \
    GOPROXY="file://$work/proxy,file://$modcache/cache/download,$(go env GOPROXY)" \
    gorelease -base=none -version="$version") || status=$?
  if [ "$status" -ne 0 ]; then echo "ci: api: gorelease exited $status for $dir; report only"; fi
done
