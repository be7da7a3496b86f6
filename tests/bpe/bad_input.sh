#!/bin/sh
# bad_input.sh MEMPLAN VOCAB_DIR WORKDIR: memplan tokenize on broken
# vocabularies and token files: exit status 1 (2 for usage), the message
# naming the file (line:col where there is one) and the fault, and no output
# file nor temp file left behind.
set -u
memplan=$1 vocab=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
printf 'Hello, world.\n' >in.txt
bad=0
# expect NAME STATUS TEXT -- ARGS...: runs memplan tokenize ARGS -o out.bin
expect() {
  name=$1 want=$2 text=$3
  shift 4
  "$memplan" tokenize "$@" -o out.bin >stdout 2>stderr
  rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, expected $want"; bad=1
  elif ! grep -qF -- "$text" stderr; then echo "FAIL $name: stderr lacks: $text"; bad=1
  elif ls | grep -q '^out\.bin'; then echo "FAIL $name: wrote $(ls | grep '^out\.bin')"; bad=1
  else echo "ok $name: $(cat stderr)"; fi
  rm -f out.bin*
}
vocab_with() { # DIR: a copy of the good vocabulary to break
  rm -rf "$1" && mkdir "$1" && cp "$vocab/encoder.json" "$vocab/vocab.bpe" "$1/"
}
vocab_with trunc && head -c 500000 "$vocab/encoder.json" >trunc/encoder.json
expect truncated_json 1 "trunc/encoder.json:1:" -- --vocab trunc in.txt
grep -qF "(truncated?)" stderr || { echo "FAIL truncated_json: not called truncated"; bad=1; }
vocab_with notjson && echo '["not", "an object"]' >notjson/encoder.json
expect not_json 1 "notjson/encoder.json:1:1: expected a JSON object" -- --vocab notjson in.txt
vocab_with badid && sed 's/"!": 0,/"!": 0.5,/' "$vocab/encoder.json" >badid/encoder.json
expect fractional_id 1 "badid/encoder.json:1:7: an id that is not an integer" -- --vocab badid in.txt
vocab_with dupid && sed 's/"\\"": 1,/"\\"": 0,/' "$vocab/encoder.json" >dupid/encoder.json
expect duplicate_id 1 "id 0 is given to two tokens" -- --vocab dupid in.txt
vocab_with unknown && { head -n 3 "$vocab/vocab.bpe"; echo "qqqzzz Ġt"; tail -n +4 "$vocab/vocab.bpe"; } >unknown/vocab.bpe
expect unknown_merge 1 "unknown/vocab.bpe:4:1: this merge is inconsistent with unknown/encoder.json: its first token" \
  -- --vocab unknown in.txt
vocab_with short && head -n 30000 "$vocab/vocab.bpe" >short/vocab.bpe
expect merges_cut_at_line 1 "is made by no merge of short/vocab.bpe: is vocab.bpe truncated" -- --vocab short in.txt
vocab_with cut && head -c 200000 "$vocab/vocab.bpe" >cut/vocab.bpe
expect merges_cut_mid_line 1 "cut/vocab.bpe:" -- --vocab cut in.txt
grep -qF "the last line has no newline: the file looks truncated" stderr || { echo "FAIL: mid-line cut"; bad=1; }
expect no_vocab 1 "nowhere/encoder.json: cannot open" -- --vocab nowhere in.txt
expect no_input 1 "cannot open missing.txt" -- --vocab "$vocab" missing.txt
expect no_vocab_option 2 "give --vocab DIR" -- in.txt
expect token_bits 2 "memplan tokenize: error: --token-bits is 16 or 32, got '24'" -- --vocab "$vocab" --token-bits 24 in.txt
expect token_bits_decode 2 "--token-bits is for encoding: --decode reads the width from the header" \
  -- --vocab "$vocab" --token-bits 32 --decode in.txt
"$memplan" tokenize --vocab "$vocab" in.txt -o good.bin >/dev/null || { echo "FAIL: good input"; bad=1; }
head -c 1030 good.bin >cut.bin
expect truncated_tokens 1 "cut.bin: header says 5 tokens (1034 bytes) but the file has 1030 bytes (truncated?)" \
  -- --vocab "$vocab" --decode cut.bin
expect not_tokens 1 "in.txt: too short for a token file header (14 of 1024 bytes)" -- --vocab "$vocab" --decode in.txt
cp good.bin version.bin && printf '\7' | dd of=version.bin bs=1 seek=4 conv=notrunc 2>/dev/null
expect bad_version 1 "version.bin: unsupported token file version 7 for magic 20240520 (expected 1)" \
  -- --vocab "$vocab" --decode version.bin
cp good.bin magic.bin && printf '\0' | dd of=magic.bin bs=1 seek=0 conv=notrunc 2>/dev/null
expect bad_magic 1 "magic.bin: not a token file: magic 20240384, expected 20240520 (uint16 ids) or 20240801 (uint32" \
  -- --vocab "$vocab" --decode magic.bin
cp good.bin badid.bin && printf '\377\377' | dd of=badid.bin bs=1 seek=1026 conv=notrunc 2>/dev/null
expect unknown_id 1 "badid.bin: token 1: id 65535 is not in the vocabulary (50257 ids)" -- --vocab "$vocab" --decode badid.bin
exit $bad
