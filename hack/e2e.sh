#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e) against the local cluster.
#   hack/e2e.sh         use the running cluster, starting it if needed
#   hack/e2e.sh fresh   start from nothing, and afterwards take the same
#                       cluster down and prove nothing is left behind
#                       (what `make test` and CI do); the cluster is taken
#                       down on failure too
# Each part is a stage of hack/stage.sh (cluster-up, deploy, e2e, teardown
# check). Test results (JSON and verbose logs) land in .cache/test-results/.
set -euo pipefail
cd "$(dirname "$0")/.."
sc=.cache/bin/shoal-cluster
stage=hack/stage.sh
fresh=${1:-}
mkdir -p .cache

if [ "$fresh" = fresh ]; then
  "$sc" down
  trap '"$sc" down' EXIT
fi
$stage cluster-up "$sc" up --nodes "${NODES:-3}"
env_lines=$("$sc" env)
eval "$env_lines"
# Shoal from deploy/, built for this machine only, with the test-only noop
# work source switched on for the backbone tests.
SHOAL_TEST_WORK=1 SHOAL_PLATFORMS="linux/$(go env GOARCH)" $stage "images and deploy" hack/deploy.sh
export SHOAL_E2E_ARTIFACTS=${SHOAL_E2E_ARTIFACTS:-$PWD/.cache/e2e-artifacts}

# The parallel group runs up to E2E_PARALLEL tests at once (test/e2e/README.md);
# the fault tests run after it, one at a time (TestMain orders them).
$stage e2e hack/gotest.sh e2e -tags e2e -count=1 -timeout 40m -parallel "${E2E_PARALLEL:-8}" ./test/e2e/... ||
  { echo "e2e failed; artifacts in $SHOAL_E2E_ARTIFACTS, verbose log .cache/test-results/e2e.log" >&2; exit 1; }

if [ "$fresh" = fresh ]; then
  # The teardown check adopts the suite's cluster, takes it down and checks
  # the machine itself; the EXIT trap stays in case it dies before that.
  SHOAL_TEARDOWN_RUNNING_CLUSTER=1 $stage "teardown check" \
    hack/gotest.sh teardown -tags e2e -count=1 -timeout 15m -run TestDownLeavesNothing ./test/cluster/
fi
