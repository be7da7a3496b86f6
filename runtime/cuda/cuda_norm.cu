/* cuda_norm.cu: the CUDA backend's normalization: layernorm, rmsnorm, softmax, batchnorm2d (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// layernorm, softmax: one warp per row, WARPS_PER_BLOCK rows per block

#define WARPS_PER_BLOCK 8

static unsigned row_blocks(int64_t rows) {
  int64_t g = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  RT_CHECK(g <= INT_MAX, "too many rows");
  return (unsigned)g;
}

/* cpu_norm.c's arithmetic (warp_row_stats); b NULL adds nothing. */
static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *x, const float *w,
                                                const float *b, int64_t N, int C, float eps) {
  int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *xr = x + row * C;
  float *o = out + row * C;
  float m, r;
  warp_row_stats(xr, C, eps, &m, &r);
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
