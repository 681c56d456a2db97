#!/usr/bin/env bash
# Idle footprint of the shoal-agent processes on the local cluster: resident
# memory and CPU over a window (default 60 s), read from /proc on the host
# (the local cluster's nodes share the host's PID namespace).
#   hack/agent-footprint.sh [seconds]
# Goals (issue 4): <= 40 MiB RSS and <= 5 millicores per idle agent.
set -euo pipefail
window=${1:-60}
pids=$(pgrep -x shoal-agent || true)
[ -n "$pids" ] || { echo "no shoal-agent process: run make up (or make deploy) first" >&2; exit 1; }
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A start
for p in $pids; do start[$p]=$(ticks "$p"); done
sleep "$window"
max_rss=0 max_mc=0
printf '%-8s %-10s %-10s\n' pid rss_mib millicores
for p in $pids; do
  [ -r "/proc/$p/stat" ] || continue
  rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")
  used=$(( $(ticks "$p") - ${start[$p]} ))
  mc=$(awk -v t="$used" -v hz="$hz" -v w="$window" 'BEGIN {printf "%.2f", t / hz / w * 1000}')
  rss=$(awk -v k="$rss_kib" 'BEGIN {printf "%.1f", k / 1024}')
  printf '%-8s %-10s %-10s\n' "$p" "$rss" "$mc"
  max_rss=$(awk -v a="$max_rss" -v b="$rss" 'BEGIN {print (b > a) ? b : a}')
  max_mc=$(awk -v a="$max_mc" -v b="$mc" 'BEGIN {print (b > a) ? b : a}')
done
echo "RESULT bench=agent-idle agents=$(echo "$pids" | wc -w) window_s=$window max_rss_mib=$max_rss max_millicores=$max_mc goal_rss_mib=40 goal_millicores=5"
