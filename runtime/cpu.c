/* cpu.c: the CPU backend of memplan_rt.h (C17, POSIX threads, OpenBLAS).
 *
 * Matrix products go through cblas_sgemm, transposes as CBLAS flags and
 * beta = acc ? 1 : 0, so "=" and "+=" cost the same; OpenBLAS runs on one
 * thread per call and gemm() splits a product into blocks of rows or columns
 * for the thread pool below. Everything else is a plain loop, parallel over
 * rows, or over column blocks where rows would race on a sum (bias, layernorm
 * and embedding gradients). Row reductions (means, softmax sums, losses)
 * accumulate in double. exp and gelu are branch-free float code that the
 * compiler vectorizes. Nothing here allocates after rt_set_threads.
 *
 * The thread pool: a parallel loop is cut into a fixed number of chunks (a
 * function of the loop and the thread count only, so results are
 * deterministic for a given count); the caller and the workers claim chunks
 * from one atomic counter, and the caller returns once every chunk is done.
 * Unlike an OpenMP region it never waits for a worker that has not started:
 * on a loaded machine a descheduled worker costs nothing, the caller runs its
 * chunks. Idle workers spin briefly, then sleep on a condition variable.
 */
#include "memplan_rt.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An OpenBLAS extension; some cblas.h declare it, some don't. */
void openblas_set_num_threads(int num_threads);

/* Longest sequence attention handles: its per-row scratch is T floats on the
 * stack, 64 KiB at this limit (the header's per-call stack budget). */
#define RT_ATT_MAX_T 16384
/* Columns per task when a gradient sums over rows: each task owns whole
 * columns, so no two threads add into one element and the summation order
 * does not depend on the thread count. */
#define RT_COL_BLOCK 64
/* Element-wise kernels below this size run on the caller alone: handing out
 * chunks costs more than the loop. */
#define RT_PAR_MIN 16384
/* Losses sum over a fixed number of parts, added in order: a loss must not
 * depend on the thread count or on timing. */
#define RT_SUM_PARTS 64
/* Products below this many multiply-adds run on one thread; a split gives
 * blocks of whole multiples of the quantum (SIMD-friendly). */
#define RT_GEMM_PAR_MIN (1 << 18)
#define RT_GEMM_QUANTUM 16
/* Chunks per thread of a parallel loop (of a product: RT_GEMM_CHUNKS):
 * more than one, so a late thread's share is picked up by the others. */
#define RT_CHUNKS 4
#define RT_GEMM_CHUNKS 2
/* Pool limits; an idle worker polls this many times (~50 us) before it sleeps. */
#define RT_MAX_THREADS 256
#define RT_SPIN 4000

static const float RT_SQRT_2_OVER_PI = 0.7978845608028654f; /* M_PI is not C17 */
static const float RT_SQRT1_2 = 0.7071067811865476f;        /* 1 / sqrt 2 */
static const float RT_INV_SQRT_2PI = 0.3989422804014327f;   /* 1 / sqrt(2 pi) */

_Noreturn static void rt_fail(const char *file, int line, const char *msg) {
  fprintf(stderr, "%s:%d: memplan runtime: %s\n", file, line, msg);
  abort();
}
#define RT_CHECK(cond, msg) ((cond) ? (void)0 : rt_fail(__FILE__, __LINE__, (msg)))

// ----------------------------------------------------------------------------
// thread pool

/* fn(ctx, lo, hi) runs iterations [lo, hi) of a loop. */
typedef void (*RtTask)(const void *ctx, int64_t lo, int64_t hi);

static int rt_nt = 1;  /* threads, the caller included (rt_set_threads) */
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
static void rt_par(RtTask fn, const void *ctx, int64_t n, int64_t chunks) {
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
static int64_t rt_chunks(int par) { return par ? (int64_t)RT_CHUNKS * rt_nt : 1; }

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

/* BLAS takes int dimensions (LP64 OpenBLAS). */
static int blas_dim(int64_t d) {
  RT_CHECK(d >= 0 && d <= INT_MAX, "matrix dimension does not fit BLAS int");
  return (int)d;
}

/* C[m,n] (+)= op(A)[m,k] @ op(B)[k,n], row-major. ta: A is stored [k,m];
 * tb: B is stored [n,k]. beta = 0 never reads C (BLAS contract), so acc = 0
 * needs no memset. */
static void gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float *C, int64_t ldc, int acc) {
  if (m == 1 && !ta) { /* one row (generation's decode): a matrix-vector product, W read once */
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, blas_dim(tb ? n : k), blas_dim(tb ? k : n), 1.0f, B,
                blas_dim(ldb), A, 1, acc ? 1.0f : 0.0f, C, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_dim(m), blas_dim(n),
              blas_dim(k), 1.0f, A, blas_dim(lda), B, blas_dim(ldb), acc ? 1.0f : 0.0f, C, blas_dim(ldc));
}

/* The same product cut into blocks of rows of C (or of columns, when C is
 * wider than tall), each a single-threaded sgemm, run on the pool. One pool
 * for everything: OpenBLAS's own threads and the kernels' threads would fight
 * over the cores. Blocks depend on the thread count only, so results are
 * deterministic for a given count. */
typedef struct {
  int ta, tb, rows, acc;
  int64_t m, n, k, lda, ldb, len;
  const float *A, *B;
  float *C;
} GemmTask;

static void gemm_task(const void *ctx, int64_t lo, int64_t hi) {
  const GemmTask *g = ctx;
  int64_t q = RT_GEMM_QUANTUM, nq = g->len / q;
  lo *= q, hi = hi == nq ? g->len : hi * q; // in quanta; the last block takes the rest
  if (hi <= lo) return;
  if (g->rows)
    gemm1(g->ta, g->tb, hi - lo, g->n, g->k, g->ta ? g->A + lo : g->A + lo * g->lda, g->lda, g->B, g->ldb,
          g->C + lo * g->n, g->n, g->acc);
  else
    gemm1(g->ta, g->tb, g->m, hi - lo, g->k, g->A, g->lda, g->tb ? g->B + lo * g->ldb : g->B + lo, g->ldb, g->C + lo,
          g->n, g->acc);
}

static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C, int acc) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  int rows = m >= n;
  int64_t len = rows ? m : n;
  if (rt_nt == 1 || m * n * k < RT_GEMM_PAR_MIN || len < 2 * RT_GEMM_QUANTUM) {
    gemm1(ta, tb, m, n, k, A, lda, B, ldb, C, n, acc);
    return;
  }
  GemmTask g = {ta, tb, rows, acc, m, n, k, lda, ldb, len, A, B, C};
  rt_par(gemm_task, &g, len / RT_GEMM_QUANTUM, (int64_t)RT_GEMM_CHUNKS * rt_nt);
}

/* out = a + b (element-wise tasks share this context). */
typedef struct {
  float *out;
  const float *a, *b;
  int acc;
} AddTask;

static void accumulate_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *b = c->b;
  for (int64_t i = lo; i < hi; i++) out[i] += b[i];
}

/* dst (+)= src. dst == src with acc = 0 is the in-place no-op. */
static void accumulate(float *dst, const float *src, int64_t n, int acc) {
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

static int64_t col_blocks(int64_t N) { return (N + RT_COL_BLOCK - 1) / RT_COL_BLOCK; }

static void colsum(float *out, const float *in, int64_t M, int64_t N, int acc) {
  ColsumTask a = {out, in, M, N, acc};
  rt_par(colsum_task, &a, col_blocks(N), rt_chunks(M * N >= RT_PAR_MIN));
}

/* Eight partial sums: without -ffast-math the compiler may not reorder a
 * float reduction, but it vectorizes independent lanes. */
static float dot(const float *a, const float *b, int64_t n) {
  float s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; i++) r += a[i] * b[i];
  return r;
}

static double sum_parts(const double *part) {
  double s = 0.0;
  for (int c = 0; c < RT_SUM_PARTS; c++) s += part[c];
  return s;
}

/* exp(x) in plain branch-free float arithmetic, so that loops calling it
 * vectorize (libm's expf is a call per element): Cephes' expf, n = round(x
 * log2 e) by the 1.5 2^23 trick, r = x - n ln 2 in two exact steps (no
 * contraction: -std=c17), a degree-6 polynomial, then 2^n put into the
 * exponent bits. Within 2 ulp of expf for |x| <= 87; below -87 (where expf
 * is at most 1.6e-38) it returns 0, above 88 it saturates at e^88; NaN gives
 * NaN. Deterministic: the same float operations on every machine. */
static inline float rt_exp(float x) {
  float xc = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
  float t = xc * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  uint32_t ti; /* unsigned: NaN's bits would make a negative shift (UB) */
  memcpy(&ti, &t, 4);
  uint32_t e = (ti - 0x4B400000u) + 127u; // n + 127, in [1, 254] (NaN: anything; the result is x)
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  uint32_t bi = e << 23;
  float scale;
  memcpy(&scale, &bi, 4);
  float y = p * scale;
  return x < -87.0f ? 0.0f : x != x ? x : y;
}

/* Lanes for row reductions: independent partial results the compiler keeps
 * in vector registers, combined in a fixed order (deterministic). */
#define RT_LANES 16

/* max of x[0..n), n >= 1. */
static float row_max(const float *x, int64_t n) {
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
static double row_sum_exp(float *out, const float *x, int64_t n, float mx) {
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
static float row_lse(const float *x, int64_t n) {
  float mx = row_max(x, n);
  return mx + (float)log(row_sum_exp(NULL, x, n, mx));
}

/* In place: x[0..n) = softmax(x[0..n)). */
static void softmax_row(float *x, int64_t n) {
  float mx = row_max(x, n);
  double s = row_sum_exp(x, x, n, mx);
  float inv = (float)(1.0 / s);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

// ----------------------------------------------------------------------------
// linear, matmul

void rt_linear_forward(float *out, const float *x, const float *W, const float *b, int64_t M, int64_t K, int64_t N) {
  // With a bias, rows start as b and the product is added onto them (beta = 1).
  if (b)
    for (int64_t i = 0; i < M; i++) memcpy(out + i * N, b, (size_t)N * sizeof(float));
  gemm(0, 1, M, N, K, x, W, out, b != NULL);
}

void rt_linear_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, int64_t M,
                        int64_t K, int64_t N, int acc_dx, int acc_dW, int acc_db) {
  if (dx) gemm(0, 0, M, K, N, dout, W, dx, acc_dx); // [M,N] @ [N,K]
  if (dW) gemm(1, 0, N, K, M, dout, x, dW, acc_dW); // [M,N]^T @ [M,K]
  if (db) colsum(db, dout, M, N, acc_db);
}

void rt_matmul_forward(float *out, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N) {
  for (int64_t i = 0; i < Bt; i++) gemm(0, 0, M, N, K, a + i * M * K, b + i * K * N, out + i * M * N, 0);
}

void rt_matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t Bt, int64_t M,
                        int64_t K, int64_t N, int acc_da, int acc_db) {
  for (int64_t i = 0; i < Bt; i++) {
    const float *dout_i = dout + i * M * N;
    if (da) gemm(0, 1, M, K, N, dout_i, b + i * K * N, da + i * M * K, acc_da);
    if (db) gemm(1, 0, K, N, M, a + i * M * K, dout_i, db + i * K * N, acc_db);
  }
}

// ----------------------------------------------------------------------------
// element-wise: add, mul, relu, gelu, silu

static void add_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *a = c->a, *b = c->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] + b[i];
}

