#!/bin/sh
# llama3_vocab.sh MEMPLAN VOCAB_DIR SRC_DIR WORKDIR: a vocabulary shaped as Llama 3's (128,256 ids, a
# tokenizer.json with Llama 3's Split regex + ByteLevel; make_tokenizer_json.py llama3-big builds it from GPT-2's
# npm vocabulary, its ids shifted by 77,743 above 65535 and the ids below them reserved) end to end:
# - memplan tokenize writes 32-bit token files for it (llm.c's Llama 3 header: magic 20240801, version 7): each
#   id is the same vocabulary's unshifted one (llama3-gpt2, 16-bit file) + 77,743; --decode gives the text
#   back; --token-bits 32 writes the small vocabulary's ids 32-bit, --token-bits 16 is refused for the large
#   one; a 32-bit file with an id outside the vocabulary is refused with its text.
# - a tiny llama with V = 128,256 naming it in its YAML (tokenizer:) trains 3 steps on --text and on the
#   32-bit file of the same text: the same losses, bit for bit (the ids are the same), its --text line naming the
#   tokenizer's kind (Llama 3 BPE, 128256 ids); it generates text
#   that is the tokenizer's decoding of the ids it prints, from --prompt and from a 32-bit --prompt-tokens
#   (the same greedy tokens).
set -u
memplan=$1 vocab=$2 src=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $1"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
python3 "$here/make_tokenizer_json.py" llama3-big big.json "$vocab" || fail "make_tokenizer_json.py llama3-big"
python3 "$here/make_tokenizer_json.py" llama3-gpt2 small.json "$vocab" || fail "make_tokenizer_json.py llama3-gpt2"
cat "$src/README.md" "$src"/docs/*.md | head -c 20000 >text.txt

# ids: header, width, big == small + shift (some ids are above 65535: all of them here)
"$memplan" tokenize --vocab big.json text.txt -o big.bin >log || fail "tokenize --vocab big.json: exit $?"
grep -F "(32-bit ids)" log || fail "big.json: not 32-bit ids"
"$memplan" tokenize --vocab small.json text.txt -o small.bin >log || fail "tokenize --vocab small.json: exit $?"
grep -F "(16-bit ids)" log || fail "small.json: not 16-bit ids"
"$memplan" tokenize --vocab small.json --token-bits 32 text.txt -o small32.bin >/dev/null || fail "--token-bits 32"
python3 - <<'PY' || fail "token files"
import struct
def read(path):
    b = open(path, "rb").read()
    magic, version, n = struct.unpack("<3i", b[:12])
    width = {20240520: 2, 20240801: 4}[magic]
    assert (magic, version) in ((20240520, 1), (20240801, 7)) and len(b) == 1024 + width * n, (path, magic, version)
    return magic, list(struct.unpack("<%d%s" % (n, "H" if width == 2 else "I"), b[1024:]))
(mb, big), (ms, small), (m32, small32) = read("big.bin"), read("small.bin"), read("small32.bin")
assert (mb, ms, m32) == (20240801, 20240520, 20240801), (mb, ms, m32)
assert small32 == small, "--token-bits 32: other ids"
bad = [k for k, (a, b) in enumerate(zip(big, small)) if a != b + 77743]
assert len(big) == len(small) and not bad, "big.bin is not small.bin + 77743: first at token %s" % bad[:1]
print("ok: %d tokens, 32-bit ids %d..%d = the 16-bit ids + 77743" % (len(big), min(big), max(big)))
PY
"$memplan" tokenize --vocab big.json --decode big.bin -o back.txt >/dev/null || fail "--decode big.bin: exit $?"
cmp text.txt back.txt || fail "decode(encode(x)) != x for big.json"
"$memplan" tokenize --vocab big.json --token-bits 16 text.txt -o no.bin >/dev/null 2>err
rc=$?
[ $rc -eq 1 ] && [ ! -e no.bin ] || fail "--token-bits 16 with big.json: exit $rc, expected 1 and no file"
grep -qxF "memplan tokenize: error: --token-bits 16: big.json has ids up to 128255, above 65535, which 16-bit \
token files cannot hold: give --token-bits 32 or leave it out" err || { cat err; fail "--token-bits 16: message"; }
python3 -c "import struct; open('badid.bin', 'wb').write(struct.pack('<256i', 20240801, 7, 2, *[0] * 253) + \
struct.pack('<2I', 80000, 128256))"
"$memplan" tokenize --vocab big.json --decode badid.bin -o no.txt >/dev/null 2>err
rc=$?
[ $rc -eq 1 ] && [ ! -e no.txt ] || fail "--decode badid.bin: exit $rc, expected 1 and no file"
grep -qxF "memplan tokenize: error: badid.bin: token 1: id 128256 is not in the vocabulary (128256 ids)" err ||
  { cat err; fail "--decode badid.bin: message"; }
echo "ok: --decode gives the text back; --token-bits 16 and an id >= V refused"

# a tiny llama with V = 128,256 and the tokenizer; B x T = 32 tokens a step
sed -e 's/^dims: .*/dims: {B: 2, T: 16, C: 32, NH: 2, KVH: 1, L: 1, F: 64, V: 128256}/' \
  -e "s|^init: gpt2|init: gpt2\ntokenizer: big.json|" "$src/models/llama-mini.yaml" >model.yaml
