/* memplan_trainer.c: the trainer program every generated trainer.c shares:
 * options, data loading, parameter initialization, safetensors checkpoints,
 * logging, profiling and memory reporting. The plan-specific part (arena
 * layout, step, eval) is in trainer.c; see memplan_trainer.h.
 *
 * With a device backend (TrModel.device: the CUDA trainer) the plan runs in a
 * device arena; the host arena is then a shadow for I/O only (parameters,
 * inputs, the loss), untouched elsewhere, and the hooks move those regions.
 *
 * Memory: everything here is allocated before the first step (the arena, the
 * data file, profile tables, the shuffling permutation, the checkpoint table
 * and a device's staging buffer); the training loop itself allocates nothing,
 * which --check-alloc verifies when a counting allocator is preloaded
 * (tests/alloc_count.c exports memplan_alloc_count). A --save-every
 * checkpoint allocates its file, header and names; --check-alloc leaves
 * those out of its count. Loading and saving stream tensor by tensor: no
 * copy of a checkpoint file is ever held in memory. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "memplan_trainer.h"
#include "memplan_json.h"
#include "memplan_kernels.h" /* RT_NF4_TABLE, RT_NF4_BLOCK */

#include <dlfcn.h>
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* GPT-2 BPE for --text (the YAML's tokenizer:): one translation unit with it, so
 * every build of this file (CPU, CUDA, MPI) has it; memplan tokenize shares the file. */
#include "memplan_bpe.c"

#ifdef MEMPLAN_MPI
#include <mpi.h>
#endif

#define TR_TOKEN_MAGIC 20240520            /* llm.c's token shard header */
#define TR_EVAL_SAMPLE0 ((int64_t)1 << 40) /* synthetic eval samples never meet training ones */
/* Step counts (--steps, --warmup, a checkpoint's step): at most 2^53, which a
 * double (the lr schedule's arithmetic) holds exactly and no step + 1 or sum
 * of two counts can overflow. */
#define TR_MAX_STEPS ((int64_t)1 << 53)
#define TR_MAX_THREADS 256 /* cpu.c's pool (RT_MAX_THREADS) */

// ----------------------------------------------------------------------------
// helpers

int tr_rank = 0, tr_ranks = 1;

__attribute__((format(printf, 1, 2))) _Noreturn static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fputs("trainer: error: ", stderr);
  if (tr_ranks > 1) fprintf(stderr, "rank %d: ", tr_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xmalloc(size_t n, const char *what) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory allocating %zu bytes for %s", n, what);
  return p;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Peak resident set size of this process, bytes. */
static int64_t peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (int64_t)ru.ru_maxrss * 1024;
}

static const char *fmt_bytes(char *buf, size_t n, int64_t b) {
  if (b >= ((int64_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (1 << 30));
  else snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
  return buf;
}

/* A duration for the progress lines: "8.41 s", "3m07s", "2h05m". */
static const char *fmt_secs(char *buf, size_t n, double s) {
  if (!(s < 1e9)) snprintf(buf, n, "?");
  else if (s < 60) snprintf(buf, n, "%.2f s", s);
  else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
  else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
  return buf;
}

// ----------------------------------------------------------------------------
// random numbers: splitmix64, for initialization and the synthetic data

static uint64_t mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* A hash of (tag, a, b): the synthetic data set's only source of randomness. */
static uint64_t key3(uint64_t tag, uint64_t a, uint64_t b) { return mix64(mix64(mix64(tag) ^ a) ^ b); }

/* The random key of an op with mode_arg (memplan_trainer.h): the same for
 * its forward, recompute and backward, new each micro-batch and step. */
static uint64_t op_key_seed;
uint64_t tr_op_key(int64_t t, int mb, uint64_t layer) {
  return mix64(mix64(mix64(op_key_seed) ^ (uint64_t)t) ^ ((uint64_t)(uint32_t)mb << 32 ^ layer));
}

/* Uniform in [0, 1) with 24 bits: exact in float, double and Python. */
static double unit24(uint64_t h) { return (double)(h >> 40) * 0x1p-24; }

typedef struct {
  uint64_t s;
  int has_spare;
  double spare;
} Rng;

static double rng_uniform(Rng *r) { /* [0, 1), 53 bits */
  r->s += 0x9e3779b97f4a7c15u;
  return (double)(mix64(r->s) >> 11) * 0x1p-53;
}

static double rng_normal(Rng *r) { /* Box-Muller */
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  double rad = sqrt(-2.0 * log(1.0 - u1)), th = 6.283185307179586 * u2;
  r->spare = rad * sin(th), r->has_spare = 1;
  return rad * cos(th);
}

// ----------------------------------------------------------------------------
// data: token streams (--text, --data) and the synthetic blobs

typedef struct {
  const char *path;
  uint16_t *tok;
  int64_t n, pos;
} Stream;

/* Every input file (--text, --data, --val, --npy's arrays, --load, --resume)
 * is opened here: without blocking (a FIFO with no writer would hang open()),
 * then refused unless it is a regular file: a FIFO, a device or a socket may
 * never end, and a directory has no bytes to read. Returns a descriptor in
 * blocking mode. */
static int open_input(const char *path, const char *what) {
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
static unsigned char *read_file(const char *path, int64_t *size, const char *what) {
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

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* --text: bytes are tokens, or GPT-2 BPE tokens with a tokenizer (the plan's);
 * --data: an llm.c shard (see memplan_trainer.h). */
static Stream load_tokens(const char *path, int is_text, int64_t vocab, const char *tokenizer) {
  int64_t size;
  unsigned char *b = read_file(path, &size, is_text ? "text" : "token");
  Stream s = {.path = path};
  if (is_text && tokenizer) { /* GPT-2 BPE, as `memplan tokenize` */
    char err[1024];
    Bpe *bpe = bpe_load(tokenizer, err, sizeof err);
    if (!bpe) free(b), die("%s (the model's tokenizer, from its YAML's tokenizer: entry)", err);
    BpeTokens t = {0};
    bpe_encode(bpe, b, (size_t)size, 1, &t);
    bpe_free(bpe);
    s.n = (int64_t)t.n;
    s.tok = xmalloc((size_t)s.n * sizeof(uint16_t) + 1, "tokens");
    for (int64_t i = 0; i < s.n; i++) s.tok[i] = (uint16_t)t.ids[i];
    free(t.ids);
    if (tr_rank == 0)
      printf("text %s: %lld bytes -> %lld tokens (GPT-2 BPE, %s)\n", path, (long long)size, (long long)s.n, tokenizer);
  } else if (is_text) {
    s.n = size;
    s.tok = xmalloc((size_t)size * sizeof(uint16_t), "tokens");
    for (int64_t i = 0; i < size; i++) s.tok[i] = b[i];
  } else {
    /* the header's fields first, so that the buffer is freed before any
     * error (a leak checker would report it at exit otherwise) */
    uint32_t magic = size >= 1024 ? le32(b) : 0, version = size >= 1024 ? le32(b + 4) : 0;
    s.n = size >= 1024 ? le32(b + 8) : 0;
    if (size < 1024 || magic != TR_TOKEN_MAGIC || version != 1 || size != 1024 + 2 * s.n) free(b);
    if (size < 1024) die("%s: too short for a token file header (%lld of 1024 bytes)", path, (long long)size);
    if (magic != TR_TOKEN_MAGIC)
      die("%s: not a token file: magic %u, expected %d (llm.c format: 256 int32 header, then uint16 tokens)", path,
          magic, TR_TOKEN_MAGIC);
    if (version != 1) die("%s: unsupported token file version %u (expected 1)", path, version);
    if (size != 1024 + 2 * s.n)
      die("%s: header says %lld tokens (%lld bytes) but the file has %lld bytes%s", path, (long long)s.n,
          (long long)(1024 + 2 * s.n), (long long)size, size < 1024 + 2 * s.n ? " (truncated?)" : "");
    s.tok = xmalloc((size_t)s.n * sizeof(uint16_t), "tokens");
    for (int64_t i = 0; i < s.n; i++) s.tok[i] = (uint16_t)(b[1024 + 2 * i] | b[1024 + 2 * i + 1] << 8);
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
static void fill_token_batch(unsigned char *arena, const TrInput *in, int nin, Stream *s, int mb, int micro) {
  int64_t w = in[0].rows * in[0].cols;
  if (mb == 0 && s->pos + w * micro + 1 > s->n) s->pos = 0;
  const uint16_t *src = s->tok + s->pos + (int64_t)mb * w;
  for (int k = 0; k < nin; k++) {
    int32_t *dst = (int32_t *)(arena + in[k].offset);
    int shift = in[k].kind == TR_IN_NEXT;
    for (int64_t i = 0; i < w; i++) dst[i] = src[i + shift];
  }
  if (mb == micro - 1) s->pos += w * micro;
}

/* Training order (memplan_trainer.h): a training set is nwin windows a pass
 * (epoch), one window a step; window k covers items perm[k*w .. k*w + w) of
 * a permutation of the set's n items, identity without shuffling. Token
 * data: the items are the windows themselves (w = 1, window k reads tokens
 * [perm[k]*W, perm[k]*W + W + 1) for W = micro-batches x B x T); .npy data:
 * the items are samples (w = micro-batches x B). With shuffling, epoch e's
 * permutation is a Fisher-Yates from key = key3(4, seed, e): for i = n-1 down
 * to 1, j = mix64(key + i) mod (i + 1), swap perm[i] and perm[j]. The
 * position (epoch, index of the next window) is what a checkpoint saves. */
typedef struct {
  int64_t n, w, nwin;   /* items, items per window, windows per epoch (n / w) */
  int64_t epoch, index; /* the next window: the index-th of epoch (0-based) */
  int64_t cur;          /* the window being read: its first item's place in perm */
  int64_t *perm;        /* n entries, allocated at setup (NULL without shuffling) */
  int64_t perm_epoch;   /* the epoch perm holds (-1: none yet) */
  uint64_t seed;
} Order;

static void order_init(Order *o, int64_t n, int64_t w, int shuffle, uint64_t seed) {
  *o = (Order){.n = n, .w = w, .nwin = n / w, .perm_epoch = -1, .seed = seed};
  if (shuffle) o->perm = xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1), "the shuffling permutation");
}

/* Moves to the next window (at a step's first micro-batch): a new epoch,
 * and with shuffling its permutation, when the last one is used up. */
static void order_next(Order *o) {
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
static int64_t order_item(const Order *o, int64_t r) { return o->perm ? o->perm[o->cur + r] : o->cur + r; }

/* Micro-batch mb of a token model's current training window, for this rank
 * (the window holds ranks x micro micro-batches; rank's are the rank-th micro). */
static void fill_token_train(unsigned char *arena, const TrInput *in, int nin, const Stream *s, const Order *o, int mb,
                             int micro, int rank, int ranks) {
  int64_t w = in[0].rows * in[0].cols;
  const uint16_t *src = s->tok + order_item(o, 0) * w * micro * ranks + ((int64_t)rank * micro + mb) * w;
  for (int k = 0; k < nin; k++) {
    int32_t *dst = (int32_t *)(arena + in[k].offset);
    int shift = in[k].kind == TR_IN_NEXT;
    for (int64_t i = 0; i < w; i++) dst[i] = src[i + shift];
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

static void fill_blob_batch(unsigned char *arena, const TrInput *in, int nin, int64_t sample0, int64_t K) {
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

// ----------------------------------------------------------------------------
// data: NumPy .npy files (--npy DIR; the conventions are in memplan_trainer.h)

/* One input's samples from one split: n samples of cols values each, float
 * or int32_t as the input's dtype. */
typedef struct {
  char *path;
  int64_t n, cols;
  void *v;
} NpyArray;

/* A split (DIR/train or DIR/test): one array per input of a schedule, in its
 * table's order, each with n samples (the training order: an Order). */
typedef struct {
  NpyArray *a;
  int na;
  int64_t n;
} NpySet;

/* The loaded splits and the file being parsed stay reachable from here, so
 * that an error's exit leaves nothing a leak checker would call lost. */
static NpySet npy_train, npy_test;
static unsigned char *npy_file;

/* "(8000, 1, 28, 28)"; with sym, "(S, 784)": axis 0 written as sym. */
static const char *npy_fmt_shape(char *buf, size_t n, const int64_t *d, int rank, const char *sym) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++) {
    if (i == 0 && sym) k += (size_t)snprintf(buf + k, n - k, "%s", sym);
    else k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  }
  if (k < n) snprintf(buf + k, n - k, "%s)", rank == 1 ? "," : "");
  return buf;
}

/* DIR/SPLIT/NAME.npy for input `in` into a (a->path set): the header read and
 * checked against the input (dtype, per-sample shape, size), then every
 * value (finite floats; labels and token ids in range) into a->v. */
static void load_npy(NpyArray *a, const TrInput *in, const TrModel *m) {
  const char *path = a->path;
  int64_t size;
  npy_file = read_file(path, &size, ".npy");
  const unsigned char *b = npy_file;
  if (size < 10 || memcmp(b, "\x93NUMPY", 6))
    die("%s: not a .npy file: it does not start with the magic \\x93NUMPY (%lld bytes)", path, (long long)size);
  int major = b[6], minor = b[7], wide = major >= 2;
  if (major < 1 || major > 3 || minor != 0)
    die("%s: .npy format version %d.%d: the trainer reads versions 1.0, 2.0 and 3.0", path, major, minor);
  int64_t hlen = wide ? (size >= 12 ? (int64_t)le32(b + 8) : -1) : (int64_t)(b[8] | b[9] << 8);
  int64_t start = (wide ? 12 : 10) + hlen;
  if (hlen < 0 || start > size)
    die("%s: truncated: the header should end at byte %lld, the file has %lld bytes", path,
        (long long)(hlen < 0 ? 12 : start), (long long)size);
  MjNpy hd;
  MjError err;
  if (mj_npy_header((const char *)b + (wide ? 12 : 10), (size_t)hlen, &hd, &err)) {
    if (!strncmp(err.msg, "structured dtype", 16))
      die("%s: a structured dtype (descr is a list): input '%s' needs a plain array", path, in->name);
    die("%s: malformed .npy header at byte %lld: %s", path, (long long)err.off + (wide ? 12 : 10), err.msg);
  }
  const char *descr = hd.descr;
  int fortran = hd.fortran, rank = hd.rank;
  const int64_t *shape = hd.shape;
  if (fortran)
    die("%s: fortran_order is True (column-major data): the trainer reads row-major arrays; save "
        "np.ascontiguousarray(a) instead",
        path);
  int f32 = in->dtype == TR_F32;
  int item = f32 ? (!strcmp(descr, "<f4") ? 4 : 0) : !strcmp(descr, "<i4") ? 4 : !strcmp(descr, "<i8") ? 8 : 0;
  if (!item)
    die("%s: dtype '%s', but input '%s' of %s is %s and needs %s", path, descr, in->name, m->model, f32 ? "f32" : "i32",
        f32 ? "'<f4' (little-endian float32: a.astype('<f4'))"
            : "'<i4' or '<i8' (little-endian int32 or int64: a.astype('<i4'))");
  int ok = in->rank >= 1 && rank == in->rank;
  for (int d = 1; ok && d < rank; d++) ok = shape[d] == in->shape[d];
  if (!ok) {
    char have[160], need[160], each[160];
    die("%s: shape %s, but input '%s' of %s needs %s: S samples of shape %s", path,
        npy_fmt_shape(have, sizeof have, shape, rank, NULL), in->name, m->model,
        npy_fmt_shape(need, sizeof need, in->shape, in->rank, "S"),
        npy_fmt_shape(each, sizeof each, in->shape + 1, in->rank - 1, NULL));
  }
  if (shape[0] < 1) die("%s: no samples (shape[0] is 0)", path);
  int64_t need = item;
  for (int d = 0; d < rank; d++) need = need > ((int64_t)1 << 62) / shape[d] ? ((int64_t)1 << 62) : need * shape[d];
  if (size - start != need) {
    char have[160];
    die("%s: %s: %lld bytes of data after the header, but shape %s of '%s' needs %lld", path,
        size - start < need ? "truncated" : "longer than its header says", (long long)(size - start),
        npy_fmt_shape(have, sizeof have, shape, rank, NULL), descr, (long long)need);
  }
  a->n = shape[0], a->cols = in->cols;
  int64_t count = a->n * a->cols, bound = in->kind == TR_IN_LABELS ? m->classes : m->vocab;
  a->v = xmalloc((size_t)count * 4, "the .npy data");
  const unsigned char *src = b + start;
  for (int64_t k = 0; k < count; k++) {
    if (f32) {
      uint32_t u = le32(src + 4 * k);
      float f;
      memcpy(&f, &u, 4);
      if (!isfinite(f))
        die("%s: sample %lld, element %lld is %s: inputs must be finite", path, (long long)(k / a->cols),
            (long long)(k % a->cols),
            isnan(f) ? "nan"
            : f > 0  ? "inf"
                     : "-inf");
      ((float *)a->v)[k] = f;
      continue;
    }
    int64_t v = item == 4 ? (int64_t)(int32_t)le32(src + 4 * k)
                          : (int64_t)((uint64_t)le32(src + 8 * k) | (uint64_t)le32(src + 8 * k + 4) << 32);
    if (v < 0 || v >= bound) {
      char at[64] = "";
      if (a->cols > 1) snprintf(at, sizeof at, ", element %lld", (long long)(k % a->cols));
      die("%s: value %lld at sample %lld%s is out of range: input '%s' of %s holds %s, 0 <= value < %lld", path,
          (long long)v, (long long)(k / a->cols), at, in->name, m->model,
          in->kind == TR_IN_LABELS ? "class labels" : "token ids", (long long)bound);
    }
    ((int32_t *)a->v)[k] = (int32_t)v;
  }
  free(npy_file);
  npy_file = NULL;
}

/* The .npy files of one split, DIR/SPLIT/<input>.npy for every input of a
 * schedule, each with the same number of samples. */
static void load_npy_set(NpySet *s, const char *dir, const char *split, const TrInput *in, int nin, const TrModel *m) {
  size_t dn = strlen(dir) + strlen(split) + 2;
  char *sub = xmalloc(dn, "a path"), names[256] = "";
  snprintf(sub, dn, "%s/%s", dir, split);
  for (int k = 0; k < nin; k++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s.npy", k ? ", " : "", in[k].name);
  struct stat st;
  int rc = stat(sub, &st), e = errno;
  if (rc != 0 || !S_ISDIR(st.st_mode))
    die("--npy %s: %s: %s; it needs %s/train and %s/test, each with one .npy file per input of %s: %s", dir, sub,
        rc != 0 ? strerror(e) : "not a directory", dir, dir, m->model, names);
  s->a = xmalloc(sizeof(NpyArray) * (size_t)(nin ? nin : 1), "the .npy inputs");
  memset(s->a, 0, sizeof(NpyArray) * (size_t)(nin ? nin : 1));
  s->na = nin;
  for (int k = 0; k < nin; k++) {
    size_t pn = dn + strlen(in[k].name) + 6;
    s->a[k].path = xmalloc(pn, "a path");
    snprintf(s->a[k].path, pn, "%s/%s.npy", sub, in[k].name);
    if (stat(s->a[k].path, &st) != 0)
      die("cannot open %s: %s (--npy %s reads %s/%s/<input>.npy for every input of %s: %s)", s->a[k].path,
          strerror(errno), dir, dir, split, m->model, names);
    load_npy(&s->a[k], &in[k], m);
    if (s->a[k].n != s->a[0].n)
      die("%s has %lld samples but %s has %lld: the inputs of a split need one entry per sample", s->a[k].path,
          (long long)s->a[k].n, s->a[0].path, (long long)s->a[0].n);
  }
  s->n = nin ? s->a[0].n : 0;
  free(sub);
}

/* Row r of every input from sample (first + r) mod n of the split. */
static void fill_npy_rows(unsigned char *arena, const TrInput *in, int nin, const NpySet *s, int64_t first) {
  for (int k = 0; k < nin; k++) {
    size_t row = (size_t)in[k].cols * 4;
    for (int64_t r = 0; r < in[k].rows; r++)
      memcpy(arena + in[k].offset + (size_t)r * row,
             (const unsigned char *)s->a[k].v + (size_t)((first + r) % s->n) * row, row);
  }
}

/* Micro-batch mb of the current training window (Order) for this rank: its
 * rows (rank*micro + mb)*B .. + B - 1 (data parallelism: the window holds
 * every rank's micro-batches, memplan_trainer.h). */
static void fill_npy_batch(unsigned char *arena, const TrInput *in, int nin, const NpySet *s, const Order *o, int mb,
                           int micro, int rank) {
  int64_t first = ((int64_t)rank * micro + mb) * in[0].rows;
  for (int k = 0; k < nin; k++) {
    size_t row = (size_t)in[k].cols * 4;
    for (int64_t r = 0; r < in[k].rows; r++)
      memcpy(arena + in[k].offset + (size_t)r * row,
             (const unsigned char *)s->a[k].v + (size_t)order_item(o, first + r) * row, row);
  }
}

// ----------------------------------------------------------------------------
// parameters: initialization, safetensors

/* What a weights file holds: the parameters, then the running state. */
static int nsaved(const TrModel *m) { return m->nparams + m->nstates; }
static const TrParam *saved_at(const TrModel *m, int i) {
  return i < m->nparams ? &m->params[i] : &m->states[i - m->nparams];
}

/* Running state starts at its init (zeros or ones); the seed plays no part. */
static void init_states(unsigned char *arena, const TrModel *m) {
  for (int i = 0; i < m->nstates; i++) {
    const TrParam *p = &m->states[i];
    float *w = (float *)(arena + p->offset);
    for (int64_t k = 0; k < p->numel; k++) w[k] = p->init == TR_INIT_ONES ? 1.0f : 0.0f;
  }
}

/* Frozen weights' storage (memplan_kernels.h): elements k0 .. k0 + n - 1 of
 * parameter p (k0 and n whole rows for int8, whole blocks of RT_NF4_BLOCK
 * for NF4, the last chunk excepted) from fp32 values w, into codes (p's
 * storage, from its start) and absmax (its absmax tensor, from its start).
 * The code of x is the nearest of x / absmax, in double, ties to the lower;
 * an all-zero row or block has absmax 0 and every code 0.0's. */
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static int nearest_code(const float *table, int ncodes, double r) {
  int c = 0;
  while (c + 1 < ncodes && r > ((double)table[c] + (double)table[c + 1]) / 2) c++;
  return c;
}
static void quantize(const TrParam *p, const float *w, int64_t k0, int64_t n, unsigned char *codes, float *absmax) {
  static const float nf4[16] = RT_NF4_TABLE;
  if (p->store == TR_STORE_BF16) {
    for (int64_t k = 0; k < n; k++) ((uint16_t *)codes)[k0 + k] = f32_to_bf16(w[k]);
    return;
  }
  int64_t group = p->store == TR_STORE_I8 ? (p->rank ? p->shape[p->rank - 1] : 1) : RT_NF4_BLOCK;
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    int64_t len = n - g0 < group ? n - g0 : group;
    float a = 0.0f;
    for (int64_t k = 0; k < len; k++) a = fabsf(w[g0 + k]) > a ? fabsf(w[g0 + k]) : a;
    absmax[(k0 + g0) / group] = a;
    for (int64_t k = 0; k < len; k++) {
      double r = a > 0.0f ? (double)w[g0 + k] / (double)a : 0.0;
      int64_t at = k0 + g0 + k;
      if (p->store == TR_STORE_I8) ((int8_t *)codes)[at] = (int8_t)lrint(127.0 * r);
      else {
        int c = nearest_code(nf4, 16, r), shift = at % 2 ? 0 : 4;
        codes[at / 2] = (unsigned char)((codes[at / 2] & ~(15 << shift)) | (c << shift));
      }
    }
  }
}

/* Elements a chunk of quantize() takes: whole rows (int8) or blocks. */
static int64_t quant_chunk(const TrParam *p) {
  int64_t cols = p->store == TR_STORE_I8 && p->rank ? p->shape[p->rank - 1] : RT_NF4_BLOCK;
  int64_t rows = cols ? ((int64_t)1 << 20) / cols : 1;
  return cols * (rows ? rows : 1);
}

static void init_params(unsigned char *arena, const TrModel *m, uint64_t seed) {
  for (int i = 0; i < m->nparams; i++) {
    const TrParam *p = &m->params[i];
    if (p->store == TR_STORE_ABSMAX) continue; /* its weight's quantize() writes it */
    int q = p->store != TR_STORE_F32;
    int64_t chunk = q ? quant_chunk(p) : p->numel;
    float *w =
        q ? xmalloc(sizeof(float) * (size_t)(chunk ? chunk : 1), "a weight's chunk") : (float *)(arena + p->offset);
    Rng r = {.s = mix64(seed) ^ mix64((uint64_t)i + 1)}; // one stream per parameter
    for (int64_t k0 = 0; k0 < p->numel; k0 += chunk) {
      int64_t n = p->numel - k0 < chunk ? p->numel - k0 : chunk;
      for (int64_t k = 0; k < n; k++) {
        switch (p->init) {
        case TR_INIT_NORMAL: w[k] = (float)(p->scale * rng_normal(&r)); break;
        case TR_INIT_UNIFORM: w[k] = (float)(p->scale * (2.0 * rng_uniform(&r) - 1.0)); break;
        case TR_INIT_ONES: w[k] = 1.0f; break;
        default: w[k] = 0.0f; break;
        }
      }
      if (q)
        quantize(p, w, k0, n, arena + p->offset,
                 p->absmax >= 0 ? (float *)(arena + m->params[p->absmax].offset) : NULL);
    }
    if (q) free(w);
  }
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* safetensors: u64 header length N, N bytes of JSON (padded with spaces to a
 * multiple of 8), then the tensors' bytes; F32, little-endian, row-major.
 * Written to a temp file, synced, then renamed over path. */

/* Temp files PATH.tmp.PID that a process killed inside a save left behind
 * (PID no longer running): removed after a save succeeded. Only this
 * pattern, only dead writers; a failure here is harmless. */
static void remove_stale_temps(const char *path) {
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  int dn = slash && slash > path ? (int)(slash - path) : 1; /* "dir", "/" or "." */
  char *dir = xmalloc((size_t)dn + 1, "a path");
  snprintf(dir, (size_t)dn + 1, "%.*s", dn, slash ? path : ".");
  DIR *d = opendir(dir);
  size_t bn = strlen(base);
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
    char *end;
    if (strncmp(e->d_name, base, bn) || strncmp(e->d_name + bn, ".tmp.", 5)) continue;
    long pid = strtol(e->d_name + bn + 5, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    size_t fn = strlen(dir) + strlen(e->d_name) + 2;
    char *f = xmalloc(fn, "a path");
    snprintf(f, fn, "%s/%s", dir, e->d_name);
    remove(f);
    free(f);
  }
  if (d) closedir(d);
  free(dir);
}

/* The temp file a save writes before it renames it over path: PATH.tmp.PID. */
static char *temp_name(const char *path) {
  size_t tn = strlen(path) + 32;
  char *tmp = xmalloc(tn, "a path");
  snprintf(tmp, tn, "%s.tmp.%ld", path, (long)getpid());
  return tmp;
}

/* --save, checked before the first step: the save creates its temp file in
 * PATH's directory and renames it over PATH, so create (and remove) that same
 * temp file now, and refuse a PATH that is a directory; a run must not train
 * for hours and then fail to write. */
static void check_save_path(const char *path) {
  struct stat st;
  if (!*path) die("--save '': expected a file name");
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) die("cannot write --save %s: it is a directory", path);
  char *tmp = temp_name(path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    int e = errno;
    die("cannot write --save %s: %s (checked by creating %s)", path, strerror(e), tmp);
  }
  close(fd);
  remove(tmp);
  free(tmp);
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *d) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Checkpoints (the format: memplan_trainer.h). Every tensor a checkpoint
 * holds: the parameters, the running state, then the optimizer state (raw
 * bytes in its own dtype). */
enum { CK_PARAM, CK_STATE, CK_OPT };
typedef struct {
  const char *name;
  int64_t offset, bytes, numel;
  char dtype[8]; /* safetensors' name: plan.json's in upper case ("F32", "BF16") */
  int rank, kind;
  const int64_t *shape;
  int64_t packed[1]; /* an NF4 weight's shape in the file: [ceil(numel / 2)] bytes */
} CkTensor;

/* The checkpoint's metadata: string keys and string values (safetensors'
 * __metadata__ holds strings only). */
enum { META_MAX = 40, META_KEY = 24, META_VAL = 2048 };
typedef struct {
  int n;
  char key[META_MAX][META_KEY], val[META_MAX][META_VAL];
} Meta;

__attribute__((format(printf, 3, 4))) static void meta_set(Meta *mt, const char *key, const char *fmt, ...) {
  if (mt->n == META_MAX) die("internal: too many metadata entries");
  snprintf(mt->key[mt->n], META_KEY, "%s", key);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mt->val[mt->n], META_VAL, fmt, ap);
  va_end(ap);
  mt->n++;
}

static const char *meta_get(const Meta *mt, const char *key) {
  for (int i = 0; i < mt->n; i++)
    if (!strcmp(mt->key[i], key)) return mt->val[i];
  return NULL;
}

/* The tensors, and a device's staging buffer (at most TR_STAGE_BYTES): set
 * up once, before the first step, so that saving inside the training loop
 * needs no memory for the tensors. */
#define TR_STAGE_BYTES ((int64_t)64 << 20)
static struct {
  CkTensor *t;
  int n;
  unsigned char *stage;
  int64_t stage_bytes;
} ck;

/* Buffers of one load or save, reachable from here while they live, so that
 * an error's exit leaves nothing a leak checker would call lost. */
static struct {
  char *hdr, *tmp, *seen;
  MjSt st; /* a header read */
} ck_io;

/* with_opt 0: the weights and running state only (a ZeRO run's ranks each
 * hold a shard of the optimizer state, which is not saved). */
static void ck_setup(const TrModel *m, int with_opt) {
  ck.n = nsaved(m) + (with_opt ? m->nopt_states : 0);
  ck.t = xmalloc(sizeof(CkTensor) * (size_t)(ck.n ? ck.n : 1), "the checkpoint table");
  int64_t most = 0;
  for (int i = 0; i < ck.n; i++) {
    CkTensor *c = &ck.t[i];
    if (i < nsaved(m)) {
      const TrParam *p = saved_at(m, i);
      static const char *const dt[] = {"F32", "BF16", "I8", "U8", "F32"}; /* by TR_STORE_* */
      *c = (CkTensor){
          p->name,  p->offset,           p->bytes, p->numel, "", p->rank, i < m->nparams ? CK_PARAM : CK_STATE,
          p->shape, {(p->numel + 1) / 2}};
      snprintf(c->dtype, sizeof c->dtype, "%s", dt[p->store]);
      if (p->store == TR_STORE_NF4) c->rank = 1, c->shape = c->packed;
    } else {
      const TrOptState *p = &m->opt_states[i - nsaved(m)];
      int64_t numel = 1;
      for (int d = 0; d < p->rank; d++) numel *= p->shape[d];
      *c = (CkTensor){p->name, p->offset, p->bytes, numel, "", p->rank, CK_OPT, p->shape, {0}};
      for (int k = 0; k < 7 && p->dtype[k]; k++)
        c->dtype[k] = (char)(p->dtype[k] >= 'a' && p->dtype[k] <= 'z' ? p->dtype[k] - 32 : p->dtype[k]);
    }
    if (c->bytes > most) most = c->bytes;
  }
  if (m->device) {
    ck.stage_bytes = most < TR_STAGE_BYTES ? most : TR_STAGE_BYTES;
    ck.stage = xmalloc((size_t)(ck.stage_bytes ? ck.stage_bytes : 1), "the checkpoint staging buffer");
  }
}

/* Writes the checkpoint: the header (metadata first, then the tensors in
 * table order), then their bytes, from the host arena, or on a device
 * through the staging buffer. To a temp file, synced, renamed over path,
 * and the directory synced: a crash leaves the old file or the new one. */
static void save_checkpoint(const char *path, const Meta *mt, const unsigned char *arena, const TrDevice *dev) {
  size_t hn = 0;
  FILE *h = open_memstream(&ck_io.hdr, &hn);
  if (!h) die("cannot build the safetensors header: %s", strerror(errno));
  fprintf(h, "{\"__metadata__\":{");
  for (int i = 0; i < mt->n; i++) {
    if (i) fputc(',', h);
    json_str(h, mt->key[i]);
    fputc(':', h);
    json_str(h, mt->val[i]);
  }
  fputc('}', h);
  int64_t off = 0;
  for (int i = 0; i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    fputc(',', h);
    json_str(h, c->name);
    fprintf(h, ":{\"dtype\":\"%s\",\"shape\":[", c->dtype);
    for (int d = 0; d < c->rank; d++) fprintf(h, "%s%lld", d ? "," : "", (long long)c->shape[d]);
    fprintf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + c->bytes));
    off += c->bytes;
  }
  fputc('}', h);
  while ((ftell(h) % 8) != 0) fputc(' ', h);
  fclose(h);
  char *tmp = ck_io.tmp = temp_name(path);
  FILE *f = fopen(tmp, "wb");
  if (!f) die("cannot write %s: %s", tmp, strerror(errno));
  unsigned char len[8];
  for (int k = 0; k < 8; k++) len[k] = (unsigned char)((uint64_t)hn >> (8 * k));
  int ok = fwrite(len, 1, 8, f) == 8 && fwrite(ck_io.hdr, 1, hn, f) == hn;
  for (int i = 0; ok && i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    if (!dev) {
      ok = fwrite(arena + c->offset, 1, (size_t)c->bytes, f) == (size_t)c->bytes;
      continue;
    }
    for (int64_t at = 0; ok && at < c->bytes; at += ck.stage_bytes) {
      int64_t n = c->bytes - at < ck.stage_bytes ? c->bytes - at : ck.stage_bytes;
      dev->download_to(ck.stage, arena, c->offset + at, n);
      ok = fwrite(ck.stage, 1, (size_t)n, f) == (size_t)n;
    }
  }
  ok = fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    die("cannot write %s: %s", path, strerror(e));
  }
  const char *slash = strrchr(path, '/');
  char *dir = xmalloc(slash ? (size_t)(slash - path) + 2 : 2, "a path");
  snprintf(dir, slash ? (size_t)(slash - path) + 2 : 2, "%.*s", slash ? (int)(slash - path + (slash == path)) : 1,
           slash ? path : ".");
  int dfd = open(dir, O_RDONLY);
  if (dfd >= 0) fsync(dfd), close(dfd); /* the rename itself on disk; a failure here loses nothing written */
  free(dir);
  free(tmp);
  free(ck_io.hdr);
  ck_io.tmp = ck_io.hdr = NULL;
  remove_stale_temps(path);
}

/* A loaded f32 tensor that holds NaN or Inf would only show up steps later as
 * a non-finite loss; name the tensor and the element (flat and per
 * dimension). Optimizer state too, and AdamW's second moment (.adam_v, a mean
 * of squares) must not be negative. w holds elements k0 .. k0 + count - 1 of
 * it; where: the file, or the step (check_run_finite); then ends the message. */
static void check_finite(const char *where, const CkTensor *c, const float *w, int64_t k0, int64_t count,
                         const char *then) {
  size_t nl = strlen(c->name);
  int second_moment = c->kind == CK_OPT && nl > 7 && !strcmp(c->name + nl - 7, ".adam_v");
  uint32_t bad = 0; /* first a branch-free pass (it vectorizes): an exponent of all ones is Inf or NaN */
  for (int64_t i = 0; i < count; i++) {
    uint32_t u;
    memcpy(&u, &w[i], 4);
    bad |= (u & 0x7f800000u) == 0x7f800000u || (second_moment && u >> 31);
  }
  if (!bad) return;
  int64_t i = 0;
  while (i < count && isfinite(w[i]) && !(second_moment && w[i] < 0)) i++;
  if (i == count) return;
  int64_t k = k0 + i, at[6] = {0}, rest = k;
  for (int d = c->rank - 1; d >= 0; d--) {
    at[d] = c->shape[d] ? rest % c->shape[d] : 0;
    rest = c->shape[d] ? rest / c->shape[d] : 0;
  }
  char idx[128], val[32];
  shape_str(idx, sizeof idx, c->rank, at);
  snprintf(val, sizeof val, "%g", (double)w[i]);
  die("%s: tensor '%s' has a %s: element %lld (index %s) is %s%s", where, c->name,
      isfinite(w[i])      ? "negative value, and it is AdamW's second moment (a mean of squares)"
      : c->kind == CK_OPT ? "non-finite value"
                          : "non-finite weight",
      (long long)k, idx, val, then);
}

/* n bytes at file offset off into dst; a short file is an error naming the tensor. */
static void read_at(int fd, void *dst, int64_t n, int64_t off, const char *path, const char *name) {
  unsigned char *p = dst;
  while (n > 0) {
    ssize_t k = pread(fd, p, (size_t)n, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      die("%s: cannot read tensor '%s': %s", path, name, k < 0 ? strerror(errno) : "the file ended early (truncated?)");
    p += k, off += k, n -= k;
  }
}

/* One tensor entry of a safetensors header (runtime/memplan_json.c checked it). */
typedef MjStTensor CkEntry;

/* A checkpoint's header, read without its data and checked whole by the
 * project's one safetensors reader (mj_st_read: the JSON, every entry, the
 * data section exactly covered): the entries, and the metadata into mt
 * (when not NULL). Returns the entries (*n of them, alive in ck_io.st until
 * mj_st_free) and sets *data0 (where the data starts) and *size. */
static CkEntry *read_header(int fd, const char *path, const char *what, Meta *mt, int *n, int64_t *data0,
                            int64_t *size) {
  struct stat st;
  if (fstat(fd, &st) != 0) die("cannot read %s file %s: %s", what, path, strerror(errno));
  if (S_ISDIR(st.st_mode)) die("cannot read %s file %s: it is a directory", what, path);
  *size = (int64_t)st.st_size;
  if (*size < 8) die("%s: too short for a safetensors file (%lld bytes)", path, (long long)*size);
  unsigned char len[8];
  read_at(fd, len, 8, 0, path, "(the header length)");
  uint64_t hn = 0;
  for (int k = 0; k < 8; k++) hn |= (uint64_t)len[k] << (8 * k);
  if (hn > (uint64_t)*size - 8)
    die("%s: header length %llu runs past the end of the file (truncated?)", path, (unsigned long long)hn);
  if (hn > (uint64_t)MJ_ST_MAX_HEADER)
    die("%s: a header of %llu bytes, over the 100 MiB a safetensors header may have (not a checkpoint?)", path,
        (unsigned long long)hn);
  *data0 = 8 + (int64_t)hn;
  char *hdr = ck_io.hdr = xmalloc((size_t)hn + 1, "the safetensors header");
  read_at(fd, hdr, (int64_t)hn, 8, path, "(the header)");
  MjError err;
  if (mj_st_read(&ck_io.st, hdr, (size_t)hn, *size - *data0, &err))
    die("%s: malformed safetensors header at byte %lld: %s", path, (long long)err.off + 8, err.msg);
  free(hdr);
  ck_io.hdr = NULL;
  const MjVal *meta = ck_io.st.meta;
  if (mt && meta) {
    if (meta->n > META_MAX)
      die("%s: __metadata__ holds %d entries; a trainer checkpoint has at most %d (not a checkpoint of this trainer?)",
          path, meta->n, META_MAX);
    for (int k = 0; k < meta->n; k++) {
      const MjVal *v = &meta->u.items[k];
      if (strlen(v->key) >= META_KEY || v->n >= META_VAL)
        die("%s: __metadata__ '%.100s': a key over %d bytes or a value over %d bytes (not a checkpoint of this "
            "trainer?)",
            path, v->key, META_KEY - 1, META_VAL - 1);
      snprintf(mt->key[mt->n], META_KEY, "%s", v->key);
      snprintf(mt->val[mt->n++], META_VAL, "%s", v->u.s);
    }
  }
  *n = ck_io.st.n;
  return ck_io.st.t;
}

/* A frozen weight that the plan stores quantized, given in the file as F32
 * (or BF16 for int8 and NF4): read in chunks, checked finite, quantized into
 * its storage and its absmax (on a device through host copies of both). */
static int quantizes(const TrParam *p, const CkEntry *e) {
  return (p->store == TR_STORE_BF16 || p->store == TR_STORE_I8 || p->store == TR_STORE_NF4) &&
         (!strcmp(e->dtype, "F32") || (!strcmp(e->dtype, "BF16") && p->store != TR_STORE_BF16));
}
static void load_quantized(int fd, const char *path, const CkEntry *e, int64_t data0, unsigned char *arena,
                           const TrModel *m, const TrParam *p) {
  int bf = !strcmp(e->dtype, "BF16"), same = e->rank == p->rank;
  for (int d = 0; same && d < e->rank; d++) same = e->shape[d] == p->shape[d];
  if (!same) {
    char got[128], want[128];
    shape_str(got, sizeof got, e->rank, e->shape);
    shape_str(want, sizeof want, p->rank, p->shape);
    die("%s: shape mismatch for tensor '%s': the file has %s, the model needs %s", path, e->name, got, want);
  }
  if (e->end - e->begin != (bf ? 2 : 4) * p->numel)
    die("%s: tensor '%s': data_offsets [%lld, %lld] do not hold its %lld %s elements", path, e->name,
        (long long)e->begin, (long long)e->end, (long long)p->numel, e->dtype);
  const TrDevice *dev = m->device;
  const TrParam *a = p->absmax >= 0 ? &m->params[p->absmax] : NULL;
  unsigned char *codes = dev ? xmalloc((size_t)p->bytes, "a weight's codes") : arena + p->offset;
  float *am = !a ? NULL : dev ? xmalloc((size_t)a->bytes, "a weight's absmax") : (float *)(arena + a->offset);
  int64_t chunk = quant_chunk(p);
  float *w = xmalloc(sizeof(float) * (size_t)chunk, "a weight's chunk");
  uint16_t *h = bf ? xmalloc(sizeof(uint16_t) * (size_t)chunk, "a weight's chunk") : NULL;
  CkTensor c = {p->name, p->offset, 4 * p->numel, p->numel, "F32", p->rank, CK_PARAM, p->shape, {0}};
  for (int64_t k0 = 0; k0 < p->numel; k0 += chunk) {
    int64_t n = p->numel - k0 < chunk ? p->numel - k0 : chunk;
    if (bf) {
      read_at(fd, h, 2 * n, data0 + e->begin + 2 * k0, path, p->name);
      for (int64_t k = 0; k < n; k++) {
        uint32_t x = (uint32_t)h[k] << 16;
        memcpy(&w[k], &x, 4);
      }
    } else read_at(fd, w, 4 * n, data0 + e->begin + 4 * k0, path, p->name);
    check_finite(path, &c, w, k0, n, "");
    quantize(p, w, k0, n, codes, am);
  }
  if (dev) {
    dev->upload_from(arena, p->offset, codes, p->bytes);
    if (a) dev->upload_from(arena, a->offset, am, a->bytes);
    free(codes), free(am);
  }
  free(w), free(h);
}

/* --load (weights: parameters and running state; optimizer state and
 * metadata in the file are ignored) or --resume (every tensor), streamed:
 * each tensor read from the file straight to its arena offset, on a device
 * through the staging buffer in chunks; never a copy of the whole file.
 * --resume checked the header and metadata before (resume_opts). */
/* A LoRA adapter's parameter ("L.lora_A", "L.lora_B"): --load of a base model's weights initializes it. */
static int is_adapter(const char *name) {
  size_t n = strlen(name);
  return n > 7 && (!strcmp(name + n - 7, ".lora_A") || !strcmp(name + n - 7, ".lora_B"));
}

static void load_checkpoint(const char *path, unsigned char *arena, const TrModel *m, int resume) {
  const char *what = resume ? "checkpoint" : "weights";
  int fd = open_input(path, what);
  int ne;
  int64_t data0, size;
  CkEntry *ents = read_header(fd, path, what, NULL, &ne, &data0, &size);
  int need = resume ? ck.n : nsaved(m);
  char *seen = ck_io.seen = xmalloc((size_t)ck.n + 1, "flags");
  memset(seen, 0, (size_t)ck.n + 1);
  const TrDevice *dev = m->device;
  for (int x = 0; x < ne; x++) {
    const CkEntry *e = &ents[x];
    int i = 0;
    while (i < ck.n && strcmp(ck.t[i].name, e->name)) i++;
    if (i >= need) { /* --load: the optimizer state of a checkpoint is not a weight */
      if (i == ck.n)
        fprintf(stderr, "trainer: warning: %s: tensor '%s' is not a parameter of %s; ignored\n", path, e->name,
                m->model);
      continue;
    }
    const CkTensor *c = &ck.t[i];
    if (c->kind == CK_PARAM && quantizes(&m->params[i], e)) {
      load_quantized(fd, path, e, data0, arena, m, &m->params[i]);
      seen[i] = 1;
      if (m->params[i].absmax >= 0) seen[m->params[i].absmax] = 1;
      continue;
    }
    if (strcmp(e->dtype, c->dtype))
      die("%s: tensor '%s' has dtype %s; the trainer reads %s", path, e->name, e->dtype, c->dtype);
    int same = e->rank == c->rank;
    for (int d = 0; same && d < e->rank; d++) same = e->shape[d] == c->shape[d];
    if (!same) {
      char got[128], want[128];
      shape_str(got, sizeof got, e->rank, e->shape);
      shape_str(want, sizeof want, c->rank, c->shape);
      die("%s: shape mismatch for tensor '%s': the file has %s, the model needs %s", path, e->name, got, want);
    }
    if (e->end - e->begin != c->bytes) /* a dtype and shape that agree have the bytes: a check of the checks */
      die("%s: tensor '%s': data_offsets [%lld, %lld] do not hold its %lld bytes", path, e->name, (long long)e->begin,
          (long long)e->end, (long long)c->bytes);
    int f32 = !strcmp(c->dtype, "F32");
    if (!dev) {
      read_at(fd, arena + c->offset, c->bytes, data0 + e->begin, path, c->name);
      if (f32) check_finite(path, c, (const float *)(arena + c->offset), 0, c->numel, "");
    } else {
      for (int64_t at = 0; at < c->bytes; at += ck.stage_bytes) {
        int64_t n = c->bytes - at < ck.stage_bytes ? c->bytes - at : ck.stage_bytes;
        read_at(fd, ck.stage, n, data0 + e->begin + at, path, c->name);
        if (f32) check_finite(path, c, (const float *)ck.stage, at / 4, n / 4, "");
        dev->upload_from(arena, c->offset + at, ck.stage, n);
      }
    }
    seen[i] = 1;
  }
  int fresh = 0;
  for (int i = 0; i < need; i++)
    if (!seen[i] && !resume && is_adapter(ck.t[i].name)) fresh++; /* a base model's weights: new adapters */
    else if (!seen[i])
      die("%s: no tensor '%s' (the model needs every %s)", path, ck.t[i].name,
          ck.t[i].kind == CK_PARAM   ? "parameter"
          : ck.t[i].kind == CK_STATE ? "running statistic: role \"state\" in plan.json"
                                     : "optimizer state to resume: role \"optimizer_state\" in plan.json");
  if (fresh)
    printf("%s: %d LoRA adapter tensors not in the file: initialized (A Kaiming-uniform, B zeros)\n", path, fresh);
  free(seen);
  mj_st_free(&ck_io.st);
  ck_io.seen = NULL;
  close(fd);
}

// ----------------------------------------------------------------------------
// profiling

int tr_profiling;
static double *prof_time, prof_last;

void tr_tick(int op) {
  double t = now_s();
  prof_time[op] += t - prof_last;
  prof_last = t;
}

typedef struct {
  const char *kind, *phase, *layer;
  double t;
} ProfRow;

static int prof_cmp(const void *a, const void *b) {
  double x = ((const ProfRow *)a)->t, y = ((const ProfRow *)b)->t;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_report(const TrModel *m, int64_t steps, double step_s) {
  ProfRow *rows = xmalloc(sizeof(ProfRow) * (size_t)m->nops, "profile"),
          *kinds = xmalloc(sizeof(ProfRow) * (size_t)m->nops, "profile");
  int nk = 0;
  double total = 0.0;
  for (int i = 0; i < m->nops; i++) {
    rows[i] = (ProfRow){m->ops[i].kind, m->ops[i].phase, m->ops[i].layer, prof_time[i] / (double)steps};
    total += rows[i].t;
    int k = 0;
    while (k < nk && (strcmp(kinds[k].kind, rows[i].kind) || strcmp(kinds[k].phase, rows[i].phase))) k++;
    if (k == nk) kinds[nk++] = (ProfRow){rows[i].kind, rows[i].phase, "", 0.0};
    kinds[k].t += rows[i].t;
  }
  qsort(rows, (size_t)m->nops, sizeof *rows, prof_cmp);
  qsort(kinds, (size_t)nk, sizeof *kinds, prof_cmp);
  printf("\nprofile over %lld steps: ops take %.2f ms of a %.2f ms step\n", (long long)steps, 1e3 * total,
         1e3 * step_s);
  printf("by op kind:\n  %10s %6s  %-16s %s\n", "ms/step", "share", "kind", "phase");
  for (int k = 0; k < nk; k++)
    printf("  %10.3f %5.1f%%  %-16s %s\n", 1e3 * kinds[k].t, 100.0 * kinds[k].t / step_s, kinds[k].kind,
           kinds[k].phase);
  int top = m->nops < 20 ? m->nops : 20;
  printf("top %d ops:\n  %10s %6s  %-16s %-9s %s\n", top, "ms/step", "share", "kind", "phase", "layer");
  for (int i = 0; i < top; i++)
    printf("  %10.3f %5.1f%%  %-16s %-9s %s\n", 1e3 * rows[i].t, 100.0 * rows[i].t / step_s, rows[i].kind,
           rows[i].phase, rows[i].layer);
  free(rows);
  free(kinds);
}

// ----------------------------------------------------------------------------
// options

static const char help_text[] =
    "usage: trainer [options]\n"
    "Trains %s with the plan memplan compiled into this program.\n"
    "\n"
    "  --steps N         training steps (default 100)\n"
    "  --lr X            learning rate, > 0 and <= 3.4e38 (default %g, from the model's YAML)\n"
    "  --schedule S      lr schedule: constant, cosine or linear (default %s, from the YAML);\n"
    "                    linear warmup to lr, then cosine or linear decay to the floor\n"
    "                    final-fraction x lr at the last of the --steps steps\n"
    "  --warmup N        warmup steps: lr x t/N at step t <= N (default %lld); given with a decay,\n"
    "                    fewer than --steps\n"
    "  --final-fraction F  the decay's floor as a fraction of lr, in [0, 1] (default %g;\n"
    "                    cosine and linear only)\n"
    "  --seed N          parameter initialization seed (default 1337)\n"
    "  --threads N       OpenMP and OpenBLAS threads, 1 to 256 (default: OMP_NUM_THREADS or all\n"
    "                    cores; CPU trainer only)\n"
    "  --no-blas-select  CPU trainer: run the OpenBLAS kernel the library detected, even a\n"
    "                    generic one (see below; this exact spelling)\n"
    "  --text FILE       training text: each byte is a token (models with V >= 256)\n"
    "  --data FILE       training tokens, llm.c format: 256 int32 header (20240520, 1, n, ...),\n"
    "                    then n uint16 tokens\n"
    "  --val FILE        evaluation data, same format (default: the training data)\n"
    "  --npy DIR         every input from NumPy files named after it: DIR/train/<input>.npy\n"
    "                    for training, DIR/test/<input>.npy for evaluation (see below)\n"
    "  --eval-every N    evaluate every N steps (default 0: only after the last step)\n"
    "  --eval-batches N  batches per evaluation, read from the start of the data (default 4;\n"
    "                    with --npy, every test sample once; 0: none)\n"
    "  --log-every N     print one line every N steps (default 1)\n"
    "  --log FILE        also write step,loss,ms,eval_loss,eval_accuracy,lr,grad_norm as CSV\n"
    "  --clip X          gradient clipping: the largest global L2 norm of the gradients, >= 0\n"
    "                    (default %g, the YAML's optimizer.clip_grad_norm; 0: no clipping);\n"
    "                    only for plans compiled with clip_grad_norm (their gradients are kept)\n"
    "  --profile         time every op; print time per op kind and the top ops at the end\n"
    "  --load FILE       initial weights from a safetensors file (names as in plan.json); a new\n"
    "                    run: a checkpoint's optimizer state and metadata are not read\n"
    "  --save FILE       a checkpoint after the last step (atomic: temp file + fsync + rename;\n"
    "                    checked writable before the first step; see below)\n"
    "  --save-every N    a checkpoint after every N-th step, PATH-stepNNNNNN.safetensors\n"
    "                    (PATH: --save's name without .safetensors, or 'checkpoint')\n"
    "  --keep K          checkpoints of --save-every to keep, the newest (default 3)\n"
    "  --resume FILE     continue the run a checkpoint saved: weights, optimizer state, step,\n"
    "                    data position, seed, loss scale, lr schedule; options not given\n"
    "                    take the checkpoint's values (--steps: its run's total)\n"
    "  --no-shuffle      training windows in order (also --shuffle 0; default --shuffle 1:\n"
    "                    each pass over the data in a new order drawn from --seed)\n"
    "  --loss-scale X    initial loss scale of fp16 plans, > 0 and <= 3.4e38 (default 65536;\n"
    "                    halves on overflow, doubles after 2000 clean steps)\n"
    "  --force-overflow N  test hook: scale step N's loss gradient by inf, as an overflow would\n"
    "  --comm-timeout S  data-parallel plans (mpirun): a rank exits when a step takes more than\n"
    "                    S seconds, as when another rank died (default 600; 0: no limit)\n"
    "  --kill-rank R@N   test hook: rank R exits abruptly (no MPI_Finalize) at step N\n"
    "  --hang-rank R@N   test hook: rank R stops at step N, its watchdog too (the others' must\n"
    "                    end the run)\n"
    "  --cuda-graph      CUDA trainer: capture the step into a CUDA graph once, replay it\n"
    "                    every step (plans without micro-batches or loss scaling)\n"
    "  --generate N      generate N tokens after training (or alone: --load FILE --generate N,\n"
    "                    no data, no steps) from the eval plan's logits: from the plan's KV\n"
    "                    cache (--gen-context), else llm.c's loop, each token recomputing the\n"
    "                    last T tokens; text with a tokenizer or V = 256\n"
    "  --prompt TEXT     the prompt, tokenized as --text (default: <|endoftext|> with a\n"
    "                    tokenizer); at most T tokens\n"
    "  --prompt-tokens FILE  the prompt as token ids, --data's format\n"
    "  --temperature X   sampling temperature, >= 0 (default 1; 0: greedy, the first maximum)\n"
    "  --top-k K         sample among the K most likely tokens (default 0: all; 1: greedy)\n"
    "  --top-p P         sample among the fewest most likely tokens holding P of the mass,\n"
    "                    in (0, 1] (default 1); draws from --seed\n"
    "  --sample-every K  also generate after every K-th training step\n"
    "  --no-kv-cache     a plan with a KV cache (memplan compile --gen-context N) prefills the\n"
    "                    prompt once and decodes one token a step from the cache; this option\n"
    "                    recomputes each window instead, as without a cache\n"
    "  --kv-check        both: each token's cached logits against the window's recompute, the\n"
    "                    largest difference printed (a test of the cache)\n"
    "  --check-alloc     fail unless a preloaded counting allocator saw no allocation\n"
    "                    inside the training loop (tests/alloc_count.c)\n"
    "  --help            this text\n"
    "\n"
    "Each log line shows the step's lr, the time since the first step and the remaining\n"
    "time at the mean pace so far (ETA); the end shows the total and the mean throughput.\n"
    "The lr at step t of S (memplan_trainer.h): t <= warmup W: lr t/W; then with\n"
    "p = (t-W-1)/(S-W-1), cosine: lr (f + (1-f)(1+cos(pi p))/2), linear: lr (f + (1-f)(1-p)).\n"
    "Plans that clip show each step's gradient norm (before clipping; after unscaling under\n"
    "fp16), as torch.nn.utils.clip_grad_norm_ returns it, and scale every gradient by\n"
    "X / (norm + 1e-6) when that is below 1.\n"
    "\n"
    "Batches of a token model are windows of B*T+1 tokens (inputs, and targets shifted by\n"
    "one) at multiples of B*T; each pass over the data visits them in a new order, a\n"
    "Fisher-Yates permutation from --seed and the pass (as llm.c's shuffling loader; in order\n"
    "with --no-shuffle); evaluation reads them in order from the start. Models with f32\n"
    "inputs train on the synthetic 'blobs' data set (see memplan_trainer.h; never shuffled:\n"
    "every sample is new) unless --npy gives their data.\n"
    "\n"
    "A checkpoint is a safetensors file: the weights, running state and optimizer state\n"
    "(each in its own dtype), and in __metadata__ the step, data position, seed, loss scale,\n"
    "lr schedule and the plan's fingerprint (memplan_trainer.h lists the keys). Resuming with\n"
    "the same thread count continues bit for bit; a checkpoint of another plan is refused.\n"
    "\n"
    "--npy: axis 0 of every file is the sample, the rest the input's shape without its batch\n"
    "axis; f32 inputs need dtype '<f4', i32 inputs '<i4' or '<i8' (labels 0..K-1, token\n"
    "ids 0..V-1); format versions 1.0-3.0, C order. Training batches are windows of\n"
    "B samples of a permutation of the samples, new each pass (in order with --no-shuffle;\n"
    "a pass skips the last S mod B). Evaluation reads every test sample once; a last\n"
    "partial batch is padded with the first samples, not counted.\n"
    "Classification models (cross_entropy on [B, K] logits) report accuracy, the share\n"
    "of argmax(logits) == label, next to the eval loss.\n"
    "\n"
    "The CPU trainer names its BLAS library and kernel in its header (\"BLAS: ...\"). OpenBLAS\n"
    "picks a kernel when it loads; on a CPU newer than the library it may pick a generic\n"
    "one (Prescott), several times slower. When the CPU has AVX2+FMA or AVX-512 and the\n"
    "library detected an older kernel, the trainer restarts itself once with\n"
    "OPENBLAS_CORETYPE set to the best kernel (SkylakeX, Haswell or Zen) and says so. An\n"
    "OPENBLAS_CORETYPE you set is always kept; --no-blas-select keeps the library's choice.\n";

typedef struct {
  int64_t steps, seed, eval_every, eval_batches, log_every, force_overflow;
  int64_t comm_timeout, kill_rank, kill_step; /* data parallelism: the watchdog, the --kill-rank test hook */
  int hang;                                   /* --hang-rank: the rank hangs instead */
  int threads, profile, check_alloc, cuda_graph, eval_batches_given;
  int schedule, final_fraction_given; /* TR_SCHED_* */
  int64_t warmup;
  double lr, loss_scale, final_fraction;
  double clip; /* gradient clipping's max norm (0: none) */
  int clip_given;
  const char *text, *data, *val, *npy, *load, *save, *log;
  /* checkpoints and shuffling; *_given: set on the command line (a resumed
   * run takes the checkpoint's value of every option not given) */
  const char *resume;
  int64_t save_every, keep;
  int shuffle;
  int steps_given, seed_given, lr_given, schedule_given, warmup_given, loss_scale_given, shuffle_given;
  /* generation (--generate): tokens per sample, the prompt, sampling */
  int64_t generate, top_k, sample_every;
  double temperature, top_p;
  const char *prompt, *prompt_tokens;
  int no_kv_cache, kv_check; /* --no-kv-cache: recompute each window; --kv-check: both, compared */
} Opts;

static int64_t opt_int(const char *s, const char *name, int64_t min, int64_t max) {
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  if (e == s || *e || errno || v < min || v > max) {
    if (max == INT64_MAX) die("%s '%s': expected an integer >= %lld", name, s, (long long)min);
    die("%s '%s': expected an integer in [%lld, %lld]", name, s, (long long)min, (long long)max);
  }
  return v;
}

/* Every float option (--lr, --loss-scale): finite, > 0 and at most float32's
 * largest (3.4e38: the kernels take them as floats, where more is inf).
 * strtod also reads "inf", "nan" and overflows like 1e999 to inf; none of
 * them can train. */
static double opt_float(const char *s, const char *name) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !(v > 0 && v <= FLT_MAX))
    die("%s '%s': expected a finite number > 0 (at most 3.4e38, float32's largest)", name, s);
  return v;
}

static const char *const sched_names[] = {"constant", "cosine", "linear"};

static int opt_schedule(const char *s) {
  for (int k = 0; k < 3; k++)
    if (!strcmp(s, sched_names[k])) return k;
  die("--schedule '%s': expected constant, cosine or linear", s);
}

/* --clip: a finite number >= 0 (0: no clipping). */
static double opt_clip(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !isfinite(v) || !(v >= 0)) die("--clip '%s': expected a finite number >= 0", s);
  return v;
}

/* --temperature: a finite number >= 0 (0: greedy). */
static double opt_temperature(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !isfinite(v) || !(v >= 0))
    die("--temperature '%s': expected a finite number >= 0 (0: greedy, 1: the model's distribution)", s);
  return v;
}

/* --top-p: a number in (0, 1] (1: no nucleus cut). */
static double opt_top_p(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !(v > 0 && v <= 1))
    die("--top-p '%s': expected a number in (0, 1] (the probability mass kept; 1: all of it)", s);
  return v;
}

/* --final-fraction: a number in [0, 1]. */
static double opt_fraction(const char *s, const char *name) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !(v >= 0 && v <= 1)) die("%s '%s': expected a number in [0, 1]", name, s);
  return v;
}

