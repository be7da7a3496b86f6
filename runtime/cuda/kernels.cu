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

// ----------------------------------------------------------------------------
// error checking: trainers are programs, so every failure prints file:line and
// the library's reason, then exits

static void rt_cuda_fail(const char *file, int line, const char *what, const char *why) {
  fprintf(stderr, "%s:%d: memplan CUDA runtime: %s: %s\n", file, line, what, why);
  exit(1);
}

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

// ----------------------------------------------------------------------------
// context

static struct {
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
} ctx;

static void need_ctx(void) { RT_CHECK(ctx.ready, "call rt_cuda_init first"); }

int rt_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void rt_cuda_init(void *workspace, size_t workspace_bytes) {
  RT_CHECK(!ctx.ready, "rt_cuda_init called twice");
  RT_CHECK(workspace_bytes == 0 || workspace != NULL, "workspace bytes without a pointer");
  RT_CHECK((uintptr_t)workspace % 256 == 0, "cuBLAS needs a 256-byte aligned workspace");
  int dev = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&ctx.num_sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  ctx.smem_optin = (size_t)optin;
  CUDA_CHECK(cudaStreamCreate(&ctx.stream));
  CUBLAS_CHECK(cublasCreate(&ctx.blas));
  CUBLAS_CHECK(cublasLtCreate(&ctx.lt));
  // cublasSetStream resets the handle to cuBLAS's own workspace pool, so the
  // plan's workspace is set after it.
  CUBLAS_CHECK(cublasSetStream(ctx.blas, ctx.stream));
  CUBLAS_CHECK(cublasSetWorkspace(ctx.blas, workspace, workspace_bytes));
  ctx.workspace = workspace;
  ctx.workspace_bytes = workspace_bytes;
  ctx.ready = 1;
}

void rt_cuda_shutdown(void) {
  need_ctx();
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (ctx.graph_exec) CUDA_CHECK(cudaGraphExecDestroy(ctx.graph_exec));
  if (ctx.graph) CUDA_CHECK(cudaGraphDestroy(ctx.graph));
  ctx.graph_exec = NULL, ctx.graph = NULL, ctx.graph_adamw = 0;
  CUBLAS_CHECK(cublasLtDestroy(ctx.lt));
  CUBLAS_CHECK(cublasDestroy(ctx.blas));
  CUDA_CHECK(cudaStreamDestroy(ctx.stream));
  ctx.ready = 0;
}

rt_cuda_stream_t rt_cuda_stream(void) {
  need_ctx();
  return ctx.stream;
}

void rt_cuda_set_tf32(int on) { ctx.tf32 = on != 0; }
void rt_cuda_set_cublaslt(int on) { ctx.lt_off = on == 0; }

void rt_cuda_synchronize(void) {
  need_ctx();
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void *rt_cuda_malloc(size_t bytes) {
  void *p = NULL;
  CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

void rt_cuda_free(void *dev) { CUDA_CHECK(cudaFree(dev)); }

void rt_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes) {
  need_ctx();
  CUDA_CHECK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void rt_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes) {
  need_ctx();
  CUDA_CHECK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void rt_cuda_memset_zero(void *dev, size_t bytes) {
  need_ctx();
  CUDA_CHECK(cudaMemsetAsync(dev, 0, bytes, ctx.stream));
}

float rt_cuda_read_loss(const float *loss_dev) {
  float v = 0.0f;
  rt_cuda_memcpy_d2h(&v, loss_dev, sizeof v);
  return v;
}

void rt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes) { CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes)); }

// ----------------------------------------------------------------------------
// launch helpers and device reductions

#define FULL_MASK 0xffffffffu

/* cuBLAS and the kernels' 32-bit row/column indices take int dimensions. */
static int dim_int(int64_t d) {
  RT_CHECK(d >= 0 && d <= INT_MAX, "dimension does not fit int");
  return (int)d;
}

/* Blocks for a grid-stride loop over n items: enough to fill the GPU, no
 * more (the loop covers the rest). */
static unsigned grid_for(int64_t n, int block) {
  int64_t g = (n + block - 1) / block, cap = (int64_t)ctx.num_sms * 16;
  return (unsigned)(g < cap ? g : cap);
}

/* Lets `kernel` use `bytes` of dynamic shared memory (above 48 KiB needs an
 * explicit opt-in). */
static void smem_optin(const void *kernel, size_t bytes, const char *what) {
  if (bytes <= 48 * 1024) return;
  if (bytes > ctx.smem_optin) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s needs %zu bytes of shared memory, the device has %zu", what, bytes, ctx.smem_optin);
    rt_cuda_fail(__FILE__, __LINE__, "shared memory", msg);
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

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

// ----------------------------------------------------------------------------
// matrix products (cuBLAS, cuBLASLt)

static cublasComputeType_t compute_type(void) { return ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; }

/* C[m,n] (+)= op(A)[m,k] @ op(B)[k,n], row-major, for `batch` matrices
 * `sA`, `sB`, `sC` floats apart. ta: A is stored [k,m]; tb: B is stored
 * [n,k] (as cpu.c's gemm). Row-major C is column-major C^T = op(B)^T op(A)^T,
 * so cuBLAS gets B first, with the same flags and leading dimensions.
 * beta = 0 never reads C, so acc = 0 needs no memset and ignores NaN there. */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C, int acc,
                 int64_t batch, int64_t sA, int64_t sB, int64_t sC) {
  need_ctx();
  int mi = dim_int(m), ni = dim_int(n), ki = dim_int(k), bi = dim_int(batch);
  if (mi == 0 || ni == 0 || bi == 0) return;
  int lda = ta ? mi : ki, ldb = tb ? ki : ni;
  lda = lda > 0 ? lda : 1; // k = 0: cuBLAS still wants ld >= 1
  ldb = ldb > 0 ? ldb : 1;
  float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (bi == 1)
    CUBLAS_CHECK(cublasGemmEx(ctx.blas, opB, opA, ni, mi, ki, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C,
                              CUDA_R_32F, ni, compute_type(), CUBLAS_GEMM_DEFAULT));
  else
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.blas, opB, opA, ni, mi, ki, &alpha, B, CUDA_R_32F, ldb, sB, A,
                                            CUDA_R_32F, lda, sA, &beta, C, CUDA_R_32F, ni, sC, bi, compute_type(),
                                            CUBLAS_GEMM_DEFAULT));
}

/* Largest power of two up to 256 dividing the address: cuBLASLt's heuristic
 * assumes 256-byte aligned operands unless told otherwise. */
static uint32_t align_of(const void *p) {
  uint32_t a = 256;
  while (a > 4 && (uintptr_t)p % a) a >>= 1;
  return a;
}

#define LT_SET(fn, obj, attr, val) CUBLAS_CHECK(fn(obj, attr, &(val), sizeof(val)))

/* out[M,N] = x[M,K] @ W[N,K]^T + b[N] as one cuBLASLt call, the bias added
 * in the epilogue (no extra pass over out). Column-major: out^T[N,M] =
 * op_T(W: K x N) @ x^T (K x M), the bias one value per row of out^T.
 * Returns 0, having done nothing, when cuBLASLt offers no algorithm. */
static int linear_forward_lt(float *out, const float *x, const float *W, const float *b, int M, int K, int N) {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, compute_type(), CUDA_R_32F));
  cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  LT_SET(cublasLtMatmulDescSetAttribute, op, CUBLASLT_MATMUL_DESC_TRANSA, opT);
  LT_SET(cublasLtMatmulDescSetAttribute, op, CUBLASLT_MATMUL_DESC_TRANSB, opN);
  LT_SET(cublasLtMatmulDescSetAttribute, op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
  LT_SET(cublasLtMatmulDescSetAttribute, op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, K, N, K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, M, K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, N));
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = ctx.workspace_bytes;
  uint32_t alA = align_of(W), alB = align_of(x), alD = align_of(out);
  LT_SET(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws);
  LT_SET(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alA);
  LT_SET(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alB);
  LT_SET(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alD);
  LT_SET(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alD);
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  // "Not supported" here is an answer, not an error: the caller falls back.
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, op, la, lb, lc, lc, pref, 1, &res, &found);
  int ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (ok) {
    float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(ctx.lt, op, &alpha, W, la, x, lb, &beta, out, lc, out, lc, &res.algo, ctx.workspace,
                                ctx.workspace_bytes, ctx.stream));
  }
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
  return ok;
}

/* out[i, :] = b for every row: the product is then added onto it (beta = 1),
 * as cpu.c does. */
static __global__ void bias_broadcast_kernel(float *out, const float *b, int64_t M, int N) {
  int64_t n = M * N;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = b[i % N];
}

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

/* out[j] (+)= sum_i in[i, j]: the bias gradient. */
static __global__ void colsum_kernel(float *out, const float *in, int64_t M, int N, int acc) {
  __shared__ double sh[COL_BLOCK * ROW_GROUPS];
  int c = threadIdx.x % COL_BLOCK, g = threadIdx.x / COL_BLOCK;
  int j = blockIdx.x * COL_BLOCK + c;
  double s = 0.0;
  if (j < N)
    for (int64_t i = g; i < M; i += ROW_GROUPS) s += in[i * N + j];
  s = column_total(s, sh);
  if (g == 0 && j < N) out[j] = (float)(acc ? out[j] + s : s);
}

static void colsum(float *out, const float *in, int64_t M, int64_t N, int acc) {
  int n = dim_int(N);
  if (n == 0) return;
  colsum_kernel<<<(n + COL_BLOCK - 1) / COL_BLOCK, COL_BLOCK * ROW_GROUPS, 0, ctx.stream>>>(out, in, M, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_linear_forward(float *out, const float *x, const float *W, const float *b, int64_t M, int64_t K,
                            int64_t N) {
  need_ctx();
  if (b && !ctx.lt_off && M > 0 && N > 0 && K > 0 &&
      linear_forward_lt(out, x, W, b, dim_int(M), dim_int(K), dim_int(N)))
    return;
  if (b) {
    bias_broadcast_kernel<<<grid_for(M * N, 256), 256, 0, ctx.stream>>>(out, b, M, dim_int(N));
    LAUNCH_CHECK();
  }
  gemm(0, 1, M, N, K, x, W, out, b != NULL, 1, 0, 0, 0);
}

void rt_cuda_linear_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                             int64_t M, int64_t K, int64_t N, int acc_dx, int acc_dW, int acc_db) {
  need_ctx();
  if (dx) gemm(0, 0, M, K, N, dout, W, dx, acc_dx, 1, 0, 0, 0); // [M,N] @ [N,K]
  if (dW) gemm(1, 0, N, K, M, dout, x, dW, acc_dW, 1, 0, 0, 0); // [M,N]^T @ [M,K]
  if (db) colsum(db, dout, M, N, acc_db);
}

void rt_cuda_matmul_forward(float *out, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N) {
  gemm(0, 0, M, N, K, a, b, out, 0, Bt, M * K, K * N, M * N);
}

void rt_cuda_matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t Bt,
                             int64_t M, int64_t K, int64_t N, int acc_da, int acc_db) {
  if (da) gemm(0, 1, M, K, N, dout, b, da, acc_da, Bt, M * N, K * N, M * K);
  if (db) gemm(1, 0, K, N, M, a, dout, db, acc_db, Bt, M * K, M * N, K * N);
}

// ----------------------------------------------------------------------------
// element-wise: add, mul, relu, gelu, silu (one thread per element, each element read
// before it is written by the same thread: that is what makes the in-place
// pairs of the header safe)

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#define SQRT_2_OVER_PI 0.7978845608028654f
#define SQRT1_2 0.7071067811865476f      /* 1 / sqrt 2 */
#define INV_SQRT_2PI 0.3989422804014327f /* 1 / sqrt(2 pi) */

static __global__ void add_forward_kernel(float *out, const float *a, const float *b, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

/* da and db in one pass over dout. A gradient aliasing dout has acc = 0, and
 * writing it is skipped (its value is already there). */
static __global__ void add_backward_kernel(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  bool wa = da && !(da == dout && !acc_da), wb = db && !(db == dout && !acc_db);
  GRID_STRIDE(i, n) {
    float g = dout[i];
    if (wa) da[i] = acc_da ? da[i] + g : g;
    if (wb) db[i] = acc_db ? db[i] + g : g;
  }
}

static __global__ void mul_forward_kernel(float *out, const float *a, const float *b, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

/* As cpu.c: an element's dout, a and b are read before da is written there,
 * and da before db (da may be dout or db, see the header). */
static __global__ void mul_backward_kernel(float *da, float *db, const float *dout, const float *a, const float *b,
                                           int64_t n, int acc_da, int acc_db) {
  GRID_STRIDE(i, n) {
    float g = dout[i], ai = a[i], bi = b[i];
    if (da) da[i] = acc_da ? da[i] + g * bi : g * bi;
    if (db) db[i] = acc_db ? db[i] + g * ai : g * ai;
  }
}

static __global__ void relu_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static __global__ void relu6_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
}

static __global__ void relu6_backward_kernel(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = out[i] > 0.0f && out[i] < 6.0f ? dout[i] : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void sigmoid_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = 1.0f / (1.0f + expf(fminf(fmaxf(-x[i], -80.0f), 80.0f)));
}

static __global__ void sigmoid_backward_kernel(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = dout[i] * out[i] * (1.0f - out[i]);
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __device__ float hardsigmoid1(float x) { return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f; }

static __global__ void hardswish_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] * hardsigmoid1(x[i]);
}

static __global__ void hardswish_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    float g = xi < -3.0f ? 0.0f : xi <= 3.0f ? dout[i] * (xi / 3.0f + 0.5f) : dout[i];
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void hardsigmoid_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = hardsigmoid1(x[i]);
}

