#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e) against the local cluster.
#   hack/e2e.sh         use the running cluster, starting it if needed
#   hack/e2e.sh fresh   start from nothing, tear down afterwards (even on
#                       failure), then prove a full up/down cycle leaves
#                       nothing behind (what `make test` and CI do)
set -euo pipefail
cd "$(dirname "$0")/.."
sc=.cache/bin/shoal-cluster
fresh=${1:-}
mkdir -p .cache

if [ "$fresh" = fresh ]; then
  "$sc" down
  trap '"$sc" down' EXIT
fi
"$sc" up --nodes "${NODES:-3}"
env_lines=$("$sc" env)
eval "$env_lines"
# Shoal from deploy/, built for this machine only, with the test-only noop
# work source switched on for the backbone tests.
SHOAL_TEST_WORK=1 SHOAL_PLATFORMS="linux/$(go env GOARCH)" hack/deploy.sh
export SHOAL_E2E_ARTIFACTS=${SHOAL_E2E_ARTIFACTS:-$PWD/.cache/e2e-artifacts}

suite() { # package, log
  set +e
  go test -tags e2e -count=1 -timeout 30m -v "$1" > "$2" 2>&1
  local rc=$?
  set -e
  grep -E '^(--- |PASS|FAIL|ok )|^\s+--- |\.go:[0-9]+: .*(after|Ready|served)' "$2" || true
  if [ $rc != 0 ]; then
    tail -60 "$2"
    echo "e2e failed; artifacts in $SHOAL_E2E_ARTIFACTS, full log $2" >&2
    exit $rc
  fi
}
suite ./test/e2e/... .cache/e2e.log

if [ "$fresh" = fresh ]; then
  # The EXIT trap stays: if the teardown test dies without its cleanup, the
  # trap still takes its cluster down.
  "$sc" down
  suite ./test/cluster/ .cache/e2e-teardown.log
fi
