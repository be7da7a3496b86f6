/* cuda_internal.cuh: what the CUDA backend's files (cuda_*.cu) share. The comment below was the top of kernels.cu,
 * which split_runtime.py cut into these files by section. */
#ifndef CUDA_INTERNAL_CUH
#define CUDA_INTERNAL_CUH

/* kernels.cu: the CUDA backend of memplan_rt.h (see memplan_rt_cuda.h).
 *
 * Matrix products go through cuBLAS (cublasGemmEx, strided-batched for
 * matmul; row-major products as column-major ones with the operands swapped,
 * transposes as flags, beta = acc ? 1 : 0) and, for linear forward with a
 * bias, cuBLASLt with a bias epilogue. Everything else is a kernel here, one
 * per op direction, each with a launch helper; reductions accumulate in
 * double like cpu.c, in a fixed order (no float atomics anywhere), so every
 * result is reproducible run to run.
 *
 * Thread layouts, chosen per op:
 * - element-wise ops: grid-stride loops, 64-bit indices;
 * - row ops (layernorm, softmax): one warp per row, lanes stride the row;
 * - sums over rows (bias, layernorm weight grads): a block owns 8 columns and
 *   64 row groups, reduced in shared memory in a fixed order;
 * - attention: a block owns 16 consecutive rows of one (batch, head), or of
 *   one (batch, kv head) for dk, dv, one per warp, and streams the other side
 *   in tiles of 32 positions (one per lane) through shared memory (see the
 *   attention section);
 * - rope: one thread per (position, frequency), looping over the heads;
 * - batchnorm2d: one block per channel, its threads striding the channel's values;
 * - shape ops: one thread per element written (see their section);
 * - pooling: one thread per output element forward, one per input element
 *   backward (gathering its windows in cpu.c's order); global average pooling
 *   one thread per plane;
 * - dropout: one thread per 32-element mask word.
 */
#include "memplan_rt_cuda.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Shared by the files of this family (split_runtime.py): moved here, or declared
 * here and defined in one file. */

void rt_cuda_fail(const char *file, int line, const char *what, const char *why);

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) rt_cuda_fail(__FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
  } while (0)
#define CUBLAS_CHECK(call)                                                                                 \
  do {                                                                                                     \
    cublasStatus_t st_ = (call);                                                                           \
    if (st_ != CUBLAS_STATUS_SUCCESS) rt_cuda_fail(__FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
  } while (0)
/* A contract violation by the caller (a size that does not fit, no context). */
#define RT_CHECK(cond, msg)                                      \
  do {                                                           \
    if (!(cond)) rt_cuda_fail(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
/* Kernel launches report configuration errors here; faults inside a kernel
 * surface at the next synchronizing call. */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

typedef struct {
  int ready;
  cudaStream_t stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  void *workspace; // plan-owned scratch: cuBLAS, cuBLASLt, and kernels between them
  size_t workspace_bytes;
  int tf32;          // matrix products in TF32 (rt_cuda_set_tf32; any time)
  int lt_off;        // no cuBLASLt bias epilogue (rt_cuda_set_cublaslt(0))
  int num_sms;       // sizes grid-stride launches
  size_t smem_optin; // largest dynamic shared memory a block may opt into
  // CUDA graphs (rt_cuda_graph_*): AdamW launches captured into the graph
  // read their step-dependent scalars from rt_adam_scalars, set before each
  // replay; the other hyperparameters are fixed at capture.
  int capturing;
  int graph_adamw;         // the captured graph has AdamW updates
  double lr, beta1, beta2; // theirs (one set per graph)
  cudaGraph_t graph;
  cudaGraphExec_t graph_exec;
} RtCudaContext;
extern RtCudaContext ctx;
void need_ctx(void);

#define FULL_MASK 0xffffffffu

int dim_int(int64_t d);
unsigned grid_for(int64_t n, int block);
void smem_optin(const void *kernel, size_t bytes, const char *what);

/* Butterfly reductions: every lane ends with the same value, bit for bit
 * (each step adds the same two numbers on both partner lanes). */
static __device__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}
static __device__ float warp_sum_f(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}
static __device__ float warp_max_f(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
  return v;
}

/* cpu_internal.h's row_stats over x[0..n), one warp: lane-strided double
 * sums, the mean rounded to float before the two-pass biased variance,
 * rstd = 1 / sqrtf(var + eps). Every lane gets both; layernorm's and
 * groupnorm's statistics. */
static __device__ void warp_row_stats(const float *x, int64_t n, float eps, float *mean, float *rstd) {
  int lane = threadIdx.x % 32;
  double s = 0.0;
  for (int64_t j = lane; j < n; j += 32) s += x[j];
  float m = (float)(warp_sum_d(s) / (double)n);
  double v = 0.0;
  for (int64_t j = lane; j < n; j += 32) v += (double)(x[j] - m) * (x[j] - m);
  *mean = m;
  *rstd = 1.0f / sqrtf((float)(warp_sum_d(v) / (double)n) + eps);
}

/* Whole-block reductions (blockDim.x a multiple of 32); every thread gets the
 * result. `sh` holds 32 values; the leading barrier lets calls follow each
 * other on the same `sh`. */
static __device__ double block_sum_d(double v, double *sh) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_sum_d(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  return warp_sum_d(lane < nw ? sh[lane] : 0.0);
}
static __device__ float block_max_f(float v, float *sh) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_max_f(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  return warp_max_f(lane < nw ? sh[lane] : -INFINITY);
}

void cuda_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C, int acc,
               int64_t batch, int64_t sA, int64_t sB, int64_t sC);

// Column sums: a block owns COL_BLOCK columns and ROW_GROUPS row groups;
// thread (g, c) sums rows g, g + ROW_GROUPS, ... of column c in double, then
// the group sums are added in group order. A warp reads 4 rows of 8
// consecutive floats: whole 32-byte sectors.
#define COL_BLOCK 8
#define ROW_GROUPS 64

/* Adds the ROW_GROUPS partial sums of each column in a fixed order; thread
 * c < COL_BLOCK gets column c's total. sh has COL_BLOCK * ROW_GROUPS. */
static __device__ double column_total(double part, double *sh) {
  int c = threadIdx.x % COL_BLOCK, g = threadIdx.x / COL_BLOCK;
  __syncthreads();
  sh[g * COL_BLOCK + c] = part;
  __syncthreads();
  double s = 0.0;
  if (g == 0)
    for (int i = 0; i < ROW_GROUPS; i++) s += sh[i * COL_BLOCK + c];
  return s;
}

void cuda_colsum(float *out, const float *in, int64_t M, int64_t N, int acc);

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#define LOSS_BLOCK 1024

static __device__ uint64_t mix64_dev(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void adam_scalars_kernel(float step, float bc2_sqrt);

static __device__ uint16_t to_bf16(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); // quiet NaN
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static __device__ float from_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

#endif
