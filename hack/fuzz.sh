#!/usr/bin/env bash
# Runs every Go native fuzz target of the module for a bounded time each:
#
#   hack/fuzz.sh            FUZZTIME per target (default 5s; make test runs it so)
#   FUZZTIME=2m hack/fuzz.sh
#
# `go test` alone only replays each target's seeds and committed corpus
# (testdata/fuzz/<target>/); this step mutates inputs too. Go fuzzes one
# target per run, so each target is its own `go test -fuzz` run. A failing
# input is written to the package's testdata/fuzz/<target>/ by go test:
# commit it with the fix, and it stays a regression case.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}

targets=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for target in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(f \*testing\.F\).*/\1/p' "$file"); do
    targets=$((targets + 1))
    if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "./$dir" 2>&1); then
      echo "$out"
      echo "FAIL $dir $target: the failing input is under $dir/testdata/fuzz/$target/" >&2
      exit 1
    fi
    # The fuzzer's last progress line: elapsed, execs, new interesting inputs.
    echo "ok   $dir $target: $(grep -E '^fuzz: elapsed' <<<"$out" | tail -1 | sed 's/^fuzz: //')"
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | grep -v '^\./\.cache/' | sed 's|^\./||' | sort)
echo "fuzzed $targets targets for $fuzztime each"