static __global__ void hardsigmoid_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = x[i] > -3.0f && x[i] < 3.0f ? dout[i] / 6.0f : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void scale_channels_forward_kernel(float *out, const float *x, const float *s, int64_t S, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] * s[i / S];
}

/* one thread per plane, summed in double; before dx, which may overwrite dout */
static __global__ void scale_channels_ds_kernel(float *ds, const float *dout, const float *x, int64_t NC, int64_t S,
                                                int acc) {
  GRID_STRIDE(p, NC) {
    double sum = 0.0;
    for (int64_t j = 0; j < S; j++) sum += (double)dout[p * S + j] * x[p * S + j];
    ds[p] = acc ? ds[p] + (float)sum : (float)sum;
  }
}

static __global__ void scale_channels_dx_kernel(float *dx, const float *dout, const float *s, int64_t S, int64_t n,
                                                int acc) {
  GRID_STRIDE(i, n) {
    float g = dout[i] * s[i / S];
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void relu_backward_kernel(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = out[i] > 0.0f ? dout[i] : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

/* approximate: tanh (1) or exact erf (0), x Phi(x). */
static __global__ void gelu_forward_kernel(float *out, const float *x, int64_t n, int approximate) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    if (approximate) {
      float u = SQRT_2_OVER_PI * (xi + 0.044715f * xi * xi * xi);
      out[i] = 0.5f * xi * (1.0f + tanhf(u));
    } else {
      out[i] = 0.5f * xi * (1.0f + erff(xi * SQRT1_2));
    }
  }
}

/* tanh: sech^2 as 1/cosh^2 (accurate where tanh nears +-1; an overflowing
 * cosh gives 0, the right limit). Exact: Phi(x) + x phi(x), as cpu.c. */
static __global__ void gelu_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int approximate,
                                            int acc) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    float g;
    if (approximate) {
      float u = SQRT_2_OVER_PI * (xi + 0.044715f * xi * xi * xi);
      float ch = coshf(u);
      float du = SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * xi * xi);
      g = dout[i] * (0.5f * (1.0f + tanhf(u)) + 0.5f * xi * du / (ch * ch));
    } else {
      float cdf = 0.5f * (1.0f + erff(xi * SQRT1_2));
      float pdf = INV_SQRT_2PI * expf(-0.5f * xi * xi);
      g = dout[i] * (cdf + xi * pdf);
    }
    dx[i] = acc ? dx[i] + g : g;
  }
}

/* The CPU's formula: e = exp(-x) clamped at exp(+-80), s = 1 / (1 + e),
 * 1 - s = e s (no inf * 0 for very negative x). */
/* out (+)= f x. */
static __global__ void scale_kernel(float *out, const float *x, int64_t n, float f, int acc) {
  GRID_STRIDE(i, n) out[i] = acc ? out[i] + f * x[i] : f * x[i];
}

static __device__ float silu_e(float x) { return expf(fminf(fmaxf(-x, -80.0f), 80.0f)); }

static __global__ void silu_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    out[i] = xi / (1.0f + silu_e(xi));
  }
}

static __global__ void silu_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    float e = silu_e(xi);
    float s = 1.0f / (1.0f + e);
    float g = dout[i] * (s * (1.0f + xi * (e * s)));
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_cuda_add_forward(float *out, const float *a, const float *b, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  add_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, a, b, n);
  LAUNCH_CHECK();
}

void rt_cuda_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  need_ctx();
  if (n <= 0 || (!da && !db)) return;
  add_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(da, db, dout, n, acc_da, acc_db);
  LAUNCH_CHECK();
}

void rt_cuda_mul_forward(float *out, const float *a, const float *b, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  mul_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, a, b, n);
  LAUNCH_CHECK();
}

void rt_cuda_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t n,
                          int acc_da, int acc_db) {
  need_ctx();
  if (n <= 0 || (!da && !db)) return;
  mul_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(da, db, dout, a, b, n, acc_da, acc_db);
  LAUNCH_CHECK();
}

void rt_cuda_relu_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  relu_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  relu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, out, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_relu6_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  relu6_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_relu6_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  relu6_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, out, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_sigmoid_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  sigmoid_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_sigmoid_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  sigmoid_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, out, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_hardswish_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  hardswish_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_hardswish_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  hardswish_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_hardsigmoid_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  hardsigmoid_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_hardsigmoid_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  hardsigmoid_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_scale_channels_forward(float *out, const float *x, const float *s, int64_t NC, int64_t S) {
  need_ctx();
  int64_t n = NC * S;
  if (n <= 0) return;
  scale_channels_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, s, S, n);
  LAUNCH_CHECK();
}

void rt_cuda_scale_channels_backward(float *dx, float *ds, const float *dout, const float *x, const float *s,
                                     int64_t NC, int64_t S, int acc_dx, int acc_ds) {
  need_ctx();
  int64_t n = NC * S;
  if (n <= 0) return;
  if (ds) {
    scale_channels_ds_kernel<<<grid_for(NC, 128), 128, 0, ctx.stream>>>(ds, dout, x, NC, S, acc_ds);
    LAUNCH_CHECK();
  }
  if (dx) {
    scale_channels_dx_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, s, S, n, acc_dx);
    LAUNCH_CHECK();
  }
}

void rt_cuda_gelu_forward(float *out, const float *x, int64_t n, int approximate) {
  need_ctx();
  if (n <= 0) return;
  gelu_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n, approximate);
  LAUNCH_CHECK();
}

void rt_cuda_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int approximate, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  gelu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, approximate, acc);
  LAUNCH_CHECK();
}

void rt_cuda_scale_forward(float *out, const float *x, int64_t n, double factor) {
  need_ctx();
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n, (float)factor, 0);
  LAUNCH_CHECK();
}

void rt_cuda_scale_backward(float *dx, const float *dout, int64_t n, double factor, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  scale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, n, (float)factor, acc);
  LAUNCH_CHECK();
}

void rt_cuda_silu_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  silu_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_silu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  silu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// layernorm, softmax: one warp per row, WARPS_PER_BLOCK rows per block

#define WARPS_PER_BLOCK 8

static unsigned row_blocks(int64_t rows) {
  int64_t g = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  RT_CHECK(g <= INT_MAX, "too many rows");
  return (unsigned)g;
}

/* cpu.c's arithmetic: double sums, the mean rounded to float before the
 * two-pass variance, rstd = 1 / sqrtf(var + eps); b NULL adds nothing. */
static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *x, const float *w,
                                                const float *b, int64_t N, int C, float eps) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *xr = x + row * C;
  float *o = out + row * C;
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += xr[j];
  float m = (float)(warp_sum_d(s) / (double)C);
  double v = 0.0;
  for (int j = lane; j < C; j += 32) {
    float d = xr[j] - m;
    v += (double)d * d;
  }
  float r = 1.0f / sqrtf((float)(warp_sum_d(v) / (double)C) + eps);
  if (b)
    for (int j = lane; j < C; j += 32) o[j] = (xr[j] - m) * r * w[j] + b[j];
  else
    for (int j = lane; j < C; j += 32) o[j] = (xr[j] - m) * r * w[j];
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = r;
  }
}

/* dx (+)= rstd (w dout - mean(w dout) - xhat mean(w dout xhat)), per row. */
static __global__ void layernorm_backward_dx_kernel(float *dx, const float *dout, const float *x, const float *w,
                                                    const float *mean, const float *rstd, int64_t N, int C, int acc) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *xr = x + row * C, *gr = dout + row * C;
  float *dxr = dx + row * C;
  float m = mean[row], r = rstd[row];
  double s1 = 0.0, s2 = 0.0;
  for (int j = lane; j < C; j += 32) {
    float wg = w[j] * gr[j];
    s1 += wg;
    s2 += wg * ((xr[j] - m) * r);
  }
  float m1 = (float)(warp_sum_d(s1) / (double)C), m2 = (float)(warp_sum_d(s2) / (double)C);
  for (int j = lane; j < C; j += 32) {
    float g = r * (w[j] * gr[j] - m1 - (xr[j] - m) * r * m2);
    dxr[j] = acc ? dxr[j] + g : g;
  }
}

/* dw (+)= sum_rows dout * xhat; db (+)= sum_rows dout (column sums). */
static __global__ void layernorm_backward_wb_kernel(float *dw, float *db, const float *dout, const float *x,
                                                    const float *mean, const float *rstd, int64_t N, int C, int acc_dw,
                                                    int acc_db) {
  __shared__ double sh[COL_BLOCK * ROW_GROUPS];
  int c = threadIdx.x % COL_BLOCK, g = threadIdx.x / COL_BLOCK;
  int j = blockIdx.x * COL_BLOCK + c;
  double sw = 0.0, sb = 0.0;
  if (j < C)
    for (int64_t i = g; i < N; i += ROW_GROUPS) {
      float gi = dout[i * C + j];
      sw += gi * ((x[i * C + j] - mean[i]) * rstd[i]);
      sb += gi;
    }
  sw = column_total(sw, sh);
  sb = column_total(sb, sh);
  if (g == 0 && j < C) {
    if (dw) dw[j] = (float)(acc_dw ? dw[j] + sw : sw);
    if (db) db[j] = (float)(acc_db ? db[j] + sb : sb);
  }
}

void rt_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                               int64_t N, int64_t C, float eps) {
  need_ctx();
  if (N <= 0) return;
  layernorm_forward_kernel<<<row_blocks(N), WARPS_PER_BLOCK * 32, 0, ctx.stream>>>(out, mean, rstd, x, w, b, N,
                                                                                   dim_int(C), eps);
  LAUNCH_CHECK();
}

void rt_cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                                const float *mean, const float *rstd, int64_t N, int64_t C, float eps, int acc_dx,
                                int acc_dw, int acc_db) {
  (void)eps; /* rstd is saved */
  need_ctx();
  int c = dim_int(C);
  if (dx && N > 0) {
    layernorm_backward_dx_kernel<<<row_blocks(N), WARPS_PER_BLOCK * 32, 0, ctx.stream>>>(dx, dout, x, w, mean, rstd, N,
                                                                                         c, acc_dx);
    LAUNCH_CHECK();
  }
  if ((dw || db) && c > 0) {
    layernorm_backward_wb_kernel<<<(c + COL_BLOCK - 1) / COL_BLOCK, COL_BLOCK * ROW_GROUPS, 0, ctx.stream>>>(
        dw, db, dout, x, mean, rstd, N, c, acc_dw, acc_db);
    LAUNCH_CHECK();
  }
}

/* rmsnorm, cpu.c's arithmetic: double sum of squares, rstd = 1 / sqrtf(ms + eps). */
static __global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *x, const float *w, int64_t N, int C,
                                              float eps) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *xr = x + row * C;
  float *o = out + row * C;
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += (double)xr[j] * xr[j];
  float r = 1.0f / sqrtf((float)(warp_sum_d(s) / (double)C) + eps);
  for (int j = lane; j < C; j += 32) o[j] = xr[j] * r * w[j];
  if (lane == 0 && rstd) rstd[row] = r;
}

/* dx (+)= rstd (w dout - x rstd^2 mean(w dout x)), per row. */
static __global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dout, const float *x, const float *w,
                                                  const float *rstd, int64_t N, int C, int acc) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *xr = x + row * C, *gr = dout + row * C;
  float *dxr = dx + row * C;
  float r = rstd[row];
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += (double)(w[j] * gr[j]) * xr[j];
  float m = (float)(warp_sum_d(s) / (double)C) * r * r;
  for (int j = lane; j < C; j += 32) {
    float g = r * (w[j] * gr[j] - xr[j] * m);
    dxr[j] = acc ? dxr[j] + g : g;
  }
}

/* dw (+)= sum_rows dout * x * rstd (column sums). */
static __global__ void rmsnorm_backward_dw_kernel(float *dw, const float *dout, const float *x, const float *rstd,
                                                  int64_t N, int C, int acc) {
  __shared__ double sh[COL_BLOCK * ROW_GROUPS];
  int c = threadIdx.x % COL_BLOCK, g = threadIdx.x / COL_BLOCK;
  int j = blockIdx.x * COL_BLOCK + c;
  double sw = 0.0;
  if (j < C)
    for (int64_t i = g; i < N; i += ROW_GROUPS) sw += dout[i * C + j] * (x[i * C + j] * rstd[i]);
  sw = column_total(sw, sh);
  if (g == 0 && j < C) dw[j] = (float)(acc ? dw[j] + sw : sw);
}

void rt_cuda_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t N, int64_t C, float eps) {
  need_ctx();
  if (N <= 0) return;
  rmsnorm_forward_kernel<<<row_blocks(N), WARPS_PER_BLOCK * 32, 0, ctx.stream>>>(out, rstd, x, w, N, dim_int(C), eps);
  LAUNCH_CHECK();
}

void rt_cuda_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                              const float *rstd, int64_t N, int64_t C, float eps, int acc_dx, int acc_dw) {
  (void)eps; /* rstd is saved */
  need_ctx();
  int c = dim_int(C);
  if (dx && N > 0) {
    rmsnorm_backward_dx_kernel<<<row_blocks(N), WARPS_PER_BLOCK * 32, 0, ctx.stream>>>(dx, dout, x, w, rstd, N, c,
                                                                                       acc_dx);
    LAUNCH_CHECK();
  }
  if (dw && c > 0) {
    rmsnorm_backward_dw_kernel<<<(c + COL_BLOCK - 1) / COL_BLOCK, COL_BLOCK * ROW_GROUPS, 0, ctx.stream>>>(
        dw, dout, x, rstd, N, c, acc_dw);
    LAUNCH_CHECK();
  }
}

/* Three passes over the row (max, sum, write); the write pass recomputes
 * exp rather than storing it, so out may be x: a lane reads x[j] just before
 * writing out[j], and the whole warp finished reading in the sum's shuffle. */
