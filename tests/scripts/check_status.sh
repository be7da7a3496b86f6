#!/bin/sh
# check_status.sh STATUS PATTERN COMMAND [ARGS...]: runs COMMAND and checks
# the outcome a user sees: exit status STATUS and PATTERN (grep -E) in what
# it printed on stderr (on stdout when STATUS is 0).
set -u
want=$1 pattern=$2
shift 2
cmd="$*"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$@" >"$out/stdout" 2>"$out/stderr"
rc=$?
stream=stderr
[ "$want" -eq 0 ] && stream=stdout
fail() { echo "FAIL: $cmd: $1"; echo "--- stdout:"; cat "$out/stdout"; echo "--- stderr:"; cat "$out/stderr"; exit 1; }
[ "$rc" -eq "$want" ] || fail "exit status $rc, expected $want"
grep -qE -- "$pattern" "$out/$stream" || fail "no match for /$pattern/ in $stream"
echo "ok: exit $rc: $cmd"
head -n 3 "$out/$stream"
