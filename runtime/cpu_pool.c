/* cpu_pool.c: the CPU backend's thread pool and the helpers every kernel family uses (cpu_internal.h). */
#include "cpu_internal.h"

/* An OpenBLAS extension; some cblas.h declare it, some don't. */
void openblas_set_num_threads(int num_threads);

/* Chunks per thread of a parallel loop (of a product: RT_GEMM_CHUNKS):
 * more than one, so a late thread's share is picked up by the others. */
#define RT_CHUNKS 4
/* Pool limits; an idle worker polls this many times (~50 us) before it sleeps. */
#define RT_MAX_THREADS 256
#define RT_SPIN 4000

_Noreturn void rt_fail(const char *file, int line, const char *msg) {
  fprintf(stderr, "%s:%d: memplan runtime: %s\n", file, line, msg);
  abort();
}

// ----------------------------------------------------------------------------
// thread pool

int rt_nt = 1;         /* threads, the caller included (rt_set_threads) */
static int rt_workers; /* worker threads started */
/* The current job: generation << 32 | next unclaimed chunk. A claim is a
 * compare-and-swap on it, so a worker that read a finished job's fields can
 * never run a chunk of it: the generation has moved on and its CAS fails. */
static _Atomic uint64_t rt_ticket;
#define RT_CLOSED 0xffffffffu /* next chunk while the caller writes a job's fields */
static _Atomic(RtTask) rt_fn;
static _Atomic(const void *) rt_ctx;
static _Atomic int64_t rt_n, rt_nchunks;
static _Atomic int64_t rt_done; /* chunks finished in the current job */
static _Atomic int rt_sleepers;
static pthread_mutex_t rt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rt_cv = PTHREAD_COND_INITIALIZER;

static inline void rt_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static uint32_t rt_gen(void) { return (uint32_t)(atomic_load(&rt_ticket) >> 32); }

/* Claims and runs chunks of job generation g until none are left. */
static void rt_run_chunks(uint32_t g) {
  for (;;) {
    uint64_t t = atomic_load_explicit(&rt_ticket, memory_order_acquire);
    if ((uint32_t)(t >> 32) != g) return;
    if ((uint32_t)t == RT_CLOSED) {
      rt_relax();
      continue;
    }
    int64_t k = (int64_t)(uint32_t)t;
    RtTask fn = atomic_load_explicit(&rt_fn, memory_order_relaxed);
    const void *ctx = atomic_load_explicit(&rt_ctx, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&rt_n, memory_order_relaxed);
    int64_t nch = atomic_load_explicit(&rt_nchunks, memory_order_relaxed);
    if (k >= nch) return;
    if (!atomic_compare_exchange_weak_explicit(&rt_ticket, &t, t + 1, memory_order_acq_rel, memory_order_acquire))
      continue;
    fn(ctx, n * k / nch, n * (k + 1) / nch);
    atomic_fetch_add_explicit(&rt_done, 1, memory_order_release);
  }
}

static void *rt_worker(void *arg) {
  (void)arg;
  uint32_t seen = rt_gen();
  for (;;) {
    uint32_t g = rt_gen();
    for (int i = 0; i < RT_SPIN && g == seen; i++) {
      rt_relax();
      g = rt_gen();
    }
    if (g == seen) {
      pthread_mutex_lock(&rt_mu);
      atomic_fetch_add(&rt_sleepers, 1);
      while ((g = rt_gen()) == seen) pthread_cond_wait(&rt_cv, &rt_mu);
      atomic_fetch_sub(&rt_sleepers, 1);
      pthread_mutex_unlock(&rt_mu);
    }
    seen = g;
    rt_run_chunks(g);
  }
  return NULL;
}

/* Runs fn over [0, n) in `chunks` equal parts on the pool; returns when all
 * are done. Not reentrant: tasks never call rt_par. */
void rt_par(RtTask fn, const void *ctx, int64_t n, int64_t chunks) {
  if (chunks > n) chunks = n;
  if (rt_nt == 1 || chunks <= 1) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  // Close the old job first: a worker that read its ticket and then these
  // fields fails its claim, as the ticket is no longer the one it read.
  uint32_t g = rt_gen() + 1;
  atomic_store(&rt_ticket, (uint64_t)g << 32 | RT_CLOSED);
  atomic_store_explicit(&rt_fn, fn, memory_order_relaxed);
  atomic_store_explicit(&rt_ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&rt_n, n, memory_order_relaxed);
  atomic_store_explicit(&rt_nchunks, chunks, memory_order_relaxed);
  atomic_store_explicit(&rt_done, 0, memory_order_relaxed);
  atomic_store(&rt_ticket, (uint64_t)g << 32); // seq_cst: ordered before the sleepers check
  if (atomic_load(&rt_sleepers) > 0) {
    pthread_mutex_lock(&rt_mu);
    pthread_cond_broadcast(&rt_cv);
    pthread_mutex_unlock(&rt_mu);
  }
  rt_run_chunks(g);
  // Only chunks a worker has claimed remain: it is running them.
  for (int i = 0; atomic_load_explicit(&rt_done, memory_order_acquire) < chunks; i++) {
    if ((i & 1023) == 1023) sched_yield();
    else rt_relax();
  }
}