static __global__ void softmax_forward_kernel(float *out, const float *x, int64_t N, int C) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *xr = x + row * C;
  float *o = out + row * C;
  float mx = -INFINITY;
  for (int j = lane; j < C; j += 32) mx = fmaxf(mx, xr[j]);
  mx = warp_max_f(mx);
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += expf(xr[j] - mx);
  float inv = (float)(1.0 / warp_sum_d(s));
  for (int j = lane; j < C; j += 32) o[j] = expf(xr[j] - mx) * inv;
}

/* dx (+)= out * (dout - sum(dout * out)); the sum is complete (shuffle)
 * before any lane writes, so dx may be dout. */
static __global__ void softmax_backward_kernel(float *dx, const float *dout, const float *out, int64_t N, int C,
                                               int acc) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *gr = dout + row * C, *yr = out + row * C;
  float *dxr = dx + row * C;
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += gr[j] * yr[j];
  float sf = (float)warp_sum_d(s);
  for (int j = lane; j < C; j += 32) {
    float g = yr[j] * (gr[j] - sf);
    dxr[j] = acc ? dxr[j] + g : g;
  }
}

void rt_cuda_softmax_forward(float *out, const float *x, int64_t N, int64_t C) {
  need_ctx();
  if (N <= 0) return;
  softmax_forward_kernel<<<row_blocks(N), WARPS_PER_BLOCK * 32, 0, ctx.stream>>>(out, x, N, dim_int(C));
  LAUNCH_CHECK();
}

void rt_cuda_softmax_backward(float *dx, const float *dout, const float *out, int64_t N, int64_t C, int acc) {
  need_ctx();
  if (N <= 0 || !dx) return;
  softmax_backward_kernel<<<row_blocks(N), WARPS_PER_BLOCK * 32, 0, ctx.stream>>>(dx, dout, out, N, dim_int(C), acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// self-attention (causal or not, grouped-query)
//
// Layout (as cpu.c): qkv[b,t,:] = q (C = NH*hs) | k (KC = KVH*hs) | v (KC);
// query head h uses channels h*hs .. h*hs+hs-1 of q and those of kv head
// kh = h / G of k and v, G = NH/KVH the group size; out[b,t,h*hs+d];
// lse[b,h,t]. Causal: query t sees keys 0..t; otherwise all T.
//
// Three kernels, each a block of ATT_ROWS warps owning ATT_ROWS consecutive
// positions, one position per warp, and streaming the other side in tiles of
// ATT_TILE positions (one per lane) through shared memory, so each K/V (or
// Q/dout) load serves ATT_ROWS rows:
// - forward, blocks per (b, h): per query row, online softmax over key tiles
//   (running max m, running sum l, output rescaled when m grows),
//   FlashAttention's recurrence; saves lse = m + log l.
// - backward dq, blocks per (b, h): per query row over key tiles:
//   p = exp(q.k scale - lse), ds = p (dout.v - D) scale with D = dout.out,
//   dq += ds k.
// - backward dk, dv, blocks per (b, kv head): per key row over the query
//   tiles of each of the group's G query heads in turn (causal: queries
//   t >= key only): dv += p dout, dk += ds q. Splitting dq from dk/dv
//   recomputes p twice but needs no atomics and no scratch: every gradient
//   element has one writer (a kv head's dk, dv sum over its group inside one
//   block, in a fixed order), which also makes acc = 0 a plain store.
// Shared-memory rows of a tile are padded to an odd stride so that lane j
// reading row j, column d hits bank (j * stride + d) % 32: all distinct.

#define ATT_ROWS 16
#define ATT_TILE 32

static __host__ __device__ int att_stride(int hs) { return hs % 2 ? hs : hs + 1; }

/* Dot product of an own row with a shared row; plain loop, lanes differ in
 * `b` only, so `a` reads are broadcasts. */
static __device__ float dot_sh(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int d = 0; d < n; d++) s += a[d] * b[d];
  return s;
}

/* Sizes of one attention call, as the kernels use them. */
typedef struct {
  int T, C, NH, hs, KC, C3, G; // G = NH / KVH query heads per kv head
  int causal;
  float scale;
} AttDims;

static size_t att_forward_smem(int hs) {
  return sizeof(float) * ((size_t)2 * ATT_TILE * att_stride(hs) + (size_t)2 * ATT_ROWS * hs + ATT_ROWS * ATT_TILE);
}

static __global__ void attention_forward_kernel(float *out, float *lse, const float *qkv, AttDims a) {
  extern __shared__ float sm[];
  int T = a.T, hs = a.hs, st = att_stride(hs), C3 = a.C3;
  float *Ks = sm;                 // [ATT_TILE][st] keys of this tile
  float *Vs = Ks + ATT_TILE * st; // [ATT_TILE][st] values
  float *Qs = Vs + ATT_TILE * st; // [ATT_ROWS][hs] each warp's query
  float *Os = Qs + ATT_ROWS * hs; // [ATT_ROWS][hs] each warp's output accumulator
  float *Ps = Os + ATT_ROWS * hs; // [ATT_ROWS][ATT_TILE] each warp's probabilities
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int h = blockIdx.y, b = blockIdx.z;
  int t0 = (gridDim.x - 1 - blockIdx.x) * ATT_ROWS; // longest rows first
  int t = t0 + warp;
  int last = a.causal ? min(t, T - 1) : T - 1;                      // this row's last key
  int slast = a.causal ? min(t0 + ATT_ROWS, T) - 1 : T - 1;         // the block's
  const float *qb = qkv + (int64_t)b * T * C3 + h * hs;             // q of position 0
  const float *kb = qkv + (int64_t)b * T * C3 + a.C + h / a.G * hs; // k of position 0
  const float *vb = kb + a.KC;
  float *q = Qs + warp * hs, *o = Os + warp * hs, *p_sh = Ps + warp * ATT_TILE;
  if (t < T)
    for (int d = lane; d < hs; d += 32) {
      q[d] = qb[(int64_t)t * C3 + d];
      o[d] = 0.0f;
    }
  float m = -INFINITY, l = 0.0f;
  for (int s0 = 0; s0 <= slast; s0 += ATT_TILE) {
    __syncthreads(); // the previous tile is consumed
    for (int i = threadIdx.x; i < ATT_TILE * hs; i += blockDim.x) {
      int j = i / hs, d = i % hs, s = s0 + j;
      bool in = s <= slast;
      Ks[j * st + d] = in ? kb[(int64_t)s * C3 + d] : 0.0f;
      Vs[j * st + d] = in ? vb[(int64_t)s * C3 + d] : 0.0f;
    }
    __syncthreads();
    if (t >= T || s0 > last) continue; // no key of this tile is visible to row t
    int s = s0 + lane;
    float score = s <= last ? dot_sh(q, Ks + lane * st, hs) * a.scale : -INFINITY;
    float mnew = fmaxf(m, warp_max_f(score)); // finite: key s0 <= last is visible
    float p = s <= last ? expf(score - mnew) : 0.0f;
    float corr = expf(m - mnew); // 0 on the first tile (m = -inf)
    l = l * corr + warp_sum_f(p);
    m = mnew;
    p_sh[lane] = p;
    __syncwarp();
    int jn = min(ATT_TILE, last - s0 + 1);
    for (int d = lane; d < hs; d += 32) {
      float acc = o[d] * corr;
      for (int j = 0; j < jn; j++) acc += p_sh[j] * Vs[j * st + d];
      o[d] = acc;
    }
    __syncwarp(); // p_sh is rewritten next tile
  }
  if (t >= T) return;
  float inv = 1.0f / l;
  float *orow = out + ((int64_t)b * T + t) * a.C + h * hs;
  for (int d = lane; d < hs; d += 32) orow[d] = o[d] * inv;
  if (lse && lane == 0) lse[((int64_t)b * a.NH + h) * T + t] = m + logf(l);
}

static size_t att_dq_smem(int hs) {
  return sizeof(float) * ((size_t)2 * ATT_TILE * att_stride(hs) + (size_t)3 * ATT_ROWS * hs + ATT_ROWS * ATT_TILE);
}

/* dq (+)= sum over the keys s that query t sees of ds(t, s) k[s]. */
static __global__ void attention_backward_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                                                    const float *lse, AttDims a, int acc) {
  extern __shared__ float sm[];
  int T = a.T, hs = a.hs, st = att_stride(hs), C3 = a.C3;
  float *Ks = sm;                  // [ATT_TILE][st]
  float *Vs = Ks + ATT_TILE * st;  // [ATT_TILE][st]
  float *Qs = Vs + ATT_TILE * st;  // [ATT_ROWS][hs] query rows
  float *Gs = Qs + ATT_ROWS * hs;  // [ATT_ROWS][hs] dout rows
  float *dQs = Gs + ATT_ROWS * hs; // [ATT_ROWS][hs] dq accumulators
  float *Ps = dQs + ATT_ROWS * hs; // [ATT_ROWS][ATT_TILE] ds per key
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int h = blockIdx.y, b = blockIdx.z;
  int t0 = (gridDim.x - 1 - blockIdx.x) * ATT_ROWS;
  int t = t0 + warp;
  int last = a.causal ? min(t, T - 1) : T - 1;
  int slast = a.causal ? min(t0 + ATT_ROWS, T) - 1 : T - 1;
  const float *qb = qkv + (int64_t)b * T * C3 + h * hs;
  const float *kb = qkv + (int64_t)b * T * C3 + a.C + h / a.G * hs;
  const float *vb = kb + a.KC;
  float *q = Qs + warp * hs, *g = Gs + warp * hs, *dq = dQs + warp * hs;
  float *ds_sh = Ps + warp * ATT_TILE;
  float D = 0.0f, L = 0.0f;
  if (t < T) {
    int64_t row = ((int64_t)b * T + t) * a.C + h * hs;
    float part = 0.0f;
    for (int d = lane; d < hs; d += 32) {
      q[d] = qb[(int64_t)t * C3 + d];
      g[d] = dout[row + d];
      dq[d] = 0.0f;
      part += g[d] * out[row + d];
    }
    D = warp_sum_f(part);
    L = lse[((int64_t)b * a.NH + h) * T + t];
  }
  __syncwarp();
  for (int s0 = 0; s0 <= slast; s0 += ATT_TILE) {
    __syncthreads();
    for (int i = threadIdx.x; i < ATT_TILE * hs; i += blockDim.x) {
      int j = i / hs, d = i % hs, s = s0 + j;
      bool in = s <= slast;
      Ks[j * st + d] = in ? kb[(int64_t)s * C3 + d] : 0.0f;
      Vs[j * st + d] = in ? vb[(int64_t)s * C3 + d] : 0.0f;
    }
    __syncthreads();
    if (t >= T || s0 > last) continue;
    int s = s0 + lane;
    float ds = 0.0f;
    if (s <= last) {
      float p = expf(dot_sh(q, Ks + lane * st, hs) * a.scale - L);
      ds = p * (dot_sh(g, Vs + lane * st, hs) - D) * a.scale;
    }
    ds_sh[lane] = ds;
    __syncwarp();
    int jn = min(ATT_TILE, last - s0 + 1);
    for (int d = lane; d < hs; d += 32) {
      float x = dq[d];
      for (int j = 0; j < jn; j++) x += ds_sh[j] * Ks[j * st + d];
      dq[d] = x;
    }
    __syncwarp();
  }
  if (t >= T) return;
  float *dst = dqkv + ((int64_t)b * T + t) * C3 + h * hs;
  for (int d = lane; d < hs; d += 32) dst[d] = acc ? dst[d] + dq[d] : dq[d];
}

static size_t att_dkv_smem(int hs) {
  return sizeof(float) * ((size_t)2 * ATT_TILE * att_stride(hs) + 2 * ATT_TILE + (size_t)4 * ATT_ROWS * hs +
                          (size_t)2 * ATT_ROWS * ATT_TILE);
}

/* dk (+)= sum over the group's query heads and the queries t that see key s
 * of ds(t, s) q[t]; dv (+)= the same sum of p(t, s) dout[t]. Rows here are
 * keys of one kv head; tiles are queries of one query head at a time,
 * causal: from the block's first key on (earlier queries see none of them). */
