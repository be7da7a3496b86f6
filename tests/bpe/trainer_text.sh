#!/bin/sh
# trainer_text.sh MEMPLAN VOCAB_DIR SRC_DIR WORKDIR: a model whose YAML names
# a tokenizer (gpt2-mini with V = 50257 and `tokenizer:`) trains on --text
# with GPT-2's BPE: the trainer's token count equals memplan tokenize's, and
# its first loss is about ln(50257) = 10.8 (bytes as ids would give ~ln V too,
# so the count is the check); a bad tokenizer: is a compile error at its
# line:col with exit 1.
set -u
memplan=$1 vocab=$2 src=$3 work=$4
fail() { echo "FAIL: $1"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
sed -e 's/V: 256}/V: 50257}/' -e "s|^init: gpt2|init: gpt2\ntokenizer: $vocab|" -e 's/T: 64,/T: 32,/' \
  -e 's/L: 2,/L: 1,/' "$src/models/gpt2-mini.yaml" >"$work/model.yaml"
grep -q "^tokenizer: " "$work/model.yaml" || fail "no tokenizer line in the test model"
"$memplan" compile "$work/model.yaml" -o "$work/t" >/dev/null || fail "compile: exit $?"
grep -qF "\"tokenizer\": \"$(cd "$vocab" && pwd -P)\"" "$work/t/plan.json" || fail "plan.json does not name the tokenizer"
cmake -S "$work/t" -B "$work/t/build" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$work/t/build" \
  --target trainer >/dev/null || fail "trainer build"
cat "$src/README.md" "$src"/docs/*.md | head -c 20000 >"$work/text.txt"  # the README alone is under 20000 bytes
"$memplan" tokenize --vocab "$vocab" "$work/text.txt" -o "$work/text.bin" >/dev/null || fail "tokenize"
want=$(( ($(wc -c <"$work/text.bin") - 1024) / 2 ))
"$work/t/build/trainer" --text "$work/text.txt" --steps 1 --threads 1 >"$work/log" 2>&1 || { cat "$work/log"; fail "trainer: exit $?"; }
grep -xF "text $work/text.txt: 20000 bytes -> $want tokens (GPT-2 BPE, 50257 ids, $(cd "$vocab" && pwd -P))" \
  "$work/log" || { cat "$work/log"; fail "not $want tokens of GPT-2 BPE's 50257 ids"; }
# a tokenizer folder that is not one: the compile error names the YAML line
mkdir -p "$work/empty"
sed "s|^tokenizer: .*|tokenizer: empty|" "$work/model.yaml" >"$work/bad.yaml"
"$memplan" compile "$work/bad.yaml" >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 1 ] || fail "bad tokenizer: exit $rc, expected 1"
grep -F "bad.yaml:9:12: error: tokenizer 'empty': $work/empty/encoder.json: cannot open: No such file" "$work/err" ||
  { cat "$work/err"; fail "bad tokenizer: message"; }
echo "ok: the trainer's --text made memplan tokenize's $want tokens"
