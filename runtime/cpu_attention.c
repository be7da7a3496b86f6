/* cpu_attention.c: the CPU backend's self-attention and rope (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// self-attention (causal or not, grouped-query)
//
// Layout: qkv[b,t,:] = q (C = NH*hs) | k (KC = KVH*hs) | v (KC); query head h
// uses channels h*hs..h*hs+hs-1 of q and those of kv head h / (NH/KVH) in k
// and v. A causal (b,t,h) query row reads keys and values of positions 0..t
// only, a non-causal one all T.

/* One query row: p[0..n) = softmax(q . k[t2] * scale), out = sum_t2 p[t2] v[t2];
 * returns the row's log-sum-exp of scaled scores. k and v point at position 0
 * of this row's kv head; positions are C3 floats apart; p is n floats of
 * scratch. */
static float attention_row(float *out, float *p, const float *q, const float *k, const float *v, int64_t n, int64_t hs,
                           int64_t C3, float scale) {
  for (int64_t t2 = 0; t2 < n; t2++) p[t2] = dot(q, k + t2 * C3, hs) * scale;
  float mx = row_max(p, n);
  double s = row_sum_exp(p, p, n, mx);
  float inv = (float)(1.0 / s);
  for (int64_t i = 0; i < hs; i++) out[i] = 0.0f;
  for (int64_t t2 = 0; t2 < n; t2++) {
    float w = p[t2] * inv;
    const float *v2 = v + t2 * C3;
    for (int64_t i = 0; i < hs; i++) out[i] += w * v2[i];
  }
  return mx + (float)log(s);
}

static void attention_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *lse = A->o[1];
  const float *qkv = A->i[0];
  int64_t T = A->d[0], C = A->d[1], NH = A->d[2], hs = A->d[3], C3 = A->d[4], KC = A->d[5], group = A->d[6];
  int64_t causal = A->d[7];
  float scale = A->f[0];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / (T * NH);
    int64_t t = it / NH % T;
    int64_t h = it % NH;
    float p[RT_ATT_MAX_T]; // only p[0..n) is touched
    const float *base = qkv + b * T * C3, *k = base + C + h / group * hs;
    float l = attention_row(out + (b * T + t) * C + h * hs, p, base + t * C3 + h * hs, k, k + KC, causal ? t + 1 : T,
                            hs, C3, scale);
    if (lse) lse[(b * NH + h) * T + t] = l;
  }
}

void rt_attention_forward(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                          int64_t KVH, int64_t causal) {
  RT_CHECK(T <= RT_ATT_MAX_T, "attention needs T <= 16384");
  RT_CHECK(NH > 0 && KVH > 0 && C % NH == 0 && NH % KVH == 0, "attention needs C % NH == 0 and NH % KVH == 0");
  int64_t hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  RtArgs a = {
      .o = {out, lse}, .i = {qkv}, .d = {T, C, NH, hs, C + 2 * KVH * hs, KVH * hs, NH / KVH, causal}, .f = {scale}};
  rt_par(attention_task, &a, B * T * NH, rt_chunks(1));
}

/* Backward of one query row with output grad g over keys 0..n-1,
 * FlashAttention-style: the probabilities are recomputed as
 * p = exp(q . k[t2] scale - lse), and the softmax backward's sum_t2 p dp
 * equals D = g . out (out = sum p v), so one pass over t2 suffices:
 * dp = g . v[t2], ds = p (dp - D) scale, dq += ds k[t2], dk[t2] += ds q,
 * dv[t2] += p g. No scratch; one sweep over the rows of k, v, dk and dv
 * (measured: a second sweep, to vectorize the exp over t2, costs more than
 * it saves; rows are C3 floats apart). */
static void attention_row_backward(float *dq, float *dk, float *dv, const float *g, const float *o, float lse,
                                   const float *q, const float *k, const float *v, int64_t n, int64_t hs, int64_t C3,
                                   float scale) {
  float D = dot(g, o, hs);
  for (int64_t t2 = 0; t2 < n; t2++) {
    const float *k2 = k + t2 * C3, *v2 = v + t2 * C3;
    float p = expf(dot(q, k2, hs) * scale - lse);
    float ds = p * (dot(g, v2, hs) - D) * scale;
    float *dk2 = dk + t2 * C3, *dv2 = dv + t2 * C3;
    for (int64_t i = 0; i < hs; i++) {
      dq[i] += ds * k2[i];
      dk2[i] += ds * q[i];
      dv2[i] += p * g[i];
    }
  }
}

