/* cuda_loss.cu: the CUDA backend's losses: cross-entropy, mse, linear_cross_entropy (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// losses: per-row kernels, then one block adds the rows in a fixed order (a
// deterministic mean without atomics)

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
    if (dx) cuda_gemm(0, 0, n, K, V, scratch, W, dx + r0 * K, 0, 1, 0, 0, 0); // [n,V] @ [V,K]
    if (dW) cuda_gemm(1, 0, V, K, n, scratch, xc, dW, r0 > 0, 1, 0, 0, 0);    // [n,V]^T @ [n,K]
    if (db && b) cuda_colsum(db, scratch, n, V, r0 > 0);
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
