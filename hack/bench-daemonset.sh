#!/usr/bin/env bash
# `make bench-daemonset`: an Advanced DaemonSet update on every node of the
# local cluster to a new image no node has (test/bench/rollout), two ways
# in one run: rollingUpdateType Standard without pre-download, and
# InPlaceIfPossible with pre-download through the agents' swarm. Prints
# the total time, each node's unready time and the bytes fetched from the
# registry, with one "RESULT bench=daemonset ..." line per scenario, and
# for each in-place pod when each step of its update showed (new spec,
# new container running and ready, InPlaceUpdateReady True, Ready). Needs
# the cluster running Shoal (make up); SHOAL_BENCH_LAYER_MIB changes the
# size of the new layer.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
eval "$(.cache/bin/shoal-cluster env)"
exec go test -tags bench -run TestDaemonSetRolloutBenchmark -count=1 -timeout "${TIMEOUT:-30m}" -v ./test/bench/rollout/ "$@"