static __global__ void attention_backward_dkv_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                                                     const float *lse, AttDims a, int acc) {
  extern __shared__ float sm[];
  int T = a.T, hs = a.hs, st = att_stride(hs), C3 = a.C3;
  float *Qs = sm;                        // [ATT_TILE][st] queries of this tile
  float *Gs = Qs + ATT_TILE * st;        // [ATT_TILE][st] their dout rows
  float *Ls = Gs + ATT_TILE * st;        // [ATT_TILE] their lse
  float *Ds = Ls + ATT_TILE;             // [ATT_TILE] their D = dout.out
  float *Kw = Ds + ATT_TILE;             // [ATT_ROWS][hs] each warp's key row
  float *Vw = Kw + ATT_ROWS * hs;        // [ATT_ROWS][hs] each warp's value row
  float *dKs = Vw + ATT_ROWS * hs;       // [ATT_ROWS][hs] dk accumulators
  float *dVs = dKs + ATT_ROWS * hs;      // [ATT_ROWS][hs] dv accumulators
  float *Ps = dVs + ATT_ROWS * hs;       // [ATT_ROWS][ATT_TILE] p per query
  float *DSs = Ps + ATT_ROWS * ATT_TILE; // [ATT_ROWS][ATT_TILE] ds per query
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int kh = blockIdx.y, b = blockIdx.z;
  int k0 = blockIdx.x * ATT_ROWS; // causal: the first blocks see the most queries
  int s = k0 + warp;              // this warp's key position
  const float *kb = qkv + (int64_t)b * T * C3 + a.C + kh * hs;
  const float *vb = kb + a.KC;
  float *k = Kw + warp * hs, *v = Vw + warp * hs, *dk = dKs + warp * hs, *dv = dVs + warp * hs;
  float *p_sh = Ps + warp * ATT_TILE, *ds_sh = DSs + warp * ATT_TILE;
  if (s < T)
    for (int d = lane; d < hs; d += 32) {
      k[d] = kb[(int64_t)s * C3 + d];
      v[d] = vb[(int64_t)s * C3 + d];
      dk[d] = 0.0f;
      dv[d] = 0.0f;
    }
  for (int h = kh * a.G; h < (kh + 1) * a.G; h++) {
    const float *qb = qkv + (int64_t)b * T * C3 + h * hs;
    const float *lse_bh = lse + ((int64_t)b * a.NH + h) * T;
    int64_t orow0 = (int64_t)b * T * a.C + h * hs; // out/dout of position 0
    for (int s0 = a.causal ? k0 : 0; s0 < T; s0 += ATT_TILE) {
      __syncthreads();
      for (int i = threadIdx.x; i < ATT_TILE * hs; i += blockDim.x) {
        int j = i / hs, d = i % hs, tq = s0 + j;
        bool in = tq < T;
        Qs[j * st + d] = in ? qb[(int64_t)tq * C3 + d] : 0.0f;
        Gs[j * st + d] = in ? dout[orow0 + (int64_t)tq * a.C + d] : 0.0f;
      }
      for (int j = warp; j < ATT_TILE; j += ATT_ROWS) { // D and lse of each query
        int tq = s0 + j;
        float part = 0.0f;
        if (tq < T)
          for (int d = lane; d < hs; d += 32)
            part += dout[orow0 + (int64_t)tq * a.C + d] * out[orow0 + (int64_t)tq * a.C + d];
        part = warp_sum_f(part);
        if (lane == 0) {
          Ds[j] = part;
          Ls[j] = tq < T ? lse_bh[tq] : 0.0f;
        }
      }
      __syncthreads();
      if (s >= T) continue;
      int tq = s0 + lane;
      float p = 0.0f, ds = 0.0f;
      if ((tq >= s || !a.causal) && tq < T) {
        p = expf(dot_sh(k, Qs + lane * st, hs) * a.scale - Ls[lane]);
        ds = p * (dot_sh(v, Gs + lane * st, hs) - Ds[lane]) * a.scale;
      }
      p_sh[lane] = p;
      ds_sh[lane] = ds;
      __syncwarp();
      for (int d = lane; d < hs; d += 32) {
        float x = dk[d], y = dv[d];
        for (int j = 0; j < ATT_TILE; j++) {
          x += ds_sh[j] * Qs[j * st + d];
          y += p_sh[j] * Gs[j * st + d];
        }
        dk[d] = x;
        dv[d] = y;
      }
      __syncwarp();
    }
  }
  if (s >= T) return;
  float *dst = dqkv + ((int64_t)b * T + s) * C3 + a.C + kh * hs;
  for (int d = lane; d < hs; d += 32) {
    dst[d] = acc ? dst[d] + dk[d] : dk[d];
    dst[a.KC + d] = acc ? dst[a.KC + d] + dv[d] : dv[d];
  }
}

/* Checks the shapes; returns the kernels' sizes and the grid (row blocks,
 * NH, B) of forward and dq (dk, dv: KVH in place of NH). */
static AttDims att_dims(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, dim3 *grid) {
  need_ctx();
  RT_CHECK(NH > 0 && KVH > 0 && C % NH == 0 && NH % KVH == 0, "attention needs C % NH == 0 and NH % KVH == 0");
  RT_CHECK(B <= 65535 && NH <= 65535, "attention grid: B and NH must be <= 65535");
  int64_t hs = C / NH;
  AttDims a;
  a.T = dim_int(T);
  a.C = (int)C;
  a.NH = (int)NH;
  a.hs = (int)hs;
  a.KC = (int)(KVH * hs);
  a.C3 = dim_int(C + 2 * KVH * hs);
  a.G = (int)(NH / KVH);
  a.causal = causal != 0;
  a.scale = 1.0f / sqrtf((float)hs);
  *grid = dim3((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS), (unsigned)NH, (unsigned)B);
  return a;
}

void rt_cuda_attention_forward(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                               int64_t KVH, int64_t causal) {
  dim3 grid;
  AttDims a = att_dims(B, T, C, NH, KVH, causal, &grid);
  if (B == 0 || T == 0) return;
  size_t smem = att_forward_smem(a.hs);
  smem_optin((const void *)attention_forward_kernel, smem, "attention forward");
  attention_forward_kernel<<<grid, ATT_ROWS * 32, smem, ctx.stream>>>(out, lse, qkv, a);
  LAUNCH_CHECK();
}

void rt_cuda_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                                int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, int acc) {
  dim3 grid;
  AttDims a = att_dims(B, T, C, NH, KVH, causal, &grid);
  if (B == 0 || T == 0 || !dqkv) return;
  size_t smem = att_dq_smem(a.hs);
  smem_optin((const void *)attention_backward_dq_kernel, smem, "attention backward (dq)");
  attention_backward_dq_kernel<<<grid, ATT_ROWS * 32, smem, ctx.stream>>>(dqkv, dout, qkv, out, lse, a, acc);
  LAUNCH_CHECK();
  smem = att_dkv_smem(a.hs);
  smem_optin((const void *)attention_backward_dkv_kernel, smem, "attention backward (dk, dv)");
  grid.y = (unsigned)KVH;
  attention_backward_dkv_kernel<<<grid, ATT_ROWS * 32, smem, ctx.stream>>>(dqkv, dout, qkv, out, lse, a, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// embeddings

static __global__ void embedding_forward_kernel(float *out, const int32_t *tokens, const float *W, int64_t N, int C) {
  GRID_STRIDE(i, N * C) {
    int64_t row = i / C;
    out[i] = W[(int64_t)tokens[row] * C + (i - row * C)];
  }
}

// Embedding backward, deterministic without sorting or scratch: rows of dW
// are split into EMB_BUCKETS buckets (token % EMB_BUCKETS); a warp owns one
// bucket and 32 columns, so no two warps ever touch one element. The warp
// scans all N tokens 32 at a time (a ballot finds its bucket's), visits its
// matches in position order, and keeps a running sum in registers while
// consecutive matches hit the same row, adding it into dW when the row
// changes. Each dW element thus receives a fixed sequence of adds. Work per
// warp is N/32 ballots plus its matches; a very frequent token serializes on
// its warp, which the register run keeps cheap.
#define EMB_BUCKETS 256
#define EMB_WARPS 8 // buckets per block

static __global__ void embedding_backward_kernel(float *dW, const float *dout, const int32_t *tokens, int64_t N,
                                                 int C) {
  int lane = threadIdx.x % 32;
  int bucket = blockIdx.y * EMB_WARPS + threadIdx.x / 32;
  int col = blockIdx.x * 32 + lane;
  bool mine = col < C;
  int cur = -1;     // the row the running sum belongs to
  float run = 0.0f; // running sum of dout for row `cur`
  for (int64_t i0 = 0; i0 < N; i0 += 32) {
    int64_t i = i0 + lane;
    int tok = i < N ? tokens[i] : -1;
    unsigned hits = __ballot_sync(FULL_MASK, tok >= 0 && tok % EMB_BUCKETS == bucket);
    while (hits) { // warp-uniform: every lane holds the same mask
      int src = __ffs(hits) - 1;
      hits &= hits - 1;
      int row = __shfl_sync(FULL_MASK, tok, src);
      if (row != cur) {
        if (cur >= 0 && mine) dW[(int64_t)cur * C + col] += run;
        cur = row;
        run = 0.0f;
      }
      if (mine) run += dout[(i0 + src) * C + col];
    }
  }
  if (cur >= 0 && mine) dW[(int64_t)cur * C + col] += run;
}

void rt_cuda_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V) {
  need_ctx();
  (void)V; // ids were checked by the data loader
  if (N <= 0 || C <= 0) return;
  embedding_forward_kernel<<<grid_for(N * C, 256), 256, 0, ctx.stream>>>(out, tokens, W, N, dim_int(C));
  LAUNCH_CHECK();
}

void rt_cuda_embedding_backward(float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V,
                                int acc) {
  need_ctx();
  if (!dW || C <= 0) return;
  dim_int(V);
  if (!acc) CUDA_CHECK(cudaMemsetAsync(dW, 0, (size_t)(V * C) * sizeof(float), ctx.stream));
  if (N <= 0) return;
  dim3 grid((unsigned)((dim_int(C) + 31) / 32), EMB_BUCKETS / EMB_WARPS);
  embedding_backward_kernel<<<grid, EMB_WARPS * 32, 0, ctx.stream>>>(dW, dout, tokens, N, (int)C);
  LAUNCH_CHECK();
}

static __global__ void position_embedding_forward_kernel(float *out, const float *W, int64_t n, int64_t TC) {
  GRID_STRIDE(i, n) out[i] = W[i % TC];
}

/* One thread per dW element, summing over b in order: cpu.c's exact
 * arithmetic (start at 0 or dW, add each batch row). */
static __global__ void position_embedding_backward_kernel(float *dW, const float *dout, int64_t B, int64_t T, int64_t C,
                                                          int64_t Wrows, int acc) {
  GRID_STRIDE(i, Wrows * C) {
    int64_t t = i / C;
    float s = acc ? dW[i] : 0.0f;
    if (t < T)
      for (int64_t b = 0; b < B; b++) s += dout[b * T * C + i];
    if (t < T || !acc) dW[i] = s;
  }
}

void rt_cuda_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T, int64_t C) {
  need_ctx();
  int64_t n = B * T * C;
  if (n <= 0) return;
  position_embedding_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, W, n, T * C);
  LAUNCH_CHECK();
}

void rt_cuda_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows,
                                         int acc) {
  need_ctx();
  if (!dW || Wrows * C <= 0) return;
  position_embedding_backward_kernel<<<grid_for(Wrows * C, 256), 256, 0, ctx.stream>>>(dW, dout, B, T, C, Wrows, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// rope: one thread per (position, frequency i). Its angle's cos and sin, in
// double as cpu.c computes them, serve the pair (i, i + hd/2) of every q and
// k head of the position; the thread also moves elements i and i + hd/2 of
// every v head. Neighbouring threads touch neighbouring i (coalesced), and
// each pair is read before it is written by the same thread (out may be x).

static __global__ void rope_kernel(float *out, const float *x, int64_t rows, int T, int nr, int KV, int hd,
                                   double theta, float factor, float low, float high, float orig, float sign, int acc) {
  int h2 = hd / 2;
  int64_t W = (int64_t)(nr + KV) * hd;
  bool copy_v = !(out == x && !acc); // v is already in place
  GRID_STRIDE(idx, rows * h2) {
    int64_t r = idx / h2;
    int i = (int)(idx % h2);
    double a = (double)(r % T) * rt_rope_freq(theta, i, hd, factor, low, high, orig);
    float c = (float)cos(a), s = sign * (float)sin(a);
    const float *xr = x + r * W;
    float *orow = out + r * W;
    for (int h = 0; h < nr; h++) {
      int64_t k = (int64_t)h * hd + i;
      float x1 = xr[k], x2 = xr[k + h2];
      float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
      orow[k] = acc ? orow[k] + y1 : y1;
      orow[k + h2] = acc ? orow[k + h2] + y2 : y2;
    }
    if (copy_v)
      for (int h = nr; h < nr + KV; h++) {
        int64_t k = (int64_t)h * hd + i;
        orow[k] = acc ? orow[k] + xr[k] : xr[k];
        orow[k + h2] = acc ? orow[k + h2] + xr[k + h2] : xr[k + h2];
      }
  }
}

static void rope(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, const float *s,
                 float sign, int acc) {
  need_ctx();
  RT_CHECK(hd % 2 == 0, "rope needs an even head dimension");
  int64_t n = B * T * (hd / 2);
  if (n <= 0) return;
  rope_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, B * T, dim_int(T), dim_int(H + KV), dim_int(KV),
                                                        dim_int(hd), (double)s[0], s[1], s[2], s[3], s[4], sign, acc);
  LAUNCH_CHECK();
}

void rt_cuda_rope_forward(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                          float theta, float factor, float low, float high, float orig) {
  const float s[5] = {theta, factor, low, high, orig};
  rope(out, x, B, T, H, KV, hd, s, 1.0f, 0);
}

void rt_cuda_rope_backward(float *dx, const float *dout, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                           float theta, float factor, float low, float high, float orig, int acc) {
  const float s[5] = {theta, factor, low, high, orig};
  if (dx) rope(dx, dout, B, T, H, KV, hd, s, -1.0f, acc);
}

// ----------------------------------------------------------------------------
// shape ops: flatten and reshape (a copy, or nothing in place), transpose,
// concat, class_token, select. One thread per element written (grid-stride,
// 64-bit indices): writes coalesce, transpose's reads are strided. concat and
// class_token move one slice per launch, in stream order, so gradients that
// are one buffer (concat of a tensor with itself) add up in order. The one
// sum, class_token's dW, is one thread per column over the batch in order
// and in double, as cpu.c: bit for bit the same.

/* dst[r * ds + j] (+)= src[r * ss + j], r < rows, j < len (ss = 0: one row repeated). */
static __global__ void block_kernel(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t len,
                                    int acc) {
  GRID_STRIDE(e, rows * len) {
    int64_t r = e / len, j = e % len;
    float v = src[r * ss + j];
    float *d = dst + r * ds + j;
    *d = acc ? *d + v : v;
  }
}

static void block_copy(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t len, int acc) {
  need_ctx();
  if (!dst || rows <= 0 || len <= 0) return;
  block_kernel<<<grid_for(rows * len, 256), 256, 0, ctx.stream>>>(dst, ds, src, ss, rows, len, acc);
  LAUNCH_CHECK();
}

/* flatten, reshape: the same elements; dst == src with acc = 0 is in place. */
static void same_elements(float *dst, const float *src, int64_t n, int acc) {
  if (!dst || (dst == src && !acc)) return;
  RT_CHECK(dst != src, "an in-place shape op's gradient cannot accumulate into its own input");
  block_copy(dst, n, src, n, 1, n, acc);
}

void rt_cuda_flatten_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_cuda_flatten_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }
void rt_cuda_reshape_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_cuda_reshape_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }

