/* memplan_rt.h: the kernels a generated trainer calls, CPU backend (cpu_*.c:
 * C17, POSIX threads, OpenBLAS). Every kernel of memplan_kernels.h (which
 * holds their contracts and the conventions they share) as rt_<name>, then
 * what only this backend has. The CUDA backend is cuda/memplan_rt_cuda.h.
 */
#ifndef MEMPLAN_RT_H
#define MEMPLAN_RT_H

#include <stddef.h>
#include <stdint.h>

#include "memplan_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_DECLARE(ret, name, params) ret rt_##name params;
MEMPLAN_KERNELS(RT_DECLARE)
MEMPLAN_CASTS(RT_DECLARE)
#undef RT_DECLARE

/* Number of threads the CPU backend uses (its thread pool); set once at start. */
void rt_set_threads(int n);
/* fn(ctx, lo, hi) over [0, n) in chunks on that pool (cpu_generate.c's kernels); not reentrant. */
void rt_parallel(void (*fn)(const void *ctx, int64_t lo, int64_t hi), const void *ctx, int64_t n);

/* The BLAS library and kernel, first thing in main (cpu_blas.c): when the
 * library detected a kernel older than the best this CPU runs, and neither
 * OPENBLAS_CORETYPE is set nor select is 0, restarts the program (execv of
 * /proc/self/exe with argv) with OPENBLAS_CORETYPE set to that kernel, so it
 * does not return then. Returns the header line's text, for example
 * "OpenBLAS 0.3.21, Zen kernel (detected)". */
const char *rt_blas_select(char **argv, int select);

/* Loss scaling: g *= inv_scale; returns 1 when every element was finite,
 * 0 otherwise (then g's contents are unspecified: the step is skipped). */
int rt_unscale_check(float *g, int64_t n, float inv_scale);

/* Gradient clipping: the sum of g[i]^2, each square and the sum in double,
 * in index order. The trainer sums these over every gradient for the global
 * norm and scales the gradients with rt_unscale_check. */
double rt_grad_sqnorm(const float *g, int64_t n);

/* Guard mode (memplan compile --guard): n canary bytes follow a buffer.
 * rt_guard_arm fills them before an op writes the buffer; rt_guard_check
 * exits with a message naming the op and the buffer if the op wrote past the
 * buffer's end. */
void rt_guard_arm(unsigned char *canary, int64_t n);
void rt_guard_check(const unsigned char *canary, int64_t n, int op, const char *layer, const char *buffer);

#ifdef __cplusplus
}
#endif
#endif