void rt_add_forward(float *out, const float *a, const float *b, int64_t n) {
  rt_par(add_task, &(AddTask){out, a, b, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

void rt_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  // A gradient may alias dout only with acc = 0, where its write is a no-op:
  // dout is intact for the other one whichever goes first.
  accumulate(da, dout, n, acc_da);
  accumulate(db, dout, n, acc_db);
}

static void mul_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *a = c->a, *b = c->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] * b[i];
}

void rt_mul_forward(float *out, const float *a, const float *b, int64_t n) {
  rt_par(mul_task, &(AddTask){out, a, b, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

typedef struct {
  float *da, *db;
  const float *dout, *a, *b;
  int acc_da, acc_db;
} MulBackwardTask;

/* Each element's dout, a and b are read before da is written there, and da
 * before db: so da or db may be dout (acc = 0), and da may be db (acc_db = 1,
 * which then adds onto the da just written). */
static void mul_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const MulBackwardTask *c = ctx;
  float *da = c->da, *db = c->db;
  const float *dout = c->dout, *a = c->a, *b = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = dout[i], ai = a[i], bi = b[i];
    if (da) da[i] = c->acc_da ? da[i] + g * bi : g * bi;
    if (db) db[i] = c->acc_db ? db[i] + g * ai : g * ai;
  }
}

void rt_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t n, int acc_da,
                     int acc_db) {
  if (!da && !db) return;
  MulBackwardTask t = {da, db, dout, a, b, acc_da, acc_db};
  rt_par(mul_backward_task, &t, n, rt_chunks(n >= RT_PAR_MIN));
}

static void relu_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void rt_relu_forward(float *out, const float *x, int64_t n) {
  rt_par(relu_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
#ifdef RT_PLANT_OFF_BY_ONE /* tests/crash/guard.sh: a planted bug guard mode must catch */
  out[n] = 0.0f;
#endif
}

/* dx (a.out) (+)= dout (a) where y (b) > 0. */
static void relu_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *out = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = out[i] > 0.0f ? dout[i] : 0.0f;
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  rt_par(relu_backward_task, &(AddTask){dx, dout, out, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static void relu6_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
}

void rt_relu6_forward(float *out, const float *x, int64_t n) {
  rt_par(relu6_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) where 0 < y (b) < 6. */
static void relu6_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *out = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = out[i] > 0.0f && out[i] < 6.0f ? dout[i] : 0.0f;
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_relu6_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  rt_par(relu6_backward_task, &(AddTask){dx, dout, out, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* e = exp(a) for a sigmoid 1 / (1 + e), a clamped to [-80, 80], where
 * sigmoid is within 2e-35 of 0 or 1: e and 1/(1 + e) stay normal, and the
 * loops vectorize. */
static inline float sigmoid_e(float a) { return rt_exp(a < -80.0f ? -80.0f : a > 80.0f ? 80.0f : a); }

/* 0.5 x (1 + tanh u) = x sigmoid(2u) = x / (1 + e), e = exp(-2u): one
 * exp and no tanh. */
static inline float gelu_e(float x) { return sigmoid_e(-2.0f * (RT_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x))); }

static void gelu_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    out[i] = xi / (1.0f + gelu_e(xi));
  }
}

/* Exact gelu: x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)). */
static void gelu_erf_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    out[i] = 0.5f * xi * (1.0f + erff(xi * RT_SQRT1_2));
  }
}

void rt_gelu_forward(float *out, const float *x, int64_t n, int approximate) {
  rt_par(approximate ? gelu_task : gelu_erf_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (out) (+)= dout (a) gelu'(x (b)). */
static void gelu_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  int acc = c->acc;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float e = gelu_e(xi);
    float s = 1.0f / (1.0f + e); // sigmoid(2u) = 0.5 (1 + tanh u)
    float du = RT_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * xi * xi);
    // d/dx x s(2u) = s + 2 x du s (1 - s); 1 - s = e s exactly, no
    // cancellation where s nears 1 (where 1 - tanh^2 would lose digits).
    float g = dout[i] * (s + 2.0f * xi * du * ((e * s) * s));
    dx[i] = acc ? dx[i] + g : g;
  }
}

/* Exact: dx (out) (+)= dout (a) (Phi(x) + x phi(x)), x (b); phi(x) =
 * exp(-x^2 / 2) / sqrt(2 pi) underflows to 0 where Phi is 0 or 1. */
static void gelu_erf_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  int acc = c->acc;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float cdf = 0.5f * (1.0f + erff(xi * RT_SQRT1_2));
    float pdf = RT_INV_SQRT_2PI * expf(-0.5f * xi * xi);
    float g = dout[i] * (cdf + xi * pdf);
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int approximate, int acc) {
  rt_par(approximate ? gelu_backward_task : gelu_erf_backward_task, &(AddTask){dx, dout, x, acc}, n,
         rt_chunks(n >= RT_PAR_MIN));
}

/* out (+)= f x, element by element (alias-safe). */
typedef struct {
  float *out;
  const float *x;
  float f;
  int acc;
} ScaleTask;

static void scale_task(const void *ctx, int64_t lo, int64_t hi) {
  const ScaleTask *c = ctx;
  for (int64_t i = lo; i < hi; i++) c->out[i] = c->acc ? c->out[i] + c->f * c->x[i] : c->f * c->x[i];
}