/* out[a, q, m, p, z] (+)= in[a, p, m, q, z], out's element e per thread. */
static __global__ void transpose_kernel(float *out, const float *in, int64_t P, int64_t M, int64_t Q, int64_t Z,
                                        int64_t n, int acc) {
  GRID_STRIDE(e, n) {
    int64_t z = e % Z, r = e / Z;
    int64_t p = r % P;
    r /= P;
    int64_t m = r % M;
    r /= M;
    int64_t q = r % Q, a = r / Q;
    float v = in[(((a * P + p) * M + m) * Q + q) * Z + z];
    out[e] = acc ? out[e] + v : v;
  }
}

static void transpose(float *out, const float *in, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z, int acc) {
  need_ctx();
  int64_t n = A * P * M * Q * Z;
  if (!out || n <= 0) return;
  transpose_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, in, P, M, Q, Z, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_transpose_forward(float *out, const float *x, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z) {
  transpose(out, x, A, P, M, Q, Z, 0);
}

void rt_cuda_transpose_backward(float *dx, const float *dout, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z,
                                int acc) {
  transpose(dx, dout, A, Q, M, P, Z, acc); // dout is [A, Q, M, P, Z]
}

void rt_cuda_concat_forward(float *out, const float *a0, const float *a1, const float *a2, const float *a3,
                            const float *a4, const float *a5, int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2,
                            int64_t n3, int64_t n4, int64_t n5) {
  const float *a[6] = {a0, a1, a2, a3, a4, a5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  for (int k = 0; k < 6; off += n[k++])
    if (a[k] && n[k]) block_copy(out + off * In, W * In, a[k], n[k] * In, O, n[k] * In, 0);
}

void rt_cuda_concat_backward(float *da0, float *da1, float *da2, float *da3, float *da4, float *da5, const float *dout,
                             int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4,
                             int64_t n5, int acc0, int acc1, int acc2, int acc3, int acc4, int acc5) {
  float *da[6] = {da0, da1, da2, da3, da4, da5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  int acc[6] = {acc0, acc1, acc2, acc3, acc4, acc5};
  for (int k = 0; k < 6; off += n[k++])
    if (da[k] && n[k]) block_copy(da[k], n[k] * In, dout + off * In, W * In, O, n[k] * In, acc[k]);
}

void rt_cuda_class_token_forward(float *out, const float *x, const float *W, int64_t B, int64_t N, int64_t C) {
  block_copy(out, (N + 1) * C, W, 0, B, C, 0);
  block_copy(out + C, (N + 1) * C, x, N * C, B, N * C, 0);
}

/* dW[j] (+)= sum_b dout[b * S + j], in batch order in double. */
static __global__ void class_token_dw_kernel(float *dW, const float *dout, int64_t B, int64_t C, int64_t S, int acc) {
  GRID_STRIDE(j, C) {
    double s = 0.0;
    for (int64_t b = 0; b < B; b++) s += dout[b * S + j];
    dW[j] = (float)(acc ? dW[j] + s : s);
  }
}

void rt_cuda_class_token_backward(float *dx, float *dW, const float *dout, int64_t B, int64_t N, int64_t C, int acc_dx,
                                  int acc_dW) {
  block_copy(dx, N * C, dout + C, (N + 1) * C, B, N * C, acc_dx);
  if (!dW || C <= 0) return;
  class_token_dw_kernel<<<grid_for(C, 256), 256, 0, ctx.stream>>>(dW, dout, B, C, (N + 1) * C, acc_dW);
  LAUNCH_CHECK();
}

void rt_cuda_select_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t index) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  block_copy(out, In, x + index * In, N * In, O, In, 0);
}

/* dx (acc = 0): dout's rows at index, 0 elsewhere. */
static __global__ void select_backward_kernel(float *dx, const float *dout, int64_t N, int64_t In, int64_t index,
                                              int64_t n) {
  GRID_STRIDE(e, n) {
    int64_t r = e / In;
    dx[e] = r % N == index ? dout[r / N * In + e % In] : 0.0f;
  }
}

void rt_cuda_select_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t index, int acc) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  need_ctx();
  if (!dx || O * N * In <= 0) return;
  if (acc) { // only the selected rows change
    block_copy(dx + index * In, N * In, dout, In, O, In, 1);
    return;
  }
  select_backward_kernel<<<grid_for(O * N * In, 256), 256, 0, ctx.stream>>>(dx, dout, N, In, index, O * N * In);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// losses: per-row kernels, then one block adds the rows in a fixed order (a
// deterministic mean without atomics)

#define LOSS_BLOCK 1024

/* lse[i] = log(sum(exp(logits[i, :]))), max subtracted; a block per row
 * (vocabularies are long), rows strided over the grid. */
static __global__ void cross_entropy_lse_kernel(float *lse, const float *logits, int64_t N, int V) {
  __shared__ float shf[32];
  __shared__ double shd[32];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const float *li = logits + i * V;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, li[j]);
    mx = block_max_f(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(li[j] - mx);
    s = block_sum_d(s, shd);
    if (threadIdx.x == 0) lse[i] = mx + (float)log(s);
  }
}

/* loss[0] = mean over rows of lse_i - logits[i, target_i]. */
static __global__ void cross_entropy_mean_kernel(float *loss, const float *lse, const float *logits,
                                                 const int32_t *targets, int64_t N, int V) {
  __shared__ double sh[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += (double)lse[i] - logits[i * V + targets[i]];
  s = block_sum_d(s, sh);
  if (threadIdx.x == 0) loss[0] = (float)(s / (double)N);
}

/* Each element reads only its own logit and the row's saved lse, so
 * dlogits may be logits (acc = 0). */
static __global__ void cross_entropy_backward_kernel(float *dlogits, const float *logits, const int32_t *targets,
                                                     const float *lse, int64_t N, int V, float k, int acc) {
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const float *li = logits + i * V;
    float *di = dlogits + i * V;
    float l = lse[i];
    int y = targets[i];
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      float g = k * (expf(li[j] - l) - (j == y ? 1.0f : 0.0f));
      di[j] = acc ? di[j] + g : g;
    }
  }
}

/* Threads per row-block: 256, or fewer (a multiple of 32) for short rows. */
static int row_threads(int V) {
  int t = (V + 31) / 32 * 32;
  return t < 256 ? (t > 0 ? t : 32) : 256;
}

static unsigned row_grid(int64_t N) {
  int64_t cap = (int64_t)ctx.num_sms * 32;
  return (unsigned)(N < cap ? N : cap);
}

void rt_cuda_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                                   int64_t V) {
  need_ctx();
  int v = dim_int(V);
  RT_CHECK(N > 0, "cross-entropy of no rows");
  float *rows = lse;
  if (!rows) { // eval: the row values go to the workspace (stream-ordered, free here)
    RT_CHECK((size_t)N * sizeof(float) <= ctx.workspace_bytes,
             "cross-entropy with lse = NULL needs 4 N bytes of workspace");
    rows = (float *)ctx.workspace;
  }
  cross_entropy_lse_kernel<<<row_grid(N), row_threads(v), 0, ctx.stream>>>(rows, logits, N, v);
  LAUNCH_CHECK();
  cross_entropy_mean_kernel<<<1, LOSS_BLOCK, 0, ctx.stream>>>(loss, rows, logits, targets, N, v);
  LAUNCH_CHECK();
}

void rt_cuda_cross_entropy_backward(float *dlogits, const float *logits, const int32_t *targets, const float *lse,
                                    int64_t N, int64_t V, float scale, int acc) {
  need_ctx();
  int v = dim_int(V);
  if (N <= 0 || !dlogits) return;
  float k = (float)((double)scale / (double)N);
  cross_entropy_backward_kernel<<<row_grid(N), row_threads(v), 0, ctx.stream>>>(dlogits, logits, targets, lse, N, v, k,
                                                                                acc);
  LAUNCH_CHECK();
}

// linear_cross_entropy: R rows at a time, the chunk's logits in scratch (the
// memplan_kernels.h contract); the rows' loss terms after them, added in a
// fixed order at the end.

/* Per row of a chunk: term[i] = lse - z[i, y]; in training, z becomes
 * k (softmax - onehot), as cross_entropy's backward computes it. z[i, y] is
 * read before the block's reductions, whose barriers order it before any
 * write. */
static __global__ void lce_rows_kernel(float *z, float *term, const int32_t *targets, int64_t n, int V, float k,
                                       int train) {
  __shared__ float shf[32];
  __shared__ double shd[32];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    float *zi = z + i * V;
    int y = targets[i];
    float zy = zi[y];
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, zi[j]);
    mx = block_max_f(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(zi[j] - mx);
    s = block_sum_d(s, shd);
    float l = mx + (float)log(s);
    if (threadIdx.x == 0) term[i] = l - zy;
    if (train)
      for (int j = threadIdx.x; j < V; j += blockDim.x) zi[j] = k * (expf(zi[j] - l) - (j == y ? 1.0f : 0.0f));
  }
}

/* loss[0] = the mean of term[0..N), one block, in a fixed order. */
static __global__ void lce_mean_kernel(float *loss, const float *term, int64_t N) {
  __shared__ double sh[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += term[i];
  s = block_sum_d(s, sh);
  if (threadIdx.x == 0) loss[0] = (float)(s / (double)N);
}

void rt_cuda_linear_cross_entropy_forward(float *loss, float *dx, float *dW, float *db, const float *x, const float *W,
                                          const float *b, const int32_t *targets, float *scratch, int64_t N, int64_t V,
                                          int64_t K, int64_t R) {
  need_ctx();
  RT_CHECK(scratch && N >= 1 && R >= 1, "linear_cross_entropy needs rows, a chunk and its scratch");
  int v = dim_int(V);
  float *term = scratch + R * V;
  int train = dx || dW || (db && b);
  float k = (float)(1.0 / (double)N);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t n = N - r0 < R ? N - r0 : R;
    const float *xc = x + r0 * K;
    rt_cuda_linear_forward(scratch, xc, W, b, n, K, V);
    lce_rows_kernel<<<row_grid(n), row_threads(v), 0, ctx.stream>>>(scratch, term + r0, targets + r0, n, v, k, train);
    LAUNCH_CHECK();
    if (dx) gemm(0, 0, n, K, V, scratch, W, dx + r0 * K, 0, 1, 0, 0, 0); // [n,V] @ [V,K]
    if (dW) gemm(1, 0, V, K, n, scratch, xc, dW, r0 > 0, 1, 0, 0, 0);    // [n,V]^T @ [n,K]
    if (db && b) colsum(db, scratch, n, V, r0 > 0);
  }
  if (!loss) return; /* the deferred head gradient's recompute (planner/headgrad.h): dW only */
  lce_mean_kernel<<<1, LOSS_BLOCK, 0, ctx.stream>>>(loss, term, N);
  LAUNCH_CHECK();
}

/* out (+)= k in, element-wise: out may be in (acc = 0). */
static __global__ void lce_scale_kernel(float *out, const float *in, int64_t n, float k, int acc) {
  GRID_STRIDE(e, n) {
    float g = k * in[e];
    out[e] = acc ? out[e] + g : g;
  }
}

static void lce_scale(float *out, const float *in, int64_t n, float k, int acc) {
  if (!out || n <= 0) return;
  lce_scale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, in, n, k, acc);
  LAUNCH_CHECK();
}

void rt_cuda_linear_cross_entropy_backward(float *dx, float *dW, float *db, const float *sdx, const float *sdW,
                                           const float *sdb, float *scratch, int64_t N, int64_t V, int64_t K, int64_t R,
                                           float scale, int acc_dx, int acc_dW, int acc_db) {
  (void)scratch, (void)R;
  need_ctx();
  lce_scale(dx, sdx, N * K, scale, acc_dx);
  lce_scale(dW, sdW, V * K, scale, acc_dW);
  lce_scale(db, sdb, V, scale, acc_db);
}

/* One block: n is an output's size, small next to the products before it. */
static __global__ void mse_forward_kernel(float *loss, const float *pred, const float *target, int64_t n) {
  __shared__ double sh[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double d = (double)pred[i] - target[i];
    s += d * d;
  }
  s = block_sum_d(s, sh);
  if (threadIdx.x == 0) loss[0] = (float)(s / (double)n);
}

static __global__ void mse_backward_kernel(float *dpred, const float *pred, const float *target, int64_t n, float k,
                                           int acc) {
  GRID_STRIDE(i, n) {
    float g = k * (pred[i] - target[i]);
    dpred[i] = acc ? dpred[i] + g : g;
  }
}

void rt_cuda_mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
  need_ctx();
  RT_CHECK(n > 0, "mse of no elements");
  mse_forward_kernel<<<1, LOSS_BLOCK, 0, ctx.stream>>>(loss, pred, target, n);
  LAUNCH_CHECK();
}

