#!/bin/sh
# cli_help.sh MEMPLAN: `memplan --help` names every option of every command
# (each taken from `memplan CMD --help`) and the exit statuses; each command's
# help exits 0 and says what its exit statuses mean.
set -u
memplan=$1
fail() { echo "FAIL: $1"; exit 1; }
top=$("$memplan" --help) || fail "memplan --help: exit status $?"
for cmd in compile sweep show pack import-hf tokenize import-torch; do
  help=$("$memplan" "$cmd" --help) || fail "memplan $cmd --help: exit status $?"
  echo "$top" | grep -qF "memplan $cmd " || fail "memplan --help does not mention memplan $cmd"
  echo "$help" | grep -qF "exit status: 0 success; 1 user error" || fail "memplan $cmd --help: no exit statuses"
  opts=$(echo "$help" | grep -oE -- '--[a-z][a-z-]+' | sort -u)
  [ -n "$opts" ] || fail "memplan $cmd --help lists no options"
  for o in $opts; do
    echo "$top" | grep -qF -- "$o" || fail "memplan --help leaves out $o of memplan $cmd"
  done
  echo "ok: memplan $cmd:" $opts
done
echo "$top" | grep -qF "exit status: 0 success" || fail "memplan --help: no exit statuses"
echo "cli help: ok"
