#!/usr/bin/env bash
# make soak: the fault soak (test/e2e/soak_test.go, TestSoak) on the local
# cluster, started and deployed if needed (as `make e2e` does). It runs
# ImagePullJobs, ContainerRecreateRequests, CloneSet in-place updates and
# PodProbeMarker flips side by side for SOAK_MINUTES (default 20) under a
# seeded schedule of faults, checks its invariants throughout and prints a
# summary. `make test` runs a 2-minute soak in its serial e2e group.
#   SOAK_MINUTES  minutes of new work (default 20)
#   SOAK_SEED     the schedule's seed (default: the clock; printed)
#   SOAK_FAULTS   a subset of agent-kill,leader-kill,node-cut,registry-burst,containerd-restart
#   SOAK_DEFECT   forget-agent-state: agents lose their state dir on restart
#                 (a run the soak must fail)
# The verbose log goes to .cache/test-results/soak.log, the summary to
# .cache/test-results/soak-summary.txt (and the console).
set -euo pipefail
cd "$(dirname "$0")/.."
sc=.cache/bin/shoal-cluster
stage=hack/stage.sh
mkdir -p .cache
$stage cluster-up "$sc" up --nodes "${NODES:-3}"
env_lines=$("$sc" env)
eval "$env_lines"
SHOAL_TEST_WORK=1 SHOAL_PLATFORMS="linux/$(go env GOARCH)" $stage "images and deploy" hack/deploy.sh
export SHOAL_E2E_ARTIFACTS=${SHOAL_E2E_ARTIFACTS:-$PWD/.cache/e2e-artifacts}
minutes=${SOAK_MINUTES:-20}
# The run's own bound: the work, then up to 25 minutes to drain and check.
timeout=$(awk -v m="$minutes" 'BEGIN { printf "%dm", m + 25 }')
summary=$PWD/.cache/test-results/soak-summary.txt
mkdir -p "$(dirname "$summary")"
rm -f "$summary"
rc=0
SHOAL_SOAK_MINUTES=$minutes SHOAL_SOAK_SEED=${SOAK_SEED:-} SHOAL_SOAK_FAULTS=${SOAK_FAULTS:-} SHOAL_SOAK_DEFECT=${SOAK_DEFECT:-} \
  SHOAL_SOAK_SUMMARY=$summary \
  $stage soak hack/gotest.sh soak -tags e2e -count=1 -timeout "$timeout" -run '^TestSoak$' ./test/e2e/ || rc=$?
[ -f "$summary" ] && cat "$summary"
exit $rc
