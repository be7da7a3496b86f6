// split_llama3.js FILE: the pieces of FILE (UTF-8) under Llama 3's pre-tokenizer regex, by node's regex engine
// (the engine memplan's character classes come from, tests/bpe/unicode_tables.js): one line per piece, its length
// in UTF-8 bytes. JavaScript has no (?i:...) group: the contractions are spelt case-insensitively by hand, with
// U+017F (long s), the one other character that case-folds to one of their letters.
"use strict";
const fs = require("fs");
const text = fs.readFileSync(process.argv[2], "utf8");
const re =
  /'(?:[sS\u017F]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;
const out = [];
let at = 0;
for (const m of text.matchAll(re)) {
  if (m.index !== at) throw new Error(`unmatched text at ${at}`);
  out.push(Buffer.byteLength(m[0], "utf8"));
  at += m[0].length;
}
if (at !== text.length) throw new Error(`unmatched text at ${at}`);
process.stdout.write(out.join("\n") + "\n");
