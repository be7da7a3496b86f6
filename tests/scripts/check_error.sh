#!/bin/sh
# check_error.sh MEMPLAN FILE [ARGS...]: runs `memplan compile FILE ARGS` in
# FILE's folder and checks the user error: exit status 1, every "# expect:"
# line of FILE present in stderr, the source line and a caret drawn when the
# message has a line:col, and no output folder written.
set -u
memplan=$1 file=$2
shift 2
dir=$(dirname "$file") base=$(basename "$file")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$dir" || exit 1
"$memplan" compile "$base" -o "$out/plan" "$@" >"$out/stdout" 2>"$out/stderr"
rc=$?
fail() { echo "FAIL: $base: $1"; echo "--- stderr:"; cat "$out/stderr"; exit 1; }
[ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
[ -e "$out/plan" ] && fail "wrote $out/plan despite the error"
grep '^# expect: ' "$base" | sed 's/^# expect: //' | while IFS= read -r want; do
  grep -qF -- "$want" "$out/stderr" || { echo "missing: $want"; exit 1; }
done || fail "expected text not found"
if head -n 1 "$out/stderr" | grep -qE ':[0-9]+:[0-9]+: error:'; then
  grep -qE '^ *\^$' "$out/stderr" || fail "no caret under the source line"
fi
echo "ok: $base"
cat "$out/stderr"
