#!/usr/bin/env bash
# `make bench-pub`: pod DELETE admission latency through the
# PodUnavailableBudget webhook at 50 requests per second, against the same
# deletes with the webhook taken out of the configuration, in one run
# (test/bench/pub). Prints p50 and p99 of both and what the webhook adds,
# with one "RESULT bench=pub ..." line. Needs the cluster running Shoal
# (make up).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
eval "$(.cache/bin/shoal-cluster env)"
exec go test -tags bench -run TestPUBWebhookLatencyBenchmark -count=1 -timeout "${TIMEOUT:-10m}" -v ./test/bench/pub/ "$@"
