#!/usr/bin/env bash
# `make bench-distribution`: a ResourceDistribution of one Secret to
# SHOAL_BENCH_NAMESPACES (default 500) namespaces of the local cluster,
# then one change of the Secret (test/bench/distribution). Prints, for
# each step, the time until every copy is right against a baseline of
# concurrent client writers in the same run, and the coordinator's API
# writes per namespace, with one "RESULT bench=distribution ..." line per
# step. Needs the cluster running Shoal (make up).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
eval "$(.cache/bin/shoal-cluster env)"
exec go test -tags bench -run TestResourceDistributionBenchmark -count=1 -timeout "${TIMEOUT:-30m}" -v ./test/bench/distribution/ "$@"