void rt_cuda_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float scale, int acc) {
  need_ctx();
  if (n <= 0 || !dpred) return;
  float k = (float)(2.0 * scale / (double)n);
  mse_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dpred, pred, target, n, k, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// conv2d: cpu.c's method, one sample at a time: a kernel writes the sample's
// im2col matrix col[C k k, Ho Wo] into the plan's scratch, and each group is
// one product of a strided batch over the groups (cuBLAS). dx goes through
// the same scratch and col2im, a gather (each input pixel sums the column
// entries that read it, in a fixed order: no atomics). The bias gradient is
// one block per channel, summed in double.

struct ConvDims {
  int64_t C, H, W, Ho, Wo, k, s, p, d;
};

static __global__ void im2col_kernel(float *col, const float *x, ConvDims c) {
  int64_t P = c.Ho * c.Wo, n = c.C * c.k * c.k * P;
  GRID_STRIDE(i, n) {
    int64_t r = i / P, q = i % P, ch = r / (c.k * c.k), ki = r / c.k % c.k, kj = r % c.k;
    int64_t ih = q / c.Wo * c.s - c.p + ki * c.d, iw = q % c.Wo * c.s - c.p + kj * c.d;
    col[i] = ih >= 0 && ih < c.H && iw >= 0 && iw < c.W ? x[(ch * c.H + ih) * c.W + iw] : 0.0f;
  }
}

/* img[ch, ih, iw] (+)= the entries of col that tap (ki, kj) took from it */
static __global__ void col2im_kernel(float *img, const float *col, ConvDims c, int acc) {
  int64_t P = c.Ho * c.Wo, n = c.C * c.H * c.W;
  GRID_STRIDE(i, n) {
    int64_t ch = i / (c.H * c.W), ih = i / c.W % c.H, iw = i % c.W;
    float s = 0.0f;
    for (int64_t ki = 0; ki < c.k; ki++) {
      int64_t th = ih + c.p - ki * c.d; // = oh * stride
      if (th < 0 || th % c.s || th / c.s >= c.Ho) continue;
      for (int64_t kj = 0; kj < c.k; kj++) {
        int64_t tw = iw + c.p - kj * c.d;
        if (tw < 0 || tw % c.s || tw / c.s >= c.Wo) continue;
        s += col[((ch * c.k + ki) * c.k + kj) * P + th / c.s * c.Wo + tw / c.s];
      }
    }
    img[i] = acc ? img[i] + s : s;
  }
}

/* out[n, o, :] = b[o] for the whole batch; the products add onto it */
static __global__ void conv_bias_kernel(float *out, const float *b, int64_t n, int64_t O, int64_t P) {
  GRID_STRIDE(i, n) out[i] = b[i / P % O];
}

/* db[o] (+)= sum over samples and positions of dout[n, o, :]: one block per o */
static __global__ void conv_db_kernel(float *db, const float *dout, int64_t N, int64_t O, int64_t P, int acc) {
  __shared__ double sh[32];
  int64_t o = blockIdx.x;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < N * P; i += blockDim.x) s += dout[(i / P * O + o) * P + i % P];
  s = block_sum_d(s, sh);
  if (threadIdx.x == 0) db[o] = (float)(acc ? db[o] + s : s);
}

static void conv_im2col(float *col, const float *x, const ConvDims &c) {
  im2col_kernel<<<grid_for(c.C * c.k * c.k * c.Ho * c.Wo, 256), 256, 0, ctx.stream>>>(col, x, c);
  LAUNCH_CHECK();
}

void rt_cuda_conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                            int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t k, int64_t s,
                            int64_t p, int64_t d, int64_t G) {
  need_ctx();
  int64_t P = Ho * Wo, Og = O / G, K = C / G * k * k;
  int direct = k == 1 && s == 1 && p == 0;
  RT_CHECK(direct || scratch, "conv2d: no scratch buffer for an im2col");
  ConvDims c = {C, H, Wd, Ho, Wo, k, s, p, d};
  if (b && N * O * P > 0) {
    conv_bias_kernel<<<grid_for(N * O * P, 256), 256, 0, ctx.stream>>>(out, b, N * O * P, O, P);
    LAUNCH_CHECK();
  }
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x + n * C * H * Wd;
    if (!direct) conv_im2col(scratch, xs, c);
    gemm(0, 0, Og, P, K, W, direct ? xs : scratch, out + n * O * P, b != NULL, G, Og * K, K * P, Og * P);
  }
}

void rt_cuda_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                             float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho,
                             int64_t Wo, int64_t k, int64_t s, int64_t p, int64_t d, int64_t G, int acc_dx, int acc_dW,
                             int acc_db) {
  need_ctx();
  int64_t P = Ho * Wo, Og = O / G, K = C / G * k * k;
  int direct = k == 1 && s == 1 && p == 0;
  RT_CHECK(direct || scratch || (!dx && !dW), "conv2d: no scratch buffer for an im2col");
  ConvDims c = {C, H, Wd, Ho, Wo, k, s, p, d};
  if (db && O > 0) {
    conv_db_kernel<<<(unsigned)O, LOSS_BLOCK, 0, ctx.stream>>>(db, dout, N, O, P, acc_db);
    LAUNCH_CHECK();
  }
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x + n * C * H * Wd, *ds = dout + n * O * P;
    float *dxs = dx ? dx + n * C * H * Wd : NULL;
    if (dW) { // dW_g (+)= dout_g [Og, P] @ col_g^T [P, K], summed over the samples
      if (!direct) conv_im2col(scratch, xs, c);
      gemm(0, 1, Og, K, P, ds, direct ? xs : scratch, dW, acc_dW || n > 0, G, Og * P, K * P, Og * K);
    }
    if (!dx) continue;
    // dx_g (+)= W_g^T [K, Og] @ dout_g [Og, P], through the columns unless 1x1
    gemm(1, 0, K, P, Og, W, ds, direct ? dxs : scratch, direct ? acc_dx : 0, G, Og * K, Og * P, K * P);
    if (direct) continue;
    col2im_kernel<<<grid_for(C * H * Wd, 256), 256, 0, ctx.stream>>>(dxs, scratch, c, acc_dx);
    LAUNCH_CHECK();
  }
}

// ----------------------------------------------------------------------------
// batchnorm2d: one block per channel, its threads striding the channel's
// M = N*S values (element i at (i / S * C + c) * S + i % S); double sums,
// reduced in a fixed order (block_sum_d)

#define BN_THREADS 256

static __device__ int64_t bn_at(int64_t i, int c, int C, int64_t S) { return (i / S * C + c) * S + i % S; }

/* cpu.c's arithmetic: double mean and two-pass variance, rstd = 1 / sqrt(var + eps)
 * in double, the running statistics updated in double (RT_MODE_TRAIN only). */
static __global__ void batchnorm_forward_kernel(float *out, float *mean, float *rstd, const float *x, const float *w,
                                                const float *b, float *rmean, float *rvar, int64_t N, int C, int64_t S,
                                                float eps, float momentum, int mode) {
  __shared__ double sh[32];
  int c = blockIdx.x;
  int64_t M = N * S;
  float m, r;
  if (mode == RT_MODE_EVAL) {
    m = rmean[c];
    r = (float)(1.0 / sqrt((double)rvar[c] + (double)eps));
  } else {
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) s += x[bn_at(i, c, C, S)];
    double md = block_sum_d(s, sh) / (double)M, v = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      double d = (double)x[bn_at(i, c, C, S)] - md;
      v += d * d;
    }
    v = block_sum_d(v, sh) / (double)M;
    m = (float)md;
    r = (float)(1.0 / sqrt(v + (double)eps));
    if (threadIdx.x == 0) {
      if (mean) mean[c] = m;
      if (rstd) rstd[c] = r;
      if (mode == RT_MODE_TRAIN) { // a recompute must not update them a second time
        double mom = momentum;
        rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * md);
        rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * v * (double)M / (double)(M - 1));
      }
    }
  }
  float wc = w[c], bc = b ? b[c] : 0.0f;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    int64_t k = bn_at(i, c, C, S);
    out[k] = __fadd_rn(__fmul_rn(__fmul_rn(x[k] - m, r), wc), bc);
  }
}

/* dw = sum dout xhat, db = sum dout, dx = w rstd (dout - db / M - xhat dw / M). */
static __global__ void batchnorm_backward_kernel(float *dx, float *dw, float *db, const float *dout, const float *x,
                                                 const float *w, const float *mean, const float *rstd, int64_t N, int C,
                                                 int64_t S, int acc_dx, int acc_dw, int acc_db) {
  __shared__ double sh[32];
  int c = blockIdx.x;
  int64_t M = N * S;
  float m = mean[c], r = rstd[c];
  double sg = 0.0, sgx = 0.0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    int64_t k = bn_at(i, c, C, S);
    sg += dout[k];
    sgx += dout[k] * ((x[k] - m) * r);
  }
  sg = block_sum_d(sg, sh);
  sgx = block_sum_d(sgx, sh);
  if (threadIdx.x == 0) {
    if (dw) dw[c] = (float)(acc_dw ? dw[c] + sgx : sgx);
    if (db) db[c] = (float)(acc_db ? db[c] + sg : sg);
  }
  if (!dx) return;
  float wr = w[c] * r, m1 = (float)(sg / (double)M), m2 = (float)(sgx / (double)M);
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    int64_t k = bn_at(i, c, C, S);
    float g = wr * (dout[k] - m1 - (x[k] - m) * r * m2);
    dx[k] = acc_dx ? dx[k] + g : g;
  }
}

void rt_cuda_batchnorm2d_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                                 float *running_mean, float *running_var, int64_t N, int64_t C, int64_t S, float eps,
                                 float momentum, int mode, uint64_t key) {
  (void)key;
  need_ctx();
  if (C <= 0 || N * S <= 0) return;
  batchnorm_forward_kernel<<<(unsigned)dim_int(C), BN_THREADS, 0, ctx.stream>>>(
      out, mean, rstd, x, w, b, running_mean, running_var, N, dim_int(C), S, eps, momentum, mode);
  LAUNCH_CHECK();
}

void rt_cuda_batchnorm2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                                  const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, float eps,
                                  float momentum, int mode, uint64_t key, int acc_dx, int acc_dw, int acc_db) {
  (void)eps, (void)momentum, (void)mode, (void)key; /* batch statistics, saved */
  need_ctx();
  if (C <= 0 || N * S <= 0 || (!dx && !dw && !db)) return;
  batchnorm_backward_kernel<<<(unsigned)dim_int(C), BN_THREADS, 0, ctx.stream>>>(dx, dw, db, dout, x, w, mean, rstd, N,
                                                                                 dim_int(C), S, acc_dx, acc_dw, acc_db);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// pooling: one thread per output element forward; backward gathers, one thread
// per input element, the windows that hold it in row-major output order, so
// every sum runs in cpu.c's order (cpu.c scatters in that order) and results
// match it bit for bit. global_avgpool: one thread per plane, summed in double
// in order, as cpu.c.

struct PoolDims {
  int64_t H, W, Ho, Wo, k, s, p;
};

/* torch's first maximum of window (ho, wo) of plane x (cpu.c's pool_argmax) */
static __device__ int64_t pool_argmax_dev(const PoolDims &d, const float *x, int64_t ho, int64_t wo) {
  int64_t h0 = ho * d.s - d.p, w0 = wo * d.s - d.p;
  int64_t h1 = h0 + d.k < d.H ? h0 + d.k : d.H, w1 = w0 + d.k < d.W ? w0 + d.k : d.W;
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  int64_t best = h0 * d.W + w0;
  float mx = -INFINITY;
  for (int64_t h = h0; h < h1; h++)
    for (int64_t w = w0; w < w1; w++) {
      float v = x[h * d.W + w];
      if (v > mx || isnan(v)) {
        mx = v;
        best = h * d.W + w;
      }
    }
  return best;
}

static __global__ void maxpool_forward_kernel(float *out, const float *x, PoolDims d, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t pl = i / (d.Ho * d.Wo), r = i % (d.Ho * d.Wo);
    const float *xp = x + pl * d.H * d.W;
    out[i] = xp[pool_argmax_dev(d, xp, r / d.Wo, r % d.Wo)];
  }
}

static __global__ void avgpool_forward_kernel(float *out, const float *x, PoolDims d, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t pl = i / (d.Ho * d.Wo), r = i % (d.Ho * d.Wo);
    const float *xp = x + pl * d.H * d.W;
    int64_t h0 = r / d.Wo * d.s - d.p, w0 = r % d.Wo * d.s - d.p;
    double sum = 0.0;
    for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + d.k && h < d.H; h++)
      for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + d.k && w < d.W; w++) sum += xp[h * d.W + w];
    out[i] = (float)(sum / (double)(d.k * d.k));
  }
}

/* The outputs whose windows hold input row h: [*lo, *hi). */
static __device__ void pool_range(int64_t h, int64_t k, int64_t s, int64_t p, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t a = h + p - k + 1; /* ho s - p + k > h */
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  *hi = (h + p) / s + 1; /* ho s - p <= h */
  if (*hi > n) *hi = n;
}

static __global__ void pool_backward_kernel(float *dx, const float *dout, const float *x, PoolDims d, int64_t n,
                                            int is_max, int acc) {
  GRID_STRIDE(i, n) {
    int64_t pl = i / (d.H * d.W), r = i % (d.H * d.W), h = r / d.W, w = r % d.W;
    const float *g = dout + pl * d.Ho * d.Wo, *xp = is_max ? x + pl * d.H * d.W : NULL;
    float div = (float)(d.k * d.k), v = acc ? dx[i] : 0.0f;
    int64_t hlo, hhi, wlo, whi;
    pool_range(h, d.k, d.s, d.p, d.Ho, &hlo, &hhi);
    pool_range(w, d.k, d.s, d.p, d.Wo, &wlo, &whi);
    for (int64_t ho = hlo; ho < hhi; ho++)
      for (int64_t wo = wlo; wo < whi; wo++) {
        if (!is_max) v += g[ho * d.Wo + wo] / div;
        else if (pool_argmax_dev(d, xp, ho, wo) == r) v += g[ho * d.Wo + wo];
      }
    dx[i] = v;
  }
}

