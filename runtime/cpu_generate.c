/* cpu_generate.c: generation from a planned KV cache on the CPU (memplan compile
 * --gen-context N; planner/decode.h). The eval schedule's ops run on n rows
 * at positions pos..pos+n-1 in the first n rows of their eval buffers:
 * prefill is the prompt's rows from position 0 in one pass, decode one row a
 * token. Attention writes each row's K and V into its layer's cache and
 * attends over the cache's positions 0..pos+r; rope turns row r by position
 * pos + r; the learned position embedding reads row pos + r; the logits are
 * the last row's only (a matrix-vector product, gemm's one-row case). The
 * kernels are the trainer's (rt_*, cpu.c) on the trainer's thread pool;
 * nothing here allocates. */
#include <math.h>
#include <string.h>

#include "memplan_kernels.h" /* rt_rope_freq */
#include "memplan_rt.h"
#include "memplan_trainer.h"

#define DEC_MAX_CONTEXT 16384 /* planner/decode.c's limit: one scores row on the stack */

typedef struct {
  const TrDecodeOp *o;
  float *out, *K, *V;
  const float *qkv;
  int64_t n, pos;
} Job;

/* Rows [lo, hi) of rope: each q and k head of row r turned pairwise by
 * position pos + r, as rt_rope_forward turns row t (cpu.c's rope_task). */
static void rope_task(const void *ctx, int64_t lo, int64_t hi) {
  const Job *j = ctx;
  const TrDecodeOp *o = j->o;
  int64_t H = o->d[0], KV = o->d[1], hd = o->d[2], h2 = hd / 2, W = (H + 2 * KV) * hd;
  for (int64_t r = lo; r < hi; r++) {
    float *x = j->out + r * W;
    for (int64_t i = 0; i < h2; i++) {
      double a = (double)(j->pos + r) * rt_rope_freq(o->f[0], i, hd, o->f[1], o->f[2], o->f[3], o->f[4]);
      float c = (float)cos(a), s = (float)sin(a);
      for (int64_t h = 0; h < H + KV; h++) {
        float x1 = x[h * hd + i], x2 = x[h * hd + i + h2];
        x[h * hd + i] = x1 * c - x2 * s, x[h * hd + i + h2] = x2 * c + x1 * s;
      }
    }
  }
}

/* Query rows (r, h) in [lo, hi): softmax(q . K[0..pos+r] / sqrt(hd)) V over
 * the cache, the kv head h / (heads / kv_heads); as cpu.c's attention_row
 * (the max first, the sum of exponentials in double). */
static void attention_task(const void *ctx, int64_t lo, int64_t hi) {
  const Job *j = ctx;
  const TrDecodeOp *o = j->o;
  int64_t H = o->d[0], KV = o->d[1], hd = o->d[2], C3 = (H + 2 * KV) * hd, KC = KV * hd;
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t it = lo; it < hi; it++) {
    int64_t r = it / H, h = it % H, n = j->pos + r + 1;
    const float *q = j->qkv + r * C3 + h * hd, *k = j->K + h / (H / KV) * hd, *v = j->V + h / (H / KV) * hd;
    float p[DEC_MAX_CONTEXT], mx = -INFINITY;
    for (int64_t t = 0; t < n; t++) {
      float s = 0.0f;
      for (int64_t i = 0; i < hd; i++) s += q[i] * k[t * KC + i];
      p[t] = s * scale;
      if (p[t] > mx) mx = p[t];
    }
    double sum = 0.0;
    for (int64_t t = 0; t < n; t++) sum += p[t] = expf(p[t] - mx);
    float inv = (float)(1.0 / sum), *out = j->out + r * H * hd + h * hd;
    for (int64_t i = 0; i < hd; i++) out[i] = 0.0f;
    for (int64_t t = 0; t < n; t++) {
      float w = p[t] * inv;
      for (int64_t i = 0; i < hd; i++) out[i] += w * v[t * KC + i];
    }
  }
}

void tr_decode(const TrModel *m, unsigned char *arena, int64_t n, int64_t pos) {
  for (int i = 0; i < m->ndecode; i++) {
    const TrDecodeOp *o = &m->decode[i];
    float *out = (float *)(arena + o->out);
    const float *x = o->in[0] >= 0 ? (const float *)(arena + o->in[0]) : NULL;
    const float *b = o->in[1] >= 0 ? (const float *)(arena + o->in[1]) : NULL;
    const float *c = o->in[2] >= 0 ? (const float *)(arena + o->in[2]) : NULL;
    int64_t w = o->cols;
    switch (o->kind) {
    case TR_DEC_EMBEDDING: rt_embedding_forward(out, (const int32_t *)x, b, n, w, m->vocab); break;
    case TR_DEC_POSITION: memcpy(out, x + pos * w, (size_t)(n * w) * sizeof(float)); break;
    case TR_DEC_ADD: rt_add_forward(out, x, b, n * w); break;
    case TR_DEC_MUL: rt_mul_forward(out, x, b, n * w); break;
    case TR_DEC_GELU: rt_gelu_forward(out, x, n * w, (int)o->d[0]); break;
    case TR_DEC_SILU: rt_silu_forward(out, x, n * w); break;
    case TR_DEC_LAYERNORM: rt_layernorm_forward(out, NULL, NULL, x, b, c, n, w, o->f[0]); break;
    case TR_DEC_RMSNORM: rt_rmsnorm_forward(out, NULL, x, b, n, w, o->f[0]); break;
    case TR_DEC_LINEAR: rt_linear_forward(out, x, b, c, n, o->d[0], w); break;
    case TR_DEC_LOGITS: rt_linear_forward(out, x + (n - 1) * o->d[0], b, c, 1, o->d[0], w); break;
    case TR_DEC_ROPE: {
      if (out != x) memcpy(out, x, (size_t)(n * (o->d[0] + 2 * o->d[1]) * o->d[2]) * sizeof(float));
      Job j = {.o = o, .out = out, .n = n, .pos = pos};
      rt_parallel(rope_task, &j, n);
      break;
    }
    case TR_DEC_ATTENTION: {
      int64_t KC = o->d[1] * o->d[2], C3 = (o->d[0] + 2 * o->d[1]) * o->d[2];
      float *K = (float *)(arena + o->cache), *V = K + m->gen_context * KC;
      for (int64_t r = 0; r < n; r++) { /* every new position first: row r attends to rows before it */
        memcpy(K + (pos + r) * KC, x + r * C3 + o->d[0] * o->d[2], (size_t)KC * sizeof(float));
        memcpy(V + (pos + r) * KC, x + r * C3 + o->d[0] * o->d[2] + KC, (size_t)KC * sizeof(float));
      }
      Job j = {.o = o, .out = out, .K = K, .V = V, .qkv = x, .n = n, .pos = pos};
      rt_parallel(attention_task, &j, n * o->d[0]);
      break;
    }
    }
  }
}
