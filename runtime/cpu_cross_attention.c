/* cpu_cross_attention.c: the CPU backend's cross-attention (cpu_internal.h).
 *
 * Layout: q[b,t,:] holds NH query heads of hs = C/NH floats; kv[b,s,:] holds
 * k (C) then v (C) for context position s, the same heads. Query row (b,t,h)
 * sees every key s < Tk of head h (no mask). As attention's, forward keeps
 * only each row's log-sum-exp and backward recomputes the probabilities. */
#include "cpu_internal.h"

/* Forward, one task per query row (b, t, h): scores over the Tk keys on the
 * stack, softmax, then the weighted sum of the values. */
static void xattn_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *lse = A->o[1];
  const float *q = A->i[0], *kv = A->i[1];
  int64_t Tq = A->d[0], Tk = A->d[1], C = A->d[2], NH = A->d[3], hs = C / NH;
  float scale = A->f[0];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / (Tq * NH), t = it / NH % Tq, h = it % NH;
    const float *qr = q + (b * Tq + t) * C + h * hs, *k = kv + b * Tk * 2 * C + h * hs, *v = k + C;
    float *o = out + (b * Tq + t) * C + h * hs;
    float p[RT_ATT_MAX_T]; // only p[0..Tk) is touched
    for (int64_t s = 0; s < Tk; s++) p[s] = dot(qr, k + s * 2 * C, hs) * scale;
    float mx = row_max(p, Tk);
    double sum = row_sum_exp(p, p, Tk, mx);
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < hs; i++) o[i] = 0.0f;
    for (int64_t s = 0; s < Tk; s++) {
      float w = p[s] * inv;
      for (int64_t i = 0; i < hs; i++) o[i] += w * v[s * 2 * C + i];
    }
    if (lse) lse[(b * NH + h) * Tq + t] = mx + (float)log(sum);
  }
}

void rt_cross_attention_forward(float *out, float *lse, const float *q, const float *kv, int64_t B, int64_t Tq,
                                int64_t Tk, int64_t C, int64_t NH) {
  RT_CHECK(Tk <= RT_ATT_MAX_T, "cross_attention needs Tk <= 16384");
  RT_CHECK(NH > 0 && C % NH == 0, "cross_attention needs C % NH == 0");
  RtArgs a = {.o = {out, lse}, .i = {q, kv}, .d = {Tq, Tk, C, NH}, .f = {1.0f / sqrtf((float)(C / NH))}};
  rt_par(xattn_task, &a, B * Tq * NH, rt_chunks(1));
}

/* Backward, one task per (b, h): it owns that head's dq rows and its dk, dv
 * columns of every context position, so tasks never race and each sum runs
 * in one order whatever the thread count. Per query row t, with
 * p = exp(q.k[s] scale - lse) and D = dout.out (softmax's sum_s p dp):
 * ds = p (dout.v[s] - D) scale, dq += ds k[s], dk[s] += ds q, dv[s] += p dout. */
static void xattn_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dq = A->o[0], *dkv = A->o[1];
  const float *dout = A->i[0], *q = A->i[1], *kv = A->i[2], *out = A->i[3], *lse = A->i[4];
  int64_t Tq = A->d[0], Tk = A->d[1], C = A->d[2], NH = A->d[3], hs = C / NH, C2 = 2 * C;
  float scale = A->f[0];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / NH, h = it % NH;
    const float *k = kv + b * Tk * C2 + h * hs, *v = k + C;
    float *dk = dkv ? dkv + b * Tk * C2 + h * hs : NULL;
    if (dk && !A->acc[1])
      for (int64_t s = 0; s < Tk; s++) {
        memset(dk + s * C2, 0, (size_t)hs * sizeof(float));
        memset(dk + C + s * C2, 0, (size_t)hs * sizeof(float));
      }
    for (int64_t t = 0; t < Tq; t++) {
      int64_t row = (b * Tq + t) * C + h * hs;
      const float *g = dout + row, *qr = q + row;
      float D = dot(g, out + row, hs), L = lse[(b * NH + h) * Tq + t];
      float *dqr = dq ? dq + row : NULL;
      if (dqr && !A->acc[0]) memset(dqr, 0, (size_t)hs * sizeof(float));
      for (int64_t s = 0; s < Tk; s++) {
        const float *ks = k + s * C2, *vs = v + s * C2;
        float p = expf(dot(qr, ks, hs) * scale - L);
        float ds = p * (dot(g, vs, hs) - D) * scale;
        if (dqr)
          for (int64_t i = 0; i < hs; i++) dqr[i] += ds * ks[i];
        if (dk)
          for (int64_t i = 0; i < hs; i++) {
            dk[s * C2 + i] += ds * qr[i];
            dk[C + s * C2 + i] += p * g[i];
          }
      }
    }
  }
}

void rt_cross_attention_backward(float *dq, float *dkv, const float *dout, const float *q, const float *kv,
                                 const float *out, const float *lse, int64_t B, int64_t Tq, int64_t Tk, int64_t C,
                                 int64_t NH, int acc_dq, int acc_dkv) {
  RT_CHECK(NH > 0 && C % NH == 0, "cross_attention needs C % NH == 0");
  if (!dq && !dkv) return;
  RtArgs a = {.o = {dq, dkv},
              .i = {dout, q, kv, out, lse},
              .d = {Tq, Tk, C, NH},
              .f = {1.0f / sqrtf((float)(C / NH))},
              .acc = {acc_dq, acc_dkv}};
  rt_par(xattn_backward_task, &a, B * NH, rt_chunks(1));
}
