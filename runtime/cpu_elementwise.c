/* cpu_elementwise.c: the CPU backend's element-wise ops, activations, scale_channels, layer_scale (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// element-wise: add, mul, relu, gelu, silu

static void add_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *a = c->a, *b = c->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] + b[i];
}

void rt_add_forward(float *out, const float *a, const float *b, int64_t n) {
  rt_par(add_task, &(AddTask){out, a, b, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

void rt_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  // A gradient may alias dout only with acc = 0, where its write is a no-op:
  // dout is intact for the other one whichever goes first.
  accumulate(da, dout, n, acc_da);
  accumulate(db, dout, n, acc_db);
}

static void mul_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *a = c->a, *b = c->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] * b[i];
}

void rt_mul_forward(float *out, const float *a, const float *b, int64_t n) {
  rt_par(mul_task, &(AddTask){out, a, b, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

typedef struct {
  float *da, *db;
  const float *dout, *a, *b;
  int acc_da, acc_db;
} MulBackwardTask;

/* Each element's dout, a and b are read before da is written there, and da
 * before db: so da or db may be dout (acc = 0), and da may be db (acc_db = 1,
 * which then adds onto the da just written). */
static void mul_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const MulBackwardTask *c = ctx;
  float *da = c->da, *db = c->db;
  const float *dout = c->dout, *a = c->a, *b = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = dout[i], ai = a[i], bi = b[i];
    if (da) da[i] = c->acc_da ? da[i] + g * bi : g * bi;
    if (db) db[i] = c->acc_db ? db[i] + g * ai : g * ai;
  }
}

void rt_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t n, int acc_da,
                     int acc_db) {
  if (!da && !db) return;
  MulBackwardTask t = {da, db, dout, a, b, acc_da, acc_db};
  rt_par(mul_backward_task, &t, n, rt_chunks(n >= RT_PAR_MIN));
}

static void relu_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void rt_relu_forward(float *out, const float *x, int64_t n) {
  rt_par(relu_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
#ifdef RT_PLANT_OFF_BY_ONE /* tests/crash/guard.sh: a planted bug guard mode must catch */
  out[n] = 0.0f;
#endif
}

/* dx (a.out) (+)= dout (a) where y (b) > 0. */
static void relu_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *out = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = out[i] > 0.0f ? dout[i] : 0.0f;
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  rt_par(relu_backward_task, &(AddTask){dx, dout, out, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static void relu6_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
}

void rt_relu6_forward(float *out, const float *x, int64_t n) {
  rt_par(relu6_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) where 0 < y (b) < 6. */
static void relu6_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *out = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = out[i] > 0.0f && out[i] < 6.0f ? dout[i] : 0.0f;
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_relu6_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  rt_par(relu6_backward_task, &(AddTask){dx, dout, out, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* e = exp(a) for a sigmoid 1 / (1 + e), a clamped to [-80, 80], where
 * sigmoid is within 2e-35 of 0 or 1: e and 1/(1 + e) stay normal, and the
 * loops vectorize. */
static inline float sigmoid_e(float a) { return rt_exp(a < -80.0f ? -80.0f : a > 80.0f ? 80.0f : a); }

/* 0.5 x (1 + tanh u) = x sigmoid(2u) = x / (1 + e), e = exp(-2u): one
 * exp and no tanh. */
static inline float gelu_e(float x) { return sigmoid_e(-2.0f * (RT_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x))); }

static void gelu_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    out[i] = xi / (1.0f + gelu_e(xi));
  }
}

/* Exact gelu: x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)). */
static void gelu_erf_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    out[i] = 0.5f * xi * (1.0f + erff(xi * RT_SQRT1_2));
  }
}

void rt_gelu_forward(float *out, const float *x, int64_t n, int approximate) {
  rt_par(approximate ? gelu_task : gelu_erf_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (out) (+)= dout (a) gelu'(x (b)). */
static void gelu_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  int acc = c->acc;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float e = gelu_e(xi);
    float s = 1.0f / (1.0f + e); // sigmoid(2u) = 0.5 (1 + tanh u)
    float du = RT_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * xi * xi);
    // d/dx x s(2u) = s + 2 x du s (1 - s); 1 - s = e s exactly, no
    // cancellation where s nears 1 (where 1 - tanh^2 would lose digits).
    float g = dout[i] * (s + 2.0f * xi * du * ((e * s) * s));
    dx[i] = acc ? dx[i] + g : g;
  }
}

