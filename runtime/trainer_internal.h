/* trainer_internal.h: what the trainer program's files share (memplan_trainer.c and trainer_*.c). The comment below was
 * the top of memplan_trainer.c, which split_runtime.py cut into these files by section. */
#ifndef TRAINER_INTERNAL_H
#define TRAINER_INTERNAL_H

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

#include "memplan_bpe.h"

#ifdef MEMPLAN_MPI
#include <mpi.h>
#endif

/* Shared by the files of this family (split_runtime.py): moved here, or declared
 * here and defined in one file. */

#define TR_EVAL_SAMPLE0 ((int64_t)1 << 40) /* synthetic eval samples never meet training ones */
/* Step counts (--steps, --warmup, a checkpoint's step): at most 2^53, which a
 * double (the lr schedule's arithmetic) holds exactly and no step + 1 or sum
 * of two counts can overflow. */
#define TR_MAX_STEPS ((int64_t)1 << 53)
#define TR_MAX_THREADS 256 /* cpu.c's pool (RT_MAX_THREADS) */

__attribute__((format(printf, 1, 2))) _Noreturn void die(const char *fmt, ...);
void *xmalloc(size_t n, const char *what);
double now_s(void);
int64_t peak_rss(void);
const char *fmt_bytes(char *buf, size_t n, int64_t b);
const char *fmt_secs(char *buf, size_t n, double s);
uint64_t mix64(uint64_t x);
uint64_t key3(uint64_t tag, uint64_t a, uint64_t b);
extern uint64_t op_key_seed;
double unit24(uint64_t h);

typedef struct {
  uint64_t s;
  int has_spare;
  double spare;
} Rng;

double rng_uniform(Rng *r);
double rng_normal(Rng *r);

typedef struct {
  const char *path;
  uint32_t *tok; /* the ids, whatever the file's width */
  int64_t n, pos;
} Stream;

int open_input(const char *path, const char *what);
unsigned char *read_file(const char *path, int64_t *size, const char *what);
uint32_t le32(const unsigned char *p);
Stream load_tokens(const char *path, int is_text, int64_t vocab, const char *tokenizer);
void fill_token_batch(unsigned char *arena, const TrInput *in, int nin, Stream *s, int mb, int micro);

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

void order_init(Order *o, int64_t n, int64_t w, int shuffle, uint64_t seed);
void order_next(Order *o);
int64_t order_item(const Order *o, int64_t r);
void fill_token_train(unsigned char *arena, const TrInput *in, int nin, const Stream *s, const Order *o, int mb,
                      int micro, int rank, int ranks);
void fill_blob_batch(unsigned char *arena, const TrInput *in, int nin, int64_t sample0, int64_t K);

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

extern NpySet npy_train, npy_test;
void load_npy_set(NpySet *s, const char *dir, const char *split, const TrInput *in, int nin, const TrModel *m);
void fill_npy_rows(unsigned char *arena, const TrInput *in, int nin, const NpySet *s, int64_t first);
void fill_npy_batch(unsigned char *arena, const TrInput *in, int nin, const NpySet *s, const Order *o, int mb,
                    int micro, int rank);
int nsaved(const TrModel *m);
const TrParam *saved_at(const TrModel *m, int i);
void init_states(unsigned char *arena, const TrModel *m);
void init_params(unsigned char *arena, const TrModel *m, uint64_t seed);
void check_save_path(const char *path);
void shape_str(char *buf, size_t n, int rank, const int64_t *d);

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

__attribute__((format(printf, 3, 4))) void meta_set(Meta *mt, const char *key, const char *fmt, ...);
const char *meta_get(const Meta *mt, const char *key);

typedef struct {
  CkTensor *t;
  int n;
  unsigned char *stage;
  int64_t stage_bytes;
} CkTable;
extern CkTable ck;

typedef struct {
  char *hdr, *tmp, *seen;
  MjSt st; /* a header read */
} CkIo;
extern CkIo ck_io;
void ck_setup(const TrModel *m, int with_opt);
void save_checkpoint(const char *path, const Meta *mt, const unsigned char *arena, const TrDevice *dev);
void check_finite(const char *where, const CkTensor *c, const float *w, int64_t k0, int64_t count, const char *then);

/* One tensor entry of a safetensors header (runtime/memplan_json.c checked it). */
typedef MjStTensor CkEntry;

CkEntry *read_header(int fd, const char *path, const char *what, Meta *mt, int *n, int64_t *data0, int64_t *size);
int is_adapter(const char *name);
void load_checkpoint(const char *path, unsigned char *arena, const TrModel *m, int resume);
extern double *prof_time, prof_last;
void prof_report(const TrModel *m, int64_t steps, double step_s);

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

extern const char *const sched_names[];
Opts parse_opts(int argc, char **argv, const TrModel *m);
double ranks_mean(double v);
extern int watchdog_secs;
void watchdog_arm(int64_t step);
void ranks_init(int *argc, char ***argv, const TrModel *m);
void ranks_finish(void);

typedef struct {
  const TrModel *m;
  unsigned char *arena; /* the host arena: where the plan runs, or a device's I/O shadow */
  unsigned char *dev;   /* where step() and eval() run: arena, or the device arena */
  Stream train, val;
  Order order;           /* the training windows' order and position (tokens, --npy) */
  int npy;               /* --npy: inputs from npy_train and npy_test */
  const TrInput *labels; /* a classification model's eval labels (accuracy), or NULL */
} Run;

void put_inputs(Run *r, const TrInput *in, int n);

typedef struct {
  int32_t *ctx; /* the prompt, then the generated tokens (prompt + N) */
  int64_t nprompt;
  double *prob;       /* V: the candidates' weights */
  int32_t *order;     /* V: token ids by logit, best first (top-k, top-p) */
  Bpe *bpe;           /* the plan's tokenizer (decoding), or NULL */
  const TrInput *tok; /* the eval plan's tokens input */
  int64_t calls;      /* generations so far: each its own random stream */
  int64_t context;    /* the window: the KV cache's positions (cached), else T */
  int cached;         /* decode from the plan's KV cache (TrModel.decode_run; cpu_generate.c) */
  float *check;       /* --kv-check: the cached logits of the token (V) */
} Gen;

void gen_setup(Gen *g, const Run *r, const Opts *o);
void generate(Run *r, const Opts *o, Gen *g);

/* Dynamic loss scaling with torch.cuda.amp.GradScaler's defaults: growth 2x
 * after 2000 clean steps, backoff 0.5 and the step skipped on inf/nan. */
typedef struct {
  double scale;
  int64_t clean, applied, skipped;
} LossScaler;

enum { TR_SCALE_GROWTH_INTERVAL = 2000 };

/* What a checkpoint's metadata restores besides the options. */
typedef struct {
  int64_t step, epoch, index, windows;
  LossScaler ls;
} Resume;

void check_run_finite(const Run *r, int64_t step);
void write_checkpoint(const char *path, const Run *r, const Opts *o, const LossScaler *ls, int64_t step);
Resume resume_opts(Opts *o, const TrModel *m);
char *ckpt_base(const Opts *o);
char *ckpt_name(const char *base, int64_t step);
void prune_checkpoints(const char *base, int64_t keep, int64_t step);

#endif
