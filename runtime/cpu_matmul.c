/* cpu_matmul.c: the CPU backend's matrix products (OpenBLAS, split over the pool): linear, matmul (cpu_internal.h). */
#include "cpu_internal.h"

/* BLAS takes int dimensions (LP64 OpenBLAS). */
static int blas_dim(int64_t d) {
  RT_CHECK(d >= 0 && d <= INT_MAX, "matrix dimension does not fit BLAS int");
  return (int)d;
}

/* C[m,n] (+)= op(A)[m,k] @ op(B)[k,n], row-major. ta: A is stored [k,m];
 * tb: B is stored [n,k]. beta = 0 never reads C (BLAS contract), so acc = 0
 * needs no memset. */
void gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
           float *C, int64_t ldc, int acc) {
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

void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C, int acc) {
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