/* Exact: dx (out) (+)= dout (a) (Phi(x) + x phi(x)), x (b); phi(x) =
 * exp(-x^2 / 2) / sqrt(2 pi) underflows to 0 where Phi is 0 or 1. */
static void gelu_erf_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  int acc = c->acc;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float cdf = 0.5f * (1.0f + erff(xi * RT_SQRT1_2));
    float pdf = RT_INV_SQRT_2PI * expf(-0.5f * xi * xi);
    float g = dout[i] * (cdf + xi * pdf);
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int approximate, int acc) {
  rt_par(approximate ? gelu_backward_task : gelu_erf_backward_task, &(AddTask){dx, dout, x, acc}, n,
         rt_chunks(n >= RT_PAR_MIN));
}

/* out (+)= f x, element by element (alias-safe). */
typedef struct {
  float *out;
  const float *x;
  float f;
  int acc;
} ScaleTask;

static void scale_task(const void *ctx, int64_t lo, int64_t hi) {
  const ScaleTask *c = ctx;
  for (int64_t i = lo; i < hi; i++) c->out[i] = c->acc ? c->out[i] + c->f * c->x[i] : c->f * c->x[i];
}

void rt_scale_forward(float *out, const float *x, int64_t n, double factor) {
  rt_par(scale_task, &(ScaleTask){out, x, (float)factor, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

void rt_scale_backward(float *dx, const float *dout, int64_t n, double factor, int acc) {
  if (dx) rt_par(scale_task, &(ScaleTask){dx, dout, (float)factor, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* e = exp(-x): sigmoid(x) = 1 / (1 + e). */
static inline float silu_e(float x) { return sigmoid_e(-x); }

static void silu_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    out[i] = xi / (1.0f + silu_e(xi));
  }
}

void rt_silu_forward(float *out, const float *x, int64_t n) {
  rt_par(silu_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (out) (+)= dout (a) silu'(x (b)). */
static void silu_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  int acc = c->acc;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float e = silu_e(xi);
    float s = 1.0f / (1.0f + e);
    // d/dx x s = s (1 + x (1 - s)), with 1 - s = e s (no cancellation near s = 1)
    float g = dout[i] * (s * (1.0f + xi * (e * s)));
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_silu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  rt_par(silu_backward_task, &(AddTask){dx, dout, x, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static void sigmoid_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = 1.0f / (1.0f + sigmoid_e(-x[i]));
}

void rt_sigmoid_forward(float *out, const float *x, int64_t n) {
  rt_par(sigmoid_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) y (1 - y), y (b) the output. */
static void sigmoid_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *out = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = dout[i] * out[i] * (1.0f - out[i]);
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_sigmoid_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  rt_par(sigmoid_backward_task, &(AddTask){dx, dout, out, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static inline float hardsigmoid1(float x) { return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f; }

static void hardswish_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = x[i] * hardsigmoid1(x[i]);
}

void rt_hardswish_forward(float *out, const float *x, int64_t n) {
  rt_par(hardswish_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) hardswish'(x (b)), torch's: 0 below -3, x / 3 + 0.5 up to 3, 1 above. */
static void hardswish_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float xi = x[i];
    float g = xi < -3.0f ? 0.0f : xi <= 3.0f ? dout[i] * (xi / 3.0f + 0.5f) : dout[i];
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_hardswish_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  rt_par(hardswish_backward_task, &(AddTask){dx, dout, x, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

static void hardsigmoid_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *out = c->out;
  const float *x = c->a;
  for (int64_t i = lo; i < hi; i++) out[i] = hardsigmoid1(x[i]);
}

void rt_hardsigmoid_forward(float *out, const float *x, int64_t n) {
  rt_par(hardsigmoid_task, &(AddTask){out, x, NULL, 0}, n, rt_chunks(n >= RT_PAR_MIN));
}

/* dx (a.out) (+)= dout (a) / 6 where -3 < x (b) < 3. */
static void hardsigmoid_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const AddTask *c = ctx;
  float *dx = c->out;
  const float *dout = c->a, *x = c->b;
  for (int64_t i = lo; i < hi; i++) {
    float g = x[i] > -3.0f && x[i] < 3.0f ? dout[i] / 6.0f : 0.0f;
    dx[i] = c->acc ? dx[i] + g : g;
  }
}

void rt_hardsigmoid_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  rt_par(hardsigmoid_backward_task, &(AddTask){dx, dout, x, acc}, n, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// scale_channels: planes of S elements, each times its own factor; parallel over planes

static void scale_channels_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t S = a->d[0];
  for (int64_t p = lo; p < hi; p++) {
    float f = a->i[1][p], *out = a->o[0] + p * S;
    const float *x = a->i[0] + p * S;
    for (int64_t j = 0; j < S; j++) out[j] = x[j] * f;
  }
}

void rt_scale_channels_forward(float *out, const float *x, const float *s, int64_t NC, int64_t S) {
  RtArgs a = {.o = {out}, .i = {x, s}, .d = {S}};
  rt_par(scale_channels_task, &a, NC, rt_chunks(NC * S >= RT_PAR_MIN));
}

/* Per plane: ds first (a double sum of dout x), then dx, which may overwrite dout. */
static void scale_channels_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t S = a->d[0];
  float *dx = a->o[0], *ds = a->o[1];
  const float *dout = a->i[0], *x = a->i[1], *s = a->i[2];
  for (int64_t p = lo; p < hi; p++) {
    const float *g = dout + p * S;
    if (ds) {
      double sum = 0.0;
      for (int64_t j = 0; j < S; j++) sum += (double)g[j] * x[p * S + j];
      ds[p] = a->acc[1] ? ds[p] + (float)sum : (float)sum;
    }
    if (dx) {
      float f = s[p], *d = dx + p * S;
      for (int64_t j = 0; j < S; j++) d[j] = a->acc[0] ? d[j] + g[j] * f : g[j] * f;
    }
  }
}

void rt_scale_channels_backward(float *dx, float *ds, const float *dout, const float *x, const float *s, int64_t NC,
                                int64_t S, int acc_dx, int acc_ds) {
  if (!dx && !ds) return;
  RtArgs a = {.o = {dx, ds}, .i = {dout, x, s}, .d = {S}, .acc = {acc_dx, acc_ds}};
  rt_par(scale_channels_backward_task, &a, NC, rt_chunks(NC * S >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// layer_scale: planes of S elements, plane (n, c) times w[c]; the forward parallel over planes, the backward over
// channels (dw[c] sums the channel's planes of every sample)

static void layer_scale_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t C = a->d[0], S = a->d[1];
  for (int64_t p = lo; p < hi; p++) {
    float f = a->i[1][p % C], *out = a->o[0] + p * S;
    const float *x = a->i[0] + p * S;
    for (int64_t j = 0; j < S; j++) out[j] = x[j] * f;
  }
}

void rt_layer_scale_forward(float *out, const float *x, const float *w, int64_t N, int64_t C, int64_t S) {
  RtArgs a = {.o = {out}, .i = {x, w}, .d = {C, S}};
  rt_par(layer_scale_task, &a, N * C, rt_chunks(N * C * S >= RT_PAR_MIN));
}

/* Per channel: dw first (a double sum over its planes), then dx, which may overwrite dout. */
static void layer_scale_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t N = a->d[0], C = a->d[1], S = a->d[2];
  float *dx = a->o[0], *dw = a->o[1];
  const float *dout = a->i[0], *x = a->i[1], *w = a->i[2];
  for (int64_t c = lo; c < hi; c++) {
    if (dw) {
      double sum = 0.0;
      for (int64_t n = 0; n < N; n++) {
        const float *g = dout + (n * C + c) * S, *xp = x + (n * C + c) * S;
        for (int64_t j = 0; j < S; j++) sum += (double)g[j] * xp[j];
      }
      dw[c] = a->acc[1] ? dw[c] + (float)sum : (float)sum;
    }
    if (dx)
      for (int64_t n = 0; n < N; n++) {
        const float *g = dout + (n * C + c) * S;
        float f = w[c], *d = dx + (n * C + c) * S;
        for (int64_t j = 0; j < S; j++) d[j] = a->acc[0] ? d[j] + g[j] * f : g[j] * f;
      }
  }
}

void rt_layer_scale_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, int64_t N,
                             int64_t C, int64_t S, int acc_dx, int acc_dw) {
  if (!dx && !dw) return;
  RtArgs a = {.o = {dx, dw}, .i = {dout, x, w}, .d = {N, C, S}, .acc = {acc_dx, acc_dw}};
  rt_par(layer_scale_backward_task, &a, C, rt_chunks(N * C * S >= RT_PAR_MIN));
}
