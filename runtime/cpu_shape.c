/* cpu_shape.c: the CPU backend's embeddings and shape ops (flatten, reshape, transpose, ...) (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// embeddings

static void embedding_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const int32_t *tokens = A->tok;
  const float *W = A->i[0];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    memcpy(out + i * C, W + (int64_t)tokens[i] * C, (size_t)C * sizeof(float));
  }
}

void rt_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V) {
  (void)V; // ids were checked by the data loader
  RtArgs a = {.o = {out}, .i = {W}, .tok = tokens, .d = {C}};
  rt_par(embedding_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

static void embedding_zero_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  int64_t C = A->d[0];
  for (int64_t v = lo; v < hi; v++) {
    memset(dW + v * C, 0, (size_t)C * sizeof(float));
  }
}

static void embedding_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  const float *dout = A->i[0];
  const int32_t *tokens = A->tok;
  int64_t N = A->d[0], C = A->d[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = it * RT_COL_BLOCK;
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    for (int64_t i = 0; i < N; i++) {
      float *row = dW + (int64_t)tokens[i] * C + j0;
      const float *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) row[j] += gi[j];
    }
  }
}

void rt_embedding_backward(float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V,
                           int acc) {
  if (!acc) {
    rt_par(embedding_zero_task, &(RtArgs){.o = {dW}, .d = {C}}, V, rt_chunks(V * C >= RT_PAR_MIN));
  }
  // Repeated tokens add into the same row: tasks own column blocks, not rows.
  RtArgs a = {.o = {dW}, .i = {dout}, .tok = tokens, .d = {N, C}};
  rt_par(embedding_backward_task, &a, col_blocks(C), rt_chunks(N * C >= RT_PAR_MIN));
}

static void position_embedding_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *W = A->i[0];
  int64_t T = A->d[0], C = A->d[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t b = it / T;
    int64_t t = it % T;
    memcpy(out + (b * T + t) * C, W + t * C, (size_t)C * sizeof(float));
  }
}

void rt_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T, int64_t C) {
  RtArgs a = {.o = {out}, .i = {W}, .d = {T, C}};
  rt_par(position_embedding_task, &a, B * T, rt_chunks(B * T * C >= RT_PAR_MIN));
}

static void position_embedding_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  const float *dout = A->i[0];
  int64_t B = A->d[0], T = A->d[1], C = A->d[2];
  int acc = A->acc[0];
  for (int64_t t = lo; t < hi; t++) {
    float *row = dW + t * C;
    if (!acc) memset(row, 0, (size_t)C * sizeof(float));
    if (t >= T) continue;
    for (int64_t b = 0; b < B; b++) {
      const float *gi = dout + (b * T + t) * C;
      for (int64_t j = 0; j < C; j++) row[j] += gi[j];
    }
  }
}

void rt_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows,
                                    int acc) {
  RtArgs a = {.o = {dW}, .i = {dout}, .d = {B, T, C}, .acc = {acc}};
  rt_par(position_embedding_backward_task, &a, Wrows, rt_chunks(Wrows * C >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// shape ops: flatten and reshape (a copy, or nothing in place), transpose,
// concat, class_token, select. Data movement only, parallel over elements
// (a task may start mid-row) or over tiles; the one sum (class_token's dW)
// is over column blocks in batch order, as colsum.

/* dst[r * ds + j] (+)= src[r * ss + j] for rows r < rows, j < len: a block
 * of a strided tensor (ss = 0 repeats one row of src). */
typedef struct {
  float *dst;
  const float *src;
  int64_t ds, ss, len;
  int acc;
} BlockTask;

static void block_task(const void *ctx, int64_t lo, int64_t hi) {
  const BlockTask *b = ctx;
  int64_t r = lo / b->len, j = lo % b->len;
  for (int64_t e = lo; e < hi; r++, j = 0) {
    int64_t k = b->len - j < hi - e ? b->len - j : hi - e;
    float *d = b->dst + r * b->ds + j;
    const float *s = b->src + r * b->ss + j;
    if (b->acc)
      for (int64_t i = 0; i < k; i++) d[i] += s[i];
    else memcpy(d, s, (size_t)k * sizeof(float));
    e += k;
  }
}

