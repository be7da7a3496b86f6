/* cuda_shape.cu: the CUDA backend's embeddings and shape ops (flatten, reshape, transpose, ...) (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// embeddings

static __global__ void embedding_forward_kernel(float *out, const int32_t *tokens, const float *W, int64_t N, int C) {
  GRID_STRIDE(i, N * C) {
    int64_t row = i / C;
    out[i] = W[(int64_t)tokens[row] * C + (i - row * C)];
  }
}

// Embedding backward, deterministic without sorting or scratch: rows of dW
// are split into EMB_BUCKETS buckets (token % EMB_BUCKETS); a warp owns one
// bucket and 32 columns, so no two warps ever touch one element. The warp
// scans all N tokens 32 at a time (a ballot finds its bucket's), visits its
// matches in position order, and keeps a running sum in registers while
// consecutive matches hit the same row, adding it into dW when the row
// changes. Each dW element thus receives a fixed sequence of adds. Work per
// warp is N/32 ballots plus its matches; a very frequent token serializes on
// its warp, which the register run keeps cheap.
#define EMB_BUCKETS 256
#define EMB_WARPS 8 // buckets per block

static __global__ void embedding_backward_kernel(float *dW, const float *dout, const int32_t *tokens, int64_t N,
                                                 int C) {
  int lane = threadIdx.x % 32;
  int bucket = blockIdx.y * EMB_WARPS + threadIdx.x / 32;
  int col = blockIdx.x * 32 + lane;
  bool mine = col < C;
  int cur = -1;     // the row the running sum belongs to
  float run = 0.0f; // running sum of dout for row `cur`
  for (int64_t i0 = 0; i0 < N; i0 += 32) {
    int64_t i = i0 + lane;
    int tok = i < N ? tokens[i] : -1;
    unsigned hits = __ballot_sync(FULL_MASK, tok >= 0 && tok % EMB_BUCKETS == bucket);
    while (hits) { // warp-uniform: every lane holds the same mask
      int src = __ffs(hits) - 1;
      hits &= hits - 1;
      int row = __shfl_sync(FULL_MASK, tok, src);
      if (row != cur) {
        if (cur >= 0 && mine) dW[(int64_t)cur * C + col] += run;
        cur = row;
        run = 0.0f;
      }
      if (mine) run += dout[(i0 + src) * C + col];
    }
  }
  if (cur >= 0 && mine) dW[(int64_t)cur * C + col] += run;
}

void rt_cuda_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V) {
  need_ctx();
  (void)V; // ids were checked by the data loader
  if (N <= 0 || C <= 0) return;
  embedding_forward_kernel<<<grid_for(N * C, 256), 256, 0, ctx.stream>>>(out, tokens, W, N, dim_int(C));
  LAUNCH_CHECK();
}

void rt_cuda_embedding_backward(float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V,
                                int acc) {
  need_ctx();
  if (!dW || C <= 0) return;
  dim_int(V);
  if (!acc) CUDA_CHECK(cudaMemsetAsync(dW, 0, (size_t)(V * C) * sizeof(float), ctx.stream));
  if (N <= 0) return;
  dim3 grid((unsigned)((dim_int(C) + 31) / 32), EMB_BUCKETS / EMB_WARPS);
  embedding_backward_kernel<<<grid, EMB_WARPS * 32, 0, ctx.stream>>>(dW, dout, tokens, N, (int)C);
  LAUNCH_CHECK();
}

static __global__ void position_embedding_forward_kernel(float *out, const float *W, int64_t n, int64_t TC) {
  GRID_STRIDE(i, n) out[i] = W[i % TC];
}

/* One thread per dW element, summing over b in order: cpu.c's exact
 * arithmetic (start at 0 or dW, add each batch row). */
static __global__ void position_embedding_backward_kernel(float *dW, const float *dout, int64_t B, int64_t T, int64_t C,
                                                          int64_t Wrows, int acc) {
  GRID_STRIDE(i, Wrows * C) {
    int64_t t = i / C;
    float s = acc ? dW[i] : 0.0f;
    if (t < T)
      for (int64_t b = 0; b < B; b++) s += dout[b * T * C + i];
    if (t < T || !acc) dW[i] = s;
  }
}

