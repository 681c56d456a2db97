#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e) against the local cluster.
#   hack/e2e.sh         use the running cluster, starting it if needed
#   hack/e2e.sh fresh   start from nothing, and afterwards take the same
#                       cluster down and prove nothing is left behind
#                       (what `make test` and CI do); the cluster is taken
#                       down on failure too
# Each part is a stage of hack/stage.sh (cluster-up, deploy, e2e, teardown
# check).
# Test results (JSON and verbose logs) land in .cache/test-results/.
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

# Two groups (test/e2e/groups_test.go): the parallel group, up to
# E2E_PARALLEL tests at once, then the serial group (faults), one at a time.
# The framework's own tests (./test/e2e/framework) run with the first.
e2e_group() { # group packages
  SHOAL_E2E_GROUP=$1 $stage "e2e $1" hack/gotest.sh "e2e-$1" -tags e2e -count=1 -timeout 30m \
    -parallel "${E2E_PARALLEL:-12}" "$2" ||
    { [ "$1" = serial ] && [ -f "$SHOAL_SOAK_SUMMARY" ] && cat "$SHOAL_SOAK_SUMMARY" >&2
      echo "e2e ($1 group) failed; artifacts in $SHOAL_E2E_ARTIFACTS, verbose log .cache/test-results/e2e-$1.log" >&2; exit 1; }
}
# The serial group holds a 2-minute fault soak (TestSoak; make soak runs
# it longer); its summary is printed after the group.
export SHOAL_SOAK_SUMMARY=${SHOAL_SOAK_SUMMARY:-$PWD/.cache/test-results/soak-summary.txt}
rm -f "$SHOAL_SOAK_SUMMARY"
e2e_group parallel ./test/e2e/...
e2e_group serial ./test/e2e/
[ -f "$SHOAL_SOAK_SUMMARY" ] && cat "$SHOAL_SOAK_SUMMARY"

if [ "$fresh" = fresh ]; then
  # The teardown check adopts the suite's cluster, takes it down and checks
  # the machine itself; the EXIT trap stays in case it dies before that.
  SHOAL_TEARDOWN_RUNNING_CLUSTER=1 $stage "teardown check" \
    hack/gotest.sh teardown -tags e2e -count=1 -timeout 15m -run TestDownLeavesNothing ./test/cluster/
fi
