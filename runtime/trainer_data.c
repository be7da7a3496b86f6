/* trainer_data.c: the trainer program's token streams (--text, --data), the synthetic blobs (trainer_internal.h). */
#include "trainer_internal.h"

/* BPE for --text (the YAML's tokenizer:) and the token files' header: one translation unit with it, so
 * every build of this file (CPU, CUDA, MPI) has it; memplan tokenize shares the file. */
#include "memplan_bpe.c"

// ----------------------------------------------------------------------------
// data: token streams (--text, --data) and the synthetic blobs

/* Every input file (--text, --data, --val, --npy's arrays, --load, --resume)
 * is opened here: without blocking (a FIFO with no writer would hang open()),
 * then refused unless it is a regular file: a FIFO, a device or a socket may
 * never end, and a directory has no bytes to read. Returns a descriptor in
 * blocking mode. */
int open_input(const char *path, const char *what) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open %s file %s: %s", what, path, strerror(errno));
  struct stat st;
  int e = fstat(fd, &st) != 0 ? errno : 0;
  const char *kind = e                      ? strerror(e)
                     : S_ISREG(st.st_mode)  ? NULL
                     : S_ISDIR(st.st_mode)  ? "it is a directory, not a regular file"
                     : S_ISFIFO(st.st_mode) ? "it is a FIFO, not a regular file"
                     : S_ISCHR(st.st_mode)  ? "it is a character device, not a regular file"
                     : S_ISBLK(st.st_mode)  ? "it is a block device, not a regular file"
                     : S_ISSOCK(st.st_mode) ? "it is a socket, not a regular file"
                                            : "it is not a regular file";
  if (kind || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    if (!kind) kind = strerror(errno);
    close(fd);
    die("cannot read %s file %s: %s", what, path, kind);
  }
  return fd;
}

/* The whole file at path, for --text, --data, --val and --npy (open_input's
 * checks first). A file that cannot be sized or read ends with the path and
 * the reason (errno's text), before anything is allocated for it. */
unsigned char *read_file(const char *path, int64_t *size, const char *what) {
  FILE *f = fdopen(open_input(path, what), "rb");
  if (!f) die("cannot read %s file %s: %s", what, path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) die("cannot size %s file %s: %s", what, path, strerror(errno));
  long n = ftell(f);
  if (n < 0) die("cannot size %s file %s: %s", what, path, strerror(errno));
  rewind(f);
  unsigned char *b = xmalloc((size_t)n, what);
  size_t got = fread(b, 1, (size_t)n, f);
  if (got != (size_t)n) {
    if (ferror(f)) die("cannot read %s file %s: %s", what, path, strerror(errno));
    die("cannot read %s file %s: it ended after %zu of %ld bytes (changed while reading?)", what, path, got, n);
  }
  fclose(f);
  *size = n;
  return b;
}

uint32_t le32(const unsigned char *p) { return get32(p); } /* memplan_bpe.c's */

/* --text: bytes are tokens, or BPE tokens with a tokenizer (the plan's);
 * --data: an llm.c token file, 16- or 32-bit ids (memplan_bpe.h). */
Stream load_tokens(const char *path, int is_text, int64_t vocab, const char *tokenizer) {
  int64_t size;
  unsigned char *b = read_file(path, &size, is_text ? "text" : "token");
  Stream s = {.path = path};
  if (is_text && tokenizer) { /* BPE, as `memplan tokenize` */
    char err[1024];
    Bpe *bpe = bpe_load(tokenizer, err, sizeof err);
    if (!bpe) free(b), die("%s (the model's tokenizer, from its YAML's tokenizer: entry)", err);
    BpeTokens t = {0};
    bpe_encode(bpe, b, (size_t)size, 1, &t);
    s.n = (int64_t)t.n, s.tok = t.ids ? t.ids : xmalloc(1, "tokens");
    if (tr_rank == 0)
      printf("text %s: %lld bytes -> %lld tokens (%s, %d ids, %s)\n", path, (long long)size, (long long)s.n,
             bpe_kind(bpe), bpe_vocab_size(bpe), tokenizer);
    bpe_free(bpe);
  } else if (is_text) {
    s.n = size;
    s.tok = xmalloc((size_t)size * sizeof *s.tok, "tokens");
    for (int64_t i = 0; i < size; i++) s.tok[i] = b[i];
  } else {
    char err[512];
    long long n;
    int width = bpe_token_header(b, size, &n, err, sizeof err);
    if (!width) free(b), die("%s: %s", path, err); /* freed first: a leak checker would report it at exit */
    s.n = n;
    s.tok = xmalloc((size_t)s.n * sizeof *s.tok + 1, "tokens");
    for (int64_t i = 0; i < s.n; i++)
      s.tok[i] = width == 2 ? (uint32_t)(b[1024 + 2 * i] | b[1024 + 2 * i + 1] << 8) : get32(b + 1024 + 4 * i);
  }
  free(b);
  for (int64_t i = 0; i < s.n; i++)
    if (s.tok[i] >= vocab) {
      unsigned t = s.tok[i];
      free(s.tok);
      die("%s: token %u at position %lld is out of range: the model's vocabulary has %lld entries%s", path, t,
          (long long)i, (long long)vocab,
          is_text ? (tokenizer ? " (its tokenizer has more ids than V)" : " (--text needs V >= 256)") : "");
    }
  return s;
}

