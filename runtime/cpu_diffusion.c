/* cpu_diffusion.c: the CPU backend's diffusion ops (docs/diffusion.md): groupnorm, add_channels, upsample,
 * timestep_embedding and ddpm_noise (cpu_internal.h); conv_transpose2d runs conv2d's products (cpu_conv.c).
 * Sums run in double; each loop is parallel over outputs that no other task writes, so results do not depend on
 * the thread count. */
#include "cpu_internal.h"

static const double RT_TWO_PI = 6.283185307179586;

// ----------------------------------------------------------------------------
// groupnorm over x[N, C, S]: group (n, g) is the contiguous block of C/G channels of sample n

static void groupnorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *mean = A->o[1], *rstd = A->o[2];
  const float *x = A->i[0], *w = A->i[1], *b = A->i[2];
  int64_t C = A->d[0], S = A->d[1], G = A->d[2], Cg = C / G, m = Cg * S;
  for (int64_t ng = lo; ng < hi; ng++) {
    const float *xg = x + ng * m;
    float *og = out + ng * m;
    float mu, r;
    row_stats(xg, m, A->f[0], &mu, &r);
    for (int64_t cc = 0; cc < Cg; cc++) {
      int64_t c = ng % G * Cg + cc;
      float wc = w ? w[c] : 1.0f, bc = b ? b[c] : 0.0f;
      for (int64_t j = cc * S; j < (cc + 1) * S; j++) og[j] = (xg[j] - mu) * r * wc + bc;
    }
    if (mean) mean[ng] = mu;
    if (rstd) rstd[ng] = r;
  }
}

void rt_groupnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t N, int64_t C, int64_t S, int64_t G, float eps) {
  RtArgs a = {.o = {out, mean, rstd}, .i = {x, w, b}, .d = {C, S, G}, .f = {eps}};
  rt_par(groupnorm_task, &a, N * G, rt_chunks(N * C * S >= RT_PAR_MIN));
}

/* dx per group: rstd (w dout - mean(w dout) - xhat mean(w dout xhat)) */
static void groupnorm_dx_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *w = A->i[2], *mean = A->i[3], *rstd = A->i[4];
  int64_t C = A->d[0], S = A->d[1], G = A->d[2], Cg = C / G, m = Cg * S;
  for (int64_t ng = lo; ng < hi; ng++) {
    const float *xg = x + ng * m, *gg = dout + ng * m;
    float *dg = dx + ng * m, mu = mean[ng], r = rstd[ng];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < m; j++) {
      float wg = (w ? w[ng % G * Cg + j / S] : 1.0f) * gg[j];
      s1 += wg;
      s2 += wg * ((xg[j] - mu) * r);
    }
    float m1 = (float)(s1 / (double)m), m2 = (float)(s2 / (double)m);
    for (int64_t j = 0; j < m; j++) {
      float wc = w ? w[ng % G * Cg + j / S] : 1.0f;
      float g = r * (wc * gg[j] - m1 - (xg[j] - mu) * r * m2);
      dg[j] = A->acc[0] ? dg[j] + g : g;
    }
  }
}

/* dw[c], db[c]: sums over samples and positions, one channel per iteration */
static void groupnorm_dwb_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dw = A->o[1], *db = A->o[2];
  const float *dout = A->i[0], *x = A->i[1], *mean = A->i[3], *rstd = A->i[4];
  int64_t C = A->d[0], S = A->d[1], G = A->d[2], N = A->d[3], Cg = C / G;
  for (int64_t c = lo; c < hi; c++) {
    double sw = 0.0, sb = 0.0;
    for (int64_t n = 0; n < N; n++) {
      int64_t ng = n * G + c / Cg;
      const float *xc = x + (n * C + c) * S, *gc = dout + (n * C + c) * S;
      for (int64_t j = 0; j < S; j++) {
        sw += (double)gc[j] * ((xc[j] - mean[ng]) * rstd[ng]);
        sb += gc[j];
      }
    }
    if (dw) dw[c] = A->acc[1] ? dw[c] + (float)sw : (float)sw;
    if (db) db[c] = A->acc[2] ? db[c] + (float)sb : (float)sb;
  }
}

