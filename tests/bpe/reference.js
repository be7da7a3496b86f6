// reference.js: the npm package gpt-3-encoder's own encoder as the reference
// for memplan's BPE (runtime/memplan_bpe.c).
//   node reference.js PKGDIR OUTDIR FILE...  [--words W] [--repeat N]
// writes OUTDIR/corpus.txt (the FILEs, then a generated non-ASCII text of W
// words, 8000 by default, all repeated N times) and OUTDIR/expected.bin (its tokens, llm.c's token
// format), and prints the encoder's MB/s. The package's Encoder.js is loaded
// with its internals exported: its encode() joins arrays with concat, which is
// quadratic in the text, so the loop is encode()'s own, with push.
'use strict'
const fs = require('fs')
const path = require('path')
const Module = require('module')

const args = process.argv.slice(2)
let repeat = 1, words = 8000
const ri = args.indexOf('--repeat')
if (ri >= 0) repeat = parseInt(args.splice(ri, 2)[1], 10)
const wi = args.indexOf('--words')
if (wi >= 0) words = parseInt(args.splice(wi, 2)[1], 10)
const [pkg, outdir, ...files] = args
const src = fs.readFileSync(path.join(pkg, 'Encoder.js'), 'utf-8')
const m = new Module(path.join(pkg, 'Encoder.js'))
m.filename = path.join(pkg, 'Encoder.js')
m.paths = Module._nodeModulePaths(pkg)
m._compile(src + '\nmodule.exports.internals = {pat, bpe, encoder, byte_encoder, encodeStr}\n', m.filename)
const {pat, bpe, encoder, byte_encoder, encodeStr} = m.exports.internals

function encode(text) { // Encoder.js's encode(), with push for concat
  const ids = []
  for (const match of text.matchAll(pat)) {
    const token = encodeStr(match[0]).map(x => byte_encoder[x]).join('')
    for (const t of bpe(token).split(' ')) ids.push(encoder[t])
  }
  return ids
}

// Non-ASCII text: words drawn (a fixed xorshift) from many scripts, with their
// digits, Unicode spaces, marks, emoji, contractions and punctuation runs.
function generated(nwords) {
  let s = 88172645463325252n
  const rnd = n => {
    s ^= (s << 13n) & 0xffffffffffffffffn; s ^= s >> 7n; s ^= (s << 17n) & 0xffffffffffffffffn
    return Number(s % BigInt(n))
  }
  const ranges = [[0x61, 0x7a], [0xe0, 0xff], [0x100, 0x17f], [0x391, 0x3c9], [0x410, 0x44f], [0x5d0, 0x5ea],
    [0x621, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x966, 0x96f], [0xe01, 0xe30], [0x3041, 0x3096],
    [0x30a1, 0x30fa], [0x4e00, 0x4fff], [0xac00, 0xad00], [0x1f600, 0x1f64f], [0x2160, 0x2188], [0xb2, 0xb3],
    [0xbc, 0xbe], [0x300, 0x36f], [0x2010, 0x2027], [0xff10, 0xff19], [0x1d400, 0x1d433], [0x20000, 0x20100]]
  const spaces = [' ', ' ', ' ', ' ', '  ', '\n', '\n\n', '\t', '\u00a0', '\u2003', '\u3000', '\u0085', '\u1680',
    '\ufeff', '\u2028', ' \n', '\r\n', '   ']
  const glue = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", '!', '?!', '...', ',', '"', '«', '»', '—',
    '2026', '3.14', '#', '<|endoftext|>', '']
  const out = []
  for (let w = 0; w < nwords; w++) {
    const [a, b] = ranges[rnd(ranges.length)]
    let word = ''
    for (let k = 1 + rnd(8); k > 0; k--) word += String.fromCodePoint(a + rnd(b - a + 1))
    out.push(word, rnd(3) ? '' : glue[rnd(glue.length)], spaces[rnd(spaces.length)])
  }
  return out.join('')
}

let text = files.map(f => fs.readFileSync(f, 'utf-8')).join('\n') + generated(words)
text = text.repeat(repeat)
fs.writeFileSync(path.join(outdir, 'corpus.txt'), text)
const bytes = Buffer.byteLength(text)
const t0 = process.hrtime.bigint(), c0 = process.cpuUsage()
const ids = encode(text)
const dt = Number(process.hrtime.bigint() - t0) / 1e9, cpu = process.cpuUsage(c0)
const cdt = (cpu.user + cpu.system) / 1e6
const header = new Int32Array(256)
header[0] = 20240520, header[1] = 1, header[2] = ids.length
fs.writeFileSync(path.join(outdir, 'expected.bin'), Buffer.concat([Buffer.from(header.buffer),
  Buffer.from(Uint16Array.from(ids).buffer)]))
console.log('reference: gpt-3-encoder 1.1.4 (node ' + process.version + '): ' + bytes + ' bytes -> ' + ids.length +
  ' tokens in ' + dt.toFixed(2) + ' s: ' + (bytes / dt / 1e6).toFixed(2) + ' MB/s; ' + cdt.toFixed(2) +
  ' s CPU: ' + (bytes / cdt / 1e6).toFixed(2) + ' MB/s CPU')
