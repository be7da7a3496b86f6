/* cuda_conv.cu: the CUDA backend's convolution (conv2d, conv_transpose2d) and pooling (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// conv2d: cpu.c's method, one sample at a time: a kernel writes the sample's
// im2col matrix col[C kh kw, Ho Wo] into the plan's scratch, and each group is
// one product of a strided batch over the groups (cuBLAS). dx goes through
// the same scratch and col2im, a gather (each input pixel sums the column
// entries that read it, in a fixed order: no atomics). The bias gradient is
// one block per channel, summed in double.

struct ConvDims {
  int64_t C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, d; /* kernel, stride, padding: height and width */
};

/* A 1x1 kernel at stride 1 without padding: x is its own im2col */
static bool conv_direct(const ConvDims &c) {
  return c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0;
}

static __global__ void im2col_kernel(float *col, const float *x, ConvDims c) {
  int64_t P = c.Ho * c.Wo, n = c.C * c.kh * c.kw * P;
  GRID_STRIDE(i, n) {
    int64_t r = i / P, q = i % P, ch = r / (c.kh * c.kw), ki = r / c.kw % c.kh, kj = r % c.kw;
    int64_t ih = q / c.Wo * c.sh - c.ph + ki * c.d, iw = q % c.Wo * c.sw - c.pw + kj * c.d;
    col[i] = ih >= 0 && ih < c.H && iw >= 0 && iw < c.W ? x[(ch * c.H + ih) * c.W + iw] : 0.0f;
  }
}

/* img[ch, ih, iw] (+)= the entries of col that tap (ki, kj) took from it */
static __global__ void col2im_kernel(float *img, const float *col, ConvDims c, int acc) {
  int64_t P = c.Ho * c.Wo, n = c.C * c.H * c.W;
  GRID_STRIDE(i, n) {
    int64_t ch = i / (c.H * c.W), ih = i / c.W % c.H, iw = i % c.W;
    float s = 0.0f;
    for (int64_t ki = 0; ki < c.kh; ki++) {
      int64_t th = ih + c.ph - ki * c.d; // = oh * stride
      if (th < 0 || th % c.sh || th / c.sh >= c.Ho) continue;
      for (int64_t kj = 0; kj < c.kw; kj++) {
        int64_t tw = iw + c.pw - kj * c.d;
        if (tw < 0 || tw % c.sw || tw / c.sw >= c.Wo) continue;
        s += col[((ch * c.kh + ki) * c.kw + kj) * P + th / c.sh * c.Wo + tw / c.sw];
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
  im2col_kernel<<<grid_for(c.C * c.kh * c.kw * c.Ho * c.Wo, 256), 256, 0, ctx.stream>>>(col, x, c);
  LAUNCH_CHECK();
}

/* out (+)= the convolution; the bias only when out is written (acc 0) */
static void conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                           int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw,
                           int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G, int acc) {
  need_ctx();
  int64_t P = Ho * Wo, Og = O / G, K = C / G * kh * kw;
  ConvDims c = {C, H, Wd, Ho, Wo, kh, kw, sh, sw, ph, pw, d};
  bool direct = conv_direct(c);
  RT_CHECK(direct || scratch, "conv2d: no scratch buffer for an im2col");
  if (b && !acc && N * O * P > 0) {
    conv_bias_kernel<<<grid_for(N * O * P, 256), 256, 0, ctx.stream>>>(out, b, N * O * P, O, P);
    LAUNCH_CHECK();
  }
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x + n * C * H * Wd;
    if (!direct) conv_im2col(scratch, xs, c);
    cuda_gemm(0, 0, Og, P, K, W, direct ? xs : scratch, out + n * O * P, acc || b != NULL, G, Og * K, K * P, Og * P);
  }
}

void rt_cuda_conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                            int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw,
                            int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G) {
  conv2d_forward(out, x, W, b, scratch, N, C, H, Wd, O, Ho, Wo, kh, kw, sh, sw, ph, pw, d, G, 0);
}

