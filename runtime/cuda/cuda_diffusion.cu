/* cuda_diffusion.cu: the CUDA backend's diffusion ops: groupnorm, add_channels, upsample, timestep_embedding
 * and ddpm_noise (cuda_internal.cuh), cpu_diffusion.c's arithmetic: one warp per group for groupnorm, one thread
 * per output element (double sums) elsewhere. conv_transpose2d runs conv2d's products (cuda_conv.cu). */
#include "cuda_internal.cuh"

static void launch_check_size(int64_t n) { RT_CHECK(n >= 0, "negative size"); }
#define BLOCK 256

// ----------------------------------------------------------------------------
// groupnorm: one warp per group (n, g), the group a contiguous block of m = C/G S values

static __global__ void groupnorm_fwd_kernel(float *out, float *mean, float *rstd, const float *x, const float *w,
                                            const float *b, int64_t NG, int64_t G, int64_t Cg, int64_t S, float eps) {
  int64_t ng = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (ng >= NG) return;
  int64_t m = Cg * S;
  const float *xg = x + ng * m;
  float *og = out + ng * m;
  float mu, r;
  warp_row_stats(xg, m, eps, &mu, &r);
  for (int64_t j = lane; j < m; j += 32) {
    int64_t c = ng % G * Cg + j / S;
    og[j] = (xg[j] - mu) * r * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
  }
  if (lane == 0) {
    if (mean) mean[ng] = mu;
    if (rstd) rstd[ng] = r;
  }
}

void rt_cuda_groupnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                               int64_t N, int64_t C, int64_t S, int64_t G, float eps) {
  need_ctx();
  launch_check_size(N * C * S);
  if (N * G == 0) return;
  groupnorm_fwd_kernel<<<grid_for(N * G * 32, BLOCK), BLOCK, 0, ctx.stream>>>(out, mean, rstd, x, w, b, N * G, G, C / G,
                                                                              S, eps);
  LAUNCH_CHECK();
}

static __global__ void groupnorm_dx_kernel(float *dx, const float *dout, const float *x, const float *w,
                                           const float *mean, const float *rstd, int64_t NG, int64_t G, int64_t Cg,
                                           int64_t S, int acc) {
  int64_t ng = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (ng >= NG) return;
  int64_t m = Cg * S;
  const float *xg = x + ng * m, *gg = dout + ng * m;
  float *dg = dx + ng * m, mu = mean[ng], r = rstd[ng];
  double s1 = 0.0, s2 = 0.0;
  for (int64_t j = lane; j < m; j += 32) {
    float wg = (w ? w[ng % G * Cg + j / S] : 1.0f) * gg[j];
    s1 += wg;
    s2 += wg * ((xg[j] - mu) * r);
  }
  float m1 = (float)(warp_sum_d(s1) / (double)m), m2 = (float)(warp_sum_d(s2) / (double)m);
  for (int64_t j = lane; j < m; j += 32) {
    float g = r * ((w ? w[ng % G * Cg + j / S] : 1.0f) * gg[j] - m1 - (xg[j] - mu) * r * m2);
    dg[j] = acc ? dg[j] + g : g;
  }
}

/* dw[c], db[c]: one warp per channel */
static __global__ void groupnorm_dwb_kernel(float *dw, float *db, const float *dout, const float *x, const float *mean,
                                            const float *rstd, int64_t N, int64_t C, int64_t S, int64_t G, int acc_dw,
                                            int acc_db) {
  int64_t c = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (c >= C) return;
  double sw = 0.0, sb = 0.0;
  for (int64_t n = 0; n < N; n++) {
    int64_t ng = n * G + c / (C / G);
    const float *xc = x + (n * C + c) * S, *gc = dout + (n * C + c) * S;
    for (int64_t j = lane; j < S; j += 32) {
      sw += (double)gc[j] * ((xc[j] - mean[ng]) * rstd[ng]);
      sb += gc[j];
    }
  }
  sw = warp_sum_d(sw);
  sb = warp_sum_d(sb);
  if (lane == 0) {
    if (dw) dw[c] = acc_dw ? dw[c] + (float)sw : (float)sw;
    if (db) db[c] = acc_db ? db[c] + (float)sb : (float)sb;
  }
}