double tr_schedule_lr(int schedule, double lr, int64_t warmup, double final_fraction, int64_t t, int64_t steps) {
  if (t <= warmup) return lr * (double)t / (double)warmup;
  if (schedule == TR_SCHED_CONSTANT) return lr;
  double p = steps - warmup - 1 > 0 ? (double)(t - warmup - 1) / (double)(steps - warmup - 1) : 1.0;
  double f = final_fraction;
  if (schedule == TR_SCHED_COSINE) return lr * (f + (1.0 - f) * 0.5 * (1.0 + cos(3.14159265358979323846 * p)));
  return lr * (f + (1.0 - f) * (1.0 - p));
}

static Opts parse_opts(int argc, char **argv, const TrModel *m) {
  enum {
    O_STEPS = 256,
    O_LR,
    O_SEED,
    O_THREADS,
    O_TEXT,
    O_DATA,
    O_VAL,
    O_EVERY,
    O_EBATCH,
    O_LOGE,
    O_LOG,
    O_PROF,
    O_LOAD,
    O_SAVE,
    O_CHECK,
    O_SCALE,
    O_FORCE,
    O_GRAPH,
    O_NPY,
    O_SCHED,
    O_WARMUP,
    O_FINAL,
    O_CLIP,
    O_COMM_TIMEOUT,
    O_KILL_RANK,
    O_HANG_RANK,
    O_RESUME,
    O_SAVE_EVERY,
    O_KEEP,
    O_SHUFFLE,
    O_NO_SHUFFLE,
    O_NO_BLAS_SELECT,
    O_GENERATE,
    O_PROMPT,
    O_PROMPT_TOKENS,
    O_TEMPERATURE,
    O_TOP_K,
    O_TOP_P,
    O_SAMPLE_EVERY,
    O_NO_KV_CACHE,
    O_KV_CHECK,
    O_HELP
  };
  // clang-format off
  static const struct option lo[] = {
      {"steps", 1, 0, O_STEPS}, {"lr", 1, 0, O_LR}, {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS},
      {"text", 1, 0, O_TEXT}, {"data", 1, 0, O_DATA}, {"val", 1, 0, O_VAL}, {"eval-every", 1, 0, O_EVERY},
      {"eval-batches", 1, 0, O_EBATCH}, {"log-every", 1, 0, O_LOGE}, {"log", 1, 0, O_LOG},
      {"profile", 0, 0, O_PROF}, {"load", 1, 0, O_LOAD}, {"save", 1, 0, O_SAVE}, {"check-alloc", 0, 0, O_CHECK},
      {"loss-scale", 1, 0, O_SCALE}, {"force-overflow", 1, 0, O_FORCE}, {"cuda-graph", 0, 0, O_GRAPH},
      {"npy", 1, 0, O_NPY}, {"schedule", 1, 0, O_SCHED}, {"warmup", 1, 0, O_WARMUP},
      {"final-fraction", 1, 0, O_FINAL}, {"clip", 1, 0, O_CLIP}, {"help", 0, 0, O_HELP},
      {"comm-timeout", 1, 0, O_COMM_TIMEOUT}, {"kill-rank", 1, 0, O_KILL_RANK}, {"hang-rank", 1, 0, O_HANG_RANK},
      {"resume", 1, 0, O_RESUME}, {"save-every", 1, 0, O_SAVE_EVERY},
      {"keep", 1, 0, O_KEEP}, {"shuffle", 1, 0, O_SHUFFLE}, {"no-shuffle", 0, 0, O_NO_SHUFFLE},
      {"no-blas-select", 0, 0, O_NO_BLAS_SELECT}, {"generate", 1, 0, O_GENERATE}, {"prompt", 1, 0, O_PROMPT},
      {"prompt-tokens", 1, 0, O_PROMPT_TOKENS}, {"temperature", 1, 0, O_TEMPERATURE}, {"top-k", 1, 0, O_TOP_K},
      {"top-p", 1, 0, O_TOP_P}, {"sample-every", 1, 0, O_SAMPLE_EVERY},
      {"no-kv-cache", 0, 0, O_NO_KV_CACHE}, {"kv-check", 0, 0, O_KV_CHECK}, {0, 0, 0, 0}};
  // clang-format on
  Opts o = {.steps = 100,
            .seed = 1337,
            .eval_batches = 4,
            .log_every = 1,
            .lr = m->lr,
            .schedule = m->schedule,
            .warmup = m->warmup,
            .final_fraction = m->final_fraction,
            .clip = m->clip_grad_norm,
            .loss_scale = 65536.0,
            .comm_timeout = 600,
            .kill_rank = -1,
            .keep = 3,
            .shuffle = 1,
            .temperature = 1.0,
            .top_p = 1.0,
#ifdef _OPENMP
            .threads = omp_get_max_threads()
#else
            .threads = 1
#endif
  };
  int c;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
    case O_STEPS: o.steps = opt_int(optarg, "--steps", 0, TR_MAX_STEPS), o.steps_given = 1; break;
    case O_LR: o.lr = opt_float(optarg, "--lr"), o.lr_given = 1; break;
    case O_SEED: o.seed = opt_int(optarg, "--seed", 0, INT64_MAX), o.seed_given = 1; break;
    case O_THREADS: o.threads = (int)opt_int(optarg, "--threads", 1, TR_MAX_THREADS); break;
    case O_TEXT: o.text = optarg; break;
    case O_DATA: o.data = optarg; break;
    case O_VAL: o.val = optarg; break;
    case O_NPY: o.npy = optarg; break;
    case O_EVERY: o.eval_every = opt_int(optarg, "--eval-every", 0, INT64_MAX); break;
    case O_EBATCH: o.eval_batches = opt_int(optarg, "--eval-batches", 0, INT64_MAX), o.eval_batches_given = 1; break;
    case O_LOGE: o.log_every = opt_int(optarg, "--log-every", 1, INT64_MAX); break;
    case O_LOG: o.log = optarg; break;
    case O_PROF: o.profile = 1; break;
    case O_LOAD: o.load = optarg; break;
    case O_SAVE: o.save = optarg; break;
    case O_CHECK: o.check_alloc = 1; break;
    case O_NO_BLAS_SELECT: break; /* read before everything else, in tr_main */
    case O_GRAPH: o.cuda_graph = 1; break;
    case O_FORCE: o.force_overflow = opt_int(optarg, "--force-overflow", 1, INT64_MAX); break;
    case O_SCALE: o.loss_scale = opt_float(optarg, "--loss-scale"), o.loss_scale_given = 1; break;
    case O_SCHED: o.schedule = opt_schedule(optarg), o.schedule_given = 1; break;
    case O_WARMUP: o.warmup = opt_int(optarg, "--warmup", 0, TR_MAX_STEPS), o.warmup_given = 1; break;
    case O_RESUME: o.resume = optarg; break;
    case O_SAVE_EVERY: o.save_every = opt_int(optarg, "--save-every", 1, INT64_MAX); break;
    case O_KEEP: o.keep = opt_int(optarg, "--keep", 1, INT64_MAX); break;
    case O_SHUFFLE:
      if (strcmp(optarg, "0") && strcmp(optarg, "1")) die("--shuffle '%s': expected 0 or 1", optarg);
      o.shuffle = optarg[0] == '1', o.shuffle_given = 1;
      break;
    case O_NO_SHUFFLE: o.shuffle = 0, o.shuffle_given = 1; break;
    case O_FINAL: o.final_fraction = opt_fraction(optarg, "--final-fraction"), o.final_fraction_given = 1; break;
    case O_CLIP: o.clip = opt_clip(optarg), o.clip_given = 1; break;
    case O_GENERATE: o.generate = opt_int(optarg, "--generate", 1, INT32_MAX); break;
    case O_PROMPT: o.prompt = optarg; break;
    case O_PROMPT_TOKENS: o.prompt_tokens = optarg; break;
    case O_TEMPERATURE: o.temperature = opt_temperature(optarg); break;
    case O_TOP_K: o.top_k = opt_int(optarg, "--top-k", 0, INT64_MAX); break;
    case O_TOP_P: o.top_p = opt_top_p(optarg); break;
    case O_SAMPLE_EVERY: o.sample_every = opt_int(optarg, "--sample-every", 1, INT64_MAX); break;
    case O_NO_KV_CACHE: o.no_kv_cache = 1; break;
    case O_KV_CHECK: o.kv_check = 1; break;
    case O_COMM_TIMEOUT: o.comm_timeout = opt_int(optarg, "--comm-timeout", 0, INT32_MAX); break;
    case O_KILL_RANK:
    case O_HANG_RANK: {
      const char *name = c == O_KILL_RANK ? "--kill-rank" : "--hang-rank";
      char *at = strchr(optarg, '@');
      if (!at) die("%s '%s': expected RANK@STEP, e.g. 1@3", name, optarg);
      *at = '\0';
      o.kill_rank = opt_int(optarg, name, 0, INT64_MAX);
      o.kill_step = opt_int(at + 1, name, 1, INT64_MAX);
      o.hang = c == O_HANG_RANK;
      break;
    }
    case 'h':
    case O_HELP:
      printf(help_text, m->model, m->lr, sched_names[m->schedule], (long long)m->warmup, m->final_fraction,
             m->clip_grad_norm);
      exit(0);
    default: fprintf(stderr, "run 'trainer --help' for the options\n"); exit(2);
    }
  }
  if (optind < argc) die("unexpected argument '%s' (see --help)", argv[optind]);
  if (!isfinite(o.lr) || !(o.lr > 0)) die("the model's learning rate is %g: give --lr X (finite, > 0)", o.lr);
  if (o.final_fraction_given && o.schedule == TR_SCHED_CONSTANT)
    die("--final-fraction is the floor of a decay, and the schedule is constant: give --schedule cosine or linear");
  if (o.cuda_graph && !m->device) die("--cuda-graph needs the CUDA trainer (trainer_cuda)");
  if (o.cuda_graph && (o.schedule != TR_SCHED_CONSTANT || o.warmup))
    die("--cuda-graph replays a step captured with one lr: not with an lr schedule (give --schedule constant "
        "--warmup 0)");
  if (o.cuda_graph && (m->accumulation > 1 || m->loss_scaling))
    die("--cuda-graph replays one captured step: not with micro-batches (%d) or loss scaling", m->accumulation);
  if (o.cuda_graph && o.profile) die("--profile times ops one by one: not with --cuda-graph");
  if (o.clip_given && !(m->clip_grad_norm > 0))
    die("--clip: this plan was compiled without gradient clipping, so each parameter is updated inside "
        "backward as soon as its gradient is complete and the gradients are never all kept; add "
        "clip_grad_norm: X to the YAML's optimizer and compile again (the report shows its memory price)");
  if (o.loss_scale_given && !m->loss_scaling)
    die("--loss-scale: this plan was compiled without loss scaling (only fp16 plans scale the loss: memplan compile "
        "--precision fp16), so it would do nothing");
  if (o.cuda_graph && m->clip_grad_norm > 0)
    die("--cuda-graph replays one captured step: not with gradient clipping (the norm is read back each step)");
  if (o.text && o.data) die("give --text or --data, not both");
  if (o.load && o.resume)
    die("--load starts a new run from a file's weights, --resume continues the run a checkpoint saved: give one");
  if (o.npy && (o.text || o.data || o.val)) die("--npy DIR gives every input: not with --text, --data or --val");
  if ((o.prompt || o.prompt_tokens || o.sample_every) && !o.generate)
    die("--prompt, --prompt-tokens and --sample-every go with --generate N (the tokens to generate)");
  if (o.prompt && o.prompt_tokens) die("give --prompt TEXT or --prompt-tokens FILE, not both");
  if (o.generate && !m->vocab) die("--generate: %s is not a language model (it reads no tokens)", m->model);
  if (o.generate && m->eval_logits_offset < 0)
    die("--generate reads the eval plan's whole logits of a causal model, and %s has none: a fused classifier "
        "loss (linear_cross_entropy: use cross_entropy on the logits in its YAML to generate) or an attention "
        "that is not causal (each token would see the ones after it)",
        m->model);
  /* standalone generation: --load CKPT --generate N trains nothing */
  int standalone = o.generate && !o.text && !o.data && !o.npy;
  if (standalone && o.steps_given && o.steps > 0)
    die("--steps %lld: training reads tokens: give --text FILE or --data FILE (or --steps 0 to only generate)",
        (long long)o.steps);
  if (standalone) o.steps = 0, o.eval_batches = 0;
  if (m->vocab && !o.text && !o.data && !o.npy && !standalone)
    die("%s reads tokens: give --text FILE, --data FILE or --npy DIR", m->model);
  if (!m->vocab && (o.text || o.data || o.val))
    die("%s reads no tokens: --text, --data and --val do not apply (--npy DIR gives its inputs; without it, it "
        "trains on synthetic data)",
        m->model);
  return o;
}

