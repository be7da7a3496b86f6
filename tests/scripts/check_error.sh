#!/bin/sh
# check_error.sh [--status N] [--expect REGEX]... [--reject REGEX] MEMPLAN FILE [ARGS...]:
# runs `memplan compile FILE ARGS` in FILE's folder and checks the user error:
# exit status N (1 unless given: 2 for a usage error), every "# expect:" line
# of FILE and every --expect REGEX (grep -E) present in stderr, --reject's
# REGEX absent, the source line and a caret drawn when the message has a
# line:col, and no output folder written. The outcome is this script's exit
# status: CTest runs it without PASS_REGULAR_EXPRESSION (which would ignore it).
set -u
want=1 reject=
expects=$(mktemp)
while :; do
  case "${1-}" in
  --status) want=$2 shift 2 ;;
  --expect) printf '%s\n' "$2" >>"$expects" && shift 2 ;;
  --reject) reject=$2 shift 2 ;;
  *) break ;;
  esac
done
memplan=$1 file=$2
shift 2
dir=$(dirname "$file") base=$(basename "$file")
out=$(mktemp -d)
trap 'rm -rf "$out" "$expects"' EXIT
cd "$dir" || exit 1
"$memplan" compile "$base" -o "$out/plan" "$@" >"$out/stdout" 2>"$out/stderr"
rc=$?
fail() { echo "FAIL: $base: $1"; echo "--- stderr:"; cat "$out/stderr"; exit 1; }
[ "$rc" -eq "$want" ] || fail "exit status $rc, expected $want"
[ -e "$out/plan" ] && fail "wrote $out/plan despite the error"
[ -z "$(ls -A "$out" | grep -v '^std')" ] || fail "left $(ls -A "$out" | grep -v '^std') beside the output"
if [ -f "$base" ]; then
  grep '^# expect: ' "$base" | sed 's/^# expect: //' | while IFS= read -r want_text; do
    grep -qF -- "$want_text" "$out/stderr" || { echo "missing: $want_text"; exit 1; }
  done || fail "expected text not found"
fi
while IFS= read -r re; do
  grep -qE -- "$re" "$out/stderr" || fail "no match for /$re/ in stderr"
done <"$expects"
if [ -n "$reject" ] && grep -qE -- "$reject" "$out/stderr"; then fail "stderr matches /$reject/, which it must not"; fi
if head -n 1 "$out/stderr" | grep -qE ':[0-9]+:[0-9]+: error:'; then
  grep -qE '^ *\^$' "$out/stderr" || fail "no caret under the source line"
fi
echo "ok: exit $rc: $base"
cat "$out/stderr"
