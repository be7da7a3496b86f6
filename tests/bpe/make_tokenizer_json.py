#!/usr/bin/env python3
"""make_tokenizer_json.py KIND OUT [ENCODER_DIR]: a Hugging Face tokenizer.json for the tests.

  gpt2-strings  GPT-2's encoder.json + vocab.bpe (ENCODER_DIR) as HF's GPT-2 tokenizer.json writes
                them: pre_tokenizer ByteLevel, merges as "a b" strings, <|endoftext|> an added token
  gpt2-pairs    the same with merges as [a, b] pairs (newer files) and pre_tokenizer Sequence
                [Split(GPT-2's regex), ByteLevel(use_regex false)]
  llama3-bytes  the 256 byte tokens, no merges, Llama 3's pre_tokenizer (Split(Llama 3's regex) +
                ByteLevel) and ignore_merges: each token is one byte, for checking the split
  digits-bytes  the same with SmolLM2's pre_tokenizer, Sequence [Digits(individual_digits), ByteLevel]
  llama3-gpt2   GPT-2's vocabulary and merges (ENCODER_DIR) behind Llama 3's pre_tokenizer, ignore_merges as
                Llama 3's file has it
  llama3-big    the same shaped as Llama 3's 128,256 ids: GPT-2's ids + LLAMA3_SHIFT (77,743..127,999), the ids
                below them reserved added tokens <|pad_K|>, then Llama 3's 256 special tokens at 128,000..128,255
"""
import json
import sys

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")


LLAMA3_SHIFT = 128000 - 50257  # GPT-2's last id, <|endoftext|> (50256), lands at 127,999


def byte_chars():
    """GPT-2's bytes_to_unicode."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def byte_level(pattern=None):
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": pattern is None}
    if pattern is None:
        return bl
    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    return {"type": "Sequence", "pretokenizers": [split, bl]}


def tokenizer(vocab, merges, pre, added=(), ignore_merges=False):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for i, c in added],
            "normalizer": None, "pre_tokenizer": pre, "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}}


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind.startswith("llama3-") and kind != "llama3-bytes":
        d = sys.argv[3]
        vocab = json.load(open(d + "/encoder.json", encoding="utf-8"))
        merges = [ln.split(" ") for ln in open(d + "/vocab.bpe", encoding="utf-8").read().split("\n")[1:-1]]
        shift = LLAMA3_SHIFT if kind == "llama3-big" else 0
        vocab = {t: i + shift for t, i in vocab.items() if t != "<|endoftext|>"}
        specials = ["<|begin_of_text|>", "<|end_of_text|>"] + ["<|reserved_special_token_%d|>" % k
                                                                for k in range(254)]
        added = [(50256 + shift, "<|endoftext|>")] + ([(128000 + k, t) for k, t in enumerate(specials)] if shift else [])
        tok = tokenizer(vocab, merges, byte_level(LLAMA3_RE), added, ignore_merges=True)
        tok["added_tokens"] += [{"id": k, "content": "<|pad_%d|>" % k, "special": True} for k in range(shift)]
        with open(out, "w", encoding="utf-8") as f:  # compact: 78,000 added tokens
            json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
        return
    if kind.startswith("gpt2"):
        d = sys.argv[3]
        vocab = json.load(open(d + "/encoder.json", encoding="utf-8"))
        lines = open(d + "/vocab.bpe", encoding="utf-8").read().split("\n")[1:-1]
        pairs = kind == "gpt2-pairs"
        merges = [ln.split(" ") if pairs else ln for ln in lines]
        tok = tokenizer(vocab, merges, byte_level(GPT2_RE if pairs else None), [(50256, "<|endoftext|>")])
    elif kind == "llama3-bytes":
        tok = tokenizer({c: b for b, c in byte_chars().items()}, [], byte_level(LLAMA3_RE), ignore_merges=True)
    elif kind == "digits-bytes":
        pre = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level()]}
        tok = tokenizer({c: b for b, c in byte_chars().items()}, [], pre)
    else:
        sys.exit("make_tokenizer_json.py: unknown kind " + kind)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
