/* cpu_window.c: the CPU backend's shifted-window attention, Swin's (cpu_internal.h; the geometry is
 * rt_window_pos and rt_window_rel of memplan_kernels.h, shared with the CUDA kernels). */
#include "cpu_internal.h"

/* Tokens per window: the scores of one query row live on the stack (4 KiB). */
#define RT_WIN_MAX 1024

/* Dims of both directions' tasks: B H W C NH ws shift, hs; f[0] the scale. */
typedef struct {
  int64_t H, W, C, NH, ws, shift, hs, N, nw; /* N = ws*ws tokens per window, nw windows per image */
} WinDims;

static WinDims win_dims(const RtArgs *A) {
  WinDims d = {A->d[0], A->d[1], A->d[2], A->d[3], A->d[4], A->d[5], A->d[2] / A->d[3], A->d[4] * A->d[4], 0};
  d.nw = d.H / d.ws * (d.W / d.ws);
  return d;
}

/* The window's tokens: their flat positions and regions. */
static void win_tokens(const WinDims *d, int64_t w, int64_t *pos, int *region) {
  for (int64_t j = 0; j < d->N; j++) pos[j] = rt_window_pos(w, j, d->H, d->W, d->ws, d->shift, &region[j]);
}

/* Query j's scores over the window's keys, head h: q.k scale + bias + mask. base: qkv of image b. */
static void win_scores(float *s, const WinDims *d, const float *base, const float *table, const int64_t *pos,
                       const int *region, int64_t j, int64_t h, float scale) {
  const float *q = base + pos[j] * 3 * d->C + h * d->hs;
  for (int64_t k = 0; k < d->N; k++)
    s[k] = dot(q, base + pos[k] * 3 * d->C + d->C + h * d->hs, d->hs) * scale +
           table[rt_window_rel(j, k, d->ws) * d->NH + h] + (region[j] != region[k] ? -100.0f : 0.0f);
}

static void win_forward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  WinDims d = win_dims(A);
  float *out = A->o[0], *lse = A->o[1];
  for (int64_t it = lo; it < hi; it++) { /* (b, window, head) */
    int64_t b = it / (d.nw * d.NH), w = it / d.NH % d.nw, h = it % d.NH;
    int64_t pos[RT_WIN_MAX];
    int region[RT_WIN_MAX];
    float p[RT_WIN_MAX];
    const float *base = A->i[0] + b * d.H * d.W * 3 * d.C;
    win_tokens(&d, w, pos, region);
    for (int64_t j = 0; j < d.N; j++) {
      win_scores(p, &d, base, A->i[1], pos, region, j, h, A->f[0]);
      float mx = row_max(p, d.N);
      double sum = row_sum_exp(p, p, d.N, mx);
      float inv = (float)(1.0 / sum), *o = out + (b * d.H * d.W + pos[j]) * d.C + h * d.hs;
      for (int64_t i = 0; i < d.hs; i++) o[i] = 0.0f;
      for (int64_t k = 0; k < d.N; k++) {
        const float *v = base + pos[k] * 3 * d.C + 2 * d.C + h * d.hs;
        for (int64_t i = 0; i < d.hs; i++) o[i] += p[k] * inv * v[i];
      }
      if (lse) lse[(b * d.NH + h) * d.H * d.W + pos[j]] = mx + (float)log(sum);
    }
  }
}

static void win_check(int64_t H, int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  RT_CHECK(NH > 0 && C % NH == 0, "window_attention needs C % NH == 0");
  RT_CHECK(ws > 0 && ws * ws <= RT_WIN_MAX && H % ws == 0 && W % ws == 0,
           "window_attention needs H and W multiples of ws, ws*ws <= 1024");
  RT_CHECK(shift >= 0 && shift < ws, "window_attention needs 0 <= shift < ws");
}