"$memplan" compile model.yaml -o t >/dev/null || fail "compile: exit $?"
cmake -S t -B t/build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build t/build --target trainer >/dev/null ||
  fail "trainer build"
n=$(( ($(wc -c <big.bin) - 1024) / 4 ))
tr="t/build/trainer --threads 1 --steps 3 --eval-batches 0"
$tr --text text.txt --log text.csv --save m.safetensors --generate 12 --prompt "The quick brown fox" \
  --temperature 0 >text.log 2>&1 || { cat text.log; fail "--text: exit $?"; }
grep -xF "text text.txt: 20000 bytes -> $n tokens (Llama 3 BPE, 128256 ids, $(pwd -P)/big.json)" text.log ||
  { cat text.log; fail "--text: not $n tokens of Llama 3 BPE's 128256 ids"; }
$tr --data big.bin --log data.csv >data.log 2>&1 || { cat data.log; fail "--data big.bin: exit $?"; }
cut -d, -f1,2 text.csv >text.loss && cut -d, -f1,2 data.csv >data.loss
[ "$(wc -l <text.loss)" -eq 4 ] && cmp text.loss data.loss || { paste text.loss data.loss; fail "losses differ"; }
echo "ok: --text and the 32-bit --data train alike: $(tail -n 3 text.loss | tr '\n' ' ')"
printf 'The quick brown fox' >prompt.txt
"$memplan" tokenize --vocab big.json prompt.txt -o prompt.bin >/dev/null || fail "tokenize the prompt"
t/build/trainer --threads 1 --load m.safetensors --generate 12 --prompt-tokens prompt.bin --temperature 0 \
  >gen.log 2>&1 || { cat gen.log; fail "--prompt-tokens: exit $?"; }
python3 - "$memplan" <<'PY' || fail "generation"
import re, struct, subprocess, sys
def generated(path):
    out = open(path, "rb").read()
    m = re.search(rb"generate: 12 tokens, greedy\n(.*)\ngenerated ids:((?: \d+)+)\n", out, re.S)
    assert m, "%s: no generated text and ids" % path
    return m.group(1), [int(x) for x in m.group(2).split()]
text, ids = generated("text.log")
text2, ids2 = generated("gen.log")
assert ids == ids2 and text == text2, "--prompt and --prompt-tokens: other tokens %s %s" % (ids, ids2)
b = open("prompt.bin", "rb").read()
prompt = list(struct.unpack("<%dI" % ((len(b) - 1024) // 4), b[1024:]))
with open("gen.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240801, 7, len(prompt) + len(ids), *[0] * 253))
    f.write(struct.pack("<%dI" % (len(prompt) + len(ids)), *(prompt + ids)))
subprocess.run([sys.argv[1], "tokenize", "--vocab", "big.json", "--decode",
                "gen.bin", "-o", "gen.txt"], check=True, capture_output=True)
want = open("gen.txt", "rb").read()
assert text == want and text.startswith(b"The quick brown fox"), "printed %r, decoded %r" % (text, want)
print("ok: generated %r (ids %s), the tokenizer's decoding of its ids" % (text, ids))
PY
