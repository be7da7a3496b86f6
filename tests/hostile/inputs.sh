#!/bin/sh
# inputs.sh MEMPLAN WORKDIR: memplan's input paths that are not regular files
# (issue #32). A FIFO with no writer made compile, show, import-hf and pack
# hang in open(); a directory read as "too short for a safetensors file".
# Each must exit 1 at once, saying what the path is (timeout 10: a hang is a
# failure, exit 124). And a write over the file size limit (ulimit -f) fails
# with EFBIG and leaves no temporary folder (SIGXFSZ used to kill memplan
# before its cleanup). Planted (2026-12-01): fopen instead of mp_open_input in
# planner/load.c made the compile FIFO case print "exit 124, expected 1";
# without signal(SIGXFSZ, SIG_IGN) the ulimit case printed "exit 153, expected
# 1" and "left behind: big.tmp-AngMiF".
set -u
memplan=$1 work=$2
rm -rf "$work"
mkdir -p "$work/dir"
mkfifo "$work/fifo"
failed=0
expect() { # STATUS TEXT COMMAND...: exit STATUS, TEXT on stderr
  want=$1 text=$2
  shift 2
  timeout 10 "$@" > "$work/out" 2> "$work/err"
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qF -- "$text" "$work/err"; then
    echo "ok: exit $rc: $(head -n 1 "$work/err")"
  else
    echo "FAIL: $*: exit $rc, expected $want with '$text'"
    cat "$work/err"
    failed=1
  fi
}
model=$(dirname "$0")/../../models/mlp.yaml
"$memplan" compile "$model" -o "$work/plan" > /dev/null || exit 1
for p in fifo dir; do
  what="it is a FIFO, not a regular file"
  [ "$p" = dir ] && what="it is a directory, not a regular file"
  expect 1 "$work/$p: error: cannot read the model file: $what" "$memplan" compile "$work/$p"
  expect 1 "$work/$p: error: cannot read the model file: $what" "$memplan" sweep "$work/$p"
  expect 1 "cannot open $work/$p: $what" "$memplan" show "$work/$p"
  expect 1 "$work/$p: cannot read: $what" "$memplan" import-hf gpt2 "$work/$p" -o "$work/w.safetensors"
  expect 1 "$work/$p: error: cannot open: $what" "$memplan" pack "$work/$p"
done
# import-hf --plan: the safetensors file must get past its own checks first
/usr/bin/python3 - "$work/in.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"wte.weight": {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0\0\0\0")
PY
expect 1 "$work/fifo: cannot read: it is a FIFO, not a regular file" \
  "$memplan" import-hf gpt2 "$work/in.safetensors" --plan "$work/fifo" -o "$work/w.safetensors"
[ -e "$work/w.safetensors" ] && { echo "FAIL: import-hf wrote its output"; failed=1; }
# the file size limit: 16 blocks, far below the trainer folder's size
expect 1 "File too large" sh -c "ulimit -f 16; exec \"\$0\" compile \"\$1\" -o \"\$2\"" "$memplan" "$model" "$work/big"
left=$(ls -a "$work" | grep -e '\.tmp' -e '^big$')
[ -n "$left" ] && { echo "FAIL: left behind: $left"; failed=1; }
[ "$failed" -eq 0 ] && echo "hostile inputs: ok"
exit "$failed"
