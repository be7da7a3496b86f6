/* memplan_rt_cuda.h: the CUDA backend of the trainer kernels (cuda_*.cu,
 * cuBLAS, cuBLASLt).
 *
 * Every kernel of memplan_kernels.h exists here as rt_cuda_<name>, with the
 * contract written there (shapes, acc "=" / "+=" flags, NULL gradients,
 * alias-safe pairs), except that every tensor pointer is a device pointer, the
 * loss included (read it with rt_cuda_read_loss). The prefix keeps both
 * backends linkable into one program (the comparison test, a trainer that
 * checks one against the other). The storage casts are cpu.c's conversions,
 * bit for bit. Of the CPU backend's own kernels (memplan_rt.h), loss scaling
 * is split differently (below), and rt_set_threads and guard mode have no
 * counterpart.
 *
 * Execution model:
 * - One runtime context per process, on the device current at rt_cuda_init.
 *   It holds one CUDA stream, a cuBLAS and a cuBLASLt handle, and the
 *   workspace. Every kernel is enqueued on that stream and returns without
 *   waiting; only the helpers that move data to the host synchronize.
 * - The workspace is a device buffer the plan owns (256-byte aligned; 32 MiB
 *   is cuBLAS's recommendation on Hopper, 4 MiB before). cuBLAS and cuBLASLt
 *   use it as scratch, never allocating their own. The kernels here borrow it
 *   too, between matrix products (the stream orders all users): only
 *   rt_cuda_cross_entropy_forward with lse = NULL does, for 4 N bytes.
 * - Matrix products are fp32 in fp32 (no TF32) unless rt_cuda_set_tf32(1), so
 *   results match the CPU backend to rounding. NVIDIA_TF32_OVERRIDE=1 in the
 *   environment would force TF32 anyway; leave it unset.
 * - Deterministic: the same inputs give bitwise the same outputs on the same
 *   GPU and library versions. No kernel uses floating-point atomics; every
 *   sum over rows (bias, layernorm and embedding gradients, attention's dk, dv,
 *   losses) has a fixed order. cuBLAS is deterministic on one stream with a
 *   fixed workspace.
 * - Errors (a failed CUDA or cuBLAS call, a size that does not fit) print
 *   file:line and the reason and exit(1); a kernel's launch error is caught at
 *   launch, an execution error at the next synchronizing call.
 *
 * Limits beyond memplan_kernels.h: attention has no limit on T (no stack
 * scratch), but its head size C/NH is bounded by shared memory: about 440 on
 * Hopper, 310 on A100.
 */
#ifndef MEMPLAN_RT_CUDA_H
#define MEMPLAN_RT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "memplan_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t, spelled without the CUDA headers so plain C can include this. */
typedef struct CUstream_st *rt_cuda_stream_t;

// ----------------------------------------------------------------------------
// context and host helpers

/* Number of CUDA devices; 0 when there is no usable device or driver (never
 * exits: tests use it to skip). */
int rt_cuda_device_count(void);
/* Creates the stream and the cuBLAS/cuBLASLt handles on the current device and
 * gives them `workspace` (device memory, 256-byte aligned, may be NULL with
 * 0 bytes). Call once, after selecting the device, before any kernel. */
void rt_cuda_init(void *workspace, size_t workspace_bytes);
/* Waits for the stream, then destroys the handles and the stream. */
void rt_cuda_shutdown(void);
/* The stream every kernel runs on (for events and timing). */
rt_cuda_stream_t rt_cuda_stream(void);
/* Matrix products in TF32 (1) or exact fp32 (0, the default). */
void rt_cuda_set_tf32(int on);
/* linear forward with a bias through a cuBLASLt bias epilogue (1, default) or
 * a bias broadcast then a cuBLAS product onto it (0); for tests and timing. */
void rt_cuda_set_cublaslt(int on);
/* Waits until every enqueued kernel finished; reports execution errors. */
void rt_cuda_synchronize(void);

/* The trainer's one allocation (the arena) and its release; checked. */
void *rt_cuda_malloc(size_t bytes);
void rt_cuda_free(void *dev);
/* Copies on the runtime stream that return once the copy is done, so the host
 * buffer may be reused and kernels enqueued before see the old contents. */
void rt_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes);
void rt_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes);
/* Zeroes device memory (optimizer state before the first step), enqueued. */
void rt_cuda_memset_zero(void *dev, size_t bytes);
/* The loss leaves the device as one float (waits for the stream). */
float rt_cuda_read_loss(const float *loss_dev);
/* cudaMemGetInfo: free and total bytes of the current device. */
void rt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);

// ----------------------------------------------------------------------------
// kernels (memplan_kernels.h); pointers are device pointers

#define RT_CUDA_DECLARE(ret, name, params) ret rt_cuda_##name params;
MEMPLAN_KERNELS(RT_CUDA_DECLARE)
MEMPLAN_CASTS(RT_CUDA_DECLARE)
#undef RT_CUDA_DECLARE

/* Loss scaling, split so a step synchronizes once: rt_cuda_unscale_check
 * multiplies g by inv_scale and records, on the device, whether any element
 * was inf or NaN (enqueued, returns at once); rt_cuda_all_finite waits for the
 * stream and returns 1 when every gradient unscaled since its last call was
 * finite, 0 otherwise, and resets the record. */
void rt_cuda_unscale_check(float *g, int64_t n, float inv_scale);
int rt_cuda_all_finite(void);

/* Gradient clipping, split like loss scaling: rt_cuda_grad_sqnorm adds the
 * sum of g[i]^2 (in double) to a device total (enqueued, returns at once);
 * rt_cuda_grad_sqnorm_total waits for the stream, returns the total and
 * resets it. The sums run in a fixed order (a fixed grid, partials added by
 * one thread), so the result does not vary from run to run. */
void rt_cuda_grad_sqnorm(const float *g, int64_t n);
double rt_cuda_grad_sqnorm_total(void);

// ----------------------------------------------------------------------------
// CUDA graphs (trainer --cuda-graph): capture the calls made between begin and
// end once (nothing runs during capture), then replay them. AdamW updates
// captured this way take their step-dependent scalars (the bias corrections
// of step t) from rt_cuda_graph_launch(t), rounded exactly as
// rt_cuda_adamw_update rounds them, so a replayed step equals a direct one;
// all captured AdamW calls must share lr and betas. One graph per context.
void rt_cuda_graph_begin(void);
void rt_cuda_graph_end(void);
void rt_cuda_graph_launch(int64_t t);

#ifdef __cplusplus
}
#endif
#endif
