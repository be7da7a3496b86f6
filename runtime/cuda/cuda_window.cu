/* cuda_window.cu: the CUDA backend's shifted-window attention, Swin's (cuda_internal.cuh; the geometry is
 * rt_window_pos and rt_window_rel of memplan_kernels.h, shared with cpu_window.c).
 *
 * Plain kernels, one thread per row and no shared memory: a window has a few dozen tokens (49 in
 * torchvision's Swin), so a query row's scores are recomputed where needed rather than stored.
 * Forward: one thread per (image, window, head, query), two passes over the keys (max and sum, then
 * the weighted values added into out). Backward, three kernels that each own what they write, so
 * there are no atomics and every sum runs in one order: dq per query row, dk and dv per key row, and
 * the table's gradient per (table row, head), summing over the images, windows and the one key each
 * query has at that offset. */
#include "cuda_internal.cuh"

typedef struct {
  int64_t B, H, W, C, NH, ws, shift, hs, N, nw, rows; /* rows: B nw NH N */
  float scale;
} WinArgs;

static WinArgs win_args(int64_t B, int64_t H, int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  RT_CHECK(NH > 0 && C % NH == 0, "window_attention needs C % NH == 0");
  RT_CHECK(ws > 0 && H % ws == 0 && W % ws == 0, "window_attention needs H and W multiples of ws");
  RT_CHECK(shift >= 0 && shift < ws, "window_attention needs 0 <= shift < ws");
  WinArgs a = {B, H, W, C, NH, ws, shift, C / NH, ws * ws, H / ws * (W / ws), 0, 1.0f / sqrtf((float)(C / NH))};
  a.rows = B * a.nw * NH * a.N;
  return a;
}

/* Query j's (flat position of image b's) score of key k, head h, both tokens of window w. */
static __device__ float win_score(const WinArgs &a, const float *qkv, const float *table, int64_t b, int64_t w,
                                  int64_t h, int64_t j, int64_t k) {
  int rj, rk;
  int64_t pj = rt_window_pos(w, j, a.H, a.W, a.ws, a.shift, &rj),
          pk = rt_window_pos(w, k, a.H, a.W, a.ws, a.shift, &rk);
  const float *q = qkv + (b * a.H * a.W + pj) * 3 * a.C + h * a.hs,
              *kk = qkv + (b * a.H * a.W + pk) * 3 * a.C + a.C + h * a.hs;
  float s = 0.0f;
  for (int64_t i = 0; i < a.hs; i++) s += q[i] * kk[i];
  return s * a.scale + table[rt_window_rel(j, k, a.ws) * a.NH + h] + (rj != rk ? -100.0f : 0.0f);
}

/* Row it = ((b nw + w) NH + h) N + j. */
#define WIN_ROW(a, it)                                                                          \
  int64_t j = (it) % (a).N, h = (it) / (a).N % (a).NH, w = (it) / ((a).N * (a).NH) % (a).nw,    \
          b = (it) / ((a).N * (a).NH * (a).nw);                                                 \
  int reg_;                                                                                     \
  int64_t pj = b * (a).H * (a).W + rt_window_pos(w, j, (a).H, (a).W, (a).ws, (a).shift, &reg_); \
  (void)reg_

static __global__ void win_forward_kernel(float *out, float *lse, const float *qkv, const float *table, WinArgs a) {
  GRID_STRIDE(it, a.rows) {
    WIN_ROW(a, it);
    float mx = -INFINITY;
    for (int64_t k = 0; k < a.N; k++) mx = fmaxf(mx, win_score(a, qkv, table, b, w, h, j, k));
    double sum = 0.0;
    for (int64_t k = 0; k < a.N; k++) sum += (double)expf(win_score(a, qkv, table, b, w, h, j, k) - mx);
    float l = mx + (float)log(sum), *o = out + pj * a.C + h * a.hs;
    for (int64_t i = 0; i < a.hs; i++) o[i] = 0.0f;
    for (int64_t k = 0; k < a.N; k++) {
      int rk;
      float p = expf(win_score(a, qkv, table, b, w, h, j, k) - l);
      const float *v =
          qkv + (b * a.H * a.W + rt_window_pos(w, k, a.H, a.W, a.ws, a.shift, &rk)) * 3 * a.C + 2 * a.C + h * a.hs;
      for (int64_t i = 0; i < a.hs; i++) o[i] += p * v[i];
    }
    if (lse) lse[(b * a.NH + h) * a.H * a.W + pj - b * a.H * a.W] = l;
  }
}

/* ds of query j and key k (j's D and lse given): p (g_j . v_k - D); *p_out = p. */
static __device__ float win_ds(const WinArgs &a, const float *dout, const float *qkv, const float *table, int64_t b,
                               int64_t w, int64_t h, int64_t j, int64_t k, int64_t pj, float D, float l, float *p_out) {
  int rk;
  int64_t pk = b * a.H * a.W + rt_window_pos(w, k, a.H, a.W, a.ws, a.shift, &rk);
  float p = expf(win_score(a, qkv, table, b, w, h, j, k) - l), gv = 0.0f;
  const float *g = dout + pj * a.C + h * a.hs, *v = qkv + pk * 3 * a.C + 2 * a.C + h * a.hs;
  for (int64_t i = 0; i < a.hs; i++) gv += g[i] * v[i];
  *p_out = p;
  return p * (gv - D);
}