/* adaptive_avgpool2d: cpu.c's windows and order; backward gathers, per input element, the outputs whose
 * windows hold it: [floor(i out / n), ceil((i + 1) out / n)) of each dim */
static __device__ int64_t adaptive_lo_dev(int64_t o, int64_t n, int64_t out) { return o * n / out; }
static __device__ int64_t adaptive_hi_dev(int64_t o, int64_t n, int64_t out) { return ((o + 1) * n + out - 1) / out; }

static __global__ void adaptive_pool_forward_kernel(float *out, const float *x, PoolDims d, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t pl = i / (d.Ho * d.Wo), r = i % (d.Ho * d.Wo), ho = r / d.Wo, wo = r % d.Wo;
    const float *xp = x + pl * d.H * d.W;
    int64_t h0 = adaptive_lo_dev(ho, d.H, d.Ho), h1 = adaptive_hi_dev(ho, d.H, d.Ho);
    int64_t w0 = adaptive_lo_dev(wo, d.W, d.Wo), w1 = adaptive_hi_dev(wo, d.W, d.Wo);
    double sum = 0.0;
    for (int64_t h = h0; h < h1; h++)
      for (int64_t w = w0; w < w1; w++) sum += xp[h * d.W + w];
    out[i] = (float)(sum / (double)((h1 - h0) * (w1 - w0)));
  }
}

static __global__ void adaptive_pool_backward_kernel(float *dx, const float *dout, PoolDims d, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    int64_t pl = i / (d.H * d.W), r = i % (d.H * d.W), h = r / d.W, w = r % d.W;
    const float *g = dout + pl * d.Ho * d.Wo;
    float v = acc ? dx[i] : 0.0f;
    int64_t hlo = adaptive_lo_dev(h, d.Ho, d.H), hhi = adaptive_hi_dev(h, d.Ho, d.H);
    int64_t wlo = adaptive_lo_dev(w, d.Wo, d.W), whi = adaptive_hi_dev(w, d.Wo, d.W);
    for (int64_t ho = hlo; ho < hhi; ho++)
      for (int64_t wo = wlo; wo < whi; wo++) {
        int64_t area = (adaptive_hi_dev(ho, d.H, d.Ho) - adaptive_lo_dev(ho, d.H, d.Ho)) *
                       (adaptive_hi_dev(wo, d.W, d.Wo) - adaptive_lo_dev(wo, d.W, d.Wo));
        v += g[ho * d.Wo + wo] / (float)area;
      }
    dx[i] = v;
  }
}

static __global__ void gap_forward_kernel(float *out, const float *x, int64_t NC, int64_t HW) {
  GRID_STRIDE(pl, NC) {
    double sum = 0.0;
    for (int64_t i = 0; i < HW; i++) sum += x[pl * HW + i];
    out[pl] = (float)(sum / (double)HW);
  }
}

static __global__ void gap_backward_kernel(float *dx, const float *dout, int64_t NC, int64_t HW, int acc) {
  float div = (float)HW;
  GRID_STRIDE(i, NC * HW) {
    float g = dout[i / HW] / div;
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_cuda_maxpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                               int64_t Wo, int64_t k, int64_t s, int64_t p) {
  need_ctx();
  int64_t n = N * C * Ho * Wo;
  if (n <= 0) return;
  maxpool_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, PoolDims{H, W, Ho, Wo, k, s, p}, n);
  LAUNCH_CHECK();
}

void rt_cuda_maxpool2d_backward(float *dx, const float *dout, const float *x, int64_t N, int64_t C, int64_t H,
                                int64_t W, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  need_ctx();
  int64_t n = N * C * H * W;
  if (n <= 0 || !dx) return;
  pool_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, PoolDims{H, W, Ho, Wo, k, s, p}, n, 1,
                                                                 acc);
  LAUNCH_CHECK();
}

void rt_cuda_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                               int64_t Wo, int64_t k, int64_t s, int64_t p) {
  need_ctx();
  int64_t n = N * C * Ho * Wo;
  if (n <= 0) return;
  avgpool_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, PoolDims{H, W, Ho, Wo, k, s, p}, n);
  LAUNCH_CHECK();
}

void rt_cuda_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                                int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  need_ctx();
  int64_t n = N * C * H * W;
  if (n <= 0 || !dx) return;
  pool_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, NULL, PoolDims{H, W, Ho, Wo, k, s, p}, n, 0,
                                                                 acc);
  LAUNCH_CHECK();
}

void rt_cuda_adaptive_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W,
                                        int64_t Ho, int64_t Wo) {
  need_ctx();
  int64_t n = N * C * Ho * Wo;
  if (n <= 0) return;
  adaptive_pool_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, PoolDims{H, W, Ho, Wo, 0, 0, 0}, n);
  LAUNCH_CHECK();
}

void rt_cuda_adaptive_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W,
                                         int64_t Ho, int64_t Wo, int acc) {
  need_ctx();
  int64_t n = N * C * H * W;
  if (n <= 0 || !dx) return;
  adaptive_pool_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, PoolDims{H, W, Ho, Wo, 0, 0, 0}, n,
                                                                          acc);
  LAUNCH_CHECK();
}

void rt_cuda_global_avgpool_forward(float *out, const float *x, int64_t NC, int64_t HW) {
  need_ctx();
  if (NC <= 0) return;
  gap_forward_kernel<<<grid_for(NC, 128), 128, 0, ctx.stream>>>(out, x, NC, HW);
  LAUNCH_CHECK();
}

void rt_cuda_global_avgpool_backward(float *dx, const float *dout, int64_t NC, int64_t HW, int acc) {
  need_ctx();
  if (NC * HW <= 0 || !dx) return;
  gap_backward_kernel<<<grid_for(NC * HW, 256), 256, 0, ctx.stream>>>(dx, dout, NC, HW, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// dropout: cpu.c's hash and arithmetic (one thread per 32-element word); the
// key is a kernel argument, so a CUDA graph, which replays the arguments of
// its capture, would repeat one step's masks forever: capturing dropout is
// refused (train without --cuda-graph)

static __device__ uint64_t mix64_dev(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static __global__ void dropout_kernel(float *out, int32_t *mask, const float *x, const int32_t *cmask, int64_t n,
                                      float scale, uint32_t th, uint64_t key, int backward, int acc) {
  GRID_STRIDE(wd, (n + 31) / 32) {
    int64_t end = wd * 32 + 32 < n ? wd * 32 + 32 : n;
    uint32_t bits = cmask ? (uint32_t)cmask[wd] : 0u;
    for (int64_t i = wd * 32; i < end; i++) {
      int kept = cmask ? (int)(bits >> (i & 31) & 1u) : (mix64_dev(key ^ (uint64_t)i) >> 40) >= th;
      if (!cmask) bits |= (uint32_t)kept << (i & 31);
      float g = __fmul_rn(x[i], kept ? scale : 0.0f);
      out[i] = backward && acc ? __fadd_rn(out[i], g) : g;
    }
    if (mask) mask[wd] = (int32_t)bits;
  }
}

static void dropout_launch(float *out, int32_t *mask, const float *x, const int32_t *cmask, int64_t n, float p,
                           int mode, uint64_t key, int backward, int acc) {
  need_ctx();
  RT_CHECK(!ctx.capturing,
           "dropout's random key changes every step and a CUDA graph would replay the captured "
           "one: train this model without --cuda-graph");
  if (n <= 0 || !out) return;
  (void)mode;
  float scale = (float)(1.0 / (1.0 - (double)p));
  uint32_t th = (uint32_t)ceil((double)p * 16777216.0);
  dropout_kernel<<<grid_for((n + 31) / 32, 128), 128, 0, ctx.stream>>>(out, mask, x, cmask, n, scale, th, key, backward,
                                                                       acc);
  LAUNCH_CHECK();
}

void rt_cuda_dropout_forward(float *out, int32_t *mask, const float *x, int64_t n, float p, int mode, uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    need_ctx();
    if (out != x && n > 0)
      CUDA_CHECK(cudaMemcpyAsync(out, x, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  dropout_launch(out, mask, x, NULL, n, p, mode, key, 0, 0);
}

void rt_cuda_dropout_backward(float *dx, const float *dout, const int32_t *mask, int64_t n, float p, int mode,
                              uint64_t key, int acc) {
  dropout_launch(dx, NULL, dout, mask, n, p, mode, key, 1, acc);
}

// stochastic_depth: dropout's hash of (key, row), one draw per row (row 0's for the batch); refused under a
// CUDA graph as dropout is

static __global__ void sd_kernel(float *out, const float *x, int64_t S, int64_t batch, float scale, uint32_t th,
                                 uint64_t key, int acc, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t r = batch ? 0 : i / S;
    float g = __fmul_rn(x[i], (mix64_dev(key ^ (uint64_t)r) >> 40) >= th ? scale : 0.0f);
    out[i] = acc ? __fadd_rn(out[i], g) : g;
  }
}

static void sd_launch(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p, uint64_t key, int acc) {
  need_ctx();
  RT_CHECK(!ctx.capturing,
           "stochastic_depth's random key changes every step and a CUDA graph would replay the captured "
           "one: train this model without --cuda-graph");
  int64_t n = N * S;
  if (n <= 0 || !out) return;
  float scale = (float)(1.0 / (1.0 - (double)p));
  uint32_t th = (uint32_t)ceil((double)p * 16777216.0);
  sd_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, S, batch, scale, th, key, acc, n);
  LAUNCH_CHECK();
}

void rt_cuda_stochastic_depth_forward(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p,
                                      int mode, uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    need_ctx();
    if (out != x && N * S > 0)
      CUDA_CHECK(cudaMemcpyAsync(out, x, sizeof(float) * (size_t)(N * S), cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  sd_launch(out, x, N, S, batch, p, key, 0);
}

void rt_cuda_stochastic_depth_backward(float *dx, const float *dout, int64_t N, int64_t S, int64_t batch, float p,
                                       int mode, uint64_t key, int acc) {
  (void)mode;
  sd_launch(dx, dout, N, S, batch, p, key, acc);
}

// ----------------------------------------------------------------------------
// optimizers: cpu.c's float operations in cpu.c's order, the scalars rounded
// on the host exactly as cpu.c rounds them. The _rn intrinsics forbid nvcc's
// multiply-add contraction, so each step rounds as on the CPU and the
// parameters match cpu.c bit for bit.

/* step and bc2_sqrt for the step being replayed by a CUDA graph. */
static __device__ float rt_adam_scalars[2];

static __global__ void adam_scalars_kernel(float step, float bc2_sqrt) {
  rt_adam_scalars[0] = step, rt_adam_scalars[1] = bc2_sqrt;
}

static __global__ void adamw_kernel(float *p, const float *g, float *m, float *v, int64_t n, float step, float bc2_sqrt,
                                    float decay, float eps, float b1, float b2, float a1, float a2, int from_graph) {
  if (from_graph) {
    step = rt_adam_scalars[0];
    bc2_sqrt = rt_adam_scalars[1];
  }
  GRID_STRIDE(i, n) {
    float gi = g[i];
    float mi = __fadd_rn(__fmul_rn(m[i], b1), __fmul_rn(a1, gi));
    float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(a2, __fmul_rn(gi, gi)));
    m[i] = mi;
    v[i] = vi;
    float pd = __fmul_rn(p[i], decay);
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
    p[i] = __fsub_rn(pd, __fdiv_rn(__fmul_rn(step, mi), denom));
  }
}

static __global__ void sgd_kernel(float *p, const float *g, float *buf, int64_t n, float lr, float mom, float wd,
                                  int nesterov) {
  GRID_STRIDE(i, n) {
    float d = __fadd_rn(g[i], __fmul_rn(wd, p[i]));
    if (mom != 0.0f) {
      float bi = __fadd_rn(__fmul_rn(mom, buf[i]), d);
      buf[i] = bi;
      d = nesterov ? __fadd_rn(d, __fmul_rn(mom, bi)) : bi;
    }
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
  }
}

void rt_cuda_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t) {
  need_ctx();
  if (n <= 0) return;
  if (ctx.capturing) { // the scalars depending on t come from rt_cuda_graph_launch
    RT_CHECK(!ctx.graph_adamw || (ctx.lr == lr && ctx.beta1 == beta1 && ctx.beta2 == beta2),
             "a captured step's AdamW updates must share lr and betas");
    ctx.graph_adamw = 1, ctx.lr = lr, ctx.beta1 = beta1, ctx.beta2 = beta2;
  }
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float decay = (float)(1.0 - lr * wd);
  adamw_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(p, g, m, v, n, step, bc2_sqrt, decay, (float)eps, (float)beta1,
                                                         (float)beta2, (float)(1.0 - beta1), (float)(1.0 - beta2),
                                                         ctx.capturing);
  LAUNCH_CHECK();
}

void rt_cuda_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                        int nesterov) {
  need_ctx();
  if (n <= 0) return;
  sgd_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(p, g, buf, n, (float)lr, (float)momentum, (float)wd, nesterov);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// storage precision: cpu.c's conversions bit for bit (nearest even, NaN kept,
// fp16 subnormals kept, overflow to inf)

static __device__ uint16_t to_bf16(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); // quiet NaN
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static __device__ float from_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

static __device__ uint16_t to_f16(float f) {
  uint32_t x = __float_as_uint(f);
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
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

static __device__ float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) return __uint_as_float(__float_as_uint(__fmul_rn((float)mant, 0x1p-24f)) | sign);
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

static __global__ void f32_to_bf16_kernel(uint16_t *dst, const float *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = to_bf16(src[i]);
}
// rt_f32_to_bf16_sr (memplan_kernels.h): fp32 bits plus 16 random bits, the high half
static __global__ void f32_to_bf16_sr_kernel(uint16_t *dst, const float *src, int64_t n, uint64_t key) {
  GRID_STRIDE(i, n) {
    uint32_t x = __float_as_uint(src[i]);
    if ((x & 0x7fffffffu) >= 0x7f800000u) dst[i] = to_bf16(src[i]); // NaN, inf: as nearest
    else dst[i] = (uint16_t)((x + (uint32_t)(mix64_dev(key ^ (uint64_t)i) & 0xffffu)) >> 16);
  }
}
static __global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = from_bf16(src[i]);
}
static __global__ void f32_to_f16_kernel(uint16_t *dst, const float *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = to_f16(src[i]);
}
static __global__ void f16_to_f32_kernel(float *dst, const uint16_t *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = from_f16(src[i]);
}

#define CAST_LAUNCH(kernel, dst, src, n)                           \
  do {                                                             \
    need_ctx();                                                    \
    if ((n) <= 0) return;                                          \
    kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, n); \
    LAUNCH_CHECK();                                                \
  } while (0)

void rt_cuda_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) { CAST_LAUNCH(f32_to_bf16_kernel, dst, src, n); }
void rt_cuda_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) { CAST_LAUNCH(bf16_to_f32_kernel, dst, src, n); }
void rt_cuda_f32_to_f16(uint16_t *dst, const float *src, int64_t n) { CAST_LAUNCH(f32_to_f16_kernel, dst, src, n); }
void rt_cuda_f16_to_f32(float *dst, const uint16_t *src, int64_t n) { CAST_LAUNCH(f16_to_f32_kernel, dst, src, n); }
void rt_cuda_f32_to_bf16_sr(uint16_t *dst, const float *src, int64_t n, uint64_t key) {
  need_ctx();
  if (n <= 0) return;
  f32_to_bf16_sr_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, n, key);
  LAUNCH_CHECK();
}

