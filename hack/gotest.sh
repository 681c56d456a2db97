#!/usr/bin/env bash
# Runs `go test -json ARGS...` through gotestsum (pinned in hack/tools):
#
#   hack/gotest.sh NAME [GO TEST ARGS...]
#
# One line per finished test on the console, the failures' output again at
# the end, and a summary counted from the JSON events ("DONE n tests").
# Keeps, under .cache/test-results/: NAME.json (every event, for counting
# and timing tests), NAME.log (the same as `go test -v` would print) and
# prints the tests slower than $SLOWEST (default 20s), slowest first.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: hack/gotest.sh NAME [GO TEST ARGS...]" >&2; exit 2; }
name=$1
shift
out=.cache/test-results
mkdir -p "$out"
gotestsum() { go tool -modfile=hack/tools/go.mod gotestsum "$@"; }

gotestsum --format testname --jsonfile "$out/$name.json" -- "$@"
rc=$?
gotestsum --raw-command --format standard-verbose -- cat "$out/$name.json" >"$out/$name.log" 2>&1
echo "--- $name: tests slower than ${SLOWEST:-20s} (full log: $out/$name.log)"
gotestsum tool slowest --jsonfile "$out/$name.json" --threshold "${SLOWEST:-20s}" | head -25
exit $rc
