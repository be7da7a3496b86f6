#!/bin/sh
# tokenizer_json.sh MEMPLAN TEST_BPE VOCAB_DIR SRC_DIR WORKDIR FILE...: Hugging Face tokenizer.json files
# (made by make_tokenizer_json.py) in memplan tokenize and a model's tokenizer: entry.
# - GPT-2's encoder.json + vocab.bpe converted to tokenizer.json, merges as "a b" strings with pre_tokenizer
#   ByteLevel, and as [a, b] pairs with a Split by GPT-2's regex: the FILEs' tokens are byte-identical to the
#   encoder.json path's (itself checked against the npm package's encoder by bpe_vs_js), decode(encode(x)) == x;
#   --vocab names the file or a folder holding it.
# - Llama 3's pre-tokenizer, and SmolLM2's (Digits, then GPT-2's regex): test_bpe --split's pieces (fed in blocks
#   of 1..7 bytes) equal node's regex engine's (split_ref.js) on hand-written cases (contractions in any case, digits in threes, newlines, non-ASCII
#   letters) and the FILEs; decode(encode(x)) == x, bytes that are not UTF-8 included.
# - Broken and unsupported files: exit status 1, the message naming the file (line:col) and the fault, no
#   output file left.
# - A model's tokenizer: naming a tokenizer.json compiles, plan.json names it; an unsupported one is a compile
#   error at the YAML's line:col, exit 1.
set -u
memplan=$1 test_bpe=$2 vocab=$3 src=$4 work=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $1"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
cat "$@" >"$work/corpus.txt"
cd "$work" || exit 1
mk() { python3 "$here/make_tokenizer_json.py" "$@" || fail "make_tokenizer_json.py $1"; }
mk gpt2-strings strings.json "$vocab"
mk gpt2-pairs pairs.json "$vocab"
mk llama3-bytes llama3.json
mk digits-bytes digits.json
mkdir -p folder && cp strings.json folder/tokenizer.json

"$memplan" tokenize --vocab "$vocab" corpus.txt -o want.bin >/dev/null || fail "tokenize with encoder.json: exit $?"
for v in strings.json pairs.json folder; do
  "$memplan" tokenize --vocab "$v" corpus.txt -o "got.bin" >/dev/null || fail "tokenize --vocab $v: exit $?"
  cmp want.bin got.bin || fail "--vocab $v: tokens differ from encoder.json's"
  "$memplan" tokenize --vocab "$v" --decode got.bin -o back.txt >/dev/null || fail "--decode with $v: exit $?"
  cmp corpus.txt back.txt || fail "--vocab $v: decode(encode(x)) != x"
done
echo "ok: GPT-2 as tokenizer.json (strings, pairs + Split, a folder): $(( ($(wc -c <want.bin) - 1024) / 2 )) tokens \
equal to encoder.json's, decoded back"

# Llama 3's and SmolLM2's splits against node's regex engine
printf "He'S 'll 'LL 're 'Ve I'M don't x'd 'ſ 'ſtop '\n1234567 ١٢٣٤٥ 12 3 a1b22c333d4444 x 1 \r\n\r\n  \n  x\t\ty \
!!!\n\n(hello ((hi \"quoted\" --flag naïve café Ωmega 東京タワー Привет мир   \n\n end   " >cases.txt
cat cases.txt corpus.txt >split.txt
for kind in llama3 digits; do
  node "$here/split_ref.js" $kind split.txt >want.txt || fail "split_ref.js $kind: exit $?"
  "$test_bpe" --split $kind.json split.txt >got.txt || fail "test_bpe --split $kind.json: exit $?"
  if ! cmp -s want.txt got.txt; then
    python3 - split.txt want.txt got.txt <<'PY'
import sys
s = open(sys.argv[1], "rb").read()
a, b = ([int(x) for x in open(p).read().split()] for p in sys.argv[2:4])
at = k = 0
while k < min(len(a), len(b)) and a[k] == b[k]:
    at, k = at + a[k], k + 1
print("first difference at piece %d (byte %d): node %r, memplan %r" % (k, at, s[at:at + (a[k] if k < len(a) else 0)],
      s[at:at + (b[k] if k < len(b) else 0)]))
PY
    fail "$kind pieces differ from node's regex"
  fi
  echo "ok: $kind's split: $(wc -l <want.txt) pieces equal to node's"
done
head -c 4000 /dev/urandom >rnd.bin && cat cases.txt rnd.bin >mixed.txt
for kind in llama3 digits; do
  "$memplan" tokenize --vocab $kind.json mixed.txt -o mixed.bin >/dev/null || fail "tokenize ($kind): exit $?"
  "$memplan" tokenize --vocab $kind.json --decode mixed.bin -o mixed.back >/dev/null || fail "--decode ($kind)"
  cmp mixed.txt mixed.back || fail "$kind: decode(encode(x)) != x (random bytes included)"