void rt_scale_forward(float *out, const float *x, int64_t n, double factor) {
  rt_par(scale_task, &(ScaleTask){out, x, (float)factor, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

void rt_scale_backward(float *dx, const float *dout, int64_t n, double factor, int acc) {
  if (dx) rt_par(scale_task, &(ScaleTask){dx, dout, (float)factor, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* e = exp(-x): sigmoid(x) = 1 / (1 + e). */
static inline float silu_e(float x) { return sigmoid_e(-x); }

static void silu_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    out[i] = xi / (1.0f + silu_e(xi));
  }
}

void rt_silu_forward(float *out, const float *x, int64_t n) {
  rt_par(silu_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (out) (+)= dout (a) silu'(x (b)). */
static void silu_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  int acc = c->acc;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float e = silu_e(xi);
    float s = 1.0f / (1.0f + e);
    // d/dx x s = s (1 + x (1 - s)), with 1 - s = e s (no cancellation near s = 1)
    float g = dout[i] * (s * (1.0f + xi * (e * s)));
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_silu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  rt_par(silu_backward_task, &(AddTask){dx, dout, x, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static void sigmoid_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = 1.0f / (1.0f + sigmoid_e(-x[i]));
}

void rt_sigmoid_forward(float *out, const float *x, int64_t n) {
  rt_par(sigmoid_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) y (1 - y), y (b) the output. */
static void sigmoid_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *out = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = dout[i] * out[i] * (1.0f - out[i]);
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_sigmoid_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  rt_par(sigmoid_backward_task, &(AddTask){dx, dout, out, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static inline float hardsigmoid1(float x) { return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f; }

static void hardswish_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = x[i] * hardsigmoid1(x[i]);
}

void rt_hardswish_forward(float *out, const float *x, int64_t n) {
  rt_par(hardswish_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) hardswish'(x (b)), torch's: 0 below -3, x / 3 + 0.5 up to 3, 1 above. */
static void hardswish_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float g = xi < -3.0f ? 0.0f : xi <= 3.0f ? dout[i] * (xi / 3.0f + 0.5f) : dout[i];
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_hardswish_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  rt_par(hardswish_backward_task, &(AddTask){dx, dout, x, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static void hardsigmoid_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = hardsigmoid1(x[i]);
}

void rt_hardsigmoid_forward(float *out, const float *x, int64_t n) {
  rt_par(hardsigmoid_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) / 6 where -3 < x (b) < 3. */
static void hardsigmoid_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = x[i] > -3.0f && x[i] < 3.0f ? dout[i] / 6.0f : 0.0f;
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_hardsigmoid_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  rt_par(hardsigmoid_backward_task, &(AddTask){dx, dout, x, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* Arguments of a parallel loop: the kernels below unpack them by name. */
typedef struct {
  float *o[3];
  const float *i[5];
  const int32_t *tok;
  int64_t d[8];
  int acc[3];
  float f[8];
  double *part;
} RtArgs;

// ----------------------------------------------------------------------------
// scale_channels: planes of S elements, each times its own factor; parallel over planes

static void scale_channels_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t S = a->d[0];
  for (int64_t p = lo; p < hi; p++) {
    float f = a->i[1][p], *out = a->o[0] + p * S;
    const float *x = a->i[0] + p * S;
    for (int64_t j = 0; j < S; j++) out[j] = x[j] * f;
  }
}

void rt_scale_channels_forward(float *out, const float *x, const float *s, int64_t NC, int64_t S) {
  RtArgs a = {.o = {out}, .i = {x, s}, .d = {S}};
  rt_par(scale_channels_task, &a, NC, rt_chunks(NC * S >= RT_PAR_MIN));
}

/* Per plane: ds first (a double sum of dout x), then dx, which may overwrite dout. */
static void scale_channels_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t S = a->d[0];
  float *dx = a->o[0], *ds = a->o[1];
  const float *dout = a->i[0], *x = a->i[1], *s = a->i[2];
  for (int64_t p = lo; p < hi; p++) {
    const float *g = dout + p * S;
    if (ds) {
      double sum = 0.0;
      for (int64_t j = 0; j < S; j++) sum += (double)g[j] * x[p * S + j];
      ds[p] = a->acc[1] ? ds[p] + (float)sum : (float)sum;
    }
    if (dx) {
      float f = s[p], *d = dx + p * S;
      for (int64_t j = 0; j < S; j++) d[j] = a->acc[0] ? d[j] + g[j] * f : g[j] * f;
    }
  }
}

void rt_scale_channels_backward(float *dx, float *ds, const float *dout, const float *x, const float *s, int64_t NC,
                                int64_t S, int acc_dx, int acc_ds) {
  if (!dx && !ds) return;
  RtArgs a = {.o = {dx, ds}, .i = {dout, x, s}, .d = {S}, .acc = {acc_dx, acc_ds}};
  rt_par(scale_channels_backward_task, &a, NC, rt_chunks(NC * S >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// layernorm: out = (x - mean) * rstd * w (+ b), rstd = 1 / sqrt(var + eps) per row

static void layernorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *mean = A->o[1], *rstd = A->o[2];
  const float *x = A->i[0], *w = A->i[1], *b = A->i[2];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C;
    float *oi = out + i * C;
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += xi[j];
    float m = (float)(s / (double)C);
    double v = 0.0; // two-pass biased variance: no cancellation
    for (int64_t j = 0; j < C; j++) v += (double)(xi[j] - m) * (xi[j] - m);
    float r = 1.0f / sqrtf((float)(v / (double)C) + A->f[0]);
    if (b)
      for (int64_t j = 0; j < C; j++) oi[j] = (xi[j] - m) * r * w[j] + b[j];
    else
      for (int64_t j = 0; j < C; j++) oi[j] = (xi[j] - m) * r * w[j];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = r;
  }
}

void rt_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t N, int64_t C, float eps) {
  RtArgs a = {.o = {out, mean, rstd}, .i = {x, w, b}, .d = {C}, .f = {eps}};
  rt_par(layernorm_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

/* dx (+)= rstd (w dout - mean(w dout) - xhat mean(w dout xhat)), per row. */
static void layernorm_dx_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *w = A->i[2], *mean = A->i[3], *rstd = A->i[4];
  int64_t C = A->d[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C, *gi = dout + i * C;
    float *dxi = dx + i * C;
    float m = mean[i], r = rstd[i];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < C; j++) {
      float wg = w[j] * gi[j];
      s1 += wg;
      s2 += wg * ((xi[j] - m) * r);
    }
    float m1 = (float)(s1 / (double)C), m2 = (float)(s2 / (double)C);
    for (int64_t j = 0; j < C; j++) {
      float g = r * (w[j] * gi[j] - m1 - (xi[j] - m) * r * m2);
      dxi[j] = acc ? dxi[j] + g : g;
    }
  }
}

static void layernorm_backward_dx(float *dx, const float *dout, const float *x, const float *w, const float *mean,
                                  const float *rstd, int64_t N, int64_t C, int acc) {
  RtArgs a = {.o = {dx}, .i = {dout, x, w, mean, rstd}, .d = {C}, .acc = {acc}};
  rt_par(layernorm_dx_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

/* dw (+)= sum_rows dout * xhat; db (+)= sum_rows dout. */
static void layernorm_wb_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dw = A->o[0], *db = A->o[1];
  const float *dout = A->i[0], *x = A->i[1], *mean = A->i[2], *rstd = A->i[3];
  int64_t N = A->d[0], C = A->d[1];
  int acc_dw = A->acc[0], acc_db = A->acc[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = it * RT_COL_BLOCK;
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    double sw[RT_COL_BLOCK] = {0}, sb[RT_COL_BLOCK] = {0};
    for (int64_t i = 0; i < N; i++) {
      const float *xi = x + i * C + j0, *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) {
        sw[j] += gi[j] * ((xi[j] - mean[i]) * rstd[i]);
        sb[j] += gi[j];
      }
    }
    for (int64_t j = 0; j < nj; j++) {
      if (dw) dw[j0 + j] = (float)(acc_dw ? dw[j0 + j] + sw[j] : sw[j]);
      if (db) db[j0 + j] = (float)(acc_db ? db[j0 + j] + sb[j] : sb[j]);
    }
  }
}

static void layernorm_backward_wb(float *dw, float *db, const float *dout, const float *x, const float *mean,
                                  const float *rstd, int64_t N, int64_t C, int acc_dw, int acc_db) {
  RtArgs a = {.o = {dw, db}, .i = {dout, x, mean, rstd}, .d = {N, C}, .acc = {acc_dw, acc_db}};
  rt_par(layernorm_wb_task, &a, col_blocks(C), rt_chunks(N * C >= RT_PAR_MIN));
}

void rt_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, int64_t N, int64_t C, float eps, int acc_dx,
                           int acc_dw, int acc_db) {
  (void)eps; /* rstd is saved */
  if (dx) layernorm_backward_dx(dx, dout, x, w, mean, rstd, N, C, acc_dx);
  if (dw || db) layernorm_backward_wb(dw, db, dout, x, mean, rstd, N, C, acc_dw, acc_db);
}

// ----------------------------------------------------------------------------
// rmsnorm: out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) per row

static void rmsnorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *rstd = A->o[1];
  const float *x = A->i[0], *w = A->i[1];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C;
    float *oi = out + i * C;
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += (double)xi[j] * xi[j];
    float r = 1.0f / sqrtf((float)(s / (double)C) + A->f[0]);
    for (int64_t j = 0; j < C; j++) oi[j] = xi[j] * r * w[j];
    if (rstd) rstd[i] = r;
  }
}

void rt_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t N, int64_t C, float eps) {
  RtArgs a = {.o = {out, rstd}, .i = {x, w}, .d = {C}, .f = {eps}};
  rt_par(rmsnorm_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

/* dx (+)= rstd (w dout - x rstd^2 mean(w dout x)), per row. */
static void rmsnorm_dx_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *w = A->i[2], *rstd = A->i[3];
  int64_t C = A->d[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C, *gi = dout + i * C;
    float *dxi = dx + i * C;
    float r = rstd[i];
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += (double)(w[j] * gi[j]) * xi[j];
    float m = (float)(s / (double)C) * r * r;
    for (int64_t j = 0; j < C; j++) {
      float g = r * (w[j] * gi[j] - xi[j] * m);
      dxi[j] = acc ? dxi[j] + g : g;
    }
  }
}

/* dw (+)= sum_rows dout * x * rstd, over column blocks. */
static void rmsnorm_dw_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dw = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *rstd = A->i[2];
  int64_t N = A->d[0], C = A->d[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = it * RT_COL_BLOCK;
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    double sw[RT_COL_BLOCK] = {0};
    for (int64_t i = 0; i < N; i++) {
      const float *xi = x + i * C + j0, *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) sw[j] += gi[j] * (xi[j] * rstd[i]);
    }
    for (int64_t j = 0; j < nj; j++) dw[j0 + j] = (float)(A->acc[0] ? dw[j0 + j] + sw[j] : sw[j]);
  }
}

void rt_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                         int64_t N, int64_t C, float eps, int acc_dx, int acc_dw) {
  (void)eps; /* rstd is saved */
  if (dx) {
    RtArgs a = {.o = {dx}, .i = {dout, x, w, rstd}, .d = {C}, .acc = {acc_dx}};
    rt_par(rmsnorm_dx_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
  }
  if (dw) {
    RtArgs a = {.o = {dw}, .i = {dout, x, rstd}, .d = {N, C}, .acc = {acc_dw}};
    rt_par(rmsnorm_dw_task, &a, col_blocks(C), rt_chunks(N * C >= RT_PAR_MIN));
  }
}

// ----------------------------------------------------------------------------
// softmax

static void softmax_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *x = A->i[0];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    if (out != x) memcpy(out + i * C, x + i * C, (size_t)C * sizeof(float));
    softmax_row(out + i * C, C);
  }
}

void rt_softmax_forward(float *out, const float *x, int64_t N, int64_t C) {
  RtArgs a = {.o = {out}, .i = {x}, .d = {C}};
  rt_par(softmax_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

static void softmax_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *out = A->i[1];
  int64_t C = A->d[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *gi = dout + i * C, *yi = out + i * C;
    float *dxi = dx + i * C;
    double s = 0.0; // read all of the row's dout before dx (may alias it) is written
    for (int64_t j = 0; j < C; j++) s += gi[j] * yi[j];
    for (int64_t j = 0; j < C; j++) {
      float g = yi[j] * (gi[j] - (float)s);
      dxi[j] = acc ? dxi[j] + g : g;
    }
  }
}

void rt_softmax_backward(float *dx, const float *dout, const float *out, int64_t N, int64_t C, int acc) {
  RtArgs a = {.o = {dx}, .i = {dout, out}, .d = {C}, .acc = {acc}};
  rt_par(softmax_backward_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// self-attention (causal or not, grouped-query)
//
// Layout: qkv[b,t,:] = q (C = NH*hs) | k (KC = KVH*hs) | v (KC); query head h
// uses channels h*hs..h*hs+hs-1 of q and those of kv head h / (NH/KVH) in k
// and v. A causal (b,t,h) query row reads keys and values of positions 0..t
// only, a non-causal one all T.

/* One query row: p[0..n) = softmax(q . k[t2] * scale), out = sum_t2 p[t2] v[t2];
 * returns the row's log-sum-exp of scaled scores. k and v point at position 0
 * of this row's kv head; positions are C3 floats apart; p is n floats of
 * scratch. */
static float attention_row(float *out, float *p, const float *q, const float *k, const float *v, int64_t n, int64_t hs,
                           int64_t C3, float scale) {
  for (int64_t t2 = 0; t2 < n; t2++) p[t2] = dot(q, k + t2 * C3, hs) * scale;
  float mx = row_max(p, n);
  double s = row_sum_exp(p, p, n, mx);
  float inv = (float)(1.0 / s);
  for (int64_t i = 0; i < hs; i++) out[i] = 0.0f;
  for (int64_t t2 = 0; t2 < n; t2++) {
    float w = p[t2] * inv;
    const float *v2 = v + t2 * C3;
    for (int64_t i = 0; i < hs; i++) out[i] += w * v2[i];
  }
  return mx + (float)log(s);
}

static void attention_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *lse = A->o[1];
  const float *qkv = A->i[0];
  int64_t T = A->d[0], C = A->d[1], NH = A->d[2], hs = A->d[3], C3 = A->d[4], KC = A->d[5], group = A->d[6];
  int64_t causal = A->d[7];
  float scale = A->f[0];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / (T * NH);
    int64_t t = it / NH % T;
    int64_t h = it % NH;
    float p[RT_ATT_MAX_T]; // only p[0..n) is touched
    const float *base = qkv + b * T * C3, *k = base + C + h / group * hs;
    float l = attention_row(out + (b * T + t) * C + h * hs, p, base + t * C3 + h * hs, k, k + KC, causal ? t + 1 : T,
                            hs, C3, scale);
    if (lse) lse[(b * NH + h) * T + t] = l;
  }
}

void rt_attention_forward(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                          int64_t KVH, int64_t causal) {
  RT_CHECK(T <= RT_ATT_MAX_T, "attention needs T <= 16384");
  RT_CHECK(NH > 0 && KVH > 0 && C % NH == 0 && NH % KVH == 0, "attention needs C % NH == 0 and NH % KVH == 0");
  int64_t hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  RtArgs a = {
      .o = {out, lse}, .i = {qkv}, .d = {T, C, NH, hs, C + 2 * KVH * hs, KVH * hs, NH / KVH, causal}, .f = {scale}};
  rt_par(attention_task, &a, B * T * NH, rt_chunks(1));
}

/* Backward of one query row with output grad g over keys 0..n-1,
 * FlashAttention-style: the probabilities are recomputed as
 * p = exp(q . k[t2] scale - lse), and the softmax backward's sum_t2 p dp
 * equals D = g . out (out = sum p v), so one pass over t2 suffices:
 * dp = g . v[t2], ds = p (dp - D) scale, dq += ds k[t2], dk[t2] += ds q,
 * dv[t2] += p g. No scratch; one sweep over the rows of k, v, dk and dv
 * (measured: a second sweep, to vectorize the exp over t2, costs more than
 * it saves; rows are C3 floats apart). */
static void attention_row_backward(float *dq, float *dk, float *dv, const float *g, const float *o, float lse,
                                   const float *q, const float *k, const float *v, int64_t n, int64_t hs, int64_t C3,
                                   float scale) {
  float D = dot(g, o, hs);
  for (int64_t t2 = 0; t2 < n; t2++) {
    const float *k2 = k + t2 * C3, *v2 = v + t2 * C3;
    float p = expf(dot(q, k2, hs) * scale - lse);
    float ds = p * (dot(g, v2, hs) - D) * scale;
    float *dk2 = dk + t2 * C3, *dv2 = dv + t2 * C3;
    for (int64_t i = 0; i < hs; i++) {
      dq[i] += ds * k2[i];
      dk2[i] += ds * q[i];
      dv2[i] += p * g[i];
    }
  }
}

/* One (b, kv head): every row of its group's query heads, in a fixed order. */
static void attention_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dqkv = A->o[0];
  const float *dout = A->i[0], *qkv = A->i[1], *out = A->i[2], *lse = A->i[3];
  int64_t T = A->d[0], C = A->d[1], NH = A->d[2], hs = A->d[3], C3 = A->d[4], KC = A->d[5], group = A->d[6];
  int64_t causal = A->d[7], KVH = NH / group;
  float scale = A->f[0];
  int acc = A->acc[0];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / KVH;
    int64_t kh = it % KVH;
    const float *base = qkv + b * T * C3, *k = base + C + kh * hs;
    float *dbase = dqkv + b * T * C3, *dk = dbase + C + kh * hs;
    if (!acc)
      for (int64_t t = 0; t < T; t++) {
        memset(dbase + t * C3 + kh * group * hs, 0, (size_t)(group * hs) * sizeof(float)); // the group's dq
        memset(dk + t * C3, 0, (size_t)hs * sizeof(float));
        memset(dk + KC + t * C3, 0, (size_t)hs * sizeof(float));
      }
    for (int64_t h = kh * group; h < (kh + 1) * group; h++)
      for (int64_t t = 0; t < T; t++) {
        int64_t row = (b * T + t) * C + h * hs;
        attention_row_backward(dbase + t * C3 + h * hs, dk, dk + KC, dout + row, out + row, lse[(b * NH + h) * T + t],
                               base + t * C3 + h * hs, k, k + KC, causal ? t + 1 : T, hs, C3, scale);
      }
  }
}

void rt_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                           int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, int acc) {
  RT_CHECK(NH > 0 && KVH > 0 && C % NH == 0 && NH % KVH == 0, "attention needs C % NH == 0 and NH % KVH == 0");
  if (!dqkv) return; // its one gradient is not needed
  int64_t hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  // Parallel over (b, kv head) only: a row adds into dk, dv of every key it
  // sees, and the query heads of a group share their kv head's dk, dv; a
  // (b, kv head) pair owns those and its group's dq, so pairs never race and
  // each sum runs in one order whatever the thread count.
  RtArgs a = {.o = {dqkv},
              .i = {dout, qkv, out, lse},
              .d = {T, C, NH, hs, C + 2 * KVH * hs, KVH * hs, NH / KVH, causal},
              .f = {scale},
              .acc = {acc}};
  rt_par(attention_backward_task, &a, B * KVH, rt_chunks(1));
}

// ----------------------------------------------------------------------------
// embeddings

static void embedding_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const int32_t *tokens = A->tok;
  const float *W = A->i[0];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    memcpy(out + i * C, W + (int64_t)tokens[i] * C, (size_t)C * sizeof(float));
  }
}

void rt_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V) {
  (void)V; // ids were checked by the data loader
  RtArgs a = {.o = {out}, .i = {W}, .tok = tokens, .d = {C}};
  rt_par(embedding_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

static void embedding_zero_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  int64_t C = A->d[0];
  for (int64_t v = lo; v < hi; v++) {
    memset(dW + v * C, 0, (size_t)C * sizeof(float));
  }
}

static void embedding_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  const float *dout = A->i[0];
  const int32_t *tokens = A->tok;
  int64_t N = A->d[0], C = A->d[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = it * RT_COL_BLOCK;
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    for (int64_t i = 0; i < N; i++) {
      float *row = dW + (int64_t)tokens[i] * C + j0;
      const float *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) row[j] += gi[j];
    }
  }
}

