// split_ref.js KIND FILE: the pieces of FILE (UTF-8) under a pre-tokenizer, by node's regex engine (the engine
// memplan's character classes come from, tests/bpe/unicode_tables.js): one line per piece, its length in UTF-8
// bytes. KIND:
//   llama3  Llama 3's regex. JavaScript has no (?i:...) group: the contractions are spelt case-insensitively by
//           hand, with U+017F (long s), the one other character that case-folds to one of their letters.
//   digits  SmolLM2's Digits(individual_digits) then ByteLevel: each \p{N} alone, GPT-2's regex on the stretches
//           between them.
"use strict";
const fs = require("fs");
const [kind, file] = process.argv.slice(2);
const text = fs.readFileSync(file, "utf8");
const LLAMA3 =
  /'(?:[sS\u017F]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;
const GPT2 = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const out = [];
function split(s, re) {
  let at = 0;
  for (const m of s.matchAll(re)) {
    if (m.index !== at) throw new Error(`unmatched text at ${at}`);
    out.push(Buffer.byteLength(m[0], "utf8"));
    at += m[0].length;
  }
  if (at !== s.length) throw new Error(`unmatched text at ${at}`);
}
if (kind === "llama3") split(text, LLAMA3);
else if (kind === "digits")
  for (const part of text.split(/(\p{N})/u)) {
    if (/^\p{N}$/u.test(part)) out.push(Buffer.byteLength(part, "utf8"));
    else if (part) split(part, GPT2);
  }
else throw new Error(`unknown kind ${kind}`);
process.stdout.write(out.join("\n") + "\n");