/* Fills a token model's inputs with micro-batch mb of the window at s->pos
 * (a batch is `micro` micro-batches); the last one moves s on. Evaluation's
 * sequential windows; training windows come from an Order (below). */
void fill_token_batch(unsigned char *arena, const TrInput *in, int nin, Stream *s, int mb, int micro) {
  int64_t w = in[0].rows * in[0].cols;
  if (mb == 0 && s->pos + w * micro + 1 > s->n) s->pos = 0;
  const uint32_t *src = s->tok + s->pos + (int64_t)mb * w;
  for (int k = 0; k < nin; k++) {
    int32_t *dst = (int32_t *)(arena + in[k].offset);
    int shift = in[k].kind == TR_IN_NEXT;
    for (int64_t i = 0; i < w; i++) dst[i] = (int32_t)src[i + shift];
  }
  if (mb == micro - 1) s->pos += w * micro;
}

void order_init(Order *o, int64_t n, int64_t w, int shuffle, uint64_t seed) {
  *o = (Order){.n = n, .w = w, .nwin = n / w, .perm_epoch = -1, .seed = seed};
  if (shuffle) o->perm = xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1), "the shuffling permutation");
}

/* Moves to the next window (at a step's first micro-batch): a new epoch,
 * and with shuffling its permutation, when the last one is used up. */
void order_next(Order *o) {
  if (o->index >= o->nwin) o->epoch++, o->index = 0;
  if (o->perm && o->perm_epoch != o->epoch) {
    for (int64_t i = 0; i < o->n; i++) o->perm[i] = i;
    uint64_t key = key3(4, o->seed, (uint64_t)o->epoch);
    for (int64_t i = o->n - 1; i > 0; i--) {
      int64_t j = (int64_t)(mix64(key + (uint64_t)i) % (uint64_t)(i + 1)), t = o->perm[i];
      o->perm[i] = o->perm[j], o->perm[j] = t;
    }
    o->perm_epoch = o->epoch;
  }
  o->cur = o->index++ * o->w;
}

/* Item r of the current window. */
int64_t order_item(const Order *o, int64_t r) { return o->perm ? o->perm[o->cur + r] : o->cur + r; }

/* Micro-batch mb of a token model's current training window, for this rank
 * (the window holds ranks x micro micro-batches; rank's are the rank-th micro). */
void fill_token_train(unsigned char *arena, const TrInput *in, int nin, const Stream *s, const Order *o, int mb,
                      int micro, int rank, int ranks) {
  int64_t w = in[0].rows * in[0].cols;
  const uint32_t *src = s->tok + order_item(o, 0) * w * micro * ranks + ((int64_t)rank * micro + mb) * w;
  for (int k = 0; k < nin; k++) {
    int32_t *dst = (int32_t *)(arena + in[k].offset);
    int shift = in[k].kind == TR_IN_NEXT;
    for (int64_t i = 0; i < w; i++) dst[i] = (int32_t)src[i + shift];
  }
}

/* The "blobs" data set. Sample s has class y = key3(1, s, 0) mod K; feature
 * j is centre(y, j) / 16 + noise with centre = 2 u(key3(2, y, j)) - 1 and
 * noise = 2 u(key3(3, s, j)) - 1 (u: the top 24 bits as a fraction), in
 * double, rounded to float once: classes overlap in every single feature and
 * separate only over many. Regression targets are centre(y, j). */
static int64_t blob_class(int64_t s, int64_t K) { return (int64_t)(key3(1, (uint64_t)s, 0) % (uint64_t)K); }

static float blob_value(int64_t s, int64_t y, int64_t j, int noisy) {
  double c = 2.0 * unit24(key3(2, (uint64_t)y, (uint64_t)j)) - 1.0;
  if (!noisy) return (float)c;
  return (float)(c / 16.0 + (2.0 * unit24(key3(3, (uint64_t)s, (uint64_t)j)) - 1.0));
}

void fill_blob_batch(unsigned char *arena, const TrInput *in, int nin, int64_t sample0, int64_t K) {
  for (int k = 0; k < nin; k++)
    for (int64_t r = 0; r < in[k].rows; r++) {
      int64_t s = sample0 + r, y = blob_class(s, K);
      if (in[k].dtype == TR_I32) {
        int32_t *dst = (int32_t *)(arena + in[k].offset) + r * in[k].cols;
        for (int64_t j = 0; j < in[k].cols; j++) dst[j] = (int32_t)y;
      } else {
        float *dst = (float *)(arena + in[k].offset) + r * in[k].cols;
        for (int64_t j = 0; j < in[k].cols; j++) dst[j] = blob_value(s, y, j, in[k].kind == TR_IN_FEATURES);
      }
    }
}