void rt_embedding_backward(float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V,
                           int acc) {
  if (!acc) {
    rt_par(embedding_zero_task, &(RtArgs){.o = {dW}, .d = {C}}, V, rt_chunks(V * C >= RT_PAR_MIN));
  }
  // Repeated tokens add into the same row: tasks own column blocks, not rows.
  RtArgs a = {.o = {dW}, .i = {dout}, .tok = tokens, .d = {N, C}};
  rt_par(embedding_backward_task, &a, col_blocks(C), rt_chunks(N * C >= RT_PAR_MIN));
}

static void position_embedding_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *W = A->i[0];
  int64_t T = A->d[0], C = A->d[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / T;
    int64_t t = it % T;
    memcpy(out + (b * T + t) * C, W + t * C, (size_t)C * sizeof(float));
  }
}

void rt_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T, int64_t C) {
  RtArgs a = {.o = {out}, .i = {W}, .d = {T, C}};
  rt_par(position_embedding_task, &a, B * T, rt_chunks(B * T * C >= RT_PAR_MIN));
}

static void position_embedding_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  const float *dout = A->i[0];
  int64_t B = A->d[0], T = A->d[1], C = A->d[2];
  int acc = A->acc[0];
  for (int64_t t = lo; t < hi; t++) {
    float *row = dW + t * C;
    if (!acc) memset(row, 0, (size_t)C * sizeof(float));
    if (t >= T) continue;
    for (int64_t b = 0; b < B; b++) {
      const float *gi = dout + (b * T + t) * C;
      for (int64_t j = 0; j < C; j++) row[j] += gi[j];
    }
  }
}

void rt_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows,
                                    int acc) {
  RtArgs a = {.o = {dW}, .i = {dout}, .d = {B, T, C}, .acc = {acc}};
  rt_par(position_embedding_backward_task, &a, Wrows, rt_chunks(Wrows * C >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// rope: the q and k heads of a packed qkv rotated pairwise by position

/* Frequencies per pass over a chunk's rows: their theta^(-2i/hd) on the stack. */
#define RT_ROPE_FREQS 256

/* Rows are positions (b, t). Each frequency's cos and sin, computed once per
 * row, serve every q and k head; a pair is read before it is written, so out
 * may be x. sign -1 rotates backward; acc adds (never with out == x). */
static void rope_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *x = A->i[0];
  int64_t T = A->d[0], nr = A->d[1] + A->d[2], KV = A->d[2], hd = A->d[3], h2 = hd / 2, W = (nr + KV) * hd;
  double theta = A->f[0];
  float sign = A->f[5];
  int acc = A->acc[0];
  for (int64_t i0 = 0; i0 < h2; i0 += RT_ROPE_FREQS) {
    int64_t ni = h2 - i0 < RT_ROPE_FREQS ? h2 - i0 : RT_ROPE_FREQS;
    double inv[RT_ROPE_FREQS];
    for (int64_t j = 0; j < ni; j++) inv[j] = rt_rope_freq(theta, i0 + j, hd, A->f[1], A->f[2], A->f[3], A->f[4]);
    for (int64_t r = lo; r < hi; r++) {
      const float *xr = x + r * W;
      float *orow = out + r * W;
      for (int64_t j = 0; j < ni; j++) {
        double a = (double)(r % T) * inv[j];
        float c = (float)cos(a), s = sign * (float)sin(a);
        for (int64_t h = 0; h < nr; h++) {
          int64_t k = h * hd + i0 + j;
          float x1 = xr[k], x2 = xr[k + h2];
          float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
          orow[k] = acc ? orow[k] + y1 : y1;
          orow[k + h2] = acc ? orow[k + h2] + y2 : y2;
        }
      }
    }
  }
  if (out == x && !acc) return; // v is already in place
  for (int64_t r = lo; r < hi; r++)
    for (int64_t k = nr * hd; k < W; k++) out[r * W + k] = acc ? out[r * W + k] + x[r * W + k] : x[r * W + k];
}

static void rope(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, const float *s,
                 float sign, int acc) {
  RT_CHECK(hd % 2 == 0, "rope needs an even head dimension");
  RtArgs a = {.o = {out}, .i = {x}, .d = {T, H, KV, hd}, .acc = {acc}, .f = {s[0], s[1], s[2], s[3], s[4], sign}};
  rt_par(rope_task, &a, B * T, rt_chunks(B * T * (H + 2 * KV) * hd >= RT_PAR_MIN));
}

void rt_rope_forward(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta,
                     float factor, float low, float high, float orig) {
  rope(out, x, B, T, H, KV, hd, (const float[5]){theta, factor, low, high, orig}, 1.0f, 0);
}

void rt_rope_backward(float *dx, const float *dout, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                      float theta, float factor, float low, float high, float orig, int acc) {
  if (dx) rope(dx, dout, B, T, H, KV, hd, (const float[5]){theta, factor, low, high, orig}, -1.0f, acc);
}

// ----------------------------------------------------------------------------
// shape ops: flatten and reshape (a copy, or nothing in place), transpose,
// concat, class_token, select. Data movement only, parallel over elements
// (a task may start mid-row) or over tiles; the one sum (class_token's dW)
// is over column blocks in batch order, as colsum.

/* dst[r * ds + j] (+)= src[r * ss + j] for rows r < rows, j < len: a block
 * of a strided tensor (ss = 0 repeats one row of src). */
typedef struct {
  float *dst;
  const float *src;
  int64_t ds, ss, len;
  int acc;
} BlockTask;

static void block_task(const void *ctx, int64_t lo, int64_t hi) {
  const BlockTask *b = ctx;
  int64_t r = lo / b->len, j = lo % b->len;
  for (int64_t e = lo; e < hi; r++, j = 0) {
    int64_t k = b->len - j < hi - e ? b->len - j : hi - e;
    float *d = b->dst + r * b->ds + j;
    const float *s = b->src + r * b->ss + j;
    if (b->acc)
      for (int64_t i = 0; i < k; i++) d[i] += s[i];
    else memcpy(d, s, (size_t)k * sizeof(float));
    e += k;
  }
}

static void block_copy(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t len, int acc) {
  if (!dst || rows <= 0 || len <= 0) return;
  BlockTask b = {dst, src, ds, ss, len, acc};
  rt_par(block_task, &b, rows * len, rt_chunks(rows * len >= RT_PAR_MIN));
}

/* flatten, reshape: the same elements; dst == src with acc = 0 is in place. */
static void same_elements(float *dst, const float *src, int64_t n, int acc) {
  if (!dst || (dst == src && !acc)) return;
  RT_CHECK(dst != src, "an in-place shape op's gradient cannot accumulate into its own input");
  block_copy(dst, n, src, n, 1, n, acc);
}

void rt_flatten_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_flatten_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }
void rt_reshape_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_reshape_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }

/* Tiles of the (p, q) plane: both sides of a tile stay in cache. */
#define RT_TILE 32

/* out[a, q, m, p, z] (+)= in[a, p, m, q, z]; a task runs whole tiles of one (a, m). */
static void transpose_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *in = A->i[0];
  int64_t P = A->d[0], M = A->d[1], Q = A->d[2], Z = A->d[3];
  int64_t tp = (P + RT_TILE - 1) / RT_TILE, tq = (Q + RT_TILE - 1) / RT_TILE;
  int acc = A->acc[0];
  for (int64_t t = lo; t < hi; t++) {
    int64_t am = t / (tp * tq), tile = t % (tp * tq), a = am / M, m = am % M;
    int64_t p0 = tile / tq * RT_TILE, q0 = tile % tq * RT_TILE;
    int64_t p1 = p0 + RT_TILE < P ? p0 + RT_TILE : P, q1 = q0 + RT_TILE < Q ? q0 + RT_TILE : Q;
    if (Z == 1) { // the common case ([B, C, N] -> [B, N, C]): reads along q, writes across the tile
      const float *s = in + (a * P * M + m) * Q;
      float *o = out + (a * Q * M + m) * P;
      int64_t sp = M * Q, oq = M * P;
      if (acc)
        for (int64_t p = p0; p < p1; p++)
          for (int64_t q = q0; q < q1; q++) o[q * oq + p] += s[p * sp + q];
      else
        for (int64_t p = p0; p < p1; p++)
          for (int64_t q = q0; q < q1; q++) o[q * oq + p] = s[p * sp + q];
      continue;
    }
    for (int64_t q = q0; q < q1; q++)
      for (int64_t p = p0; p < p1; p++) {
        const float *s = in + (((a * P + p) * M + m) * Q + q) * Z;
        float *o = out + (((a * Q + q) * M + m) * P + p) * Z;
        for (int64_t z = 0; z < Z; z++) o[z] = acc ? o[z] + s[z] : s[z];
      }
  }
}

