#!/usr/bin/env bash
# `make bench-nodework`: the node-work benchmark (test/bench/nodework). A
# coordinator in a child process and 1,000 simulated agents in the test
# process talk real gRPC with TLS over loopback; it prints a table and one
# "RESULT bench=nodework ..." line. The figures are measurements: the run
# fails only when something breaks (e.g. agents that never connect).
# SHOAL_BENCH=imagepull (`make bench-imagepull`) runs the ImagePullJob
# benchmark instead: one job over every node per parallelism, with the real
# controller and status writer in the coordinator child; it prints one
# "RESULT bench=imagepull ..." line per job.
# SHOAL_BENCH=probes (`make bench-probes`) runs the PodProbeMarker benchmark:
# etcd and kube-apiserver (the local cluster's binaries) started by the test,
# 10 pods per node, the real controller in the coordinator child; it prints
# one "RESULT bench=probes ..." line (about 5 minutes at full size).
#   hack/bench-nodework.sh                        1,000 agents, 5 rounds
#   SHOAL_BENCH_AGENTS=200 hack/bench-nodework.sh fewer agents
#   SHOAL_BENCH_ROUNDS=10                         more delivery rounds
#   SHOAL_BENCH_PARALLELISM=all,50,10             imagepull: the jobs' parallelism
#   SHOAL_BENCH_PULL_SECONDS=5                    imagepull: longer simulated pulls
#   SHOAL_BENCH_PODS_PER_AGENT=10                 probes: pods per node
#   SHOAL_BENCH_STEADY_SECONDS=60                 probes: the steady-state window
#   SHOAL_BENCH_FLIP_PERCENT=10                   probes: pods whose probe fails at once
#   SHOAL_BENCH_CONVERGE_RATE=500/1000            probes: coordinator client qps/burst
#                                                 for the initial convergence
#   SHOAL_BENCH_CLIENT_RATE=50/100                probes: ... for the steady state and
#                                                 the flip (production's rate)
#   SHOAL_BENCH_STATE_DIR=/dev/shm                agents' state dirs on tmpfs
#                                                 (default: the test's temp dir)
# Extra arguments go to `go test`, e.g. `-args -agents=500`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
# 1,000 streams are 2,000 sockets plus 1,000 state-dir locks; the test raises
# its soft limit to the hard one, so make the hard one generous if we may.
ulimit -Hn 65536 2>/dev/null || true
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
# On a real cluster every agent fsyncs to its own node's disk; here 1,000
# simulated agents would share one disk and measure its fsync queue, not the
# node-work path. tmpfs keeps the writes (and their ordering) but not the
# shared-disk queue. Set SHOAL_BENCH_STATE_DIR= (empty) to measure the disk.
if [ -z "${SHOAL_BENCH_STATE_DIR+x}" ] && [ -d /dev/shm ]; then
  export SHOAL_BENCH_STATE_DIR=/dev/shm
fi
case "${SHOAL_BENCH:-nodework}" in
  nodework) test=TestNodeWorkBenchmark ;;
  imagepull) test=TestImagePullBenchmark ;;
  probes) test=TestProbesBenchmark ;;
  *) echo "SHOAL_BENCH=$SHOAL_BENCH: want nodework, imagepull or probes" >&2; exit 2 ;;
esac
exec go test -tags bench -run "$test" -count=1 -timeout "${TIMEOUT:-30m}" -v ./test/bench/nodework/ "$@"
