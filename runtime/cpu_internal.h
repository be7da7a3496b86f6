/* cpu_internal.h: what the CPU backend's files (cpu_*.c) share. The comment below was the top of cpu.c, which
 * split_runtime.py cut into these files by section. */
#ifndef CPU_INTERNAL_H
#define CPU_INTERNAL_H

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

/* Shared by the files of this family (split_runtime.py): moved here, or declared
 * here and defined in one file. */

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

#define RT_GEMM_CHUNKS 2

static const float RT_SQRT_2_OVER_PI = 0.7978845608028654f; /* M_PI is not C17 */
static const float RT_SQRT1_2 = 0.7071067811865476f;        /* 1 / sqrt 2 */
static const float RT_INV_SQRT_2PI = 0.3989422804014327f;   /* 1 / sqrt(2 pi) */

_Noreturn void rt_fail(const char *file, int line, const char *msg);

#define RT_CHECK(cond, msg) ((cond) ? (void)0 : rt_fail(__FILE__, __LINE__, (msg)))

/* fn(ctx, lo, hi) runs iterations [lo, hi) of a loop. */
typedef void (*RtTask)(const void *ctx, int64_t lo, int64_t hi);

extern int rt_nt;
void rt_par(RtTask fn, const void *ctx, int64_t n, int64_t chunks);
int64_t rt_chunks(int par);
void gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
           float *C, int64_t ldc, int acc);
void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C, int acc);

/* out = a + b (element-wise tasks share this context). */
typedef struct {
  float *out;
  const float *a, *b;
  int acc;
} AddTask;

void accumulate(float *dst, const float *src, int64_t n, int acc);
int64_t col_blocks(int64_t N);
void colsum(float *out, const float *in, int64_t M, int64_t N, int acc);
float dot(const float *a, const float *b, int64_t n);
double sum_parts(const double *part);

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

float row_max(const float *x, int64_t n);
/* layernorm's and groupnorm's statistics of x[0..n): the mean (double sum,
 * rounded to float) and rstd = 1 / sqrtf(var + eps), var two-pass and biased
 * around the float mean (no cancellation); cuda_internal.cuh's warp_row_stats
 * does the same arithmetic. */
void row_stats(const float *x, int64_t n, float eps, float *mean, float *rstd);
double row_sum_exp(float *out, const float *x, int64_t n, float mx);
float row_lse(const float *x, int64_t n);
void softmax_row(float *x, int64_t n);

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

/* splitmix64's output function, memplan_trainer.c's mix64 */
static inline uint64_t rt_mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint16_t to_bf16(float f);
float from_bf16(uint16_t h);

#endif