static void transpose(float *out, const float *in, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z, int acc) {
  if (!out) return;
  RtArgs a = {.o = {out}, .i = {in}, .d = {P, M, Q, Z}, .acc = {acc}};
  int64_t tiles = A * M * ((P + RT_TILE - 1) / RT_TILE) * ((Q + RT_TILE - 1) / RT_TILE);
  rt_par(transpose_task, &a, tiles, rt_chunks(A * P * M * Q * Z >= RT_PAR_MIN));
}

void rt_transpose_forward(float *out, const float *x, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z) {
  transpose(out, x, A, P, M, Q, Z, 0);
}

void rt_transpose_backward(float *dx, const float *dout, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z,
                           int acc) {
  transpose(dx, dout, A, Q, M, P, Z, acc); // dout is [A, Q, M, P, Z]
}

void rt_concat_forward(float *out, const float *a0, const float *a1, const float *a2, const float *a3, const float *a4,
                       const float *a5, int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                       int64_t n4, int64_t n5) {
  const float *a[6] = {a0, a1, a2, a3, a4, a5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  for (int k = 0; k < 6; off += n[k++])
    if (a[k] && n[k]) block_copy(out + off * In, W * In, a[k], n[k] * In, O, n[k] * In, 0);
}

void rt_concat_backward(float *da0, float *da1, float *da2, float *da3, float *da4, float *da5, const float *dout,
                        int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4, int64_t n5,
                        int acc0, int acc1, int acc2, int acc3, int acc4, int acc5) {
  float *da[6] = {da0, da1, da2, da3, da4, da5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  int acc[6] = {acc0, acc1, acc2, acc3, acc4, acc5};
  for (int k = 0; k < 6; off += n[k++]) // in order: one buffer may take several slices
    if (da[k] && n[k]) block_copy(da[k], n[k] * In, dout + off * In, W * In, O, n[k] * In, acc[k]);
}

void rt_class_token_forward(float *out, const float *x, const float *W, int64_t B, int64_t N, int64_t C) {
  block_copy(out, (N + 1) * C, W, 0, B, C, 0);
  block_copy(out + C, (N + 1) * C, x, N * C, B, N * C, 0);
}

/* dW[j] (+)= sum_b dout[b, 0, j], column blocks, the batch in order. */
static void class_token_dw_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  const float *dout = A->i[0];
  int64_t B = A->d[0], C = A->d[1], S = A->d[2];
  for (int64_t j0 = lo * RT_COL_BLOCK; j0 < hi * RT_COL_BLOCK && j0 < C; j0 += RT_COL_BLOCK) {
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    double s[RT_COL_BLOCK] = {0};
    for (int64_t b = 0; b < B; b++)
      for (int64_t j = 0; j < nj; j++) s[j] += dout[b * S + j0 + j];
    for (int64_t j = 0; j < nj; j++) dW[j0 + j] = (float)(A->acc[0] ? dW[j0 + j] + s[j] : s[j]);
  }
}

void rt_class_token_backward(float *dx, float *dW, const float *dout, int64_t B, int64_t N, int64_t C, int acc_dx,
                             int acc_dW) {
  block_copy(dx, N * C, dout + C, (N + 1) * C, B, N * C, acc_dx);
  if (!dW) return;
  RtArgs a = {.o = {dW}, .i = {dout}, .d = {B, C, (N + 1) * C}, .acc = {acc_dW}};
  rt_par(class_token_dw_task, &a, col_blocks(C), rt_chunks(B * C >= RT_PAR_MIN));
}

void rt_select_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t index) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  block_copy(out, In, x + index * In, N * In, O, In, 0);
}

/* Rows (o, n) of dx: dout's row at n = index, 0 elsewhere (acc = 0). */
static void select_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0];
  int64_t N = A->d[0], In = A->d[1], index = A->d[2];
  int acc = A->acc[0];
  for (int64_t r = lo; r < hi; r++) {
    float *d = dx + r * In;
    const float *g = dout + r / N * In;
    if (r % N != index) {
      if (!acc) memset(d, 0, (size_t)In * sizeof(float));
    } else if (acc) {
      for (int64_t i = 0; i < In; i++) d[i] += g[i];
    } else {
      memcpy(d, g, (size_t)In * sizeof(float));
    }
  }
}

void rt_select_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t index, int acc) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  if (!dx) return;
  RtArgs a = {.o = {dx}, .i = {dout}, .d = {N, In, index}, .acc = {acc}};
  rt_par(select_backward_task, &a, O * N, rt_chunks(O * N * In >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// losses

static void cross_entropy_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *lse = A->o[0];
  const float *logits = A->i[0];
  const int32_t *targets = A->tok;
  int64_t N = A->d[0], V = A->d[1];
  double *part = A->part;
  for (int64_t c = lo; c < hi; c++) {
    for (int64_t i = N * c / RT_SUM_PARTS; i < N * (c + 1) / RT_SUM_PARTS; i++) {
      const float *li = logits + i * V;
      float l = row_lse(li, V);
      if (lse) lse[i] = l;
      part[c] += (double)l - li[targets[i]];
    }
  }
}

void rt_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                              int64_t V) {
  double part[RT_SUM_PARTS] = {0};
  RtArgs a = {.o = {lse}, .i = {logits}, .tok = targets, .d = {N, V}, .part = part};
  rt_par(cross_entropy_task, &a, RT_SUM_PARTS, rt_chunks(1));
  loss[0] = (float)(sum_parts(part) / (double)N);
}

static void cross_entropy_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dlogits = A->o[0];
  const float *logits = A->i[0], *lse = A->i[1];
  const int32_t *targets = A->tok;
  int64_t V = A->d[0];
  float k = A->f[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *li = logits + i * V;
    float *di = dlogits + i * V;
    float l = lse[i];
    int64_t y = targets[i];
    if (acc)
      for (int64_t j = 0; j < V; j++) di[j] += k * rt_exp(li[j] - l);
    else
      for (int64_t j = 0; j < V; j++) di[j] = k * rt_exp(li[j] - l);
    di[y] -= k;
  }
}

void rt_cross_entropy_backward(float *dlogits, const float *logits, const int32_t *targets, const float *lse, int64_t N,
                               int64_t V, float scale, int acc) {
  float k = (float)((double)scale / (double)N);
  // Each element depends on its own logit and the saved lse only, so writing
  // dlogits over logits (acc = 0) never reads an overwritten value.
  RtArgs a = {.o = {dlogits}, .i = {logits, lse}, .tok = targets, .d = {V}, .f = {k}, .acc = {acc}};
  rt_par(cross_entropy_backward_task, &a, N, rt_chunks(1));
}

static void mse_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  const float *pred = A->i[0], *target = A->i[1];
  int64_t n = A->d[0];
  double *part = A->part;
  for (int64_t c = lo; c < hi; c++) {
    for (int64_t i = n * c / RT_SUM_PARTS; i < n * (c + 1) / RT_SUM_PARTS; i++) {
      double d = (double)pred[i] - target[i];
      part[c] += d * d;
    }
  }
}

void rt_mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
  double part[RT_SUM_PARTS] = {0};
  RtArgs a = {.i = {pred, target}, .d = {n}, .part = part};
  rt_par(mse_task, &a, RT_SUM_PARTS, rt_chunks(n >= RT_PAR_MIN));
  loss[0] = (float)(sum_parts(part) / (double)n);
}

static void mse_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dpred = A->o[0];
  const float *pred = A->i[0], *target = A->i[1];
  float k = A->f[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    float g = k * (pred[i] - target[i]);
    dpred[i] = acc ? dpred[i] + g : g;
  }
}

void rt_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float scale, int acc) {
  float k = (float)(2.0 * scale / (double)n);
  RtArgs a = {.o = {dpred}, .i = {pred, target}, .f = {k}, .acc = {acc}};
  rt_par(mse_backward_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// linear_cross_entropy: R rows at a time, the chunk's logits in scratch; per
// row its loss term and, in training, dlogits over the logits (as
// cross_entropy's backward computes them), then dx, dW, db from the chunk

static void lce_rows_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *z = A->o[0], *term = A->o[1];
  const int32_t *targets = A->tok;
  int64_t V = A->d[0], train = A->d[1];
  float k = A->f[0];
  for (int64_t i = lo; i < hi; i++) {
    float *zi = z + i * V;
    int64_t y = targets[i];
    float l = row_lse(zi, V);
    term[i] = l - zi[y];
    if (!train) continue;
    for (int64_t j = 0; j < V; j++) zi[j] = k * rt_exp(zi[j] - l);
    zi[y] -= k;
  }
}

void rt_linear_cross_entropy_forward(float *loss, float *dx, float *dW, float *db, const float *x, const float *W,
                                     const float *b, const int32_t *targets, float *scratch, int64_t N, int64_t V,
                                     int64_t K, int64_t R) {
  RT_CHECK(scratch && N >= 1 && R >= 1, "linear_cross_entropy needs rows, a chunk and its scratch");
  float *term = scratch + R * V;
  int train = dx || dW || (db && b);
  float k = (float)(1.0 / (double)N);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t n = N - r0 < R ? N - r0 : R;
    const float *xc = x + r0 * K;
    rt_linear_forward(scratch, xc, W, b, n, K, V);
    RtArgs a = {.o = {scratch, term + r0}, .tok = targets + r0, .d = {V, train}, .f = {k}};
    rt_par(lce_rows_task, &a, n, rt_chunks(n * V >= RT_PAR_MIN));
    if (dx) gemm(0, 0, n, K, V, scratch, W, dx + r0 * K, 0); // [n,V] @ [V,K]
    if (dW) gemm(1, 0, V, K, n, scratch, xc, dW, r0 > 0);    // [n,V]^T @ [n,K]
    if (db && b) colsum(db, scratch, n, V, r0 > 0);
  }
  if (!loss) return; /* the deferred head gradient's recompute (planner/headgrad.h): dW only */
  double s = 0.0;
  for (int64_t i = 0; i < N; i++) s += term[i];
  loss[0] = (float)(s / (double)N);
}

static void lce_scale_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *in = A->i[0];
  float k = A->f[0];
  if (A->acc[0])
    for (int64_t i = lo; i < hi; i++) out[i] += k * in[i];
  else
    for (int64_t i = lo; i < hi; i++) out[i] = k * in[i];
}

