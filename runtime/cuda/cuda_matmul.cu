/* cuda_matmul.cu: the CUDA backend's matrix products (cuBLAS, cuBLASLt): linear, matmul (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// matrix products (cuBLAS, cuBLASLt)

static cublasComputeType_t compute_type(void) { return ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; }

/* C[m,n] (+)= op(A)[m,k] @ op(B)[k,n], row-major, for `batch` matrices
 * `sA`, `sB`, `sC` floats apart. ta: A is stored [k,m]; tb: B is stored
 * [n,k] (as cpu.c's gemm). Row-major C is column-major C^T = op(B)^T op(A)^T,
 * so cuBLAS gets B first, with the same flags and leading dimensions.
 * beta = 0 never reads C, so acc = 0 needs no memset and ignores NaN there. */
void cuda_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C, int acc,
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

void cuda_colsum(float *out, const float *in, int64_t M, int64_t N, int acc) {
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
  cuda_gemm(0, 1, M, N, K, x, W, out, b != NULL, 1, 0, 0, 0);
}

void rt_cuda_linear_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                             int64_t M, int64_t K, int64_t N, int acc_dx, int acc_dW, int acc_db) {
  need_ctx();
  if (dx) cuda_gemm(0, 0, M, K, N, dout, W, dx, acc_dx, 1, 0, 0, 0); // [M,N] @ [N,K]
  if (dW) cuda_gemm(1, 0, N, K, M, dout, x, dW, acc_dW, 1, 0, 0, 0); // [M,N]^T @ [M,K]
  if (db) cuda_colsum(db, dout, M, N, acc_db);
}

void rt_cuda_matmul_forward(float *out, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N) {
  cuda_gemm(0, 0, M, N, K, a, b, out, 0, Bt, M * K, K * N, M * N);
}

void rt_cuda_matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t Bt,
                             int64_t M, int64_t K, int64_t N, int acc_da, int acc_db) {
  if (da) cuda_gemm(0, 1, M, K, N, dout, b, da, acc_da, Bt, M * N, K * N, M * K);
  if (db) cuda_gemm(1, 0, K, N, M, a, dout, db, acc_db, Bt, M * K, M * N, K * N);
}