void rt_cuda_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T, int64_t C) {
  need_ctx();
  int64_t n = B * T * C;
  if (n <= 0) return;
  position_embedding_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, W, n, T * C);
  LAUNCH_CHECK();
}

void rt_cuda_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows,
                                         int acc) {
  need_ctx();
  if (!dW || Wrows * C <= 0) return;
  position_embedding_backward_kernel<<<grid_for(Wrows * C, 256), 256, 0, ctx.stream>>>(dW, dout, B, T, C, Wrows, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// shape ops: flatten and reshape (a copy, or nothing in place), transpose,
// concat, class_token, select. One thread per element written (grid-stride,
// 64-bit indices): writes coalesce, transpose's reads are strided. concat and
// class_token move one slice per launch, in stream order, so gradients that
// are one buffer (concat of a tensor with itself) add up in order. The one
// sum, class_token's dW, is one thread per column over the batch in order
// and in double, as cpu.c: bit for bit the same.

/* dst[r * ds + j] (+)= src[r * ss + j], r < rows, j < len (ss = 0: one row repeated). */
static __global__ void block_kernel(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t len,
                                    int acc) {
  GRID_STRIDE(e, rows * len) {
    int64_t r = e / len, j = e % len;
    float v = src[r * ss + j];
    float *d = dst + r * ds + j;
    *d = acc ? *d + v : v;
  }
}

static void block_copy(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t len, int acc) {
  need_ctx();
  if (!dst || rows <= 0 || len <= 0) return;
  block_kernel<<<grid_for(rows * len, 256), 256, 0, ctx.stream>>>(dst, ds, src, ss, rows, len, acc);
  LAUNCH_CHECK();
}

/* flatten, reshape: the same elements; dst == src with acc = 0 is in place. */
static void same_elements(float *dst, const float *src, int64_t n, int acc) {
  if (!dst || (dst == src && !acc)) return;
  RT_CHECK(dst != src, "an in-place shape op's gradient cannot accumulate into its own input");
  block_copy(dst, n, src, n, 1, n, acc);
}

void rt_cuda_flatten_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_cuda_flatten_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }
void rt_cuda_reshape_forward(float *out, const float *x, int64_t n) { same_elements(out, x, n, 0); }
void rt_cuda_reshape_backward(float *dx, const float *dout, int64_t n, int acc) { same_elements(dx, dout, n, acc); }

/* out[a, q, m, p, z] (+)= in[a, p, m, q, z], out's element e per thread. */
static __global__ void transpose_kernel(float *out, const float *in, int64_t P, int64_t M, int64_t Q, int64_t Z,
                                        int64_t n, int acc) {
  GRID_STRIDE(e, n) {
    int64_t z = e % Z, r = e / Z;
    int64_t p = r % P;
    r /= P;
    int64_t m = r % M;
    r /= M;
    int64_t q = r % Q, a = r / Q;
    float v = in[(((a * P + p) * M + m) * Q + q) * Z + z];
    out[e] = acc ? out[e] + v : v;
  }
}

static void transpose(float *out, const float *in, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z, int acc) {
  need_ctx();
  int64_t n = A * P * M * Q * Z;
  if (!out || n <= 0) return;
  transpose_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, in, P, M, Q, Z, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_transpose_forward(float *out, const float *x, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z) {
  transpose(out, x, A, P, M, Q, Z, 0);
}

void rt_cuda_transpose_backward(float *dx, const float *dout, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z,
                                int acc) {
  transpose(dx, dout, A, Q, M, P, Z, acc); // dout is [A, Q, M, P, Z]
}

void rt_cuda_concat_forward(float *out, const float *a0, const float *a1, const float *a2, const float *a3,
                            const float *a4, const float *a5, int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2,
                            int64_t n3, int64_t n4, int64_t n5) {
  const float *a[6] = {a0, a1, a2, a3, a4, a5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  for (int k = 0; k < 6; off += n[k++])
    if (a[k] && n[k]) block_copy(out + off * In, W * In, a[k], n[k] * In, O, n[k] * In, 0);
}

void rt_cuda_concat_backward(float *da0, float *da1, float *da2, float *da3, float *da4, float *da5, const float *dout,
                             int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4,
                             int64_t n5, int acc0, int acc1, int acc2, int acc3, int acc4, int acc5) {
  float *da[6] = {da0, da1, da2, da3, da4, da5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5, off = 0;
  int acc[6] = {acc0, acc1, acc2, acc3, acc4, acc5};
  for (int k = 0; k < 6; off += n[k++])
    if (da[k] && n[k]) block_copy(da[k], n[k] * In, dout + off * In, W * In, O, n[k] * In, acc[k]);
}

void rt_cuda_class_token_forward(float *out, const float *x, const float *W, int64_t B, int64_t N, int64_t C) {
  block_copy(out, (N + 1) * C, W, 0, B, C, 0);
  block_copy(out + C, (N + 1) * C, x, N * C, B, N * C, 0);
}

/* dW[j] (+)= sum_b dout[b * S + j], in batch order in double. */
static __global__ void class_token_dw_kernel(float *dW, const float *dout, int64_t B, int64_t C, int64_t S, int acc) {
  GRID_STRIDE(j, C) {
    double s = 0.0;
    for (int64_t b = 0; b < B; b++) s += dout[b * S + j];
    dW[j] = (float)(acc ? dW[j] + s : s);
  }
}

void rt_cuda_class_token_backward(float *dx, float *dW, const float *dout, int64_t B, int64_t N, int64_t C, int acc_dx,
                                  int acc_dW) {
  block_copy(dx, N * C, dout + C, (N + 1) * C, B, N * C, acc_dx);
  if (!dW || C <= 0) return;
  class_token_dw_kernel<<<grid_for(C, 256), 256, 0, ctx.stream>>>(dW, dout, B, C, (N + 1) * C, acc_dW);
  LAUNCH_CHECK();
}

void rt_cuda_select_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t index) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  block_copy(out, In, x + index * In, N * In, O, In, 0);
}

/* dx (acc = 0): dout's rows at index, 0 elsewhere. */
static __global__ void select_backward_kernel(float *dx, const float *dout, int64_t N, int64_t In, int64_t index,
                                              int64_t n) {
  GRID_STRIDE(e, n) {
    int64_t r = e / In;
    dx[e] = r % N == index ? dout[r / N * In + e % In] : 0.0f;
  }
}

void rt_cuda_select_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t index, int acc) {
  RT_CHECK(index >= 0 && index < N, "select index out of range");
  need_ctx();
  if (!dx || O * N * In <= 0) return;
  if (acc) { // only the selected rows change
    block_copy(dx + index * In, N * In, dout, In, O, In, 1);
    return;
  }
  select_backward_kernel<<<grid_for(O * N * In, 256), 256, 0, ctx.stream>>>(dx, dout, N, In, index, O * N * In);
  LAUNCH_CHECK();
}

/* pad and its gradient: dst[O, Nd, In] (+)= src[O, Ns, In]'s rows n < min(Nd, Ns); with acc = 0, rows past Ns zeroed.
 */
static void pad_copy(float *dst, int64_t Nd, const float *src, int64_t Ns, int64_t O, int64_t In, int acc) {
  need_ctx();
  if (!dst || O * In <= 0) return;
  int64_t m = Nd < Ns ? Nd : Ns;
  block_copy(dst, Nd * In, src, Ns * In, O, m * In, acc);
  if (!acc && Nd > m)
    CUDA_CHECK(cudaMemset2DAsync(dst + m * In, (size_t)(Nd * In) * sizeof(float), 0,
                                 (size_t)((Nd - m) * In) * sizeof(float), (size_t)O, ctx.stream));
}

void rt_cuda_pad_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t Nout) {
  pad_copy(out, Nout, x, N, O, In, 0);
}
void rt_cuda_pad_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t Nout, int acc) {
  pad_copy(dx, N, dout, Nout, O, In, acc);
}