/* Chunks for a loop of n iterations: RT_CHUNKS per thread when par holds. */
int64_t rt_chunks(int par) { return par ? (int64_t)RT_CHUNKS * rt_nt : 1; }

void rt_parallel(RtTask fn, const void *ctx, int64_t n) { rt_par(fn, ctx, n, rt_chunks(1)); }

void rt_set_threads(int n) {
  if (n < 1) n = 1;
  if (n > RT_MAX_THREADS) n = RT_MAX_THREADS;
  omp_set_num_threads(n);
  openblas_set_num_threads(1); // gemm() splits products over the pool
  // Workers only grow (rt_set_threads is called once at start in a trainer);
  // chunks depend on rt_nt, not on how many workers help.
  while (rt_workers < n - 1) {
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&th, &at, rt_worker, NULL);
    pthread_attr_destroy(&at);
    if (err) break; // fewer helpers: the caller runs their chunks
    rt_workers++;
  }
  rt_nt = n;
}

// ----------------------------------------------------------------------------
// helpers

static void accumulate_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *b = c->b;
  for (int64_t i = lo; i < hi; i++) out[i] += b[i];
}

/* dst (+)= src. dst == src with acc = 0 is the in-place no-op. */
void accumulate(float *dst, const float *src, int64_t n, int acc) {
  if (!dst || (dst == src && !acc)) return;
  if (!acc) {
    memmove(dst, src, (size_t)n * sizeof(float));
    return;
  }
  rt_par(accumulate_task, &(AddTask){dst, dst, src, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* out[j] (+)= sum_i in[i,j] over M rows of N columns. */
typedef struct {
  float *out;
  const float *in;
  int64_t M, N;
  int acc;
} ColsumTask;

static void colsum_task(const void *ctx, int64_t lo, int64_t hi) {
  const ColsumTask *c = ctx;
  int64_t M = c->M, N = c->N;
  for (int64_t j0 = lo * RT_COL_BLOCK; j0 < hi * RT_COL_BLOCK && j0 < N; j0 += RT_COL_BLOCK) {
    int64_t nj = N - j0 < RT_COL_BLOCK ? N - j0 : RT_COL_BLOCK;
    double s[RT_COL_BLOCK] = {0};
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < nj; j++) s[j] += c->in[i * N + j0 + j];
    for (int64_t j = 0; j < nj; j++) c->out[j0 + j] = (float)(c->acc ? c->out[j0 + j] + s[j] : s[j]);
  }
}

int64_t col_blocks(int64_t N) { return (N + RT_COL_BLOCK - 1) / RT_COL_BLOCK; }

void colsum(float *out, const float *in, int64_t M, int64_t N, int acc) {
  ColsumTask a = {out, in, M, N, acc};
  rt_par(colsum_task, &a, col_blocks(N), rt_chunks(M * N >= RT_PAR_MIN));
}

/* Eight partial sums: without -ffast-math the compiler may not reorder a
 * float reduction, but it vectorizes independent lanes. */
float dot(const float *a, const float *b, int64_t n) {
  float s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; i++) r += a[i] * b[i];
  return r;
}

double sum_parts(const double *part) {
  double s = 0.0;
  for (int c = 0; c < RT_SUM_PARTS; c++) s += part[c];
  return s;
}

/* Lanes for row reductions: independent partial results the compiler keeps
 * in vector registers, combined in a fixed order (deterministic). */
#define RT_LANES 16

/* max of x[0..n), n >= 1. */
float row_max(const float *x, int64_t n) {
  float m[RT_LANES];
  for (int j = 0; j < RT_LANES; j++) m[j] = x[0];
  int64_t nv = n - n % RT_LANES;
  for (int64_t i = 0; i < nv; i += RT_LANES)
    for (int j = 0; j < RT_LANES; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (int64_t i = nv; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (int j = 1; j < RT_LANES; j++) r = m[j] > r ? m[j] : r;
  return r;
}

/* sum of exp(x[i] - mx) over x[0..n), accumulated in double lanes; with
 * out != NULL also writes out[i] = exp(x[i] - mx) (out may be x). */
double row_sum_exp(float *out, const float *x, int64_t n, float mx) {
  double s[RT_LANES] = {0};
  int64_t nv = n - n % RT_LANES;
  for (int64_t i = 0; i < nv; i += RT_LANES) {
    float e[RT_LANES];
    for (int j = 0; j < RT_LANES; j++) e[j] = rt_exp(x[i + j] - mx);
    for (int j = 0; j < RT_LANES; j++) s[j] += e[j];
    if (out)
      for (int j = 0; j < RT_LANES; j++) out[i + j] = e[j];
  }
  for (int64_t i = nv; i < n; i++) {
    float e = rt_exp(x[i] - mx);
    s[0] += e;
    if (out) out[i] = e;
  }
  double r = 0.0;
  for (int j = 0; j < RT_LANES; j++) r += s[j];
  return r;
}

/* log(sum(exp(x))) of one row, max subtracted so nothing overflows. */
float row_lse(const float *x, int64_t n) {
  float mx = row_max(x, n);
  return mx + (float)log(row_sum_exp(NULL, x, n, mx));
}

/* In place: x[0..n) = softmax(x[0..n)). */
void softmax_row(float *x, int64_t n) {
  float mx = row_max(x, n);
  double s = row_sum_exp(x, x, n, mx);
  float inv = (float)(1.0 / s);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}