/* out (+)= k in; element-wise, so out may be in (acc = 0). */
static void lce_scale(float *out, const float *in, int64_t n, float k, int acc) {
  if (!out) return;
  RtArgs a = {.o = {out}, .i = {in}, .f = {k}, .acc = {acc}};
  rt_par(lce_scale_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

void rt_linear_cross_entropy_backward(float *dx, float *dW, float *db, const float *sdx, const float *sdW,
                                      const float *sdb, float *scratch, int64_t N, int64_t V, int64_t K, int64_t R,
                                      float scale, int acc_dx, int acc_dW, int acc_db) {
  (void)scratch, (void)R;
  lce_scale(dx, sdx, N * K, scale, acc_dx);
  lce_scale(dW, sdW, V * K, scale, acc_dW);
  lce_scale(db, sdb, V, scale, acc_db);
}

// ----------------------------------------------------------------------------
// conv2d: the batch one sample at a time; a sample's im2col matrix
// col[C k k, Ho Wo] goes into the plan's scratch (row (c, ki, kj) holds the
// input pixels that kernel tap meets at every output position, 0 in the
// padding), and each group is one product with its slice of the weights,
// split over the pool. A 1x1 kernel at stride 1 without padding is a
// product with x itself.

typedef struct {
  float *col, *img; /* col2im: img (+)= col */
  const float *x;   /* im2col: one sample [C, H, W] */
  int64_t C, H, W, Ho, Wo, k, s, p, d;
  int acc;
} ConvCol;

/* rows [lo, hi) of col */
static void im2col_task(const void *ctx, int64_t lo, int64_t hi) {
  const ConvCol *c = ctx;
  int64_t kk = c->k * c->k, P = c->Ho * c->Wo;
  for (int64_t r = lo; r < hi; r++) {
    int64_t ch = r / kk, ki = r / c->k % c->k, kj = r % c->k;
    const float *src = c->x + ch * c->H * c->W;
    float *dst = c->col + r * P;
    for (int64_t oh = 0; oh < c->Ho; oh++, dst += c->Wo) {
      int64_t ih = oh * c->s - c->p + ki * c->d;
      if (ih < 0 || ih >= c->H) {
        memset(dst, 0, (size_t)c->Wo * sizeof(float));
        continue;
      }
      const float *row = src + ih * c->W;
      int64_t iw0 = kj * c->d - c->p;
      for (int64_t ow = 0; ow < c->Wo; ow++) {
        int64_t iw = iw0 + ow * c->s;
        dst[ow] = iw >= 0 && iw < c->W ? row[iw] : 0.0f;
      }
    }
  }
}

/* channels [lo, hi) of img: each owns its k k rows of col, so no two tasks
 * add into one pixel, and the order of the sums is fixed */
static void col2im_task(const void *ctx, int64_t lo, int64_t hi) {
  const ConvCol *c = ctx;
  int64_t kk = c->k * c->k, P = c->Ho * c->Wo;
  for (int64_t ch = lo; ch < hi; ch++) {
    float *img = c->img + ch * c->H * c->W;
    if (!c->acc) memset(img, 0, (size_t)(c->H * c->W) * sizeof(float));
    for (int64_t t = 0; t < kk; t++) {
      int64_t ki = t / c->k, kj = t % c->k;
      const float *src = c->col + (ch * kk + t) * P;
      for (int64_t oh = 0; oh < c->Ho; oh++, src += c->Wo) {
        int64_t ih = oh * c->s - c->p + ki * c->d;
        if (ih < 0 || ih >= c->H) continue;
        float *row = img + ih * c->W;
        int64_t iw0 = kj * c->d - c->p;
        for (int64_t ow = 0; ow < c->Wo; ow++) {
          int64_t iw = iw0 + ow * c->s;
          if (iw >= 0 && iw < c->W) row[iw] += src[ow];
        }
      }
    }
  }
}

/* G independent products C_g (+)= op(A_g) op(B_g), each dense with the
 * strides sA, sB, sC between groups: big ones one after another, each split
 * over the pool; small ones (depthwise) one group per task. Either way a
 * group is computed by the same calls whatever the thread count. */
typedef struct {
  int ta, tb, acc;
  int64_t m, n, k, sA, sB, sC;
  const float *A, *B;
  float *C;
} GroupGemm;

static void group_gemm_task(const void *ctx, int64_t lo, int64_t hi) {
  const GroupGemm *q = ctx;
  for (int64_t g = lo; g < hi; g++)
    gemm1(q->ta, q->tb, q->m, q->n, q->k, q->A + g * q->sA, q->ta ? q->m : q->k, q->B + g * q->sB, q->tb ? q->k : q->n,
          q->C + g * q->sC, q->n, q->acc);
}

static void gemm_groups(int ta, int tb, int64_t G, int64_t m, int64_t n, int64_t k, const float *A, int64_t sA,
                        const float *B, int64_t sB, float *C, int64_t sC, int acc) {
  if (G == 1 || m * n * k >= RT_GEMM_PAR_MIN) {
    for (int64_t g = 0; g < G; g++) gemm(ta, tb, m, n, k, A + g * sA, B + g * sB, C + g * sC, acc);
    return;
  }
  GroupGemm q = {ta, tb, acc, m, n, k, sA, sB, sC, A, B, C};
  rt_par(group_gemm_task, &q, G, rt_chunks(G * m * n * k >= RT_GEMM_PAR_MIN));
}

static int conv_direct(int64_t k, int64_t s, int64_t p) { return k == 1 && s == 1 && p == 0; }

static void conv_im2col(float *col, const float *x, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t k,
                        int64_t s, int64_t p, int64_t d) {
  ConvCol c = {.col = col, .x = x, .C = C, .H = H, .W = W, .Ho = Ho, .Wo = Wo, .k = k, .s = s, .p = p, .d = d};
  rt_par(im2col_task, &c, C * k * k, rt_chunks(C * k * k * Ho * Wo >= RT_PAR_MIN));
}

/* out[o, :] = b[o] for one sample's O rows of P */
typedef struct {
  float *out;
  const float *b;
  int64_t P;
} BiasRows;

static void bias_rows_task(const void *ctx, int64_t lo, int64_t hi) {
  const BiasRows *c = ctx;
  for (int64_t o = lo; o < hi; o++)
    for (int64_t i = 0; i < c->P; i++) c->out[o * c->P + i] = c->b[o];
}

void rt_conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N, int64_t C,
                       int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p,
                       int64_t d, int64_t G) {
  int64_t P = Ho * Wo, Cg = C / G, Og = O / G, K = Cg * k * k;
  int direct = conv_direct(k, s, p);
  RT_CHECK(direct || scratch, "conv2d: no scratch buffer for an im2col");
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x + n * C * H * Wd;
    float *os = out + n * O * P;
    if (!direct) conv_im2col(scratch, xs, C, H, Wd, Ho, Wo, k, s, p, d);
    if (b) rt_par(bias_rows_task, &(BiasRows){os, b, P}, O, rt_chunks(O * P >= RT_PAR_MIN));
    gemm_groups(0, 0, G, Og, P, K, W, Og * K, direct ? xs : scratch, K * P, os, Og * P, b != NULL);
  }
}

/* db[o] (+)= sum over n and positions of dout[n, o, :], in double */
typedef struct {
  float *db;
  const float *dout;
  int64_t N, O, P;
  int acc;
} ConvBias;

static void conv_db_task(const void *ctx, int64_t lo, int64_t hi) {
  const ConvBias *c = ctx;
  for (int64_t o = lo; o < hi; o++) {
    double sum = 0.0;
    for (int64_t n = 0; n < c->N; n++) {
      const float *r = c->dout + (n * c->O + o) * c->P;
      for (int64_t i = 0; i < c->P; i++) sum += r[i];
    }
    c->db[o] = (float)(c->acc ? c->db[o] + sum : sum);
  }
}

void rt_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                        float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo,
                        int64_t k, int64_t s, int64_t p, int64_t d, int64_t G, int acc_dx, int acc_dW, int acc_db) {
  int64_t P = Ho * Wo, Cg = C / G, Og = O / G, K = Cg * k * k;
  int direct = conv_direct(k, s, p);
  RT_CHECK(direct || scratch || (!dx && !dW), "conv2d: no scratch buffer for an im2col");
  if (db) rt_par(conv_db_task, &(ConvBias){db, dout, N, O, P, acc_db}, O, rt_chunks(N * O * P >= RT_PAR_MIN));
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x + n * C * H * Wd, *ds = dout + n * O * P;
    float *dxs = dx ? dx + n * C * H * Wd : NULL;
    if (dW) { // dW_g (+)= dout_g [Og, P] @ col_g^T [P, K], summed over the samples
      if (!direct) conv_im2col(scratch, xs, C, H, Wd, Ho, Wo, k, s, p, d);
      gemm_groups(0, 1, G, Og, K, P, ds, Og * P, direct ? xs : scratch, K * P, dW, Og * K, acc_dW || n > 0);
    }
    if (!dx) continue;
    if (direct) { // dx_g (+)= W_g^T [K, Og] @ dout_g [Og, P]
      gemm_groups(1, 0, G, K, P, Og, W, Og * K, ds, Og * P, dxs, K * P, acc_dx);
      continue;
    }
    gemm_groups(1, 0, G, K, P, Og, W, Og * K, ds, Og * P, scratch, K * P, 0);
    ConvCol c = {.col = scratch,
                 .img = dxs,
                 .C = C,
                 .H = H,
                 .W = Wd,
                 .Ho = Ho,
                 .Wo = Wo,
                 .k = k,
                 .s = s,
                 .p = p,
                 .d = d,
                 .acc = acc_dx};
    rt_par(col2im_task, &c, C, rt_chunks(C * k * k * P >= RT_PAR_MIN));
  }
}

// ----------------------------------------------------------------------------
// batchnorm2d: statistics per channel over N and S = H*W, parallel over channels

typedef struct {
  float *out, *mean, *rstd, *rmean, *rvar, *dx, *dw, *db;
  const float *x, *w, *b, *dout, *smean, *srstd;
  int64_t N, C, S;
  float eps, momentum;
  int mode, acc_dx, acc_dw, acc_db;
} BnArgs;

static void batchnorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const BnArgs *A = ctx;
  int64_t N = A->N, C = A->C, S = A->S, M = N * S;
  for (int64_t c = lo; c < hi; c++) {
    float m, r;
    if (A->mode == RT_MODE_EVAL) {
      m = A->rmean[c];
      r = (float)(1.0 / sqrt((double)A->rvar[c] + (double)A->eps));
    } else {
      double s = 0.0;
      for (int64_t n = 0; n < N; n++) {
        const float *xc = A->x + (n * C + c) * S;
        for (int64_t k = 0; k < S; k++) s += xc[k];
      }
      double md = s / (double)M, v = 0.0; // two-pass biased variance: no cancellation
      for (int64_t n = 0; n < N; n++) {
        const float *xc = A->x + (n * C + c) * S;
        for (int64_t k = 0; k < S; k++) v += ((double)xc[k] - md) * ((double)xc[k] - md);
      }
      v /= (double)M;
      m = (float)md;
      r = (float)(1.0 / sqrt(v + (double)A->eps));
      if (A->mean) A->mean[c] = m;
      if (A->rstd) A->rstd[c] = r;
      if (A->mode == RT_MODE_TRAIN) { // a recompute must not update them a second time
        double mom = A->momentum;
        A->rmean[c] = (float)((1.0 - mom) * A->rmean[c] + mom * md);
        A->rvar[c] = (float)((1.0 - mom) * A->rvar[c] + mom * v * (double)M / (double)(M - 1));
      }
    }
    float wc = A->w[c], bc = A->b ? A->b[c] : 0.0f;
    for (int64_t n = 0; n < N; n++) {
      const float *xc = A->x + (n * C + c) * S;
      float *oc = A->out + (n * C + c) * S;
      for (int64_t k = 0; k < S; k++) oc[k] = (xc[k] - m) * r * wc + bc;
    }
  }
}

void rt_batchnorm2d_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                            float *running_mean, float *running_var, int64_t N, int64_t C, int64_t S, float eps,
                            float momentum, int mode, uint64_t key) {
  (void)key;
  BnArgs a = {.out = out,
              .mean = mean,
              .rstd = rstd,
              .rmean = running_mean,
              .rvar = running_var,
              .x = x,
              .w = w,
              .b = b,
              .N = N,
              .C = C,
              .S = S,
              .eps = eps,
              .momentum = momentum,
              .mode = mode};
  rt_par(batchnorm_task, &a, C, rt_chunks(N * C * S >= RT_PAR_MIN));
}