/* D = g . out and lse of query row (b, h, flat position pj). */
static __device__ void win_row_stats(const WinArgs &a, const float *dout, const float *out, const float *lse, int64_t b,
                                     int64_t h, int64_t pj, float *D, float *l) {
  const float *g = dout + pj * a.C + h * a.hs, *o = out + pj * a.C + h * a.hs;
  float s = 0.0f;
  for (int64_t i = 0; i < a.hs; i++) s += g[i] * o[i];
  *D = s;
  *l = lse[(b * a.NH + h) * a.H * a.W + pj - b * a.H * a.W];
}

static __global__ void win_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *table,
                                     const float *out, const float *lse, WinArgs a, int acc) {
  GRID_STRIDE(it, a.rows) {
    WIN_ROW(a, it);
    float D, l, p;
    win_row_stats(a, dout, out, lse, b, h, pj, &D, &l);
    float *dq = dqkv + pj * 3 * a.C + h * a.hs;
    if (!acc)
      for (int64_t i = 0; i < a.hs; i++) dq[i] = 0.0f;
    for (int64_t k = 0; k < a.N; k++) {
      int rk;
      float ds = win_ds(a, dout, qkv, table, b, w, h, j, k, pj, D, l, &p) * a.scale;
      const float *kk =
          qkv + (b * a.H * a.W + rt_window_pos(w, k, a.H, a.W, a.ws, a.shift, &rk)) * 3 * a.C + a.C + h * a.hs;
      for (int64_t i = 0; i < a.hs; i++) dq[i] += ds * kk[i];
    }
  }
}

/* Row it is key k's (k in j's place of WIN_ROW); it sums over the window's queries. */
static __global__ void win_dkv_kernel(float *dqkv, const float *dout, const float *qkv, const float *table,
                                      const float *out, const float *lse, WinArgs a, int acc) {
  GRID_STRIDE(it, a.rows) {
    WIN_ROW(a, it);
    int64_t k = j, pk = pj;
    float *dk = dqkv + pk * 3 * a.C + a.C + h * a.hs, *dv = dk + a.C;
    if (!acc)
      for (int64_t i = 0; i < a.hs; i++) dk[i] = dv[i] = 0.0f;
    for (int64_t q = 0; q < a.N; q++) {
      int rq;
      int64_t pq = b * a.H * a.W + rt_window_pos(w, q, a.H, a.W, a.ws, a.shift, &rq);
      float D, l, p;
      win_row_stats(a, dout, out, lse, b, h, pq, &D, &l);
      float ds = win_ds(a, dout, qkv, table, b, w, h, q, k, pq, D, l, &p) * a.scale;
      const float *qq = qkv + pq * 3 * a.C + h * a.hs, *g = dout + pq * a.C + h * a.hs;
      for (int64_t i = 0; i < a.hs; i++) {
        dk[i] += ds * qq[i];
        dv[i] += p * g[i];
      }
    }
  }
}

/* Thread (r, h): table row r is the offset (dy, dx) = (r / (2ws-1), r % (2ws-1)) - (ws-1) of query minus
 * key; each query j has at most one key at it. */
static __global__ void win_dtable_kernel(float *dtable, const float *dout, const float *qkv, const float *table,
                                         const float *out, const float *lse, WinArgs a, int acc) {
  int64_t span = 2 * a.ws - 1;
  GRID_STRIDE(it, span * span * a.NH) {
    int64_t r = it / a.NH, h = it % a.NH, dy = r / span - (a.ws - 1), dx = r % span - (a.ws - 1);
    double sum = 0.0;
    for (int64_t b = 0; b < a.B; b++)
      for (int64_t w = 0; w < a.nw; w++)
        for (int64_t j = 0; j < a.N; j++) {
          int64_t ky = j / a.ws - dy, kx = j % a.ws - dx;
          if (ky < 0 || ky >= a.ws || kx < 0 || kx >= a.ws) continue;
          int rj;
          int64_t pj = b * a.H * a.W + rt_window_pos(w, j, a.H, a.W, a.ws, a.shift, &rj);
          float D, l, p;
          win_row_stats(a, dout, out, lse, b, h, pj, &D, &l);
          sum += win_ds(a, dout, qkv, table, b, w, h, j, ky * a.ws + kx, pj, D, l, &p);
        }
    dtable[it] = acc ? dtable[it] + (float)sum : (float)sum;
  }
}

void rt_cuda_window_attention_forward(float *out, float *lse, const float *qkv, const float *table, int64_t B,
                                      int64_t H, int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  need_ctx();
  WinArgs a = win_args(B, H, W, C, NH, ws, shift);
  if (a.rows == 0) return;
  win_forward_kernel<<<grid_for(a.rows, 128), 128, 0, ctx.stream>>>(out, lse, qkv, table, a);
  LAUNCH_CHECK();
}

void rt_cuda_window_attention_backward(float *dqkv, float *dtable, const float *dout, const float *qkv,
                                       const float *table, const float *out, const float *lse, int64_t B, int64_t H,
                                       int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift, int acc,
                                       int acc_table) {
  need_ctx();
  WinArgs a = win_args(B, H, W, C, NH, ws, shift);
  if (dqkv && a.rows) {
    win_dq_kernel<<<grid_for(a.rows, 128), 128, 0, ctx.stream>>>(dqkv, dout, qkv, table, out, lse, a, acc);
    LAUNCH_CHECK();
    win_dkv_kernel<<<grid_for(a.rows, 128), 128, 0, ctx.stream>>>(dqkv, dout, qkv, table, out, lse, a, acc);
    LAUNCH_CHECK();
  }
  if (dtable) {
    int64_t n = (2 * ws - 1) * (2 * ws - 1) * NH;
    win_dtable_kernel<<<grid_for(n, 128), 128, 0, ctx.stream>>>(dtable, dout, qkv, table, out, lse, a, acc_table);
    LAUNCH_CHECK();
  }
}