static void block_copy(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t len, int acc) {
  if (!dst || rows <= 0 || len <= 0) return;
  BlockTask b = {dst, src, ds, ss, len, acc};
  rt_par(block_task, &b, rows * len, rt_chunks(rows * len >= RT_PAR_MIN));
}

/* flatten, reshape: the same elements; dst == src with acc = 0 is in place. */
static void same_elements(float *dst, const float *src, int64_t n, int acc) {
  if (!dst || (dst == src && !acc)) return;
  RT_CHECK(dst != src, "an in-place shape op's gradient cannot accumulate into its own input");
  block_copy(dst, n, src, n, 1, n, acc);
}

void rt_flatten_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_flatten_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }
void rt_reshape_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_reshape_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }

/* Tiles of the (p, q) plane: both sides of a tile stay in cache. */
#define RT_TILE 32

/* out[a, q, m, p, z] (+)= in[a, p, m, q, z]; a task runs whole tiles of one (a, m). */
static void transpose_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *in = A->i[0];
  int64_t P = A->d[0], M = A->d[1], Q = A->d[2], Z = A->d[3];
  int64_t tp = (P + RT_TILE - 1) / RT_TILE, tq = (Q + RT_TILE - 1) / RT_TILE;
  int acc = A->acc[0];
  for (int64_t t = lo; t < hi; t++) {
    int64_t am = t / (tp * tq), tile = t % (tp * tq), a = am / M, m = am % M;
    int64_t p0 = tile / tq * RT_TILE, q0 = tile % tq * RT_TILE;
    int64_t p1 = p0 + RT_TILE < P ? p0 + RT_TILE : P, q1 = q0 + RT_TILE < Q ? q0 + RT_TILE : Q;
    if (Z == 1) { // the common case ([B, C, N] -> [B, N, C]): reads along q, writes across the tile
      const float *s = in + (a * P * M + m) * Q;
      float *o = out + (a * Q * M + m) * P;
      int64_t sp = M * Q, oq = M * P;
      if (acc)
        for (int64_t p = p0; p < p1; p++)
          for (int64_t q = q0; q < q1; q++) o[q * oq + p] += s[p * sp + q];
      else
        for (int64_t p = p0; p < p1; p++)
          for (int64_t q = q0; q < q1; q++) o[q * oq + p] = s[p * sp + q];
      continue;
    }
    for (int64_t q = q0; q < q1; q++)
      for (int64_t p = p0; p < p1; p++) {
        const float *s = in + (((a * P + p) * M + m) * Q + q) * Z;
        float *o = out + (((a * Q + q) * M + m) * P + p) * Z;
        for (int64_t z = 0; z < Z; z++) o[z] = acc ? o[z] + s[z] : s[z];
      }
  }
}

static void transpose(float *out, const float *in, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z, int acc) {
  if (!out) return;
  RtArgs a = {.o = {out}, .i = {in}, .d = {P, M, Q, Z}, .acc = {acc}};
  int64_t tiles = A * M * ((P + RT_TILE - 1) / RT_TILE) * ((Q + RT_TILE - 1) / RT_TILE);
  rt_par(transpose_task, &a, tiles, rt_chunks(A * P * M * Q * Z >= RT_PAR_MIN));
}

void rt_transpose_forward(float *out, const float *x, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z) {
  transpose(out, x, A, P, M, Q, Z, 0);
}

void rt_transpose_backward(float *dx, const float *dout, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z,
                           int acc) {
  transpose(dx, dout, A, Q, M, P, Z, acc); // dout is [A, Q, M, P, Z]
}

