#!/bin/sh
# heldout_text.sh DIR: training text and held-out text that no commit changes,
# for the tests that judge a training run by its held-out loss
# (tests/optstate/run.sh, tests/precision/run.sh). Writes DIR/train.txt, every
# license of base-files' /usr/share/common-licenses but GPL-2 (219 KB on
# Debian 12), and prints the held-out file's path, GPL-2 (18 KB). Without
# those licenses (not Debian): this tree's README.md and memplan_trainer.c.
set -eu
dir=$1
lic=/usr/share/common-licenses
if [ -r "$lic/GPL-2" ]; then
  for f in Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0; do
    if [ -r "$lic/$f" ]; then cat "$lic/$f"; fi
  done >"$dir/train.txt"
  echo "$lic/GPL-2"
else
  root=$(dirname "$0")/../..
  cp "$root/README.md" "$dir/train.txt"
  echo "$root/runtime/memplan_trainer.c"
fi
