#!/usr/bin/env bash
# `make bench-rollout`: an image rollout of 30 pods on the local cluster
# three ways (test/bench/rollout): a Deployment, a CloneSet ReCreate and a
# CloneSet InPlaceIfPossible with image pre-download, each to a new image no
# node has. Prints total time, per-pod unready p50/p99 and the
# coordinator's API writes per pod, with one "RESULT bench=rollout ..." line
# per scenario. Needs the cluster running Shoal (make up);
# SHOAL_BENCH_ROLLOUT_PODS and SHOAL_BENCH_LAYER_MIB change the size.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
eval "$(.cache/bin/shoal-cluster env)"
exec go test -tags bench -run TestRolloutBenchmark -count=1 -timeout "${TIMEOUT:-60m}" -v ./test/bench/rollout/ "$@"
