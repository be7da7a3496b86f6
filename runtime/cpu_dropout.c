/* cpu_dropout.c: the CPU backend's dropout and stochastic depth (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// dropout: the mask is a hash of (key, element), so nothing random is stored
// between calls; parallel over 32-element words, each owned by one task

/* kept: the top 24 bits of the element's hash at or above ceil(p 2^24) */
static inline uint32_t dropout_threshold(float p) { return (uint32_t)ceil((double)p * 16777216.0); }
static inline int dropout_keep(uint64_t key, int64_t i, uint32_t th) {
  return (rt_mix64(key ^ (uint64_t)i) >> 40) >= th;
}

typedef struct {
  float *out;
  int32_t *mask;
  const float *x;
  const int32_t *cmask;
  int64_t n;
  float scale;
  uint32_t th;
  uint64_t key;
  int acc;
} DropoutTask;

static void dropout_task(const void *ctx, int64_t lo, int64_t hi) {
  const DropoutTask *c = ctx;
  for (int64_t wd = lo; wd < hi; wd++) {
    uint32_t bits = 0;
    int64_t end = wd * 32 + 32 < c->n ? wd * 32 + 32 : c->n;
    for (int64_t i = wd * 32; i < end; i++) {
      int kept = dropout_keep(c->key, i, c->th);
      bits |= (uint32_t)kept << (i & 31);
      c->out[i] = c->x[i] * (kept ? c->scale : 0.0f);
    }
    if (c->mask) c->mask[wd] = (int32_t)bits;
  }
}

/* x is dout here, out is dx */
static void dropout_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const DropoutTask *c = ctx;
  for (int64_t wd = lo; wd < hi; wd++) {
    int64_t end = wd * 32 + 32 < c->n ? wd * 32 + 32 : c->n;
    uint32_t bits = c->cmask ? (uint32_t)c->cmask[wd] : 0;
    for (int64_t i = wd * 32; i < end; i++) {
      int kept = c->cmask ? (int)(bits >> (i & 31) & 1) : dropout_keep(c->key, i, c->th);
      float g = c->x[i] * (kept ? c->scale : 0.0f);
      c->out[i] = c->acc ? c->out[i] + g : g;
    }
  }
}

void rt_dropout_forward(float *out, int32_t *mask, const float *x, int64_t n, float p, int mode, uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    if (out != x) memcpy(out, x, sizeof(float) * (size_t)n);
    return;
  }
  DropoutTask t = {out, mask, x, NULL, n, (float)(1.0 / (1.0 - (double)p)), dropout_threshold(p), key, 0};
  int64_t words = (n + 31) / 32;
  rt_par(dropout_task, &t, words, rt_chunks(n >= RT_PAR_MIN));
}

void rt_dropout_backward(float *dx, const float *dout, const int32_t *mask, int64_t n, float p, int mode, uint64_t key,
                         int acc) {
  (void)mode;
  if (!dx) return;
  DropoutTask t = {dx, NULL, dout, mask, n, (float)(1.0 / (1.0 - (double)p)), dropout_threshold(p), key, acc};
  int64_t words = (n + 31) / 32;
  rt_par(dropout_backward_task, &t, words, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// stochastic_depth: dropout's hash of (key, row), one draw per row (or row 0's for the batch)

static void sd_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *a = ctx;
  int64_t S = a->d[0], batch = a->d[1];
  uint64_t key = (uint64_t)a->d[2];
  uint32_t th = (uint32_t)a->d[3];
  for (int64_t r = lo; r < hi; r++) {
    float f = dropout_keep(key, batch ? 0 : r, th) ? a->f[0] : 0.0f, *out = a->o[0] + r * S;
    const float *x = a->i[0] + r * S;
    for (int64_t j = 0; j < S; j++) out[j] = a->acc[0] ? out[j] + x[j] * f : x[j] * f;
  }
}

void rt_stochastic_depth_forward(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p, int mode,
                                 uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    if (out != x) memcpy(out, x, sizeof(float) * (size_t)(N * S));
    return;
  }
  RtArgs a = {.o = {out},
              .i = {x},
              .d = {S, batch, (int64_t)key, dropout_threshold(p)},
              .f = {(float)(1.0 / (1.0 - (double)p))}};
  rt_par(sd_task, &a, N, rt_chunks(N * S >= RT_PAR_MIN));
}

void rt_stochastic_depth_backward(float *dx, const float *dout, int64_t N, int64_t S, int64_t batch, float p, int mode,
                                  uint64_t key, int acc) {
  (void)mode;
  if (!dx) return;
  RtArgs a = {.o = {dx},
              .i = {dout},
              .d = {S, batch, (int64_t)key, dropout_threshold(p)},
              .f = {(float)(1.0 / (1.0 - (double)p))},
              .acc = {acc}};
  rt_par(sd_task, &a, N, rt_chunks(N * S >= RT_PAR_MIN));
}