void rt_cuda_groupnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                                const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, int64_t G,
                                float eps, int acc_dx, int acc_dw, int acc_db) {
  (void)eps;
  need_ctx();
  if (dx && N * G > 0)
    groupnorm_dx_kernel<<<grid_for(N * G * 32, BLOCK), BLOCK, 0, ctx.stream>>>(dx, dout, x, w, mean, rstd, N * G, G,
                                                                               C / G, S, acc_dx);
  if ((dw || db) && C > 0)
    groupnorm_dwb_kernel<<<grid_for(C * 32, BLOCK), BLOCK, 0, ctx.stream>>>(dw, db, dout, x, mean, rstd, N, C, S, G,
                                                                            acc_dw, acc_db);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// add_channels

static __global__ void add_channels_kernel(float *out, const float *x, const float *e, int64_t S, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] + e[i / S];
}

void rt_cuda_add_channels_forward(float *out, const float *x, const float *e, int64_t NC, int64_t S) {
  need_ctx();
  if (NC * S == 0) return;
  add_channels_kernel<<<grid_for(NC * S, BLOCK), BLOCK, 0, ctx.stream>>>(out, x, e, S, NC * S);
  LAUNCH_CHECK();
}

/* one warp per row: de's sum first, then dx (which may be dout itself) */
static __global__ void add_channels_bwd_kernel(float *dx, float *de, const float *dout, int64_t NC, int64_t S,
                                               int acc_dx, int acc_de) {
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (r >= NC) return;
  const float *g = dout + r * S;
  double s = 0.0;
  for (int64_t j = lane; j < S; j += 32) s += g[j];
  s = warp_sum_d(s);
  if (dx)
    for (int64_t j = lane; j < S; j += 32) dx[r * S + j] = acc_dx ? dx[r * S + j] + g[j] : g[j];
  if (de && lane == 0) de[r] = acc_de ? de[r] + (float)s : (float)s;
}

void rt_cuda_add_channels_backward(float *dx, float *de, const float *dout, int64_t NC, int64_t S, int acc_dx,
                                   int acc_de) {
  need_ctx();
  if (NC == 0) return;
  add_channels_bwd_kernel<<<grid_for(NC * 32, BLOCK), BLOCK, 0, ctx.stream>>>(dx, de, dout, NC, S, acc_dx, acc_de);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// upsample (nearest)

static __global__ void upsample_kernel(float *out, const float *x, int64_t H, int64_t W, int64_t s, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t Wo = W * s, z = i % Wo, y = i / Wo % (H * s), pl = i / (Wo * H * s);
    out[i] = x[(pl * H + y / s) * W + z / s];
  }
}

void rt_cuda_upsample_forward(float *out, const float *x, int64_t NC, int64_t H, int64_t W, int64_t s) {
  need_ctx();
  int64_t n = NC * H * W * s * s;
  if (n == 0) return;
  upsample_kernel<<<grid_for(n, BLOCK), BLOCK, 0, ctx.stream>>>(out, x, H, W, s, n);
  LAUNCH_CHECK();
}

static __global__ void upsample_bwd_kernel(float *dx, const float *dout, int64_t H, int64_t W, int64_t s, int acc,
                                           int64_t n) {
  GRID_STRIDE(q, n) {
    int64_t w = q % W, h = q / W % H, pl = q / (H * W), Wo = W * s;
    const float *g = dout + pl * H * W * s * s;
    double sum = 0.0;
    for (int64_t i = 0; i < s; i++)
      for (int64_t j = 0; j < s; j++) sum += g[(h * s + i) * Wo + w * s + j];
    dx[q] = acc ? dx[q] + (float)sum : (float)sum;
  }
}