void rt_cuda_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                             float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho,
                             int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                             int64_t d, int64_t G, int acc_dx, int acc_dW, int acc_db) {
  need_ctx();
  int64_t P = Ho * Wo, Og = O / G, K = C / G * kh * kw;
  ConvDims c = {C, H, Wd, Ho, Wo, kh, kw, sh, sw, ph, pw, d};
  bool direct = conv_direct(c);
  RT_CHECK(direct || scratch || (!dx && !dW), "conv2d: no scratch buffer for an im2col");
  if (db && O > 0) {
    conv_db_kernel<<<(unsigned)O, LOSS_BLOCK, 0, ctx.stream>>>(db, dout, N, O, P, acc_db);
    LAUNCH_CHECK();
  }
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x ? x + n * C * H * Wd : NULL, *ds = dout + n * O * P; // x: NULL without dW
    float *dxs = dx ? dx + n * C * H * Wd : NULL;
    if (dW) { // dW_g (+)= dout_g [Og, P] @ col_g^T [P, K], summed over the samples
      if (!direct) conv_im2col(scratch, xs, c);
      cuda_gemm(0, 1, Og, K, P, ds, direct ? xs : scratch, dW, acc_dW || n > 0, G, Og * P, K * P, Og * K);
    }
    if (!dx) continue;
    // dx_g (+)= W_g^T [K, Og] @ dout_g [Og, P], through the columns unless 1x1
    cuda_gemm(1, 0, K, P, Og, W, ds, direct ? dxs : scratch, direct ? acc_dx : 0, G, Og * K, Og * P, K * P);
    if (direct) continue;
    col2im_kernel<<<grid_for(C * H * Wd, 256), 256, 0, ctx.stream>>>(dxs, scratch, c, acc_dx);
    LAUNCH_CHECK();
  }
}

// ----------------------------------------------------------------------------
// conv_transpose2d: cpu_conv.c's method, the conv2d from out's shape [O, Ho,
// Wo] to x's [C, H, W] with weight W read the other way: forward is its dx,
// dx its forward of dout, dW its dW with dout as the input; db its db of dout.

void rt_cuda_conv_transpose2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch,
                                      int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo,
                                      int64_t k, int64_t s, int64_t p) {
  need_ctx();
  if (b && N * O * Ho * Wo > 0) { // the bias first, the taps add onto it
    conv_bias_kernel<<<grid_for(N * O * Ho * Wo, 256), 256, 0, ctx.stream>>>(out, b, N * O * Ho * Wo, O, Ho * Wo);
    LAUNCH_CHECK();
  }
  rt_cuda_conv2d_backward(out, NULL, NULL, x, NULL, W, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1,
                          b != NULL, 0, 0);
}

void rt_cuda_conv_transpose2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x,
                                       const float *W, float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd,
                                       int64_t O, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p, int acc_dx,
                                       int acc_dW, int acc_db) {
  need_ctx();
  if (db && O > 0) {
    conv_db_kernel<<<(unsigned)O, LOSS_BLOCK, 0, ctx.stream>>>(db, dout, N, O, Ho * Wo, acc_db);
    LAUNCH_CHECK();
  }
  if (dx) conv2d_forward(dx, dout, W, NULL, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, acc_dx);
  if (dW)
    rt_cuda_conv2d_backward(NULL, dW, NULL, x, dout, NULL, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, 0,
                            acc_dW, 0);
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

/* torch's divisor (count_include_pad): cpu_conv.c's avg_div */
static __device__ int64_t avg_div(int64_t h0, int64_t w0, const PoolDims &d) {
  return ((h0 + d.k < d.H + d.p ? h0 + d.k : d.H + d.p) - h0) * ((w0 + d.k < d.W + d.p ? w0 + d.k : d.W + d.p) - w0);
}

static __global__ void avgpool_forward_kernel(float *out, const float *x, PoolDims d, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t pl = i / (d.Ho * d.Wo), r = i % (d.Ho * d.Wo);
    const float *xp = x + pl * d.H * d.W;
    int64_t h0 = r / d.Wo * d.s - d.p, w0 = r % d.Wo * d.s - d.p;
    double sum = 0.0;
    for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + d.k && h < d.H; h++)
      for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + d.k && w < d.W; w++) sum += xp[h * d.W + w];
    out[i] = (float)(sum / (double)avg_div(h0, w0, d));
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
    float v = acc ? dx[i] : 0.0f;
    int64_t hlo, hhi, wlo, whi;
    pool_range(h, d.k, d.s, d.p, d.Ho, &hlo, &hhi);
    pool_range(w, d.k, d.s, d.p, d.Wo, &wlo, &whi);
    for (int64_t ho = hlo; ho < hhi; ho++)
      for (int64_t wo = wlo; wo < whi; wo++) {
        if (!is_max) v += g[ho * d.Wo + wo] / (float)avg_div(ho * d.s - d.p, wo * d.s - d.p, d);
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
