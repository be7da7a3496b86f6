#!/bin/sh
# atomic_output.sh MEMPLAN MODEL WORKDIR: `compile -o DIR` writes all of DIR
# or nothing. A full disk is simulated without root: bash with SIGXFSZ
# ignored (which survives exec) and `ulimit -f` makes writes past 16 KiB fail
# with EFBIG. The command must exit 1 naming the file and the problem, and
# leave no DIR, no temp folder, and an existing DIR exactly as it was (its own
# files kept); a compile that succeeds into an existing DIR keeps the files
# memplan does not write there.
set -u
memplan=$1 model=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $1"; [ -f "$work/stderr" ] && { echo "--- stderr:"; cat "$work/stderr"; }; exit 1; }
full_disk() { # DIR: compile into DIR with writes limited to 16 KiB per file
  bash -c 'trap "" XFSZ; ulimit -f 16; exec "$@"' full_disk "$memplan" compile "$model" -o "$1" \
    >/dev/null 2>"$work/stderr"
}
# files larger than the limit are written (else the limit tests nothing)
"$memplan" compile "$model" -o "$work/probe" >/dev/null 2>"$work/stderr" || fail "compile without a limit failed"
[ -n "$(find "$work/probe" -size +16k)" ] || fail "no output file is larger than 16 KiB"

# 1. a new folder: nothing appears
full_disk "$work/new"
rc=$?
[ "$rc" -eq 1 ] || fail "new folder: exit status $rc, expected 1"
[ -e "$work/new" ] && fail "new folder: $work/new exists after the failure: $(ls "$work/new" | wc -l) files"
ls -a "$work" | grep -qE 'tmp-' && fail "new folder: a temporary folder was left: $(ls -a "$work")"
grep -q "File too large" "$work/stderr" || fail "new folder: the problem (File too large) is not named"
grep -F "could not write $work/new/" "$work/stderr" | grep -qF "; $work/new was left as it was" ||
  fail "new folder: the file is not named"

# 2. an existing folder with the user's file and an older plan: both intact
mkdir -p "$work/old"
echo "the user's notes" >"$work/old/notes.txt"
echo "an older plan" >"$work/old/plan.json"
listing() { (cd "$work/old" && ls -la --time-style=+%s | grep -Ev ' \.\.?$' && cat notes.txt plan.json); }
before=$(listing)
full_disk "$work/old"
rc=$?
[ "$rc" -eq 1 ] || fail "existing folder: exit status $rc, expected 1"
grep -q "File too large" "$work/stderr" || fail "existing folder: the problem (File too large) is not named"
after=$(listing)
[ "$before" = "$after" ] || fail "existing folder changed:
--- before:
$before
--- after:
$after"
ls -a "$work" | grep -qE 'tmp-' && fail "existing folder: a temporary folder was left beside it"

# 3. success into the existing folder: memplan's files replaced, the user's kept
"$memplan" compile "$model" -o "$work/old" >/dev/null 2>"$work/stderr" || fail "compile into $work/old failed"
grep -q '"memplan_plan"' "$work/old/plan.json" || fail "plan.json was not replaced"
[ "$(cat "$work/old/notes.txt")" = "the user's notes" ] || fail "the user's notes.txt was not kept"
[ "$(ls "$work/old" | wc -l)" -eq "$(($(ls "$work/probe" | wc -l) + 1))" ] ||
  fail "unexpected files: $(ls -a "$work/old")"
{ ls -a "$work/old"; ls -a "$work"; } | grep -qE 'tmp-' && fail "a temporary folder was left after success"
echo "atomic output: ok"
