#!/usr/bin/env bash
# `make bench-probecost`: the agent's CPU per PodProbeMarker probe (issue 22;
# test/bench/probecost). A private containerd (runc) runs one real pod, the
# testserver and a busybox shell, built without Docker; the agent's probe
# runner (probes.Runner over CRI, in the test process) probes it at period
# 1 s: tcp, http (each also with every worker woken exactly when due, the
# baseline for the runner's tick), then exec, each window after an idle
# baseline. Exec probes are set against bare CRI ExecSync and bare
# `runc exec` loops at the same rate. Prints a table and one
# "RESULT bench=probecost ..." line; the figures
# are measurements, the run fails only when something breaks. Needs root,
# containerd, runc and busybox-static (the cluster's packages).
#   hack/bench-probecost.sh                          100 tcp/http, 20 exec probes, 30 s windows
#   SHOAL_BENCH_PROBES=200 hack/bench-probecost.sh   more tcp and http probes
#   SHOAL_BENCH_EXEC_PROBES=50                       more exec probes (and bare loops)
#   SHOAL_BENCH_SECONDS=60                           longer windows
#   SHOAL_BENCH_PHASES=tcp,tcp-exact                 only these phases (names in the table)
# Extra arguments go to `go test`, e.g. `-args -seconds=10`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
exec go test -tags bench -run TestProbeCostBenchmark -count=1 -timeout "${TIMEOUT:-20m}" -v ./test/bench/probecost/ "$@"