void rt_window_attention_forward(float *out, float *lse, const float *qkv, const float *table, int64_t B, int64_t H,
                                 int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  win_check(H, W, C, NH, ws, shift);
  RtArgs a = {.o = {out, lse}, .i = {qkv, table}, .d = {H, W, C, NH, ws, shift}, .f = {1.0f / sqrtf((float)(C / NH))}};
  rt_par(win_forward_task, &a, B * (H / ws) * (W / ws) * NH, rt_chunks(1));
}

/* One head h over every image and window, in a fixed order: it owns its q, k, v channels of dqkv and
 * its column of dtable, so heads never race. As attention's backward: p = exp(s - lse), D = g.out,
 * ds = p (g.v - D); dq += ds scale k, dk += ds scale q, dv += p g, dtable[row] += ds. */
static void win_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  WinDims d = win_dims(A);
  float *dqkv = A->o[0], *dtable = A->o[1], scale = A->f[0];
  const float *dout = A->i[0], *qkv = A->i[1], *table = A->i[2], *out = A->i[3], *lse = A->i[4];
  int64_t M = d.H * d.W, R = (2 * d.ws - 1) * (2 * d.ws - 1);
  for (int64_t h = lo; h < hi; h++) {
    if (dqkv && !A->acc[0])
      for (int64_t t = 0; t < A->d[6] * M; t++)
        for (int64_t part = 0; part < 3; part++)
          memset(dqkv + t * 3 * d.C + part * d.C + h * d.hs, 0, (size_t)d.hs * sizeof(float));
    if (dtable && !A->acc[1])
      for (int64_t r = 0; r < R; r++) dtable[r * d.NH + h] = 0.0f;
    for (int64_t b = 0; b < A->d[6]; b++)
      for (int64_t w = 0; w < d.nw; w++) {
        int64_t pos[RT_WIN_MAX];
        int region[RT_WIN_MAX];
        float s[RT_WIN_MAX];
        const float *base = qkv + b * M * 3 * d.C;
        float *dbase = dqkv ? dqkv + b * M * 3 * d.C : NULL;
        win_tokens(&d, w, pos, region);
        for (int64_t j = 0; j < d.N; j++) {
          int64_t row = (b * M + pos[j]) * d.C + h * d.hs;
          const float *g = dout + row, *q = base + pos[j] * 3 * d.C + h * d.hs;
          float D = dot(g, out + row, d.hs), l = lse[(b * d.NH + h) * M + pos[j]];
          win_scores(s, &d, base, table, pos, region, j, h, scale);
          for (int64_t k = 0; k < d.N; k++) {
            const float *kk = base + pos[k] * 3 * d.C + d.C + h * d.hs, *v = kk + d.C;
            float p = expf(s[k] - l), ds = p * (dot(g, v, d.hs) - D);
            if (dtable) dtable[rt_window_rel(j, k, d.ws) * d.NH + h] += ds;
            if (!dbase) continue;
            float *dq = dbase + pos[j] * 3 * d.C + h * d.hs, *dk = dbase + pos[k] * 3 * d.C + d.C + h * d.hs;
            for (int64_t i = 0; i < d.hs; i++) {
              dq[i] += ds * scale * kk[i];
              dk[i] += ds * scale * q[i];
              dk[d.C + i] += p * g[i];
            }
          }
        }
      }
  }
}

void rt_window_attention_backward(float *dqkv, float *dtable, const float *dout, const float *qkv, const float *table,
                                  const float *out, const float *lse, int64_t B, int64_t H, int64_t W, int64_t C,
                                  int64_t NH, int64_t ws, int64_t shift, int acc, int acc_table) {
  win_check(H, W, C, NH, ws, shift);
  if (!dqkv && !dtable) return;
  RtArgs a = {.o = {dqkv, dtable},
              .i = {dout, qkv, table, out, lse},
              .d = {H, W, C, NH, ws, shift, B},
              .acc = {acc, acc_table},
              .f = {1.0f / sqrtf((float)(C / NH))}};
  rt_par(win_backward_task, &a, NH, rt_chunks(1));
}