void rt_concat_forward(float *out, const float *a0, const float *a1, const float *a2, const float *a3, const float *a4,
                       const float *a5, int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                       int64_t n4, int64_t n5) {
  const float *a[6] = {a0, a1, a2, a3, a4, a5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  for (int k = 0; k < 6; off += n[k++])
    if (a[k] && n[k]) block_copy(out + off * In, W * In, a[k], n[k] * In, O, n[k] * In, 0);
}

void rt_concat_backward(float *da0, float *da1, float *da2, float *da3, float *da4, float *da5, const float *dout,
                        int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4, int64_t n5,
                        int acc0, int acc1, int acc2, int acc3, int acc4, int acc5) {
  float *da[6] = {da0, da1, da2, da3, da4, da5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  int acc[6] = {acc0, acc1, acc2, acc3, acc4, acc5};
  for (int k = 0; k < 6; off += n[k++]) // in order: one buffer may take several slices
    if (da[k] && n[k]) block_copy(da[k], n[k] * In, dout + off * In, W * In, O, n[k] * In, acc[k]);
}

void rt_class_token_forward(float *out, const float *x, const float *W, int64_t B, int64_t N, int64_t C) {
  block_copy(out, (N + 1) * C, W, 0, B, C, 0);
  block_copy(out + C, (N + 1) * C, x, N * C, B, N * C, 0);
}

/* dW[j] (+)= sum_b dout[b, 0, j], column blocks, the batch in order. */
static void class_token_dw_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dW = A->o[0];
  const float *dout = A->i[0];
  int64_t B = A->d[0], C = A->d[1], S = A->d[2];
  for (int64_t j0 = lo * RT_COL_BLOCK; j0 < hi * RT_COL_BLOCK && j0 < C; j0 += RT_COL_BLOCK) {
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    double s[RT_COL_BLOCK] = {0};
    for (int64_t b = 0; b < B; b++)
      for (int64_t j = 0; j < nj; j++) s[j] += dout[b * S + j0 + j];
    for (int64_t j = 0; j < nj; j++) dW[j0 + j] = (float)(A->acc[0] ? dW[j0 + j] + s[j] : s[j]);
  }
}

void rt_class_token_backward(float *dx, float *dW, const float *dout, int64_t B, int64_t N, int64_t C, int acc_dx,
                             int acc_dW) {
  block_copy(dx, N * C, dout + C, (N + 1) * C, B, N * C, acc_dx);
  if (!dW) return;
  RtArgs a = {.o = {dW}, .i = {dout}, .d = {B, C, (N + 1) * C}, .acc = {acc_dW}};
  rt_par(class_token_dw_task, &a, col_blocks(C), rt_chunks(B * C >= RT_PAR_MIN));
}

void rt_select_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t index) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  block_copy(out, In, x + index * In, N * In, O, In, 0);
}

/* Rows (o, n) of dx: dout's row at n = index, 0 elsewhere (acc = 0). */
static void select_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0];
  int64_t N = A->d[0], In = A->d[1], index = A->d[2];
  int acc = A->acc[0];
  for (int64_t r = lo; r < hi; r++) {
    float *d = dx + r * In;
    const float *g = dout + r / N * In;
    if (r % N != index) {
      if (!acc) memset(d, 0, (size_t)In * sizeof(float));
    } else if (acc) {
      for (int64_t i = 0; i < In; i++) d[i] += g[i];
    } else {
      memcpy(d, g, (size_t)In * sizeof(float));
    }
  }
}

void rt_select_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t index, int acc) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  if (!dx) return;
  RtArgs a = {.o = {dx}, .i = {dout}, .d = {N, In, index}, .acc = {acc}};
  rt_par(select_backward_task, &a, O * N, rt_chunks(O * N * In >= RT_PAR_MIN));
}

/* pad and its gradient: dst[O, Nd, In] (+)= src[O, Ns, In]'s rows n < min(Nd, Ns); with acc = 0, rows past Ns zeroed.
 */
static void pad_copy(float *dst, int64_t Nd, const float *src, int64_t Ns, int64_t O, int64_t In, int acc) {
  if (!dst) return;
  int64_t m = Nd < Ns ? Nd : Ns;
  block_copy(dst, Nd * In, src, Ns * In, O, m * In, acc);
  if (!acc && Nd > m)
    for (int64_t o = 0; o < O; o++) memset(dst + (o * Nd + m) * In, 0, (size_t)((Nd - m) * In) * sizeof(float));
}

void rt_pad_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t Nout) {
  pad_copy(out, Nout, x, N, O, In, 0);
}
void rt_pad_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t Nout, int acc) {
  pad_copy(dx, N, dout, Nout, O, In, acc);
}