/* Per channel: dw = sum dout xhat, db = sum dout, then dx from both. */
static void batchnorm_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const BnArgs *A = ctx;
  int64_t N = A->N, C = A->C, S = A->S, M = N * S;
  for (int64_t c = lo; c < hi; c++) {
    float m = A->smean[c], r = A->srstd[c];
    double sg = 0.0, sgx = 0.0;
    for (int64_t n = 0; n < N; n++) {
      const float *xc = A->x + (n * C + c) * S, *gc = A->dout + (n * C + c) * S;
      for (int64_t k = 0; k < S; k++) {
        sg += gc[k];
        sgx += gc[k] * ((xc[k] - m) * r);
      }
    }
    if (A->dw) A->dw[c] = (float)(A->acc_dw ? A->dw[c] + sgx : sgx);
    if (A->db) A->db[c] = (float)(A->acc_db ? A->db[c] + sg : sg);
    if (!A->dx) continue;
    float wr = A->w[c] * r, m1 = (float)(sg / (double)M), m2 = (float)(sgx / (double)M);
    for (int64_t n = 0; n < N; n++) {
      const float *xc = A->x + (n * C + c) * S, *gc = A->dout + (n * C + c) * S;
      float *dxc = A->dx + (n * C + c) * S;
      for (int64_t k = 0; k < S; k++) {
        float g = wr * (gc[k] - m1 - (xc[k] - m) * r * m2);
        dxc[k] = A->acc_dx ? dxc[k] + g : g;
      }
    }
  }
}

void rt_batchnorm2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                             const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, float eps,
                             float momentum, int mode, uint64_t key, int acc_dx, int acc_dw, int acc_db) {
  (void)eps, (void)momentum, (void)mode, (void)key; /* batch statistics, saved */
  BnArgs a = {.dx = dx,
              .dw = dw,
              .db = db,
              .dout = dout,
              .x = x,
              .w = w,
              .smean = mean,
              .srstd = rstd,
              .N = N,
              .C = C,
              .S = S,
              .acc_dx = acc_dx,
              .acc_dw = acc_dw,
              .acc_db = acc_db};
  rt_par(batchnorm_backward_task, &a, C, rt_chunks(N * C * S >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// pooling: parallel over the N*C planes, each plane owned by one task, so a
// gradient's additions run in one order whatever the thread count

typedef struct {
  float *out;
  const float *x, *dout;
  int64_t H, W, Ho, Wo, k, s, p;
  int acc;
} PoolTask;

/* The first maximum of window (ho, wo) of plane x, torch's rule: start at the
 * first element inside the input, take v > max or a NaN. */
static inline int64_t pool_argmax(const PoolTask *c, const float *x, int64_t ho, int64_t wo) {
  int64_t h0 = ho * c->s - c->p, w0 = wo * c->s - c->p;
  int64_t h1 = h0 + c->k < c->H ? h0 + c->k : c->H, w1 = w0 + c->k < c->W ? w0 + c->k : c->W;
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  int64_t best = h0 * c->W + w0;
  float mx = -INFINITY;
  for (int64_t h = h0; h < h1; h++)
    for (int64_t w = w0; w < w1; w++) {
      float v = x[h * c->W + w];
      if (v > mx || isnan(v)) {
        mx = v;
        best = h * c->W + w;
      }
    }
  return best;
}

static void maxpool_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W;
    float *out = c->out + pl * c->Ho * c->Wo;
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) out[ho * c->Wo + wo] = x[pool_argmax(c, x, ho, wo)];
  }
}

static void maxpool_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W, *dout = c->dout + pl * c->Ho * c->Wo;
    float *dx = c->out + pl * c->H * c->W;
    if (!c->acc) memset(dx, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) dx[pool_argmax(c, x, ho, wo)] += dout[ho * c->Wo + wo];
  }
}

static void avgpool_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  double div = (double)(c->k * c->k);
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W;
    float *out = c->out + pl * c->Ho * c->Wo;
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = ho * c->s - c->p, w0 = wo * c->s - c->p;
        double sum = 0.0;
        for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + c->k && h < c->H; h++)
          for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + c->k && w < c->W; w++) sum += x[h * c->W + w];
        out[ho * c->Wo + wo] = (float)(sum / div);
      }
  }
}

static void avgpool_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  float div = (float)(c->k * c->k);
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *dout = c->dout + pl * c->Ho * c->Wo;
    float *dx = c->out + pl * c->H * c->W;
    if (!c->acc) memset(dx, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = ho * c->s - c->p, w0 = wo * c->s - c->p;
        float g = dout[ho * c->Wo + wo] / div;
        for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + c->k && h < c->H; h++)
          for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + c->k && w < c->W; w++) dx[h * c->W + w] += g;
      }
  }
}

static void pool_run(RtTask fn, PoolTask t, int64_t N, int64_t C) {
  int64_t planes = N * C, work = planes * t.Ho * t.Wo * t.k * t.k;
  rt_par(fn, &t, planes, rt_chunks(work >= RT_PAR_MIN));
}

void rt_maxpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                          int64_t Wo, int64_t k, int64_t s, int64_t p) {
  pool_run(maxpool_task, (PoolTask){out, x, NULL, H, W, Ho, Wo, k, s, p, 0}, N, C);
}

void rt_maxpool2d_backward(float *dx, const float *dout, const float *x, int64_t N, int64_t C, int64_t H, int64_t W,
                           int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  if (!dx) return;
  pool_run(maxpool_backward_task, (PoolTask){dx, x, dout, H, W, Ho, Wo, k, s, p, acc}, N, C);
}

void rt_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                          int64_t Wo, int64_t k, int64_t s, int64_t p) {
  pool_run(avgpool_task, (PoolTask){out, x, NULL, H, W, Ho, Wo, k, s, p, 0}, N, C);
}

void rt_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                           int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  if (!dx) return;
  pool_run(avgpool_backward_task, (PoolTask){dx, NULL, dout, H, W, Ho, Wo, k, s, p, acc}, N, C);
}

/* adaptive_avgpool2d: window o of a dim of n outputs out and n inputs, torch's [floor(o n / out), ceil((o + 1) n /
 * out)); the outputs whose windows hold input i: [floor(i out / n), ceil((i + 1) out / n)) */
static inline int64_t adaptive_lo(int64_t o, int64_t n, int64_t out) { return o * n / out; }
static inline int64_t adaptive_hi(int64_t o, int64_t n, int64_t out) { return ((o + 1) * n + out - 1) / out; }

static void adaptive_pool_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W;
    float *out = c->out + pl * c->Ho * c->Wo;
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = adaptive_lo(ho, c->H, c->Ho), h1 = adaptive_hi(ho, c->H, c->Ho);
        int64_t w0 = adaptive_lo(wo, c->W, c->Wo), w1 = adaptive_hi(wo, c->W, c->Wo);
        double sum = 0.0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) sum += x[h * c->W + w];
        out[ho * c->Wo + wo] = (float)(sum / (double)((h1 - h0) * (w1 - w0)));
      }
  }
}

static void adaptive_pool_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *dout = c->dout + pl * c->Ho * c->Wo;
    float *dx = c->out + pl * c->H * c->W;
    if (!c->acc) memset(dx, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = adaptive_lo(ho, c->H, c->Ho), h1 = adaptive_hi(ho, c->H, c->Ho);
        int64_t w0 = adaptive_lo(wo, c->W, c->Wo), w1 = adaptive_hi(wo, c->W, c->Wo);
        float g = dout[ho * c->Wo + wo] / (float)((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) dx[h * c->W + w] += g;
      }
  }
}

/* PoolTask's k: the largest window's side, for pool_run's work estimate */
void rt_adaptive_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                                   int64_t Wo) {
  pool_run(adaptive_pool_task, (PoolTask){out, x, NULL, H, W, Ho, Wo, H / Ho + W / Wo + 2, 0, 0, 0}, N, C);
}

void rt_adaptive_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W,
                                    int64_t Ho, int64_t Wo, int acc) {
  if (!dx) return;
  pool_run(adaptive_pool_backward_task, (PoolTask){dx, NULL, dout, H, W, Ho, Wo, H / Ho + W / Wo + 2, 0, 0, acc}, N,
           C);
}

static void gap_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    double sum = 0.0;
    for (int64_t i = 0; i < c->H; i++) sum += c->x[pl * c->H + i];
    c->out[pl] = (float)(sum / (double)c->H);
  }
}

static void gap_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  float div = (float)c->H;
  for (int64_t pl = lo; pl < hi; pl++) {
    float g = c->dout[pl] / div, *dx = c->out + pl * c->H;
    for (int64_t i = 0; i < c->H; i++) dx[i] = c->acc ? dx[i] + g : g;
  }
}

/* PoolTask's H is the plane size HW here */
void rt_global_avgpool_forward(float *out, const float *x, int64_t NC, int64_t HW) {
  rt_par(gap_task, &(PoolTask){.out = out, .x = x, .H = HW}, NC, rt_chunks(NC * HW >= RT_PAR_MIN));
}