// frozen weights (--base-weights): cpu.c's dequantization, the same float operations
static __global__ void i8_to_f32_kernel(float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols) {
  GRID_STRIDE(i, n) dst[i] = (float)src[i] * __fdiv_rn(absmax[i / cols], 127.0f);
}
static __constant__ float nf4_table[16] = RT_NF4_TABLE;
static __global__ void nf4_to_f32_kernel(float *dst, const uint8_t *src, const float *absmax, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = __fmul_rn(nf4_table[(src[i / 2] >> (i % 2 ? 0 : 4)) & 15], absmax[i / RT_NF4_BLOCK]);
}
void rt_cuda_i8_to_f32(float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols) {
  need_ctx();
  if (n <= 0) return;
  i8_to_f32_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, absmax, n, cols);
  LAUNCH_CHECK();
}
void rt_cuda_nf4_to_f32(float *dst, const uint8_t *src, const float *absmax, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  nf4_to_f32_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, absmax, n);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// optimizer state in bf16 and in 8 bits: cpu.c's float operations (adam_elem)
// in its order, so the CUDA and CPU trainers agree bit for bit

static __device__ __forceinline__ void adam_elem(float *p, float gi, float *m, float *v, float step, float bc2_sqrt,
                                                 float decay, float eps, float b1, float b2, float a1, float a2) {
  *m = __fadd_rn(__fmul_rn(*m, b1), __fmul_rn(a1, gi));
  *v = __fadd_rn(__fmul_rn(*v, b2), __fmul_rn(a2, __fmul_rn(gi, gi)));
  float pd = __fmul_rn(*p, decay);
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(*v), bc2_sqrt), eps);
  *p = __fsub_rn(pd, __fdiv_rn(__fmul_rn(step, *m), denom));
}

static __global__ void adamw_bf16_kernel(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, float step,
                                         float bc2_sqrt, float decay, float eps, float b1, float b2, float a1, float a2,
                                         int from_graph) {
  if (from_graph) {
    step = rt_adam_scalars[0];
    bc2_sqrt = rt_adam_scalars[1];
  }
  GRID_STRIDE(i, n) {
    float mi = from_bf16(m[i]), vi = from_bf16(v[i]), pi = p[i];
    adam_elem(&pi, g[i], &mi, &vi, step, bc2_sqrt, decay, eps, b1, b2, a1, a2);
    p[i] = pi;
    m[i] = to_bf16(mi);
    v[i] = to_bf16(vi);
  }
}

/* The nearest code of x in the increasing table q (ties to the lower), as cpu.c's qencode. */
static __device__ uint8_t qencode(const float *q, float x) {
  if (x <= q[0]) return 0;
  if (x >= q[255]) return 255;
  int lo = 0;
  for (int step = 128; step; step >>= 1) lo += q[lo + step] <= x ? step : 0;
  return (uint8_t)(__fsub_rn(x, q[lo]) <= __fsub_rn(q[lo + 1], x) ? lo : lo + 1);
}

/* One thread block per quantization block of RT_QBLOCK elements. */
static __global__ void adamw_8bit_kernel(float *p, const float *g, uint8_t *m, uint8_t *v, float *ms, float *vs,
                                         int64_t n, float step, float bc2_sqrt, float decay, float eps, float b1,
                                         float b2, float a1, float a2, int from_graph) {
  __shared__ float q[2][256];
  __shared__ float red[2][RT_QBLOCK / 32];
  if (from_graph) {
    step = rt_adam_scalars[0];
    bc2_sqrt = rt_adam_scalars[1];
  }
  int tid = threadIdx.x;
  q[0][tid] = rt_qmap(0, tid);
  q[1][tid] = rt_qmap(1, tid);
  __syncthreads();
  int64_t b = blockIdx.x, i = b * RT_QBLOCK + tid;
  float mi = 0.0f, vi = 0.0f;
  if (i < n) {
    float pi = p[i];
    mi = __fmul_rn(q[1][m[i]], ms[b]);
    vi = __fmul_rn(q[0][v[i]], vs[b]);
    adam_elem(&pi, g[i], &mi, &vi, step, bc2_sqrt, decay, eps, b1, b2, a1, a2);
    p[i] = pi;
  }
  float am = fabsf(mi), av = vi; // max is exact: any order gives cpu.c's result
  for (int o = 16; o > 0; o >>= 1) {
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, o));
    av = fmaxf(av, __shfl_xor_sync(0xffffffffu, av, o));
  }
  if (tid % 32 == 0) red[0][tid / 32] = am, red[1][tid / 32] = av;
  __syncthreads();
  am = red[0][0], av = red[1][0];
  for (int w = 1; w < RT_QBLOCK / 32; w++) am = fmaxf(am, red[0][w]), av = fmaxf(av, red[1][w]);
  if (i < n) {
    m[i] = am > 0.0f ? qencode(q[1], __fdiv_rn(mi, am)) : 127;
    uint8_t c = av > 0.0f ? qencode(q[0], __fdiv_rn(vi, av)) : 0;
    v[i] = c == 0 && vi > 0.0f ? 1 : c;
  }
  if (tid == 0) ms[b] = am, vs[b] = av;
}

/* The scalars of a low-precision AdamW launch; under capture, records the
 * step's lr and betas as rt_cuda_adamw_update does. */
static void adam_launch_scalars(double lr, double beta1, double beta2, double wd, int64_t t, float *step,
                                float *bc2_sqrt, float *decay) {
  if (ctx.capturing) {
    RT_CHECK(!ctx.graph_adamw || (ctx.lr == lr && ctx.beta1 == beta1 && ctx.beta2 == beta2),
             "a captured step's AdamW updates must share lr and betas");
    ctx.graph_adamw = 1, ctx.lr = lr, ctx.beta1 = beta1, ctx.beta2 = beta2;
  }
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  *step = (float)(lr / bc1), *bc2_sqrt = (float)sqrt(bc2), *decay = (float)(1.0 - lr * wd);
}

void rt_cuda_adamw_update_bf16(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, double lr, double beta1,
                               double beta2, double eps, double wd, int64_t t) {
  need_ctx();
  if (n <= 0) return;
  float step, bc2_sqrt, decay;
  adam_launch_scalars(lr, beta1, beta2, wd, t, &step, &bc2_sqrt, &decay);
  adamw_bf16_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(p, g, m, v, n, step, bc2_sqrt, decay, (float)eps,
                                                              (float)beta1, (float)beta2, (float)(1.0 - beta1),
                                                              (float)(1.0 - beta2), ctx.capturing);
  LAUNCH_CHECK();
}

void rt_cuda_adamw_update_8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *m_scale, float *v_scale,
                               int64_t n, double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  need_ctx();
  if (n <= 0) return;
  float step, bc2_sqrt, decay;
  adam_launch_scalars(lr, beta1, beta2, wd, t, &step, &bc2_sqrt, &decay);
  int64_t blocks = (n + RT_QBLOCK - 1) / RT_QBLOCK;
  RT_CHECK(blocks <= 0x7fffffff, "adamw_update_8bit: too many blocks");
  adamw_8bit_kernel<<<(unsigned)blocks, RT_QBLOCK, 0, ctx.stream>>>(
      p, g, m, v, m_scale, v_scale, n, step, bc2_sqrt, decay, (float)eps, (float)beta1, (float)beta2,
      (float)(1.0 - beta1), (float)(1.0 - beta2), ctx.capturing);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// loss scaling: every gradient unscaled on the stream, one flag for all of
// them, read once (one synchronization per step)

static __device__ int rt_nonfinite; // set by any thread that saw inf/nan (same value: no race)

static __global__ void unscale_kernel(float *g, int64_t n, float inv_scale) {
  int bad = 0;
  GRID_STRIDE(i, n) {
    float x = g[i];
    bad |= !isfinite(x);
    g[i] = __fmul_rn(x, inv_scale);
  }
  if (bad) rt_nonfinite = 1;
}

void rt_cuda_unscale_check(float *g, int64_t n, float inv_scale) {
  need_ctx();
  if (n <= 0) return;
  unscale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(g, n, inv_scale);
  LAUNCH_CHECK();
}

int rt_cuda_all_finite(void) {
  need_ctx();
  int bad = 0;
  static const int zero = 0;
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(&bad, rt_nonfinite, sizeof bad, 0, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaMemcpyToSymbolAsync(rt_nonfinite, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return !bad;
}

// ----------------------------------------------------------------------------
// gradient clipping: the squared global norm in double, deterministic (a
// fixed grid of SQNORM_BLOCKS blocks, each summing a fixed stride in a fixed
// tree; one thread then adds the partials in block order to the total)

enum { SQNORM_BLOCKS = 256, SQNORM_THREADS = 256 };
static __device__ double rt_sqnorm_part[SQNORM_BLOCKS];
static __device__ double rt_sqnorm_total;

static __global__ void sqnorm_part_kernel(const float *g, int64_t n) {
  __shared__ double s[SQNORM_THREADS];
  double acc = 0.0;
  GRID_STRIDE(i, n) {
    double x = (double)g[i];
    acc = __dadd_rn(acc, __dmul_rn(x, x));
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = SQNORM_THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) s[threadIdx.x] = __dadd_rn(s[threadIdx.x], s[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) rt_sqnorm_part[blockIdx.x] = s[0];
}

static __global__ void sqnorm_add_kernel(void) {
  double t = rt_sqnorm_total;
  for (int b = 0; b < SQNORM_BLOCKS; b++) t = __dadd_rn(t, rt_sqnorm_part[b]);
  rt_sqnorm_total = t;
}

void rt_cuda_grad_sqnorm(const float *g, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  sqnorm_part_kernel<<<SQNORM_BLOCKS, SQNORM_THREADS, 0, ctx.stream>>>(g, n);
  LAUNCH_CHECK();
  sqnorm_add_kernel<<<1, 1, 0, ctx.stream>>>();
  LAUNCH_CHECK();
}

double rt_cuda_grad_sqnorm_total(void) {
  need_ctx();
  double t = 0.0;
  static const double zero = 0.0;
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(&t, rt_sqnorm_total, sizeof t, 0, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaMemcpyToSymbolAsync(rt_sqnorm_total, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return t;
}

// ----------------------------------------------------------------------------
// CUDA graphs: one per context. Capture records every kernel and library call
// enqueued between begin and end (nothing runs); launch replays them. cuBLAS
// captures cleanly because its workspace is the plan's, set at init.

void rt_cuda_graph_begin(void) {
  need_ctx();
  RT_CHECK(!ctx.graph_exec && !ctx.capturing, "one CUDA graph per context");
  ctx.capturing = 1, ctx.graph_adamw = 0;
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
}

void rt_cuda_graph_end(void) {
  need_ctx();
  RT_CHECK(ctx.capturing, "rt_cuda_graph_end without rt_cuda_graph_begin");
  CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &ctx.graph));
  ctx.capturing = 0;
  CUDA_CHECK(cudaGraphInstantiate(&ctx.graph_exec, ctx.graph, 0));
  CUDA_CHECK(cudaGraphUpload(ctx.graph_exec, ctx.stream));
}

void rt_cuda_graph_launch(int64_t t) {
  need_ctx();
  RT_CHECK(ctx.graph_exec != NULL, "no captured CUDA graph");
  if (ctx.graph_adamw) { // as rt_cuda_adamw_update rounds them
    double bc1 = 1.0 - pow(ctx.beta1, (double)t), bc2 = 1.0 - pow(ctx.beta2, (double)t);
    adam_scalars_kernel<<<1, 1, 0, ctx.stream>>>((float)(ctx.lr / bc1), (float)sqrt(bc2));
    LAUNCH_CHECK();
  }
  CUDA_CHECK(cudaGraphLaunch(ctx.graph_exec, ctx.stream));
}