void rt_cuda_upsample_backward(float *dx, const float *dout, int64_t NC, int64_t H, int64_t W, int64_t s, int acc) {
  need_ctx();
  if (NC * H * W == 0) return;
  upsample_bwd_kernel<<<grid_for(NC * H * W, BLOCK), BLOCK, 0, ctx.stream>>>(dx, dout, H, W, s, acc, NC * H * W);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// timestep_embedding

static __device__ double temb_freq_dev(int64_t i, int64_t D, float shift, float max_period) {
  return exp(-log((double)max_period) * (double)i / ((double)(D / 2) - (double)shift));
}

static __global__ void temb_kernel(float *out, const float *t, int64_t D, int64_t flip, float shift, float max_period,
                                   int64_t n) {
  GRID_STRIDE(q, n) {
    int64_t b = q / D, c = q % D, h = D / 2;
    if (c >= 2 * h) {
      out[q] = 0.0f;
      continue;
    }
    int64_t i = c % h;
    int is_sin = (c < h) != (flip != 0);
    double a = (double)t[b] * temb_freq_dev(i, D, shift, max_period);
    out[q] = (float)(is_sin ? sin(a) : cos(a));
  }
}

void rt_cuda_timestep_embedding_forward(float *out, const float *t, int64_t B, int64_t D, int64_t flip, float shift,
                                        float max_period) {
  need_ctx();
  if (B * D == 0) return;
  temb_kernel<<<grid_for(B * D, BLOCK), BLOCK, 0, ctx.stream>>>(out, t, D, flip, shift, max_period, B * D);
  LAUNCH_CHECK();
}

static __global__ void temb_bwd_kernel(float *dt, const float *dout, const float *t, int64_t B, int64_t D, int64_t flip,
                                       float shift, float max_period, int acc) {
  GRID_STRIDE(b, B) {
    int64_t h = D / 2;
    const float *g = dout + b * D;
    double s = 0.0;
    for (int64_t i = 0; i < h; i++) {
      double f = temb_freq_dev(i, D, shift, max_period), a = (double)t[b] * f;
      s += f * (g[flip ? h + i : i] * cos(a) - g[flip ? i : h + i] * sin(a));
    }
    dt[b] = acc ? dt[b] + (float)s : (float)s;
  }
}

void rt_cuda_timestep_embedding_backward(float *dt, const float *dout, const float *t, int64_t B, int64_t D,
                                         int64_t flip, float shift, float max_period, int acc) {
  need_ctx();
  if (B == 0 || !dt) return;
  temb_bwd_kernel<<<grid_for(B, BLOCK), BLOCK, 0, ctx.stream>>>(dt, dout, t, B, D, flip, shift, max_period, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// ddpm_noise: cpu_diffusion.c's draws; the key changes every step, so a CUDA graph capture is refused

static __device__ double unit53_dev(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1p-53; }

static __device__ double ddpm_abar_dev(int64_t t, int64_t T, float b0, float b1) {
  double a = 1.0;
  for (int64_t i = 0; i <= t; i++)
    a *= 1.0 - ((double)b0 + ((double)b1 - (double)b0) * (double)i / (double)(T > 1 ? T - 1 : 1));
  return a;
}

static __device__ int64_t ddpm_t_dev(uint64_t key, int64_t b, int64_t T) {
  return (int64_t)((mix64_dev(mix64_dev(key ^ 0x74696d65u) ^ (uint64_t)b) >> 11) % (uint64_t)T);
}

static __global__ void ddpm_fwd_kernel(float *xt, float *eps, float *t, const float *x0, int64_t S, int64_t T, float b0,
                                       float b1, uint64_t key, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t b = i / S, tb = ddpm_t_dev(key, b, T);
    double ab = ddpm_abar_dev(tb, T, b0, b1);
    uint64_t q = (uint64_t)i / 2;
    double r = sqrt(-2.0 * log(unit53_dev(mix64_dev(key ^ 2 * q))));
    double th = 6.283185307179586 * unit53_dev(mix64_dev(key ^ (2 * q + 1)));
    float e = (float)(r * (i % 2 ? sin(th) : cos(th)));
    eps[i] = e;
    xt[i] = (float)(sqrt(ab) * x0[i] + sqrt(1.0 - ab) * e);
    if (i % S == 0) t[b] = (float)tb;
  }
}

void rt_cuda_ddpm_noise_forward(float *xt, float *eps, float *t, const float *x0, int64_t B, int64_t S, int64_t T,
                                float beta_start, float beta_end, int mode, uint64_t key) {
  (void)mode;
  need_ctx();
  RT_CHECK(!ctx.capturing,
           "ddpm_noise's random key changes every step and a CUDA graph would replay the captured one: train this "
           "model without --cuda-graph");
  if (B * S == 0) return;
  ddpm_fwd_kernel<<<grid_for(B * S, BLOCK), BLOCK, 0, ctx.stream>>>(xt, eps, t, x0, S, T, beta_start, beta_end, key,
                                                                    B * S);
  LAUNCH_CHECK();
}

static __global__ void ddpm_bwd_kernel(float *dx0, const float *g, const float *t, int64_t S, int64_t T, float b0,
                                       float b1, int acc, int64_t n) {
  GRID_STRIDE(i, n) {
    float v = (float)(sqrt(ddpm_abar_dev((int64_t)t[i / S], T, b0, b1)) * g[i]);
    dx0[i] = acc ? dx0[i] + v : v;
  }
}

void rt_cuda_ddpm_noise_backward(float *dx0, const float *dout, const float *t, int64_t B, int64_t S, int64_t T,
                                 float beta_start, float beta_end, int mode, uint64_t key, int acc) {
  (void)mode, (void)key;
  need_ctx();
  if (B * S == 0) return;
  ddpm_bwd_kernel<<<grid_for(B * S, BLOCK), BLOCK, 0, ctx.stream>>>(dx0, dout, t, S, T, beta_start, beta_end, acc,
                                                                    B * S);
  LAUNCH_CHECK();
}