void rt_global_avgpool_backward(float *dx, const float *dout, int64_t NC, int64_t HW, int acc) {
  if (!dx) return;
  rt_par(gap_backward_task, &(PoolTask){.out = dx, .dout = dout, .H = HW, .acc = acc}, NC,
         rt_chunks(NC * HW >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// dropout: the mask is a hash of (key, element), so nothing random is stored
// between calls; parallel over 32-element words, each owned by one task

/* splitmix64's output function, memplan_trainer.c's mix64 */
static inline uint64_t rt_mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* kept: the top 24 bits of the element's hash at or above ceil(p 2^24) */
static inline uint32_t dropout_threshold(float p) { return (uint32_t)ceil((double)p * 16777216.0); }
static inline int dropout_keep(uint64_t key, int64_t i, uint32_t th) {
  return (rt_mix64(key ^ (uint64_t)i) >> 40) >= th;
}

typedef struct {
  float *out;
  int32_t *mask;
  const float *x;
  const int32_t *cmask;
  int64_t n;
  float scale;
  uint32_t th;
  uint64_t key;
  int acc;
} DropoutTask;

static void dropout_task(const void *ctx, int64_t lo, int64_t hi) {
  const DropoutTask *c = ctx;
  for (int64_t wd = lo; wd < hi; wd++) {
    uint32_t bits = 0;
    int64_t end = wd * 32 + 32 < c->n ? wd * 32 + 32 : c->n;
    for (int64_t i = wd * 32; i < end; i++) {
      int kept = dropout_keep(c->key, i, c->th);
      bits |= (uint32_t)kept << (i & 31);
      c->out[i] = c->x[i] * (kept ? c->scale : 0.0f);
    }
    if (c->mask) c->mask[wd] = (int32_t)bits;
  }
}

/* x is dout here, out is dx */
static void dropout_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const DropoutTask *c = ctx;
  for (int64_t wd = lo; wd < hi; wd++) {
    int64_t end = wd * 32 + 32 < c->n ? wd * 32 + 32 : c->n;
    uint32_t bits = c->cmask ? (uint32_t)c->cmask[wd] : 0;
    for (int64_t i = wd * 32; i < end; i++) {
      int kept = c->cmask ? (int)(bits >> (i & 31) & 1) : dropout_keep(c->key, i, c->th);
      float g = c->x[i] * (kept ? c->scale : 0.0f);
      c->out[i] = c->acc ? c->out[i] + g : g;
    }
  }
}

void rt_dropout_forward(float *out, int32_t *mask, const float *x, int64_t n, float p, int mode, uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    if (out != x) memcpy(out, x, sizeof(float) * (size_t)n);
    return;
  }
  DropoutTask t = {out, mask, x, NULL, n, (float)(1.0 / (1.0 - (double)p)), dropout_threshold(p), key, 0};
  int64_t words = (n + 31) / 32;
  rt_par(dropout_task, &t, words, rt_chunks(n >= RT_PAR_MIN));
}

void rt_dropout_backward(float *dx, const float *dout, const int32_t *mask, int64_t n, float p, int mode, uint64_t key,
                         int acc) {
  (void)mode;
  if (!dx) return;
  DropoutTask t = {dx, NULL, dout, mask, n, (float)(1.0 / (1.0 - (double)p)), dropout_threshold(p), key, acc};
  int64_t words = (n + 31) / 32;
  rt_par(dropout_backward_task, &t, words, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// stochastic_depth: dropout's hash of (key, row), one draw per row (or row 0's for the batch)

static void sd_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t S = a->d[0], batch = a->d[1];
  uint64_t key = (uint64_t)a->d[2];
  uint32_t th = (uint32_t)a->d[3];
  for (int64_t r = lo; r < hi; r++) {
    float f = dropout_keep(key, batch ? 0 : r, th) ? a->f[0] : 0.0f, *out = a->o[0] + r * S;
    const float *x = a->i[0] + r * S;
    for (int64_t j = 0; j < S; j++) out[j] = a->acc[0] ? out[j] + x[j] * f : x[j] * f;
  }
}

void rt_stochastic_depth_forward(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p, int mode,
                                 uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    if (out != x) memcpy(out, x, sizeof(float) * (size_t)(N * S));
    return;
  }
  RtArgs a = {.o = {out},
              .i = {x},
              .d = {S, batch, (int64_t)key, dropout_threshold(p)},
              .f = {(float)(1.0 / (1.0 - (double)p))}};
  rt_par(sd_task, &a, N, rt_chunks(N * S >= RT_PAR_MIN));
}

void rt_stochastic_depth_backward(float *dx, const float *dout, int64_t N, int64_t S, int64_t batch, float p, int mode,
                                  uint64_t key, int acc) {
  (void)mode;
  if (!dx) return;
  RtArgs a = {.o = {dx},
              .i = {dout},
              .d = {S, batch, (int64_t)key, dropout_threshold(p)},
              .f = {(float)(1.0 / (1.0 - (double)p))},
              .acc = {acc}};
  rt_par(sd_task, &a, N, rt_chunks(N * S >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// optimizers

static void adamw_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *p = A->o[0], *m = A->o[1], *v = A->o[2];
  const float *g = A->i[0];
  float step = A->f[0], bc2_sqrt = A->f[1], decay = A->f[2], epsf = A->f[3];
  float b1 = A->f[4], b2 = A->f[5], a1 = A->f[6], a2 = A->f[7];
  for (int64_t i = lo; i < hi; i++) {
    float gi = g[i];
    m[i] = m[i] * b1 + a1 * gi;
    v[i] = v[i] * b2 + a2 * (gi * gi);
    float pd = p[i] * decay;
    p[i] = pd - step * m[i] / (sqrtf(v[i]) / bc2_sqrt + epsf);
  }
}

void rt_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                     double eps, double wd, int64_t t) {
  // Same operations as torch.optim.AdamW (1.13, single-tensor path), with its
  // roundings: the scalars are doubles rounded to float where torch passes
  // them to a float tensor op. p *= 1 - lr wd; m = b1 m + (1 - b1) g;
  // v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float decay = (float)(1.0 - lr * wd), epsf = (float)eps;
  float b1 = (float)beta1, b2 = (float)beta2;
  float a1 = (float)(1.0 - beta1), a2 = (float)(1.0 - beta2);
  RtArgs a = {.o = {p, m, v}, .i = {g}, .f = {step, bc2_sqrt, decay, epsf, b1, b2, a1, a2}};
  rt_par(adamw_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

static void sgd_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *p = A->o[0], *buf = A->o[1];
  const float *g = A->i[0];
  float lrf = A->f[0], mom = A->f[1], wdf = A->f[2];
  int nesterov = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    float d = g[i] + wdf * p[i];
    if (mom != 0.0f) {
      buf[i] = mom * buf[i] + d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lrf * d;
  }
}

void rt_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                   int nesterov) {
  // torch.optim.SGD (dampening 0): scalars rounded to float as torch does.
  float lrf = (float)lr, mom = (float)momentum, wdf = (float)wd;
  RtArgs a = {.o = {p, buf}, .i = {g}, .f = {lrf, mom, wdf}, .acc = {nesterov}};
  rt_par(sgd_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// storage precision and loss scaling

static uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                /* nearest even */
}

static float from_bf16(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* IEEE binary16, nearest even, subnormals kept. */
static uint16_t to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e), half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* a carry may round up to inf: correct */
  return (uint16_t)(sign | half);
}

static float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0x1fu) x = sign | 0x7f800000u | (mant << 13);
  else if (exp == 0) {
    float f = (float)mant * 0x1p-24f; /* zero or subnormal: exact in float */
    memcpy(&x, &f, 4);
    x |= sign;
  } else x = sign | ((exp + 112u) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

void rt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
}
static uint16_t to_bf16_sr(float f, uint64_t bits) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  if ((x & 0x7fffffffu) == 0x7f800000u) return (uint16_t)(x >> 16);         /* inf */
  return (uint16_t)((x + (uint32_t)(bits & 0xffffu)) >> 16);
}
void rt_f32_to_bf16_sr(uint16_t *dst, const float *src, int64_t n, uint64_t key) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_bf16_sr(src[i], rt_mix64(key ^ (uint64_t)i));
}
void rt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
}
void rt_f32_to_f16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_f16(src[i]);
}
void rt_f16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = from_f16(src[i]);
}
void rt_i8_to_f32(float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i] * (absmax[i / cols] / 127.0f);
}
void rt_nf4_to_f32(float *dst, const uint8_t *src, const float *absmax, int64_t n) {
  static const float nf4[16] = RT_NF4_TABLE;
  for (int64_t i = 0; i < n; i++) dst[i] = nf4[(src[i / 2] >> (i % 2 ? 0 : 4)) & 15] * absmax[i / RT_NF4_BLOCK];
}

int rt_unscale_check(float *g, int64_t n, float inv_scale) {
  int finite = 1;
  for (int64_t i = 0; i < n; i++) {
    finite &= isfinite(g[i]) != 0;
    g[i] *= inv_scale;
  }
  return finite;
}

double rt_grad_sqnorm(const float *g, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
  return s;
}

// ----------------------------------------------------------------------------
// optimizer state in bf16 and in 8 bits (the plan's --opt-state)

typedef struct {
  float *p;
  const float *g;
  uint16_t *m16, *v16;
  uint8_t *m8, *v8;
  float *ms, *vs;
  int64_t n;
  float f[8]; /* adamw_update's scalars, in adamw_task's order */
} AdamLowTask;

static AdamLowTask adam_low_scalars(double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  AdamLowTask a = {0};
  float f[8] = {(float)(lr / bc1), (float)sqrt(bc2), (float)(1.0 - lr * wd), (float)eps,
                (float)beta1,      (float)beta2,     (float)(1.0 - beta1),   (float)(1.0 - beta2)};
  memcpy(a.f, f, sizeof f);
  return a;
}

/* adamw_task's float operations on one element: m and v in, updated in place. */
static inline void adam_elem(const float *f, float *p, float gi, float *m, float *v) {
  *m = *m * f[4] + f[6] * gi;
  *v = *v * f[5] + f[7] * (gi * gi);
  float pd = *p * f[2];
  *p = pd - f[0] * *m / (sqrtf(*v) / f[1] + f[3]);
}

static void adamw_bf16_task(const void *ctx, int64_t lo, int64_t hi) {
  const AdamLowTask *A = ctx;
  for (int64_t i = lo; i < hi; i++) {
    float m = from_bf16(A->m16[i]), v = from_bf16(A->v16[i]);
    adam_elem(A->f, &A->p[i], A->g[i], &m, &v);
    A->m16[i] = to_bf16(m);
    A->v16[i] = to_bf16(v);
  }
}

void rt_adamw_update_bf16(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t) {
  AdamLowTask a = adam_low_scalars(lr, beta1, beta2, eps, wd, t);
  a.p = p, a.g = g, a.m16 = m, a.v16 = v, a.n = n;
  rt_par(adamw_bf16_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

static float rt_qtab[2][256]; /* rt_qmap(s, c), [0] unsigned, [1] signed */

static void qtab_init(void) {
  if (rt_qtab[0][255] == 1.0f) return;
  for (int s = 0; s < 2; s++)
    for (int c = 0; c < 256; c++) rt_qtab[s][c] = rt_qmap(s, c);
}

/* The nearest code of x (ties to the lower code) in the increasing table q:
 * a branchless binary search for the last q[lo] <= x, then the nearer of lo
 * and lo + 1. */
static uint8_t qencode(const float *q, float x) {
  if (x <= q[0]) return 0;
  if (x >= q[255]) return 255;
  int lo = 0; /* q[lo] <= x < q[lo + 1] after the halvings */
  for (int step = 128; step; step >>= 1) lo += q[lo + step] <= x ? step : 0;
  return (uint8_t)(x - q[lo] <= q[lo + 1] - x ? lo : lo + 1);
}

static void adamw_8bit_task(const void *ctx, int64_t lo, int64_t hi) {
  const AdamLowTask *A = ctx;
  float m[RT_QBLOCK], v[RT_QBLOCK];
  for (int64_t b = lo; b < hi; b++) {
    int64_t i0 = b * RT_QBLOCK, k = A->n - i0 < RT_QBLOCK ? A->n - i0 : RT_QBLOCK;
    float ms = A->ms[b], vs = A->vs[b], mmax = 0.0f, vmax = 0.0f;
    for (int64_t i = 0; i < k; i++) {
      m[i] = rt_qtab[1][A->m8[i0 + i]] * ms;
      v[i] = rt_qtab[0][A->v8[i0 + i]] * vs;
      adam_elem(A->f, &A->p[i0 + i], A->g[i0 + i], &m[i], &v[i]);
      mmax = fmaxf(mmax, fabsf(m[i]));
      vmax = fmaxf(vmax, v[i]);
    }
    A->ms[b] = mmax, A->vs[b] = vmax;
    for (int64_t i = 0; i < k; i++) {
      A->m8[i0 + i] = mmax > 0.0f ? qencode(rt_qtab[1], m[i] / mmax) : 127;
      uint8_t c = vmax > 0.0f ? qencode(rt_qtab[0], v[i] / vmax) : 0;
      A->v8[i0 + i] = c == 0 && v[i] > 0.0f ? 1 : c;
    }
  }
}

void rt_adamw_update_8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *m_scale, float *v_scale, int64_t n,
                          double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  qtab_init();
  AdamLowTask a = adam_low_scalars(lr, beta1, beta2, eps, wd, t);
  a.p = p, a.g = g, a.m8 = m, a.v8 = v, a.ms = m_scale, a.vs = v_scale, a.n = n;
  int64_t blocks = (n + RT_QBLOCK - 1) / RT_QBLOCK;
  rt_par(adamw_8bit_task, &a, blocks, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// guard mode

enum { RT_CANARY = 0xA5 };

void rt_guard_arm(unsigned char *canary, int64_t n) { memset(canary, RT_CANARY, (size_t)n); }

void rt_guard_check(const unsigned char *canary, int64_t n, int op, const char *layer, const char *buffer) {
  for (int64_t i = 0; i < n; i++)
    if (canary[i] != RT_CANARY) {
      fprintf(stderr, "guard: op %d (%s) wrote past the end of buffer %s (canary byte %lld changed)\n", op, layer,
              buffer, (long long)i);
      exit(5);
    }
}