void rt_groupnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, int64_t G, float eps,
                           int acc_dx, int acc_dw, int acc_db) {
  (void)eps;
  RtArgs a = {.o = {dx, dw, db}, .i = {dout, x, w, mean, rstd}, .d = {C, S, G, N}, .acc = {acc_dx, acc_dw, acc_db}};
  int par = N * C * S >= RT_PAR_MIN;
  if (dx) rt_par(groupnorm_dx_task, &a, N * G, rt_chunks(par));
  if (dw || db) rt_par(groupnorm_dwb_task, &a, C, rt_chunks(par));
}

// ----------------------------------------------------------------------------
// add_channels: x[NC, S] + e[NC]

static void add_channels_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  int64_t S = A->d[0];
  for (int64_t r = lo; r < hi; r++)
    for (int64_t j = r * S; j < (r + 1) * S; j++) A->o[0][j] = A->i[0][j] + A->i[1][r];
}

void rt_add_channels_forward(float *out, const float *x, const float *e, int64_t NC, int64_t S) {
  RtArgs a = {.o = {out}, .i = {x, e}, .d = {S}};
  rt_par(add_channels_task, &a, NC, rt_chunks(NC * S >= RT_PAR_MIN));
}

static void add_channels_bwd_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0], *de = A->o[1];
  const float *g = A->i[0];
  int64_t S = A->d[0];
  for (int64_t r = lo; r < hi; r++) {
    double s = 0.0;
    for (int64_t j = r * S; j < (r + 1) * S; j++) s += g[j]; /* before dx: it may be dout itself */
    if (dx)
      for (int64_t j = r * S; j < (r + 1) * S; j++) dx[j] = A->acc[0] ? dx[j] + g[j] : g[j];
    if (de) de[r] = A->acc[1] ? de[r] + (float)s : (float)s;
  }
}

void rt_add_channels_backward(float *dx, float *de, const float *dout, int64_t NC, int64_t S, int acc_dx, int acc_de) {
  RtArgs a = {.o = {dx, de}, .i = {dout}, .d = {S}, .acc = {acc_dx, acc_de}};
  rt_par(add_channels_bwd_task, &a, NC, rt_chunks(NC * S >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// upsample (nearest, factor s) over planes of H x W

static void upsample_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  int64_t H = A->d[0], W = A->d[1], s = A->d[2], Wo = W * s;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = A->i[0] + pl * H * W;
    float *o = A->o[0] + pl * H * W * s * s;
    for (int64_t y = 0; y < H * s; y++)
      for (int64_t z = 0; z < Wo; z++) o[y * Wo + z] = x[y / s * W + z / s];
  }
}

void rt_upsample_forward(float *out, const float *x, int64_t NC, int64_t H, int64_t W, int64_t s) {
  RtArgs a = {.o = {out}, .i = {x}, .d = {H, W, s}};
  rt_par(upsample_task, &a, NC, rt_chunks(NC * H * W * s * s >= RT_PAR_MIN));
}

static void upsample_bwd_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  int64_t H = A->d[0], W = A->d[1], s = A->d[2], Wo = W * s;
  for (int64_t pl = lo; pl < hi; pl++) {
    float *dx = A->o[0] + pl * H * W;
    const float *g = A->i[0] + pl * H * W * s * s;
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) {
        double sum = 0.0;
        for (int64_t i = 0; i < s; i++)
          for (int64_t j = 0; j < s; j++) sum += g[(h * s + i) * Wo + w * s + j];
        dx[h * W + w] = A->acc[0] ? dx[h * W + w] + (float)sum : (float)sum;
      }
  }
}

