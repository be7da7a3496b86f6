#!/bin/sh
# check_remat.sh MEMPLAN MODEL LEAST_PCT AT_PCT EXTRA_PCT [--set DIM=V ...]:
# recomputation on a graph the chain DP cannot cut (planner/remat.c).
# `memplan sweep`: its least arena is at most LEAST_PCT% of its keep-all
# arena; `memplan compile --no-micro-batch` at AT_PCT% of keep-all pays at
# most EXTRA_PCT% extra FLOPs; and the least row is what a plan costs:
# compiled at that budget it fits, with the extra FLOPs the row printed.
set -eu
memplan=$1 model=$2 least_pct=$3 at_pct=$4 extra_pct=$5
shift 5
out=$("$memplan" sweep "$model" "$@")
echo "$out"
keep=$(echo "$out" | awk 'NR == 3 { print $1 }')
least=$(echo "$out" | awk 'END { print $1 }')
least_extra=$(echo "$out" | awk 'END { sub("%", "", $4); print $4 }')
awk -v l="$least" -v k="$keep" -v p="$least_pct" 'BEGIN {
  printf "least arena %d = %.2f%% of keep-all %d (at most %s%%)\n", l, 100 * l / k, k, p
  exit !(100 * l <= p * k) }' || { echo "FAIL: least arena above ${least_pct}% of keep-all"; exit 1; }
extra() { # BUDGET [--set ...]: the plan's extra FLOPs in %, 0 when it keeps everything
  b=$1
  shift
  r=$("$memplan" compile "$model" "$@" --no-micro-batch --budget "$b" 2>&1) || {
    echo "$r" >&2
    echo "FAIL: --budget $b does not fit" >&2
    exit 1
  }
  echo "$r" | awk '/^checkpointing:/ { sub("%", "", $2); x = $2 } END { print x ? x : 0 }'
}
at=$(awk -v k="$keep" -v p="$at_pct" 'BEGIN { printf "%d", k * p / 100 }')
x=$(extra "$at" "$@")
awk -v x="$x" -v m="$extra_pct" -v a="$at" -v p="$at_pct" 'BEGIN {
  printf "at %s%% of keep-all (%d bytes): %s%% extra FLOPs (at most %s%%)\n", p, a, x, m; exit !(x <= m) }' ||
  { echo "FAIL: too many extra FLOPs"; exit 1; }
x=$(extra "$least" "$@")
[ "$x" = "$least_extra" ] || { echo "FAIL: compiled at the least arena $least: $x% extra FLOPs, sweep printed $least_extra%"; exit 1; }
echo "ok"
