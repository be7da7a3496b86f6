/* test_bpe.c: runtime/memplan_bpe.c beyond what the reference comparison
 * (tests/bpe/vs_js.sh) sees: text fed in small blocks tokenizes exactly as
 * whole (memplan tokenize streams 1 MiB blocks; the trainer may too), bytes
 * that are not UTF-8 tokenize byte-wise and decode back, and a 1.5 MB piece
 * (one word) merges in O(n log n), not GPT-2's O(n^2).
 *   test_bpe VOCAB_DIR CORPUS
 *   test_bpe --split TOKENIZER FILE: the pre-tokenizer's pieces of FILE, fed in blocks of 1 to 7 bytes as
 *     memplan tokenize streams, one line per piece: its length in bytes (tests/bpe/tokenizer_json.sh) */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "memplan_bpe.h"

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *s = malloc((size_t)len + 1);
  *n = fread(s, 1, (size_t)len, f);
  fclose(f);
  return s;
}

/* The tokens of s[0, n) fed `block` bytes at a time, the rest of each call carried into the next. */
static BpeTokens in_blocks(Bpe *b, const unsigned char *s, size_t n, size_t block) {
  BpeTokens t = {0};
  size_t done = 0, have = 0;
  while (done < n) {
    have = have + block < n - done ? have + block : n - done;
    int final = done + have == n;
    size_t used = bpe_encode(b, s + done, have, final, &t);
    CHECK(used <= have && (!final || used == have));
    done += used, have -= used;
  }
  return t;
}

static int same(const BpeTokens *a, const BpeTokens *c) {
  return a->n == c->n && !memcmp(a->ids, c->ids, a->n * sizeof *a->ids);
}

static int decodes_to(Bpe *b, const BpeTokens *t, const unsigned char *s, size_t n) {
  size_t at = 0;
  for (size_t i = 0; i < t->n; i++) {
    size_t len;
    const unsigned char *p = bpe_token_bytes(b, t->ids[i], &len);
    if (!p || at + len > n || memcmp(s + at, p, len)) return 0;
    at += len;
  }
  return at == n;
}

static int split(const char *tokenizer, const char *file) {
  char err[1024];
  Bpe *b = bpe_load(tokenizer, err, sizeof err);
  if (!b) return fprintf(stderr, "%s\n", err), 1;
  size_t n = 0, done = 0, have = 0;
  unsigned char *s = slurp(file, &n);
  if (!s) return fprintf(stderr, "cannot read %s\n", file), 1;
  for (size_t block = 1; done < n; block = block % 7 + 1) {
    have = have + block < n - done ? have + block : n - done;
    int final = done + have == n;
    size_t len;
    while (have && (len = bpe_next_piece(b, s + done, have, final)) > 0) printf("%zu\n", len), done += len, have -= len;
  }
  free(s);
  bpe_free(b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--split")) return split(argv[2], argv[3]);
  if (argc != 3) return fprintf(stderr, "usage: test_bpe VOCAB_DIR CORPUS | --split TOKENIZER FILE\n"), 2;
  char err[1024];
  Bpe *b = bpe_load(argv[1], err, sizeof err);
  if (!b) return fprintf(stderr, "%s\n", err), 1;
  CHECK(bpe_vocab_size(b) == 50257 && bpe_eot(b) == 50256);
  size_t n = 0;
  unsigned char *corpus = slurp(argv[2], &n);
  CHECK(corpus && n > 100000);
  if (!corpus) return check_summary("test_bpe");
  if (n > 300000) n = 300000; /* a slice: block size 1 makes calls quadratic in a long piece */

  /* Random bytes, every fourth one a stray UTF-8 lead or continuation byte,
   * then a sequence cut short at the very end. */
  size_t nr = 200000;
  unsigned char *rnd = malloc(nr);
  unsigned long long x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < nr; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    rnd[i] = (unsigned char)(i % 4 ? 32 + x % 96 : 0x80 + x % 128);
  }
  rnd[nr - 1] = 0xE6;

  const unsigned char *texts[] = {corpus, rnd};
  size_t lens[] = {n, nr};
  for (int k = 0; k < 2; k++) {
    BpeTokens whole = {0};
    CHECK(bpe_encode(b, texts[k], lens[k], 1, &whole) == lens[k]);
    CHECK(decodes_to(b, &whole, texts[k], lens[k]));
    size_t blocks[] = {1, 2, 3, 7, 64, 4096};
    for (int j = 0; j < 6; j++) {
      BpeTokens t = in_blocks(b, texts[k], lens[k], blocks[j]);
      if (!same(&t, &whole)) fprintf(stderr, "text %d in blocks of %zu differs from whole\n", k, blocks[j]);
      CHECK(same(&t, &whole));
      free(t.ids);
    }
    free(whole.ids);
  }

  /* Known ids: "\xff" alone is byte 0xFF's token (GPT-2 spells it U+00FF,
   * id 187); "a\xff" joins no merge across the stray byte. */
  BpeTokens t = {0};
  bpe_encode(b, (const unsigned char *)"a\xff" "b", 3, 1, &t);
  CHECK(t.n == 3 && t.ids[0] == 64 && t.ids[1] == 187 && t.ids[2] == 65);
  free(t.ids);

  /* One 1.5 MB word: seconds (O(n^2) merging would take hours). */
  size_t nw = 1500000;
  unsigned char *word = malloc(nw);
  for (size_t i = 0; i < nw; i++) word[i] = "ab"[i % 3 == 2];
  clock_t c0 = clock();
  BpeTokens w = {0};
  CHECK(bpe_encode(b, word, nw, 1, &w) == nw);
  double sec = (double)(clock() - c0) / CLOCKS_PER_SEC;
  printf("test_bpe: a %zu-byte word: %zu tokens in %.2f s CPU\n", nw, w.n, sec);
  CHECK(decodes_to(b, &w, word, nw));
  CHECK(sec < 60); /* ASan builds take ~5 s; quadratic merging would take hours */
  free(w.ids), free(word), free(rnd), free(corpus);
  bpe_free(b);
  return check_summary("test_bpe");
}