// ----------------------------------------------------------------------------
// data parallelism (plans for N ranks): MPI in trainer_mpi (MEMPLAN_MPI)
//
// Errors return (MPI_ERRORS_RETURN) and end the run with the call and MPI's
// message. A rank that dies makes mpirun end the others; a rank that hangs
// (or a collective that never completes) trips the watchdog: every step must
// end within --comm-timeout seconds, or the rank exits naming the step.

#ifdef MEMPLAN_MPI
/* Counts of one MPI call are ints: 2^31 - 1 elements (8 GiB of f32) at most. */
static int mpi_count(int64_t n, const char *what) {
  if (n > 0x7fffffff) die("%s: %lld elements are more than one MPI call carries (2^31 - 1)", what, (long long)n);
  return (int)n;
}

static void mpi_ok(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  die("%s failed: %s (did another rank stop?)", what, msg);
}
#endif

void tr_allreduce(float *g, int64_t n) {
#ifdef MEMPLAN_MPI
  mpi_ok(MPI_Allreduce(MPI_IN_PLACE, g, mpi_count(n, "allreduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
         "MPI_Allreduce");
#else
  (void)g, (void)n;
#endif
}

/* One reduce per rank, rooted at the shard's owner, in place there (sizes
 * may differ: the last shards are shorter); then the owner's slice into
 * its shard buffer, when it has one. */
void tr_reduce_scatter(float *g, float *shard, int64_t n, int accumulate) {
  int64_t s = (n + tr_ranks - 1) / tr_ranks;
  for (int r = 0; r < tr_ranks; r++) {
    int64_t lo = (int64_t)r * s < n ? (int64_t)r * s : n, len = (lo + s < n ? lo + s : n) - lo;
    if (!len) continue;
#ifdef MEMPLAN_MPI
    int c = mpi_count(len, "reduce_scatter");
    mpi_ok(MPI_Reduce(r == tr_rank ? MPI_IN_PLACE : g + lo, r == tr_rank ? g + lo : NULL, c, MPI_FLOAT, MPI_SUM, r,
                      MPI_COMM_WORLD),
           "MPI_Reduce");
#endif
    if (r != tr_rank || shard == g + lo) continue;
    if (!accumulate) memcpy(shard, g + lo, (size_t)len * sizeof(float));
    else
      for (int64_t i = 0; i < len; i++) shard[i] += g[lo + i];
  }
}

/* One broadcast per rank, from the shard's owner. */
void tr_all_gather(float *p, int64_t n) {
#ifdef MEMPLAN_MPI
  int64_t s = (n + tr_ranks - 1) / tr_ranks;
  for (int r = 0; r < tr_ranks; r++) {
    int64_t lo = (int64_t)r * s < n ? (int64_t)r * s : n, len = (lo + s < n ? lo + s : n) - lo;
    if (len) mpi_ok(MPI_Bcast(p + lo, mpi_count(len, "all_gather"), MPI_FLOAT, r, MPI_COMM_WORLD), "MPI_Bcast");
  }
#else
  (void)p, (void)n;
#endif
}

void tr_bcast(void *p, int64_t bytes) {
#ifdef MEMPLAN_MPI
  if (tr_ranks > 1) mpi_ok(MPI_Bcast(p, mpi_count(bytes, "broadcast"), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
#else
  (void)p, (void)bytes;
#endif
}

/* The mean of a value over the ranks (the logged loss). */
static double ranks_mean(double v) {
#ifdef MEMPLAN_MPI
  if (tr_ranks > 1) {
    double sum = 0.0;
    mpi_ok(MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce (loss)");
    return sum / tr_ranks;
  }
#endif
  return v;
}

/* The watchdog: SIGALRM when a step outlives --comm-timeout. */
static volatile sig_atomic_t watchdog_step;
static int watchdog_secs;

static void watchdog_fire(int sig) {
  (void)sig;
  char msg[256];
  int n = snprintf(msg, sizeof msg,
                   "trainer: error: rank %d: step %lld did not finish within %d s (--comm-timeout): a rank died "
                   "or stopped answering (another, or this one); exiting\n",
                   tr_rank, (long long)watchdog_step, watchdog_secs);
  if (n > 0 && write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0) _exit(7);
  _exit(7);
}

static void watchdog_arm(int64_t step) {
  if (tr_ranks < 2 || !watchdog_secs) return;
  watchdog_step = (sig_atomic_t)step;
  alarm((unsigned)watchdog_secs);
}

/* MPI up (trainer_mpi), the rank known, and the plan's rank count checked. */
static void ranks_init(int *argc, char ***argv, const TrModel *m) {
  int want = m->ranks > 1 ? m->ranks : 1;
#ifdef MEMPLAN_MPI
  int ok = MPI_Init(argc, argv) == MPI_SUCCESS;
  if (!ok) die("MPI_Init failed: run this trainer with mpirun -np %d", want);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &tr_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != want) { /* one message, from rank 0 */
    if (tr_rank) _exit(1);
    die("%s was planned for %d rank%s and mpirun started %d: run mpirun -np %d, or compile the model again with "
        "--ranks %d",
        m->model, want, want > 1 ? "s" : "", size, want, size);
  }
  tr_ranks = size;
  if (tr_rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot silence stdout on rank %d", tr_rank);
#else
  (void)argc, (void)argv;
  if (want > 1)
    die("%s was planned for %d ranks (memplan compile --ranks %d), and this trainer has no MPI: run mpirun -np %d "
        "build/trainer_mpi (built where CMake finds MPI)",
        m->model, want, want, want);
#endif
  signal(SIGALRM, watchdog_fire);
}

static void ranks_finish(void) {
#ifdef MEMPLAN_MPI
  alarm(0);
  MPI_Finalize();
#endif
}

// ----------------------------------------------------------------------------
// the program

typedef struct {
  const TrModel *m;
  unsigned char *arena; /* the host arena: where the plan runs, or a device's I/O shadow */
  unsigned char *dev;   /* where step() and eval() run: arena, or the device arena */
  Stream train, val;
  Order order;           /* the training windows' order and position (tokens, --npy) */
  int npy;               /* --npy: inputs from npy_train and npy_test */
  const TrInput *labels; /* a classification model's eval labels (accuracy), or NULL */
} Run;

/* Device I/O: after the host wrote inputs or parameters, before it reads the
 * loss or saves parameters. No-ops on the CPU. */
static void put_inputs(Run *r, const TrInput *in, int n) {
  const TrDevice *d = r->m->device;
  for (int k = 0; d && k < n; k++) d->upload(r->dev, r->arena, in[k].offset, 4 * in[k].rows * in[k].cols);
}

/* Initialized parameters and running state, to the device (checkpoints
 * move theirs, and the optimizer state, through the staging buffer). */
static void put_params(Run *r) {
  const TrDevice *d = r->m->device;
  for (int i = 0; d && i < nsaved(r->m); i++)
    d->upload(r->dev, r->arena, saved_at(r->m, i)->offset, saved_at(r->m, i)->bytes);
}

static float read_loss(Run *r, int64_t offset) {
  if (r->m->device) r->m->device->download(r->arena, r->dev, offset, 4);
  return *(const float *)(r->arena + offset);
}

static void fill_train(Run *r, int64_t step, int mb) {
  const TrModel *m = r->m;
  int64_t rows = m->train_in[0].rows;
  /* data parallelism: each rank its own rows of the step's window (memplan_trainer.h) */
  if ((r->npy || m->vocab) && mb == 0) order_next(&r->order);
  if (r->npy) fill_npy_batch(r->arena, m->train_in, m->ntrain_in, &npy_train, &r->order, mb, m->accumulation, tr_rank);
  else if (m->vocab)
    fill_token_train(r->arena, m->train_in, m->ntrain_in, &r->train, &r->order, mb, m->accumulation, tr_rank, tr_ranks);
  else
    fill_blob_batch(r->arena, m->train_in, m->ntrain_in,
                    (((step - 1) * tr_ranks + tr_rank) * m->accumulation + mb) * rows, m->classes);
  put_inputs(r, m->train_in, m->ntrain_in);
}

/* One evaluation: the loss over its counted rows, and for a classification
 * model the accuracy (NAN otherwise). */
typedef struct {
  double loss, accuracy;
  int64_t correct, counted, batches;
} Eval;

/* Accuracy and, for a padded batch, the loss of the first `rows` rows of a
 * classification model's eval logits (memplan_trainer.h): the argmax is the
 * first maximum (NaN above all, as torch.argmax), the loss log-sum-exp minus
 * the label's logit, in double. Returns the summed loss. */
static double score_rows(Run *r, int64_t rows, int padded, Eval *e) {
  const TrModel *m = r->m;
  int64_t K = m->eval_logits_classes;
  if (m->device) m->device->download(r->arena, r->dev, m->eval_logits_offset, 4 * rows * K);
  const float *lg = (const float *)(r->arena + m->eval_logits_offset);
  const int32_t *y = (const int32_t *)(r->arena + r->labels->offset);
  double sum = 0.0;
  for (int64_t i = 0; i < rows; i++) {
    const float *x = lg + i * K;
    int64_t best = 0;
    for (int64_t j = 1; j < K; j++)
      if (x[j] > x[best] || (isnan(x[j]) && !isnan(x[best]))) best = j;
    e->correct += best == y[i];
    if (!padded) continue;
    double mx = x[best], z = 0.0;
    for (int64_t j = 0; j < K; j++) z += exp((double)x[j] - mx);
    sum += mx + log(z) - x[y[i]];
  }
  return sum;
}

/* The first `batches` eval batches (the same ones every time); with --npy,
 * every test sample once (a last partial batch's padding not counted) or
 * the first `batches` batches of them. */
static Eval evaluate(Run *r, int64_t batches) {
  const TrModel *m = r->m;
  int64_t be = m->eval_in[0].rows;
  Eval e = {.batches = batches};
  double total = 0.0;
  r->val.pos = 0;
  for (int64_t k = 0; k < batches; k++) {
    int64_t real = be;
    if (r->npy) {
      fill_npy_rows(r->arena, m->eval_in, m->neval_in, &npy_test, k * be);
      if (npy_test.n - k * be < be) real = npy_test.n - k * be;
    } else if (m->vocab) fill_token_batch(r->arena, m->eval_in, m->neval_in, &r->val, 0, 1);
    else fill_blob_batch(r->arena, m->eval_in, m->neval_in, TR_EVAL_SAMPLE0 + k * be, m->classes);
    put_inputs(r, m->eval_in, m->neval_in);
    m->eval(r->dev);
    double loss = read_loss(r, m->eval_loss_offset);
    if (r->labels) { /* rows of logits and labels: samples times the labels per sample */
      int64_t rows = real * r->labels->cols;
      double padded = score_rows(r, rows, real < be, &e);
      total += real < be ? padded : loss * (double)rows;
      e.counted += rows;
    } else {
      total += loss * (double)real;
      e.counted += real;
    }
  }
  e.loss = total / (double)e.counted;
  e.accuracy = r->labels ? (double)e.correct / (double)e.counted : NAN;
  return e;
}

/* Eval batches of one evaluation: --eval-batches, or with --npy by default
 * as many as cover the test set (at most that many). */
static int64_t eval_batch_count(const Run *r, const Opts *o) {
  if (!r->npy || !o->eval_batches) return o->eval_batches;
  int64_t be = r->m->eval_in[0].rows, all = (npy_test.n + be - 1) / be;
  return o->eval_batches_given && o->eval_batches < all ? o->eval_batches : all;
}

/* One forward pass of the eval plan before training: OpenMP starts its
 * threads and OpenBLAS sets up its buffers on first use, and those one-time
 * allocations belong to setup, not to the training loop. Changes no weights. */
static void warm_up(Run *r) {
  const TrModel *m = r->m;
  if (!m->neval_in) return;
  Stream s = r->train;
  s.pos = 0;
  if (r->npy) { /* the test set's first batch; without evaluations, the zeroed inputs */
    if (npy_test.n) fill_npy_rows(r->arena, m->eval_in, m->neval_in, &npy_test, 0);
  } else if (m->vocab) { /* standalone generation has no data: the zeroed inputs */
    if (s.n) fill_token_batch(r->arena, m->eval_in, m->neval_in, &s, 0, 1);
  } else fill_blob_batch(r->arena, m->eval_in, m->neval_in, TR_EVAL_SAMPLE0, m->classes);
  put_inputs(r, m->eval_in, m->neval_in);
  m->eval(r->dev);
  if (m->device) m->device->sync();
}

// ----------------------------------------------------------------------------
// generation (--generate): llm.c's sampling loop over the eval plan. Each new
// token runs the eval forward on the last T tokens (row 0 of its [B, T]
// tokens input; the other rows and the targets zero: attention is causal, so
// position w-1 sees only the window) and samples from the logits at the
// window's last position, which the plan keeps whole until eval() returns
// (TrModel.eval_logits_offset). Planned buffers only: the context, weights
// and order below are allocated at setup, nothing per token.

typedef struct {
  int32_t *ctx; /* the prompt, then the generated tokens (prompt + N) */
  int64_t nprompt;
  double *prob;       /* V: the candidates' weights */
  int32_t *order;     /* V: token ids by logit, best first (top-k, top-p) */
  Bpe *bpe;           /* the plan's tokenizer (decoding), or NULL */
  const TrInput *tok; /* the eval plan's tokens input */
  int64_t calls;      /* generations so far: each its own random stream */
  int64_t context;    /* the window: the KV cache's positions (cached), else T */
  int cached;         /* decode from the plan's KV cache (TrModel.decode_run; generate.c) */
  float *check;       /* --kv-check: the cached logits of the token (V) */
} Gen;

/* Whether token x ranks before y: the larger logit, the lower id on ties
 * (so the first is torch.argmax's first maximum). */
static int ranks_before(const float *lg, int32_t x, int32_t y) { return lg[x] > lg[y] || (lg[x] == lg[y] && x < y); }

static void sift(int32_t *a, int64_t i, int64_t n, const float *lg) {
  for (int64_t c; (c = 2 * i + 1) < n; i = c) {
    if (c + 1 < n && ranks_before(lg, a[c], a[c + 1])) c++; /* the worse child */
    if (!ranks_before(lg, a[i], a[c])) return;
    int32_t t = a[i];
    a[i] = a[c], a[c] = t;
  }
}

/* order[0, V): every id, best first (heapsort: no allocation, unlike qsort). */
static void sort_by_logit(int32_t *order, int64_t V, const float *lg) {
  for (int64_t j = 0; j < V; j++) order[j] = (int32_t)j;
  for (int64_t i = V / 2 - 1; i >= 0; i--) sift(order, i, V, lg);
  for (int64_t n = V - 1; n > 0; n--) {
    int32_t t = order[0];
    order[0] = order[n], order[n] = t;
    sift(order, 0, n, lg);
  }
}

/* The next token from logits lg[V]: greedy (the first maximum) at
 * temperature 0 or top-k 1; else softmax(lg / temperature) over the top-k
 * tokens (0: all), cut to the fewest best whose mass reaches top-p of it,
 * renormalized, sampled with one uniform draw (as HF's sampling). */
static int32_t pick_token(const float *lg, int64_t V, const Opts *o, Rng *rng, Gen *g, int64_t at) {
  int64_t best = 0;
  for (int64_t j = 0; j < V; j++) {
    if (!isfinite(lg[j]))
      die("--generate: the logit of token %lld is %g at generated token %lld: the weights are not finite "
          "(a diverged run?)",
          (long long)j, (double)lg[j], (long long)at + 1);
    if (lg[j] > lg[best]) best = j;
  }
  if (o->temperature == 0 || o->top_k == 1) return (int32_t)best;
  int sorted = o->top_k > 0 || o->top_p < 1;
  int64_t n = o->top_k > 0 && o->top_k < V ? o->top_k : V;
  if (sorted) sort_by_logit(g->order, V, lg);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = sorted ? g->order[i] : i;
    sum += g->prob[i] = exp(((double)lg[id] - (double)lg[best]) / o->temperature);
  }
  if (o->top_p < 1) {
    double c = 0.0;
    for (int64_t i = 0; i < n; i++)
      if ((c += g->prob[i]) >= o->top_p * sum) {
        n = i + 1, sum = c;
        break;
      }
  }
  double u = rng_uniform(rng) * sum, c = 0.0;
  int64_t i = 0;
  while (i < n - 1 && u >= (c += g->prob[i])) i++;
  return sorted ? g->order[i] : (int32_t)i;
}

/* A token as text (the tokenizer's bytes, or the byte itself for V = 256
 * without one); 0 when the model's tokens are printed as ids. */
static int put_token(const Gen *g, int64_t V, int32_t t) {
  size_t len = 1;
  unsigned char byte = (unsigned char)t;
  const unsigned char *b = g->bpe ? bpe_token_bytes(g->bpe, (uint32_t)t, &len) : V == 256 ? &byte : NULL;
  if (b) fwrite(b, 1, len, stdout);
  return b != NULL || g->bpe;
}

/* Setup: the prompt (--prompt TEXT tokenized as --text, --prompt-tokens FILE
 * in --data's format, or <|endoftext|> alone with a tokenizer) and the
 * buffers. The prompt must fit the eval plan's context T. */
static void gen_setup(Gen *g, const Run *r, const Opts *o) {
  const TrModel *m = r->m;
  for (int k = 0; k < m->neval_in; k++)
    if (m->eval_in[k].kind == TR_IN_TOKENS) g->tok = &m->eval_in[k];
  if (!g->tok) die("--generate: the eval plan of %s has no tokens input", m->model);
  int64_t T = g->tok->cols, V = m->eval_logits_classes;
  g->cached = m->decode_run && m->ndecode && !o->no_kv_cache;
  g->context = g->cached ? m->gen_context : T;
  if (o->kv_check && !g->cached)
    die("--kv-check compares the KV cache with a recompute, and %s", o->no_kv_cache ? "--no-kv-cache turns the "
                                                                                      "cache off"
                                                                     : m->ndecode ? "this backend has no decode kernels"
                                                                                  : "this plan has none: compile with "
                                                                                    "--gen-context N");
  if (m->tokenizer) {
    char err[1024];
    if (!(g->bpe = bpe_load(m->tokenizer, err, sizeof err)))
      die("%s (the model's tokenizer, from its YAML's tokenizer: entry)", err);
  }
  BpeTokens p = {0};
  const char *what = "--prompt";
  if (o->prompt_tokens) {
    Stream st = load_tokens(o->prompt_tokens, 0, m->vocab, NULL);
    p.ids = xmalloc((size_t)(st.n + 1) * sizeof(uint32_t), "prompt");
    for (int64_t i = 0; i < st.n; i++) p.ids[i] = st.tok[i];
    p.n = (size_t)st.n, what = "--prompt-tokens";
    free(st.tok);
  } else if (o->prompt && g->bpe) bpe_encode(g->bpe, (const unsigned char *)o->prompt, strlen(o->prompt), 1, &p);
  else if (o->prompt && m->vocab >= 256) {
    p.n = strlen(o->prompt);
    p.ids = xmalloc(p.n * sizeof(uint32_t) + 1, "prompt");
    for (size_t i = 0; i < p.n; i++) p.ids[i] = (unsigned char)o->prompt[i];
  } else if (o->prompt)
    die("--prompt: %s has no tokenizer and %lld tokens, too few for bytes (V >= 256): give --prompt-tokens FILE",
        m->model, (long long)m->vocab);
  else if (g->bpe && bpe_eot(g->bpe) >= 0) { /* as llm.c: a new document */ p.ids = xmalloc(sizeof(uint32_t), "prompt");
    p.ids[0] = (uint32_t)bpe_eot(g->bpe), p.n = 1;
  } else
    die("--generate: give --prompt TEXT or --prompt-tokens FILE (only a model with a tokenizer starts from "
        "<|endoftext|> without one)");
  if (!p.n) die("%s: the prompt is empty: give at least one token", what);
  if ((int64_t)p.n > g->context && g->cached)
    die("%s: %zu tokens, longer than the generation context of %s, %lld tokens (memplan compile --gen-context): "
        "give a shorter prompt (or compile with a larger --gen-context)",
        what, p.n, m->model, (long long)g->context);
  if ((int64_t)p.n > T)
    die("%s: %zu tokens, longer than the generation context of %s, T = %lld tokens: give a shorter prompt "
        "(or compile with a larger T)",
        what, p.n, m->model, (long long)T);
  for (size_t i = 0; i < p.n; i++)
    if ((int64_t)p.ids[i] >= V)
      die("%s: token %u at position %zu is out of range: the model's vocabulary has %lld entries", what, p.ids[i], i,
          (long long)V);
  g->nprompt = (int64_t)p.n;
  g->ctx = xmalloc((size_t)(g->nprompt + o->generate) * sizeof(int32_t), "generation context");
  for (int64_t i = 0; i < g->nprompt; i++) g->ctx[i] = (int32_t)p.ids[i];
  free(p.ids);
  g->prob = xmalloc((size_t)V * sizeof(double), "generation");
  g->order = xmalloc((size_t)V * sizeof(int32_t), "generation");
  if (o->kv_check) g->check = xmalloc((size_t)V * sizeof(float), "--kv-check");
}

/* The logits of the next token after ctx[0, n), from the eval plan's
 * forward over the window (llm.c's loop): their offset in the arena. */
static int64_t recompute(Run *r, const Gen *g, int64_t n) {
  const TrModel *m = r->m;
  int64_t w = n < g->context ? n : g->context; /* T, or the cache's positions (at most T) */
  for (int k = 0; k < m->neval_in; k++)
    memset(r->arena + m->eval_in[k].offset, 0, 4 * (size_t)(m->eval_in[k].rows * m->eval_in[k].cols));
  memcpy(r->arena + g->tok->offset, g->ctx + n - w, 4 * (size_t)w);
  put_inputs(r, m->eval_in, m->neval_in);
  m->eval(r->dev);
  int64_t at = m->eval_logits_offset + 4 * m->eval_logits_classes * (w - 1);
  if (m->device) m->device->download(r->arena, r->dev, at, 4 * m->eval_logits_classes);
  return at;
}

/* The same from the KV cache: the prompt prefilled in one pass (i = 0), then
 * one token a step at position n - 1; once the cache is full, the last
 * window prefilled again each token (llm.c's sliding window). */
static int64_t decode_next(Run *r, const Gen *g, int64_t n, int64_t i) {
  const TrModel *m = r->m;
  int32_t *tok = (int32_t *)(r->arena + g->tok->offset);
  int prefill = i == 0 || n > g->context;
  int64_t w = prefill ? (n < g->context ? n : g->context) : 1; /* rows: the window, or the newest token */
  memcpy(tok, g->ctx + n - w, 4 * (size_t)w);
  if (m->device) m->device->upload(r->dev, r->arena, g->tok->offset, 4 * w);
  m->decode_run(m, r->dev, w, prefill ? 0 : n - 1);
  if (m->device) m->device->download(r->arena, r->dev, m->eval_logits_offset, 4 * m->eval_logits_classes);
  return m->eval_logits_offset;
}

/* One generation: --generate N tokens after the prompt, printed as they come. */
static void generate(Run *r, const Opts *o, Gen *g) {
  const TrModel *m = r->m;
  int64_t T = g->tok->cols, V = m->eval_logits_classes, n = g->nprompt;
  Rng rng = {.s = key3(6, (uint64_t)o->seed, (uint64_t)g->calls++)};
  if (o->temperature == 0 || o->top_k == 1) printf("generate: %lld tokens, greedy\n", (long long)o->generate);
  else
    printf("generate: %lld tokens, temperature %g, top-k %lld, top-p %g, seed %lld\n", (long long)o->generate,
           o->temperature, (long long)o->top_k, o->top_p, (long long)o->seed);
  int text = 1;
  for (int64_t i = 0; i < n; i++) text = put_token(g, V, g->ctx[i]);
  fflush(stdout);
  double t0 = now_s(), t1 = t0, diff = 0.0, big = 0.0;
  for (int64_t i = 0; i < o->generate; i++) {
    int64_t at = g->cached ? decode_next(r, g, n, i) : recompute(r, g, n);
    if (i == 0) t1 = now_s();
    if (g->check) { /* the cached logits against the window's recompute */
      memcpy(g->check, r->arena + at, 4 * (size_t)V);
      at = recompute(r, g, n);
      for (int64_t j = 0; j < V; j++) {
        double a = g->check[j], b = ((const float *)(r->arena + at))[j];
        diff = fabs(a - b) > diff ? fabs(a - b) : diff, big = fabs(b) > big ? fabs(b) : big;
      }
    }
    int32_t t = pick_token((const float *)(r->arena + at), V, o, &rng, g, i);
    g->ctx[n++] = t;
    if (text) put_token(g, V, t), fflush(stdout);
  }
  double dt = now_s() - t0;
  if (text) printf("\n");
  printf("generated ids:");
  for (int64_t i = g->nprompt; i < n; i++) printf(" %d", g->ctx[i]);
  if (g->cached)
    printf(
        "\ngenerate: %lld tokens in %.3f s, %.1f tok/s (KV cache of %lld positions, %lld bytes: the %lld-token "
        "prompt prefilled in %.3f s, then %.2f decode tok/s)\n",
        (long long)o->generate, dt, (double)o->generate / dt, (long long)g->context, (long long)m->kv_cache_bytes,
        (long long)g->nprompt, t1 - t0, o->generate > 1 ? (double)(o->generate - 1) / (dt - (t1 - t0)) : 0.0);
  else
    printf("\ngenerate: %lld tokens in %.3f s, %.1f tok/s (each token recomputes its last %lld-token window)\n",
           (long long)o->generate, dt, (double)o->generate / dt, (long long)T);
  if (g->check)
    printf(
        "kv-check: cached logits against the recompute of each window: max |difference| %.3g, max |logit| "
        "%.3g, over %lld tokens\n",
        diff, big, (long long)o->generate);
  fflush(stdout);
}

static void check_window(const Stream *s, const TrInput *in, int micro) {
  int64_t w = micro * in->rows * in->cols + 1;
  if (s->n < w)
    die("%s: %lld tokens is too short: one batch needs %lld x %lld + 1 = %lld tokens%s", s->path, (long long)s->n,
        (long long)(micro * in->rows), (long long)in->cols, (long long)w,
        micro > 1 && tr_ranks > 1 ? " (the batches of every rank)" : "");
}

static unsigned char *alloc_arena(const TrModel *m) {
  size_t n = ((size_t)m->arena_bytes + 4095) / 4096 * 4096;
  if (m->device) { /* an I/O shadow: zero pages, touched only where the program reads or writes */
    void *s = calloc(1, n ? n : 4096);
    if (!s) die("cannot allocate the host shadow of the arena: %lld bytes", (long long)m->arena_bytes);
    return s;
  }
  void *p = NULL;
  if (posix_memalign(&p, 4096, n ? n : 4096) != 0) {
    char b[32];
    die("cannot allocate the arena: %lld bytes (%s)", (long long)m->arena_bytes,
        fmt_bytes(b, sizeof b, m->arena_bytes));
  }
  memset(p, 0, n); // touches every page (RSS shows the arena) and zeroes optimizer state
  return p;
}

typedef long (*AllocCount)(void);

/* Dynamic loss scaling with torch.cuda.amp.GradScaler's defaults: growth 2x
 * after 2000 clean steps, backoff 0.5 and the step skipped on inf/nan. */
typedef struct {
  double scale;
  int64_t clean, applied, skipped;
} LossScaler;

enum { TR_SCALE_GROWTH_INTERVAL = 2000 };

/* Gradient clipping (plans with clip_grad_norm): the global L2 norm of every
 * gradient, summed in double; when max_norm > 0 and max_norm / (norm + 1e-6)
 * < 1, every gradient is multiplied by that coefficient, computed in float as
 * torch.nn.utils.clip_grad_norm_ computes it. Returns the norm before
 * clipping (NAN when the plan does not keep its gradients). */
static double clip_grads(const TrModel *m, unsigned char *arena, double max_norm) {
  if (!(m->clip_grad_norm > 0)) return NAN;
  double norm = sqrt(m->grad_sqnorm(arena));
  float coef = (float)max_norm / ((float)norm + 1e-6f);
  if (max_norm > 0 && coef < 1.0f) m->unscale(arena, coef);
  return norm;
}

static void scaler_step(LossScaler *ls, const TrModel *m, unsigned char *arena, double lr, int64_t step,
                        double max_norm, double *norm) {
  if (m->unscale(arena, (float)(1.0 / ls->scale))) {
    *norm = clip_grads(m, arena, max_norm); /* unscaled first, then clipped (GradScaler's order) */
    m->update(arena, lr, ++ls->applied);
    if (++ls->clean == TR_SCALE_GROWTH_INTERVAL) {
      ls->scale *= 2;
      ls->clean = 0;
    }
    return;
  }
  ls->skipped++, ls->clean = 0;
  ls->scale *= 0.5;
  printf("step %lld skipped: a gradient overflowed; loss scale now %g\n", (long long)step, ls->scale);
}

/* ----------------------------------------------------------------------------
 * checkpoints of the run: metadata, --resume, --save-every */

/* What a checkpoint's metadata restores besides the options. */
typedef struct {
  int64_t step, epoch, index, windows;
  LossScaler ls;
} Resume;

static Meta ck_meta; /* one at a time: built before a save, read by --resume */

/* The run's state at the end of `step` as checkpoint metadata (the keys:
 * memplan_trainer.h). Numbers as decimal text; doubles with 17 digits, which
 * read back to the same bits. */
static void run_meta(Meta *mt, const Run *r, const Opts *o, const LossScaler *ls, int64_t step) {
  const TrModel *m = r->m;
  mt->n = 0;
  meta_set(mt, "format", "pt");
  meta_set(mt, "model", "%s", m->model);
  meta_set(mt, "plan", "%016llx", (unsigned long long)m->fingerprint);
  meta_set(mt, "training", "%s", m->training);
  meta_set(mt, "step", "%lld", (long long)step);
  meta_set(mt, "optimizer_step", "%lld", (long long)ls->applied);
  meta_set(mt, "steps", "%lld", (long long)o->steps);
  meta_set(mt, "lr", "%.17g", o->lr);
  meta_set(mt, "schedule", "%s", sched_names[o->schedule]);
  meta_set(mt, "warmup", "%lld", (long long)o->warmup);
  meta_set(mt, "final_fraction", "%.17g", o->final_fraction);
  meta_set(mt, "seed", "%lld", (long long)o->seed);
  meta_set(mt, "shuffle", "%d", o->shuffle);
  meta_set(mt, "data_epoch", "%lld", (long long)r->order.epoch);
  meta_set(mt, "data_index", "%lld", (long long)r->order.index);
  meta_set(mt, "data_windows", "%lld", (long long)r->order.nwin);
  meta_set(mt, "loss_scale", "%.17g", ls->scale);
  meta_set(mt, "loss_scale_clean", "%lld", (long long)ls->clean);
  meta_set(mt, "loss_scale_skipped", "%lld", (long long)ls->skipped);
  meta_set(mt, "threads", "%d", o->threads);
}

/* The non-finite guard: every f32 tensor a checkpoint holds (weights,
 * running state, optimizer state) checked after the updates, before each
 * save and at the end of the run; weights the updates made non-finite (an lr
 * too large) end the run with exit 1, never saved as a checkpoint. One read
 * of the bytes a save writes (through the staging buffer on a device). */
static void check_run_finite(const Run *r, int64_t step) {
  char where[64];
  snprintf(where, sizeof where, "after step %lld", (long long)step);
  const char *then = " (the updates made it so: lower --lr?); nothing saved";
  for (int i = 0; i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    if (strcmp(c->dtype, "F32")) continue;
    if (!r->m->device) {
      check_finite(where, c, (const float *)(r->dev + c->offset), 0, c->numel, then);
      continue;
    }
    for (int64_t at = 0; at < c->bytes; at += ck.stage_bytes) {
      int64_t n = c->bytes - at < ck.stage_bytes ? c->bytes - at : ck.stage_bytes;
      r->m->device->download_to(ck.stage, r->dev, c->offset + at, n);
      check_finite(where, c, (const float *)ck.stage, at / 4, n / 4, then);
    }
  }
}

/* A checkpoint of the run after `step`, and a line saying so. */
static void write_checkpoint(const char *path, const Run *r, const Opts *o, const LossScaler *ls, int64_t step) {
  check_run_finite(r, step);
  double t0 = now_s();
  int64_t bytes = 0;
  for (int i = 0; i < ck.n; i++) bytes += ck.t[i].bytes;
  run_meta(&ck_meta, r, o, ls, step);
  save_checkpoint(path, &ck_meta, r->dev, r->m->device);
  char b[32];
  printf("saved %s: step %lld, %s of tensors in %.2f s\n", path, (long long)step, fmt_bytes(b, sizeof b, bytes),
         now_s() - t0);
  fflush(stdout);
}

static const char *meta_need(const Meta *mt, const char *key, const char *path) {
  const char *v = meta_get(mt, key);
  if (!v) die("%s: corrupt checkpoint: its metadata has no '%s' (written by another program?)", path, key);
  return v;
}

static int64_t meta_int(const Meta *mt, const char *key, const char *path, int64_t min, int64_t max) {
  const char *v = meta_need(mt, key, path);
  char *e;
  errno = 0;
  long long x = strtoll(v, &e, 10);
  if (e == v || *e || errno || x < min || x > max)
    die("%s: corrupt checkpoint: metadata '%s' is '%s', expected an integer in [%lld, %lld]", path, key, v,
        (long long)min, (long long)max);
  return x;
}

/* A number in [0, max] (lr and loss_scale: float32's largest, as the options). */
static double meta_num(const Meta *mt, const char *key, const char *path, double max) {
  const char *v = meta_need(mt, key, path);
  char *e;
  double x = strtod(v, &e);
  if (e == v || *e || !(x >= 0 && x <= max))
    die("%s: corrupt checkpoint: metadata '%s' is '%s', expected a number in [0, %g]", path, key, v, max);
  return x;
}

/* --resume: the checkpoint must come from this plan. When the fingerprint
 * differs, says what differs (the training text, tensors) and what to do. */
static void resume_check(const char *path, const CkEntry *e, int ne, const Meta *mt, const TrModel *m) {
  const char *plan = meta_get(mt, "plan"), *model = meta_get(mt, "model");
  if (!plan || !meta_get(mt, "step"))
    die("%s holds no trainer state (its metadata has no step and plan: a weights file?); --load %s starts a new run "
        "from its weights",
        path, path);
  if (model && strcmp(model, m->model))
    die("%s is a checkpoint of model '%s', and this trainer trains '%s': resume it with the trainer compiled from "
        "'%s' (or --load %s to start a new run from weights that fit this model)",
        path, model, m->model, model, path);
  char fp[32];
  snprintf(fp, sizeof fp, "%016llx", (unsigned long long)m->fingerprint);
  if (!strcmp(plan, fp)) return;
  char why[2048] = "";
  size_t k = 0;
  int shown = 0;
#define WHY(...)                                                                                    \
  do {                                                                                              \
    if (shown++ < 6 && k < sizeof why) k += (size_t)snprintf(why + k, sizeof why - k, __VA_ARGS__); \
  } while (0)
  const char *tr = meta_get(mt, "training");
  if (tr && strcmp(tr, m->training))
    WHY("\n  the checkpoint's plan trains with: %s\n  this trainer's plan trains with:  %s", tr, m->training);
  for (int i = 0; i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    int x = 0;
    while (x < ne && strcmp(e[x].name, c->name)) x++;
    char want[128], got[128];
    shape_str(want, sizeof want, c->rank, c->shape);
    if (x == ne) {
      WHY("\n  the checkpoint has no tensor '%s' (%s %s in this plan)", c->name, c->dtype, want);
      continue;
    }
    int same = e[x].rank == c->rank && !strcmp(e[x].dtype, c->dtype);
    for (int d = 0; same && d < c->rank; d++) same = e[x].shape[d] == c->shape[d];
    shape_str(got, sizeof got, e[x].rank, e[x].shape);
    if (!same)
      WHY("\n  tensor '%s' is %s %s in the checkpoint, %s %s in this plan", c->name, e[x].dtype, got, c->dtype, want);
  }
  for (int x = 0; x < ne; x++) {
    int i = 0;
    while (i < ck.n && strcmp(ck.t[i].name, e[x].name)) i++;
    if (i == ck.n) WHY("\n  the checkpoint's tensor '%s' is not in this plan", e[x].name);
  }
  if (shown > 6) WHY("\n  ... and %d more differences", shown - 6);
#undef WHY
  die("%s was saved by another plan of %s (plan fingerprint %s, this trainer's %s):%s\n  Resume it with the trainer "
      "compiled from the same YAML and options (memplan compile: the same --set, --precision, --micro-batch); or "
      "--load %s to start a new run from its weights.",
      path, m->model, plan, fp, *why ? why : "\n  (the tensors and the training text agree: another memplan version?)",
      path);
}

/* --resume, before anything else is set up: the header and metadata, checked
 * against this plan; every option not given on the command line takes the
 * checkpoint's value (a given one overrides it, said on stdout). */
static Resume resume_opts(Opts *o, const TrModel *m) {
  int fd = open_input(o->resume, "checkpoint");
  int ne;
  int64_t data0, size;
  ck_meta.n = 0;
  CkEntry *ents = read_header(fd, o->resume, "checkpoint", &ck_meta, &ne, &data0, &size);
  close(fd);
  resume_check(o->resume, ents, ne, &ck_meta, m);
  mj_st_free(&ck_io.st);
  const Meta *mt = &ck_meta;
  const char *p = o->resume;
  /* every count within its range, and the counts consistent with each
   * other: a step updates the weights (optimizer_step) or, with loss
   * scaling, is skipped; it reads one window of the data */
  Resume rs = {.step = meta_int(mt, "step", p, 0, TR_MAX_STEPS)};
  rs.epoch = meta_int(mt, "data_epoch", p, 0, rs.step);
  rs.index = meta_int(mt, "data_index", p, 0, TR_MAX_STEPS); /* against the data: tr_main */
  rs.windows = meta_int(mt, "data_windows", p, 0, INT64_MAX);
  rs.ls.scale = meta_num(mt, "loss_scale", p, FLT_MAX);
  rs.ls.clean = meta_int(mt, "loss_scale_clean", p, 0, TR_SCALE_GROWTH_INTERVAL - 1);
  rs.ls.applied = meta_int(mt, "optimizer_step", p, 0, rs.step);
  rs.ls.skipped = meta_int(mt, "loss_scale_skipped", p, 0, rs.step);
  if (!(rs.ls.scale > 0)) die("%s: corrupt checkpoint: metadata 'loss_scale' is not > 0", p);
  if (rs.ls.applied + rs.ls.skipped != rs.step)
    die("%s: corrupt checkpoint: metadata 'optimizer_step' %lld + 'loss_scale_skipped' %lld is not 'step' %lld (each "
        "step updates the weights once or, with loss scaling, is skipped)",
        p, (long long)rs.ls.applied, (long long)rs.ls.skipped, (long long)rs.step);
  int64_t steps = meta_int(mt, "steps", p, 0, TR_MAX_STEPS), warmup = meta_int(mt, "warmup", p, 0, TR_MAX_STEPS);
  int64_t seed = meta_int(mt, "seed", p, 0, INT64_MAX), shuffle = meta_int(mt, "shuffle", p, 0, 1);
  double lr = meta_num(mt, "lr", p, FLT_MAX), ff = meta_num(mt, "final_fraction", p, 1);
  const char *sched = meta_need(mt, "schedule", p);
  int sk = 0;
  while (sk < 3 && strcmp(sched, sched_names[sk])) sk++;
  if (sk == 3) die("%s: corrupt checkpoint: metadata 'schedule' is '%s'", p, sched);
  if (!(lr > 0)) die("%s: corrupt checkpoint: metadata 'lr' is 0", p);
#define TAKE(given, field, val, T, fmt, name)                                                          \
  do {                                                                                                 \
    if (!(given)) o->field = val;                                                                      \
    else if (o->field != (val))                                                                        \
      printf("resume: " name " " fmt " instead of the checkpoint's " fmt "\n", (T)o->field, (T)(val)); \
  } while (0)
  TAKE(o->steps_given, steps, steps, long long, "%lld", "--steps");
  TAKE(o->lr_given, lr, lr, double, "%g", "--lr");
  TAKE(o->warmup_given, warmup, warmup, long long, "%lld", "--warmup");
  TAKE(o->final_fraction_given, final_fraction, ff, double, "%g", "--final-fraction");
  TAKE(o->seed_given, seed, seed, long long, "%lld", "--seed (dropout keys, shuffling)");
  TAKE(o->shuffle_given, shuffle, (int)shuffle, int, "%d", "--shuffle");
#undef TAKE
  if (!o->schedule_given) o->schedule = sk;
  else if (o->schedule != sk)
    printf("resume: --schedule %s instead of the checkpoint's %s\n", sched_names[o->schedule], sched_names[sk]);
  if (o->loss_scale_given && m->loss_scaling) {
    printf("resume: --loss-scale %g instead of the checkpoint's %g\n", o->loss_scale, rs.ls.scale);
    rs.ls.scale = o->loss_scale;
  }
  int64_t threads = meta_int(mt, "threads", p, 1, INT64_MAX);
  if (!m->device && threads != o->threads)
    printf(
        "resume: note: %d threads, the checkpoint's run had %lld: the steps continue, not bit for bit as "
        "uninterrupted (the kernels' sums depend on the thread count)\n",
        o->threads, (long long)threads);
  if (o->final_fraction_given && o->schedule == TR_SCHED_CONSTANT)
    die("--final-fraction is the floor of a decay, and the schedule is constant: give --schedule cosine or linear");
  return rs;
}

/* --save-every: PATH-stepNNNNNN.safetensors, PATH being --save's name without
 * ".safetensors" (default "checkpoint"). */
static char *ckpt_base(const Opts *o) {
  const char *s = o->save ? o->save : "checkpoint";
  size_t n = strlen(s);
  if (n > 12 && !strcmp(s + n - 12, ".safetensors")) n -= 12;
  char *b = xmalloc(n + 1, "a path");
  memcpy(b, s, n);
  b[n] = 0;
  return b;
}

static char *ckpt_name(const char *base, int64_t step) {
  size_t n = strlen(base) + 48;
  char *p = xmalloc(n, "a path");
  snprintf(p, n, "%s-step%06lld.safetensors", base, (long long)step);
  return p;
}

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Keeps the `keep` newest BASE-stepN.safetensors with N <= step (a resumed
 * run's older ones too); later ones (a run resumed from an earlier
 * checkpoint) are left alone until overwritten. */
static void prune_checkpoints(const char *base, int64_t keep, int64_t step) {
  const char *slash = strrchr(base, '/'), *name = slash ? slash + 1 : base;
  int dn = slash ? (int)(slash - base) + (slash == base) : 1;
  char *dir = xmalloc((size_t)dn + 1, "a path");
  snprintf(dir, (size_t)dn + 1, "%.*s", dn, slash ? base : ".");
  DIR *d = opendir(dir);
  size_t nn = strlen(name), cap = 16, n = 0;
  int64_t *steps = xmalloc(sizeof(int64_t) * cap, "checkpoint steps");
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
    const char *f = e->d_name, *q = f + nn + 5;
    if (strncmp(f, name, nn) || strncmp(f + nn, "-step", 5) || *q < '0' || *q > '9') continue;
    char *end;
    long long v = strtoll(q, &end, 10);
    if (strcmp(end, ".safetensors") || v > step) continue;
    if (n == cap) {
      int64_t *g = realloc(steps, sizeof(int64_t) * (cap *= 2));
      if (!g) break;
      steps = g;
    }
    steps[n++] = v;
  }
  if (d) closedir(d);
  qsort(steps, n, sizeof *steps, cmp_desc);
  for (size_t i = (size_t)keep; i < n; i++) {
    char *f = ckpt_name(base, steps[i]);
    remove(f);
    free(f);
  }
  free(steps);
  free(dir);
}

/* Whether argv holds flag, before any "--". */
static int has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], flag)) return 1;
  return 0;
}

