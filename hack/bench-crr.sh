#!/usr/bin/env bash
# `make bench-crr`: ContainerRecreateRequest latency on the local cluster
# (test/bench/crr): 20 requests one after another, create -> Completed p50
# and p95 against issue 17's goals (800 ms, 1.2 s), with the coordinator's stage breakdown,
# and one "RESULT bench=crr ..." line. Needs the cluster running Shoal
# (make up); SHOAL_BENCH_CRRS=N times N requests instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
eval "$(.cache/bin/shoal-cluster env)"
exec go test -tags bench -run TestCRRBenchmark -count=1 -timeout "${TIMEOUT:-20m}" -v ./test/bench/crr/ "$@"