void rt_upsample_backward(float *dx, const float *dout, int64_t NC, int64_t H, int64_t W, int64_t s, int acc) {
  RtArgs a = {.o = {dx}, .i = {dout}, .d = {H, W, s}, .acc = {acc}};
  rt_par(upsample_bwd_task, &a, NC, rt_chunks(NC * H * W * s * s >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// timestep_embedding: frequencies f_i = exp(-ln(max_period) i / (D/2 - shift))

static double temb_freq(int64_t i, int64_t D, float shift, float max_period) {
  return exp(-log((double)max_period) * (double)i / ((double)(D / 2) - (double)shift));
}

void rt_timestep_embedding_forward(float *out, const float *t, int64_t B, int64_t D, int64_t flip, float shift,
                                   float max_period) {
  int64_t h = D / 2;
  for (int64_t b = 0; b < B; b++) {
    float *o = out + b * D;
    for (int64_t i = 0; i < h; i++) {
      double a = (double)t[b] * temb_freq(i, D, shift, max_period);
      o[flip ? h + i : i] = (float)sin(a);
      o[flip ? i : h + i] = (float)cos(a);
    }
    if (D % 2) o[D - 1] = 0.0f;
  }
}

void rt_timestep_embedding_backward(float *dt, const float *dout, const float *t, int64_t B, int64_t D, int64_t flip,
                                    float shift, float max_period, int acc) {
  int64_t h = D / 2;
  for (int64_t b = 0; b < B; b++) {
    const float *g = dout + b * D;
    double s = 0.0;
    for (int64_t i = 0; i < h; i++) {
      double f = temb_freq(i, D, shift, max_period), a = (double)t[b] * f;
      s += f * (g[flip ? h + i : i] * cos(a) - g[flip ? i : h + i] * sin(a));
    }
    dt[b] = acc ? dt[b] + (float)s : (float)s;
  }
}

// ----------------------------------------------------------------------------
// ddpm_noise: t, eps and x_t from the key (memplan_kernels.h)

static double unit53(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1p-53; }

/* abar_t = prod_{i <= t} (1 - beta_i), beta linear over T steps */
static double ddpm_abar(int64_t t, int64_t T, float b0, float b1) {
  double a = 1.0;
  for (int64_t i = 0; i <= t; i++)
    a *= 1.0 - ((double)b0 + ((double)b1 - (double)b0) * (double)i / (double)(T > 1 ? T - 1 : 1));
  return a;
}

typedef struct {
  float *xt, *eps, *t, *dx0;
  const float *x0, *g, *tin;
  int64_t S, T;
  float b0, b1;
  uint64_t key;
  int acc;
} Ddpm;

static void ddpm_fwd_task(const void *ctx, int64_t lo, int64_t hi) {
  const Ddpm *c = ctx;
  for (int64_t b = lo; b < hi; b++) {
    int64_t tb = (int64_t)((rt_mix64(rt_mix64(c->key ^ 0x74696d65u) ^ (uint64_t)b) >> 11) % (uint64_t)c->T);
    double ab = ddpm_abar(tb, c->T, c->b0, c->b1), sa = sqrt(ab), sn = sqrt(1.0 - ab);
    c->t[b] = (float)tb;
    for (int64_t i = b * c->S; i < (b + 1) * c->S; i++) {
      uint64_t q = (uint64_t)i / 2;
      double r = sqrt(-2.0 * log(unit53(rt_mix64(c->key ^ 2 * q)))),
             th = RT_TWO_PI * unit53(rt_mix64(c->key ^ (2 * q + 1)));
      float e = (float)(r * (i % 2 ? sin(th) : cos(th)));
      c->eps[i] = e;
      c->xt[i] = (float)(sa * c->x0[i] + sn * e);
    }
  }
}

void rt_ddpm_noise_forward(float *xt, float *eps, float *t, const float *x0, int64_t B, int64_t S, int64_t T,
                           float beta_start, float beta_end, int mode, uint64_t key) {
  (void)mode;
  Ddpm c = {.xt = xt, .eps = eps, .t = t, .x0 = x0, .S = S, .T = T, .b0 = beta_start, .b1 = beta_end, .key = key};
  rt_par(ddpm_fwd_task, &c, B, rt_chunks(B * S >= RT_PAR_MIN));
}

static void ddpm_bwd_task(const void *ctx, int64_t lo, int64_t hi) {
  const Ddpm *c = ctx;
  for (int64_t b = lo; b < hi; b++) {
    double sa = sqrt(ddpm_abar((int64_t)c->tin[b], c->T, c->b0, c->b1));
    for (int64_t i = b * c->S; i < (b + 1) * c->S; i++) {
      float g = (float)(sa * c->g[i]);
      c->dx0[i] = c->acc ? c->dx0[i] + g : g;
    }
  }
}

void rt_ddpm_noise_backward(float *dx0, const float *dout, const float *t, int64_t B, int64_t S, int64_t T,
                            float beta_start, float beta_end, int mode, uint64_t key, int acc) {
  (void)mode, (void)key;
  Ddpm c = {.dx0 = dx0, .g = dout, .tin = t, .S = S, .T = T, .b0 = beta_start, .b1 = beta_end, .acc = acc};
  rt_par(ddpm_bwd_task, &c, B, rt_chunks(B * S >= RT_PAR_MIN));
}
