#!/usr/bin/env bash
# Times the stages of a CI run, so every run shows where its time goes.
#
#   hack/stage.sh NAME CMD [ARG...]   run CMD as the stage NAME
#   hack/stage.sh --report            print the stages run so far and a total
#
# A stage prints its name when it starts and its seconds when it ends, and
# appends "NAME<TAB>SECONDS<TAB>ok|FAIL" to the file $SHOAL_STAGES when that
# is set (.ci/run sets it and prints the report on exit, pass or fail).
# CMD's exit status is the stage's.
set -uo pipefail

if [ "${1:-}" = --report ]; then
  [ -s "${SHOAL_STAGES:-}" ] || exit 0
  echo
  echo "stage timings (seconds)"
  awk -F'\t' '
    { printf "  %-28s %6d  %s\n", $1, $2, $3; total += $2 }
    END { printf "  %-28s %6d\n", "total", total }' "$SHOAL_STAGES"
  exit 0
fi

[ $# -ge 2 ] || { echo "usage: hack/stage.sh NAME CMD [ARG...] | --report" >&2; exit 2; }
name=$1
shift
start=$(date +%s)
echo "=== stage $name"
"$@"
rc=$?
secs=$(($(date +%s) - start))
status=ok
[ $rc = 0 ] || status=FAIL
if [ -n "${SHOAL_STAGES:-}" ]; then
  printf '%s\t%d\t%s\n' "$name" "$secs" "$status" >>"$SHOAL_STAGES"
fi
echo "=== stage $name: ${secs}s, $status"
exit $rc