int tr_main(int argc, char **argv, const TrModel *m) {
  /* first: it may restart the program with another BLAS kernel (cpu_blas.c) */
  const char *blas = m->blas ? m->blas(argv, !has_flag(argc, argv, "--no-blas-select")) : NULL;
  ranks_init(&argc, &argv, m);
  /* a save over the file size limit (ulimit -f) fails with EFBIG and removes
   * its temporary file, instead of the process dying with it left behind */
  signal(SIGXFSZ, SIG_IGN);
  Opts o = parse_opts(argc, argv, m);
  watchdog_secs = (int)o.comm_timeout;
  int sharded = tr_ranks > 1 && m->zero >= 1; /* each rank holds a shard of the optimizer state */
  if (sharded && (o.save_every || o.resume))
    die("--save-every and --resume with ZeRO-%d: each rank holds only its shard of the optimizer state, and "
        "checkpoints of sharded state are not written yet (--save writes the weights); plan with --zero 0 to "
        "checkpoint a data-parallel run",
        m->zero);
  ck_setup(m, !sharded);
  if (sharded && o.save && tr_rank == 0)
    printf("--save with ZeRO-%d: the weights and running state only (the optimizer state is sharded)\n", m->zero);
  Resume rs = {.ls = {0}};
  if (o.resume) rs = resume_opts(&o, m);
  /* a decay starts after the warmup: with warmup >= steps it never would.
   * Asked for on the command line, that is a contradiction, refused; from the
   * plan (a short run of a model with a long warmup: a smoke test, the
   * reference tests' 10 steps) the run goes on and the banner says so */
  if (o.warmup_given && o.schedule != TR_SCHED_CONSTANT && o.steps > 0 && o.warmup >= o.steps)
    die("--warmup %lld with --steps %lld: the %s decay starts after the warmup, so this run would never decay (nor "
        "train at the full lr); give --warmup < --steps, or --schedule constant",
        (long long)o.warmup, (long long)o.steps, sched_names[o.schedule]);
  op_key_seed = (uint64_t)o.seed;
  if (o.save && tr_rank == 0) check_save_path(o.save);
  char *base = o.save_every && tr_rank == 0 ? ckpt_base(&o) : NULL;
  if (base) { /* the first checkpoint's name stands for all of them */
    char *first = ckpt_name(base, o.save_every);
    check_save_path(first);
    free(first);
  }
  if (m->set_threads) m->set_threads(o.threads);
  Run r = {.m = m, .npy = o.npy != NULL};
  for (int k = 0; m->eval_logits_offset >= 0 && k < m->neval_in; k++)
    if (m->eval_in[k].kind == TR_IN_LABELS) r.labels = &m->eval_in[k];
  if (o.npy) {
    load_npy_set(&npy_train, o.npy, "train", m->train_in, m->ntrain_in, m);
    int64_t w = m->accumulation * m->train_in[0].rows * tr_ranks;
    if (npy_train.n < w)
      die("--npy %s: %lld training samples are too few: one batch reads %lld", o.npy, (long long)npy_train.n,
          (long long)w);
    if (o.eval_batches) load_npy_set(&npy_test, o.npy, "test", m->eval_in, m->neval_in, m);
  } else if (m->vocab && (o.text || o.data)) {
    r.train = load_tokens(o.text ? o.text : o.data, o.text != NULL, m->vocab, m->tokenizer);
    r.val = o.val ? load_tokens(o.val, o.text != NULL, m->vocab, m->tokenizer) : r.train;
    check_window(&r.train, &m->train_in[0], m->accumulation * tr_ranks);
    if (o.eval_batches) check_window(&r.val, &m->eval_in[0], 1);
  }
  /* a window holds every rank's micro-batches (memplan_trainer.h) */
  int64_t wrows = (int64_t)m->accumulation * tr_ranks * m->train_in[0].rows;
  if (o.npy) order_init(&r.order, npy_train.n, wrows, o.shuffle, (uint64_t)o.seed);
  else if (m->vocab && r.train.n) { /* windows of ranks x micro x B x T tokens and the one after them */
    int64_t w = wrows * m->train_in[0].cols;
    order_init(&r.order, (r.train.n - 1) / w, 1, o.shuffle, (uint64_t)o.seed);
  }
  if (o.resume) {
    if (rs.windows != r.order.nwin)
      die("%s: the checkpoint's training data has %lld windows a pass, this run's %lld: resume on the same data "
          "(--text, --data or --npy) and batch",
          o.resume, (long long)rs.windows, (long long)r.order.nwin);
    if (rs.index > r.order.nwin)
      die("%s: corrupt checkpoint: metadata 'data_index' is %lld, past the %lld windows of a pass over this data",
          o.resume, (long long)rs.index, (long long)r.order.nwin);
    r.order.epoch = rs.epoch, r.order.index = rs.index;
  }
  FILE *log = o.log && tr_rank == 0 ? fopen(o.log, "w") : NULL;
  if (o.log && tr_rank == 0 && !log) die("cannot write %s: %s", o.log, strerror(errno));
  if (log) fprintf(log, "step,loss,ms,eval_loss,eval_accuracy,lr,grad_norm\n");
  AllocCount alloc_count = (AllocCount)(uintptr_t)dlsym(RTLD_DEFAULT, "memplan_alloc_count");
  if (o.check_alloc && !alloc_count) die("--check-alloc needs a counting allocator: LD_PRELOAD=liballoc_count.so");
  tr_profiling = o.profile;
  if (o.profile) {
    prof_time = xmalloc(sizeof(double) * (size_t)(m->nops ? m->nops : 1), "profile");
    memset(prof_time, 0, sizeof(double) * (size_t)(m->nops ? m->nops : 1));
  }

  char b1[32], b2[32];
  r.arena = alloc_arena(m);
  r.dev = m->device ? m->device->open(m, o.cuda_graph) : r.arena;
  int adapters = 0; /* LoRA: --load of a base model's weights initializes the adapters */
  for (int i = 0; i < m->nparams; i++) adapters |= is_adapter(m->params[i].name);
  if (!o.resume && (!o.load || adapters)) {
    init_params(r.arena, m, (uint64_t)o.seed);
    init_states(r.arena, m);
    put_params(&r);
  }
  if (o.load || o.resume) load_checkpoint(o.load ? o.load : o.resume, r.dev, m, o.resume != NULL);
  char from[600];
  if (o.resume) snprintf(from, sizeof from, "resumed from %s at step %lld", o.resume, (long long)rs.step);
  else snprintf(from, sizeof from, "%s", o.load ? o.load : "initialized from --seed");
  if (m->device)
    printf("%s: %lld parameters, %s%s, lr %g, %s\n", m->model, (long long)m->param_count, m->device->name,
           o.cuda_graph ? " (CUDA graph)" : "", o.lr, from);
  else
    printf("%s: %lld parameters, %d threads, lr %g, %s\n", m->model, (long long)m->param_count, o.threads, o.lr, from);
  if (blas) /* rt_set_threads: the trainer's pool splits each product into single-threaded OpenBLAS calls */
    printf("BLAS: %s; %d thread%s (the trainer's pool, 1 BLAS thread a call)\n", blas, o.threads,
           o.threads > 1 ? "s" : "");
  if (m->ranks >= 1) { /* a data-parallel plan (of one rank, too) */
    static const char *const zero[] = {"gradients all-reduced", "ZeRO-1: optimizer state sharded",
                                       "ZeRO-2: optimizer state and gradients sharded"};
    printf("data parallel: %d rank%s (%s), %lld %s per rank and step; rank 0 logs\n", tr_ranks, tr_ranks > 1 ? "s" : "",
           zero[m->zero >= 0 && m->zero <= 2 ? m->zero : 0], (long long)m->samples_per_step,
           m->vocab ? "tokens" : "samples");
  }
  if (r.order.nwin)
    printf("data: %lld windows a pass, %s (--seed %lld), next: pass %lld, window %lld\n", (long long)r.order.nwin,
           o.shuffle ? "shuffled each pass" : "in order", (long long)o.seed, (long long)r.order.epoch + 1,
           (long long)r.order.index + 1);
  if (o.resume && rs.step >= o.steps)
    printf(
        "resume: the checkpoint is at step %lld of --steps %lld: nothing to train (give --steps N > %lld to go "
        "on)\n",
        (long long)rs.step, (long long)o.steps, (long long)rs.step);
  if (o.schedule != TR_SCHED_CONSTANT || o.warmup) {
    printf("lr schedule: %lld warmup steps, then %s", (long long)o.warmup, sched_names[o.schedule]);
    if (o.steps > 0 && o.warmup >= o.steps)
      printf(": these %lld steps end inside the warmup (lr up to %g x lr), before any decay", (long long)o.steps,
             (double)o.steps / (double)o.warmup);
    else if (o.schedule != TR_SCHED_CONSTANT)
      printf(" decay to %g x lr at step %lld", o.final_fraction, (long long)o.steps);
    printf("\n");
  }
  printf("arena: planned %lld bytes (%s); peak RSS after setup %s\n", (long long)m->arena_bytes,
         fmt_bytes(b1, sizeof b1, m->arena_bytes), fmt_bytes(b2, sizeof b2, peak_rss()));
  fflush(stdout);
  Gen gen = {0};
  if (o.generate) gen_setup(&gen, &r, &o);
  warm_up(&r);
  if (m->device) m->device->report(m, "after setup");

  long allocs0 = alloc_count ? alloc_count() : 0;
  double t_steps = 0.0;
  int64_t eval_batches = eval_batch_count(&r, &o);
  Eval ev = {NAN, NAN, 0, 0, 0};
  LossScaler ls = o.resume ? rs.ls : (LossScaler){o.loss_scale, 0, 0, 0};
  int64_t first = rs.step + 1, ran = o.steps > rs.step ? o.steps - rs.step : 0; /* this run's steps */
  long ckpt_allocs = 0; /* checkpoints allocate (file, header, names): not the training's own */
  double t_start = now_s();
  for (int64_t step = first; step <= o.steps; step++) {
    double t0 = now_s(), sum = 0.0;
    double lr = tr_schedule_lr(o.schedule, o.lr, o.warmup, o.final_fraction, step, o.steps);
    /* over N ranks the collectives sum: each rank's loss gradient is scaled by 1/N */
    float scale = (float)((m->loss_scaling ? ls.scale : 1.0) / m->accumulation / tr_ranks);
    watchdog_arm(step);
    if (step == o.kill_step && tr_rank == o.kill_rank) { /* --kill-rank, --hang-rank: a rank dies or hangs */
      fprintf(stderr, "trainer: rank %d: %s at step %lld (test hook)\n", tr_rank, o.hang ? "hanging" : "exiting",
              (long long)step);
      if (!o.hang) _exit(9);
      alarm(0); /* stopped as from outside (SIGSTOP): its own watchdog with it; the others' must end the run */
      for (;;) pause();
    }
    if (step == o.force_overflow) scale = INFINITY;
    for (int mb = 0; mb < m->accumulation; mb++) {
      fill_train(&r, step, mb);
      if (o.profile) prof_last = now_s();
      if (m->device) m->device->step(m, r.dev, lr, ls.applied + 1, mb, scale);
      else m->step(r.dev, lr, ls.applied + 1, mb, scale);
      sum += read_loss(&r, m->loss_offset);
    }
    double gnorm = NAN; /* NAN: not clipping, or a skipped step */
    if (!m->loss_scaling) {
      gnorm = clip_grads(m, r.dev, o.clip);
      m->update(r.dev, lr, step);
      ls.applied = step;
    } else scaler_step(&ls, m, r.dev, lr, step, o.clip, &gnorm);
    if (m->device) m->device->sync();                      /* the step's time includes its updates */
    float loss = (float)ranks_mean(sum / m->accumulation); /* the mean over the ranks: a collective too */
    if (tr_ranks > 1) alarm(0);
    double dt = now_s() - t0;
    t_steps += dt;
    if (!isfinite(loss)) die("the loss is %f at step %lld (lower --lr?)", (double)loss, (long long)step);
    ev = (Eval){NAN, NAN, 0, 0, 0};
    if (o.eval_every && step % o.eval_every == 0 && eval_batches) ev = evaluate(&r, eval_batches);
    if (step % o.log_every == 0 || step == first || step == o.steps) {
      /* elapsed: wall time since the first step began (evaluations included);
       * ETA: the remaining steps at the mean pace so far */
      double el = now_s() - t_start, eta = el / (double)(step - rs.step) * (double)(o.steps - step);
      char e1[32], e2[32];
      printf("step %5lld/%lld | loss %.6f | lr %.3e | %8.2f ms | %9.0f %s/s | %s elapsed, ETA %s", (long long)step,
             (long long)o.steps, (double)loss, lr, 1e3 * dt, (double)(m->samples_per_step * tr_ranks) / dt,
             m->vocab ? "tok" : "samples", fmt_secs(e1, sizeof e1, el), fmt_secs(e2, sizeof e2, eta));
      if (!isnan(gnorm)) printf(" | norm %.4f", gnorm);
      if (!isnan(ev.loss)) printf(" | eval loss %.6f", ev.loss);
      if (!isnan(ev.accuracy)) printf(" | accuracy %.2f%%", 100.0 * ev.accuracy);
      printf("\n");
      fflush(stdout);
    }
    if (log)
      fprintf(log, "%lld,%.9g,%.4f,%.9g,%.9g,%.17g,%.9g\n", (long long)step, (double)loss, 1e3 * dt, ev.loss,
              ev.accuracy, lr, gnorm);
    if (o.sample_every && step % o.sample_every == 0 && tr_rank == 0) generate(&r, &o, &gen);
    if (base && step % o.save_every == 0) /* rank 0 only: base is NULL elsewhere */ {
      long a0 = alloc_count ? alloc_count() : 0;
      char *path = ckpt_name(base, step);
      write_checkpoint(path, &r, &o, &ls, step);
      prune_checkpoints(base, o.keep, step);
      free(path);
      if (alloc_count) ckpt_allocs += alloc_count() - a0;
    }
  }
  long allocs = alloc_count ? alloc_count() - allocs0 - ckpt_allocs : -1;
  double t_total = now_s() - t_start;
  if (ran) check_run_finite(&r, rs.step + ran);

  if (eval_batches && !(o.eval_every && ran && o.steps % o.eval_every == 0)) ev = evaluate(&r, eval_batches);
  if (ev.batches) { /* the last evaluation, also when the last step's line showed it */
    printf("eval loss %.6f", ev.loss);
    if (!isnan(ev.accuracy))
      printf(", accuracy %.2f%% (%lld of %lld correct)", 100.0 * ev.accuracy, (long long)ev.correct,
             (long long)ev.counted);
    printf(" (%lld batches, forward only)\n", (long long)ev.batches);
  }
  if (ran) {
    double ms = 1e3 * t_steps / (double)ran;
    char e1[32];
    printf("mean %.2f ms/step, %.0f %s/s, %.2f GFLOP/s; %lld steps in %s (%.0f %s/s overall, evaluations included)\n",
           ms, (double)(m->samples_per_step * tr_ranks) * 1e3 / ms, m->vocab ? "tok" : "samples",
           (double)m->step_flops * tr_ranks / ms * 1e-6, (long long)ran, fmt_secs(e1, sizeof e1, t_total),
           (double)(m->samples_per_step * tr_ranks) * (double)ran / t_total, m->vocab ? "tok" : "samples");
  }
  if (o.profile && ran) prof_report(m, ran, t_steps / (double)ran);
  if (o.generate && tr_rank == 0 && !(o.sample_every && ran && o.steps % o.sample_every == 0)) generate(&r, &o, &gen);
  if (o.save && tr_rank == 0) { /* every rank holds all parameters after the step */
    write_checkpoint(o.save, &r, &o, &ls, rs.step + ran);
  }
  int64_t rss = peak_rss();
  printf("memory: planned arena %lld bytes (%s), measured peak RSS %lld bytes (%s)\n", (long long)m->arena_bytes,
         fmt_bytes(b1, sizeof b1, m->arena_bytes), (long long)rss, fmt_bytes(b2, sizeof b2, rss));
  if (m->device) m->device->report(m, "after training");
  if (alloc_count) printf("allocations inside the training loop: %ld\n", allocs);
  if (m->loss_scaling)
    printf("loss scaling: %lld of %lld steps skipped, final scale %g\n", (long long)ls.skipped,
           (long long)(rs.step + ran), ls.scale);
  if (log) fclose(log);
  if (m->device) m->device->close(r.dev);
  free(r.arena);
  if (r.val.tok != r.train.tok) free(r.val.tok);
  free(r.train.tok);
  for (int s = 0; s < 2; s++) {
    NpySet *set = s ? &npy_test : &npy_train;
    for (int k = 0; k < set->na; k++) free(set->a[k].path), free(set->a[k].v);
    free(set->a);
  }
  free(prof_time);
  free(gen.ctx), free(gen.prob), free(gen.order);
  if (gen.bpe) bpe_free(gen.bpe);
  free(r.order.perm);
  free(base);
  free(ck.t);
  free(ck.stage);
  ranks_finish();
  if (o.check_alloc && allocs != 0) {
    fprintf(stderr, "trainer: error: %ld allocations inside the training loop (expected none)\n", allocs);
    return 4;
  }
  return 0;
}