done
echo "ok: Llama 3's and SmolLM2's: decode(encode(x)) == x, random bytes included"

# broken and unsupported files
printf 'Hello, world.\n' >in.txt
bad=0
expect() { # NAME FILE TEXT: memplan tokenize --vocab FILE fails with TEXT, exit 1, nothing written
  "$memplan" tokenize --vocab "$2" in.txt -o out.bin >stdout 2>stderr
  rc=$?
  if [ "$rc" -ne 1 ]; then echo "FAIL $1: exit $rc, expected 1"; bad=1
  elif ! grep -qF -- "$3" stderr; then echo "FAIL $1: stderr lacks: $3"; cat stderr; bad=1
  elif ls | grep -q '^out\.bin'; then echo "FAIL $1: wrote $(ls | grep '^out\.bin')"; bad=1
  else echo "ok $1: $(cat stderr)"; fi
  rm -f out.bin*
}
edit() { # OUT PYTHON: strings.json changed by PYTHON (on t, the parsed file)
  python3 -c "import json, sys; t = json.load(open('strings.json', encoding='utf-8')); $2
json.dump(t, open('$1', 'w', encoding='utf-8'), ensure_ascii=False, indent=1)" || fail "edit $1"
}
echo 'not json' >notjson.json
expect not_json notjson.json "notjson.json:1:1: "
head -c 1000000 strings.json >trunc.json
expect truncated trunc.json "trunc.json:"
edit unknown.json 't["model"]["merges"][3] = "qqqzzz Ġt"'
expect unknown_merge unknown.json "model.merges[3] (qqqzzz Ġt): its first token is not in model.vocab"
line=$(sed -n 's/^memplan tokenize: error: unknown.json:\([0-9]*\):.*/\1/p' stderr)
sed -n "${line:-0}p" unknown.json | grep -qF '"qqqzzz Ġt"' || { echo "FAIL unknown_merge: line ${line:-?} is not the merge"; bad=1; }
edit wordpiece.json 't["model"]["type"] = "WordPiece"'
expect wordpiece wordpiece.json "model.type is 'WordPiece'; memplan reads byte-level BPE tokenizers"
edit unigram.json 't["model"] = {"type": "Unigram", "vocab": []}'
expect unigram unigram.json "model.type is 'Unigram'"
edit normalizer.json 't["normalizer"] = {"type": "NFKC"}'
expect normalizer normalizer.json "normalizer 'NFKC' would change the text before tokenizing"
edit metaspace.json 't["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁"}'
expect metaspace metaspace.json "pre_tokenizer 'Metaspace' is not supported"
edit regex.json 't["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated", "invert": False}, {"type": "ByteLevel", "use_regex": False}]}'
expect unknown_regex regex.json "the Split's regex \\w+ is not GPT-2's nor Llama 3's"
edit fallback.json 't["model"]["byte_fallback"] = True'
expect byte_fallback fallback.json "model.byte_fallback is true"
edit sparse.json 't["added_tokens"][0]["id"] = 30000000'
expect sparse_id sparse.json "id 30000000 is above the file's size in bytes + 65535 ("
[ $bad -eq 0 ] || fail "broken tokenizer.json files"

# a model's tokenizer: entry
sed -e 's/V: 256}/V: 50257}/' -e "s|^init: gpt2|init: gpt2\ntokenizer: strings.json|" "$src/models/gpt2-mini.yaml" \
  >model.yaml
"$memplan" compile model.yaml -o plan >/dev/null || fail "compile with tokenizer: strings.json: exit $?"
grep -qF "\"tokenizer\": \"$(pwd -P)/strings.json\"" plan/plan.json || fail "plan.json does not name strings.json"
sed "s|^tokenizer: .*|tokenizer: wordpiece.json|" model.yaml >bad.yaml
"$memplan" compile bad.yaml -o badplan >/dev/null 2>err
rc=$?
[ $rc -eq 1 ] || fail "tokenizer: wordpiece.json: exit $rc, expected 1"
grep -F "bad.yaml:9:12: error: tokenizer 'wordpiece.json': $(pwd -P)/wordpiece.json:" err | grep -qF "model.type is \
'WordPiece'" || { cat err; fail "tokenizer: wordpiece.json: message"; }
[ ! -e badplan ] || fail "wrote badplan despite the error"
echo "ok: a model's tokenizer: names a tokenizer.json"
