/* ref.h: naive double-precision references of the trainer kernels, for
 * tests that must run where the CPU backend cannot be built (no OpenBLAS on
 * the GPU machine).
 *
 * Each ref_<name> is a kernel of MEMPLAN_KERNELS (runtime/memplan_kernels.h)
 * with the contract written there (acc flags, NULL outputs, alias-safe pairs:
 * every reference computes into temporaries and stores at the end, so any
 * aliasing is safe). Sums are plain loops in double, results rounded to float
 * once. Backward references compute the exact gradient of the forward from
 * the inputs alone: attention ignores `out` and `lse`, cross-entropy ignores
 * `lse`, so a kernel that misuses them cannot agree by accident.
 *
 * The _f32 optimizer variants (the signatures of adamw_update and sgd_update)
 * replay cpu.c's float operations in cpu.c's order (compiled with
 * -ffp-contract=off): the CUDA optimizers must match them bit for bit.
 */
#ifndef MEMPLAN_TEST_REF_H
#define MEMPLAN_TEST_REF_H

#include <stdint.h>

#include "memplan_kernels.h"

#define REF_DECLARE(ret, name, params) ret ref_##name params;
MEMPLAN_KERNELS(REF_DECLARE)
#undef REF_DECLARE

void ref_adamw_update_f32(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t);
void ref_sgd_update_f32(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                        int nesterov);
/* Gradient clipping's squared norm: sum of g[i]^2 in long double (the
 * backends sum in double, in their own orders). */
double ref_grad_sqnorm(const float *g, int64_t n);

#endif