/* One (b, kv head): every row of its group's query heads, in a fixed order. */
static void attention_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dqkv = A->o[0];
  const float *dout = A->i[0], *qkv = A->i[1], *out = A->i[2], *lse = A->i[3];
  int64_t T = A->d[0], C = A->d[1], NH = A->d[2], hs = A->d[3], C3 = A->d[4], KC = A->d[5], group = A->d[6];
  int64_t causal = A->d[7], KVH = NH / group;
  float scale = A->f[0];
  int acc = A->acc[0];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / KVH;
    int64_t kh = it % KVH;
    const float *base = qkv + b * T * C3, *k = base + C + kh * hs;
    float *dbase = dqkv + b * T * C3, *dk = dbase + C + kh * hs;
    if (!acc)
      for (int64_t t = 0; t < T; t++) {
        memset(dbase + t * C3 + kh * group * hs, 0, (size_t)(group * hs) * sizeof(float)); // the group's dq
        memset(dk + t * C3, 0, (size_t)hs * sizeof(float));
        memset(dk + KC + t * C3, 0, (size_t)hs * sizeof(float));
      }
    for (int64_t h = kh * group; h < (kh + 1) * group; h++)
      for (int64_t t = 0; t < T; t++) {
        int64_t row = (b * T + t) * C + h * hs;
        attention_row_backward(dbase + t * C3 + h * hs, dk, dk + KC, dout + row, out + row, lse[(b * NH + h) * T + t],
                               base + t * C3 + h * hs, k, k + KC, causal ? t + 1 : T, hs, C3, scale);
      }
  }
}

void rt_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                           int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, int acc) {
  RT_CHECK(NH > 0 && KVH > 0 && C % NH == 0 && NH % KVH == 0, "attention needs C % NH == 0 and NH % KVH == 0");
  if (!dqkv) return; // its one gradient is not needed
  int64_t hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  // Parallel over (b, kv head) only: a row adds into dk, dv of every key it
  // sees, and the query heads of a group share their kv head's dk, dv; a
  // (b, kv head) pair owns those and its group's dq, so pairs never race and
  // each sum runs in one order whatever the thread count.
  RtArgs a = {.o = {dqkv},
              .i = {dout, qkv, out, lse},
              .d = {T, C, NH, hs, C + 2 * KVH * hs, KVH * hs, NH / KVH, causal},
              .f = {scale},
              .acc = {acc}};
  rt_par(attention_backward_task, &a, B * KVH, rt_chunks(1));
}

// ----------------------------------------------------------------------------
// rope: the q and k heads of a packed qkv rotated pairwise by position

/* Frequencies per pass over a chunk's rows: their theta^(-2i/hd) on the stack. */
#define RT_ROPE_FREQS 256

/* Rows are positions (b, t). Each frequency's cos and sin, computed once per
 * row, serve every q and k head; a pair is read before it is written, so out
 * may be x. sign -1 rotates backward; acc adds (never with out == x). */
static void rope_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *x = A->i[0];
  int64_t T = A->d[0], nr = A->d[1] + A->d[2], KV = A->d[2], hd = A->d[3], h2 = hd / 2, W = (nr + KV) * hd;
  double theta = A->f[0];
  float sign = A->f[5];
  int acc = A->acc[0];
  for (int64_t i0 = 0; i0 < h2; i0 += RT_ROPE_FREQS) {
    int64_t ni = h2 - i0 < RT_ROPE_FREQS ? h2 - i0 : RT_ROPE_FREQS;
    double inv[RT_ROPE_FREQS];
    for (int64_t j = 0; j < ni; j++) inv[j] = rt_rope_freq(theta, i0 + j, hd, A->f[1], A->f[2], A->f[3], A->f[4]);
    for (int64_t r = lo; r < hi; r++) {
      const float *xr = x + r * W;
      float *orow = out + r * W;
      for (int64_t j = 0; j < ni; j++) {
        double a = (double)(r % T) * inv[j];
        float c = (float)cos(a), s = sign * (float)sin(a);
        for (int64_t h = 0; h < nr; h++) {
          int64_t k = h * hd + i0 + j;
          float x1 = xr[k], x2 = xr[k + h2];
          float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
          orow[k] = acc ? orow[k] + y1 : y1;
          orow[k + h2] = acc ? orow[k + h2] + y2 : y2;
        }
      }
    }
  }
  if (out == x && !acc) return; // v is already in place
  for (int64_t r = lo; r < hi; r++)
    for (int64_t k = nr * hd; k < W; k++) out[r * W + k] = acc ? out[r * W + k] + x[r * W + k] : x[r * W + k];
}

static void rope(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, const float *s,
                 float sign, int acc) {
  RT_CHECK(hd % 2 == 0, "rope needs an even head dimension");
  RtArgs a = {.o = {out}, .i = {x}, .d = {T, H, KV, hd}, .acc = {acc}, .f = {s[0], s[1], s[2], s[3], s[4], sign}};
  rt_par(rope_task, &a, B * T, rt_chunks(B * T * (H + 2 * KV) * hd >= RT_PAR_MIN));
}

void rt_rope_forward(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta,
                     float factor, float low, float high, float orig) {
  rope(out, x, B, T, H, KV, hd, (const float[5]){theta, factor, low, high, orig}, 1.0f, 0);
}

void rt_rope_backward(float *dx, const float *dout, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                      float theta, float factor, float low, float high, float orig, int acc) {
  if (dx) rope(dx, dout, B, T, H, KV, hd, (const float[5]){theta, factor, low, high, orig}, -1.0f, acc);
}
