/* cuda_attention.cu: the CUDA backend's self-attention and rope (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// self-attention (causal or not, grouped-query)
//
// Layout (as cpu.c): qkv[b,t,:] = q (C = NH*hs) | k (KC = KVH*hs) | v (KC);
// query head h uses channels h*hs .. h*hs+hs-1 of q and those of kv head
// kh = h / G of k and v, G = NH/KVH the group size; out[b,t,h*hs+d];
// lse[b,h,t]. Causal: query t sees keys 0..t; otherwise all T.
//
// Three kernels, each a block of ATT_ROWS warps owning ATT_ROWS consecutive
// positions, one position per warp, and streaming the other side in tiles of
// ATT_TILE positions (one per lane) through shared memory, so each K/V (or
// Q/dout) load serves ATT_ROWS rows:
// - forward, blocks per (b, h): per query row, online softmax over key tiles
//   (running max m, running sum l, output rescaled when m grows),
//   FlashAttention's recurrence; saves lse = m + log l.
// - backward dq, blocks per (b, h): per query row over key tiles:
//   p = exp(q.k scale - lse), ds = p (dout.v - D) scale with D = dout.out,
//   dq += ds k.
// - backward dk, dv, blocks per (b, kv head): per key row over the query
//   tiles of each of the group's G query heads in turn (causal: queries
//   t >= key only): dv += p dout, dk += ds q. Splitting dq from dk/dv
//   recomputes p twice but needs no atomics and no scratch: every gradient
//   element has one writer (a kv head's dk, dv sum over its group inside one
//   block, in a fixed order), which also makes acc = 0 a plain store.
// Shared-memory rows of a tile are padded to an odd stride so that lane j
// reading row j, column d hits bank (j * stride + d) % 32: all distinct.

#define ATT_ROWS 16
#define ATT_TILE 32

static __host__ __device__ int att_stride(int hs) { return hs % 2 ? hs : hs + 1; }

/* Dot product of an own row with a shared row; plain loop, lanes differ in
 * `b` only, so `a` reads are broadcasts. */
static __device__ float dot_sh(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int d = 0; d < n; d++) s += a[d] * b[d];
  return s;
}

/* Sizes of one attention call, as the kernels use them. */
typedef struct {
  int T, C, NH, hs, KC, C3, G; // G = NH / KVH query heads per kv head
  int causal;
  float scale;
} AttDims;

static size_t att_forward_smem(int hs) {
  return sizeof(float) * ((size_t)2 * ATT_TILE * att_stride(hs) + (size_t)2 * ATT_ROWS * hs + ATT_ROWS * ATT_TILE);
}

static __global__ void attention_forward_kernel(float *out, float *lse, const float *qkv, AttDims a) {
  extern __shared__ float sm[];
  int T = a.T, hs = a.hs, st = att_stride(hs), C3 = a.C3;
  float *Ks = sm;                 // [ATT_TILE][st] keys of this tile
  float *Vs = Ks + ATT_TILE * st; // [ATT_TILE][st] values
  float *Qs = Vs + ATT_TILE * st; // [ATT_ROWS][hs] each warp's query
  float *Os = Qs + ATT_ROWS * hs; // [ATT_ROWS][hs] each warp's output accumulator
  float *Ps = Os + ATT_ROWS * hs; // [ATT_ROWS][ATT_TILE] each warp's probabilities
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int h = blockIdx.y, b = blockIdx.z;
  int t0 = (gridDim.x - 1 - blockIdx.x) * ATT_ROWS; // longest rows first
  int t = t0 + warp;
  int last = a.causal ? min(t, T - 1) : T - 1;                      // this row's last key
  int slast = a.causal ? min(t0 + ATT_ROWS, T) - 1 : T - 1;         // the block's
  const float *qb = qkv + (int64_t)b * T * C3 + h * hs;             // q of position 0
  const float *kb = qkv + (int64_t)b * T * C3 + a.C + h / a.G * hs; // k of position 0
  const float *vb = kb + a.KC;
  float *q = Qs + warp * hs, *o = Os + warp * hs, *p_sh = Ps + warp * ATT_TILE;
  if (t < T)
    for (int d = lane; d < hs; d += 32) {
      q[d] = qb[(int64_t)t * C3 + d];
      o[d] = 0.0f;
    }
  float m = -INFINITY, l = 0.0f;
  for (int s0 = 0; s0 <= slast; s0 += ATT_TILE) {
    __syncthreads(); // the previous tile is consumed
    for (int i = threadIdx.x; i < ATT_TILE * hs; i += blockDim.x) {
      int j = i / hs, d = i % hs, s = s0 + j;
      bool in = s <= slast;
      Ks[j * st + d] = in ? kb[(int64_t)s * C3 + d] : 0.0f;
      Vs[j * st + d] = in ? vb[(int64_t)s * C3 + d] : 0.0f;
    }
    __syncthreads();
    if (t >= T || s0 > last) continue; // no key of this tile is visible to row t
    int s = s0 + lane;
    float score = s <= last ? dot_sh(q, Ks + lane * st, hs) * a.scale : -INFINITY;
    float mnew = fmaxf(m, warp_max_f(score)); // finite: key s0 <= last is visible
    float p = s <= last ? expf(score - mnew) : 0.0f;
    float corr = expf(m - mnew); // 0 on the first tile (m = -inf)
    l = l * corr + warp_sum_f(p);
    m = mnew;
    p_sh[lane] = p;
    __syncwarp();
    int jn = min(ATT_TILE, last - s0 + 1);
    for (int d = lane; d < hs; d += 32) {
      float acc = o[d] * corr;
      for (int j = 0; j < jn; j++) acc += p_sh[j] * Vs[j * st + d];
      o[d] = acc;
    }
    __syncwarp(); // p_sh is rewritten next tile
  }
  if (t >= T) return;
  float inv = 1.0f / l;
  float *orow = out + ((int64_t)b * T + t) * a.C + h * hs;
  for (int d = lane; d < hs; d += 32) orow[d] = o[d] * inv;
  if (lse && lane == 0) lse[((int64_t)b * a.NH + h) * T + t] = m + logf(l);
}

static size_t att_dq_smem(int hs) {
  return sizeof(float) * ((size_t)2 * ATT_TILE * att_stride(hs) + (size_t)3 * ATT_ROWS * hs + ATT_ROWS * ATT_TILE);
}

/* dq (+)= sum over the keys s that query t sees of ds(t, s) k[s]. */
static __global__ void attention_backward_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                                                    const float *lse, AttDims a, int acc) {
  extern __shared__ float sm[];
  int T = a.T, hs = a.hs, st = att_stride(hs), C3 = a.C3;
  float *Ks = sm;                  // [ATT_TILE][st]
  float *Vs = Ks + ATT_TILE * st;  // [ATT_TILE][st]
  float *Qs = Vs + ATT_TILE * st;  // [ATT_ROWS][hs] query rows
  float *Gs = Qs + ATT_ROWS * hs;  // [ATT_ROWS][hs] dout rows
  float *dQs = Gs + ATT_ROWS * hs; // [ATT_ROWS][hs] dq accumulators
  float *Ps = dQs + ATT_ROWS * hs; // [ATT_ROWS][ATT_TILE] ds per key
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int h = blockIdx.y, b = blockIdx.z;
  int t0 = (gridDim.x - 1 - blockIdx.x) * ATT_ROWS;
  int t = t0 + warp;
  int last = a.causal ? min(t, T - 1) : T - 1;
  int slast = a.causal ? min(t0 + ATT_ROWS, T) - 1 : T - 1;
  const float *qb = qkv + (int64_t)b * T * C3 + h * hs;
  const float *kb = qkv + (int64_t)b * T * C3 + a.C + h / a.G * hs;
  const float *vb = kb + a.KC;
  float *q = Qs + warp * hs, *g = Gs + warp * hs, *dq = dQs + warp * hs;
  float *ds_sh = Ps + warp * ATT_TILE;
  float D = 0.0f, L = 0.0f;
  if (t < T) {
    int64_t row = ((int64_t)b * T + t) * a.C + h * hs;
    float part = 0.0f;
    for (int d = lane; d < hs; d += 32) {
      q[d] = qb[(int64_t)t * C3 + d];
      g[d] = dout[row + d];
      dq[d] = 0.0f;
      part += g[d] * out[row + d];
    }
    D = warp_sum_f(part);
    L = lse[((int64_t)b * a.NH + h) * T + t];
  }
  __syncwarp();
  for (int s0 = 0; s0 <= slast; s0 += ATT_TILE) {
    __syncthreads();
    for (int i = threadIdx.x; i < ATT_TILE * hs; i += blockDim.x) {
      int j = i / hs, d = i % hs, s = s0 + j;
      bool in = s <= slast;
      Ks[j * st + d] = in ? kb[(int64_t)s * C3 + d] : 0.0f;
      Vs[j * st + d] = in ? vb[(int64_t)s * C3 + d] : 0.0f;
    }
    __syncthreads();
    if (t >= T || s0 > last) continue;
    int s = s0 + lane;
    float ds = 0.0f;
    if (s <= last) {
      float p = expf(dot_sh(q, Ks + lane * st, hs) * a.scale - L);
      ds = p * (dot_sh(g, Vs + lane * st, hs) - D) * a.scale;
    }
    ds_sh[lane] = ds;
    __syncwarp();
    int jn = min(ATT_TILE, last - s0 + 1);
    for (int d = lane; d < hs; d += 32) {
      float x = dq[d];
      for (int j = 0; j < jn; j++) x += ds_sh[j] * Ks[j * st + d];
      dq[d] = x;
    }
    __syncwarp();
  }
  if (t >= T) return;
  float *dst = dqkv + ((int64_t)b * T + t) * C3 + h * hs;
  for (int d = lane; d < hs; d += 32) dst[d] = acc ? dst[d] + dq[d] : dq[d];
}

static size_t att_dkv_smem(int hs) {
  return sizeof(float) * ((size_t)2 * ATT_TILE * att_stride(hs) + 2 * ATT_TILE + (size_t)4 * ATT_ROWS * hs +
                          (size_t)2 * ATT_ROWS * ATT_TILE);
}

/* dk (+)= sum over the group's query heads and the queries t that see key s
 * of ds(t, s) q[t]; dv (+)= the same sum of p(t, s) dout[t]. Rows here are
 * keys of one kv head; tiles are queries of one query head at a time,
 * causal: from the block's first key on (earlier queries see none of them). */
static __global__ void attention_backward_dkv_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                                                     const float *lse, AttDims a, int acc) {
  extern __shared__ float sm[];
  int T = a.T, hs = a.hs, st = att_stride(hs), C3 = a.C3;
  float *Qs = sm;                        // [ATT_TILE][st] queries of this tile
  float *Gs = Qs + ATT_TILE * st;        // [ATT_TILE][st] their dout rows
  float *Ls = Gs + ATT_TILE * st;        // [ATT_TILE] their lse
  float *Ds = Ls + ATT_TILE;             // [ATT_TILE] their D = dout.out
  float *Kw = Ds + ATT_TILE;             // [ATT_ROWS][hs] each warp's key row
  float *Vw = Kw + ATT_ROWS * hs;        // [ATT_ROWS][hs] each warp's value row
  float *dKs = Vw + ATT_ROWS * hs;       // [ATT_ROWS][hs] dk accumulators
  float *dVs = dKs + ATT_ROWS * hs;      // [ATT_ROWS][hs] dv accumulators
  float *Ps = dVs + ATT_ROWS * hs;       // [ATT_ROWS][ATT_TILE] p per query
  float *DSs = Ps + ATT_ROWS * ATT_TILE; // [ATT_ROWS][ATT_TILE] ds per query
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int kh = blockIdx.y, b = blockIdx.z;
  int k0 = blockIdx.x * ATT_ROWS; // causal: the first blocks see the most queries
  int s = k0 + warp;              // this warp's key position
  const float *kb = qkv + (int64_t)b * T * C3 + a.C + kh * hs;
  const float *vb = kb + a.KC;
  float *k = Kw + warp * hs, *v = Vw + warp * hs, *dk = dKs + warp * hs, *dv = dVs + warp * hs;
  float *p_sh = Ps + warp * ATT_TILE, *ds_sh = DSs + warp * ATT_TILE;
  if (s < T)
    for (int d = lane; d < hs; d += 32) {
      k[d] = kb[(int64_t)s * C3 + d];
      v[d] = vb[(int64_t)s * C3 + d];
      dk[d] = 0.0f;
      dv[d] = 0.0f;
    }
  for (int h = kh * a.G; h < (kh + 1) * a.G; h++) {
    const float *qb = qkv + (int64_t)b * T * C3 + h * hs;
    const float *lse_bh = lse + ((int64_t)b * a.NH + h) * T;
    int64_t orow0 = (int64_t)b * T * a.C + h * hs; // out/dout of position 0
    for (int s0 = a.causal ? k0 : 0; s0 < T; s0 += ATT_TILE) {
      __syncthreads();
      for (int i = threadIdx.x; i < ATT_TILE * hs; i += blockDim.x) {
        int j = i / hs, d = i % hs, tq = s0 + j;
        bool in = tq < T;
        Qs[j * st + d] = in ? qb[(int64_t)tq * C3 + d] : 0.0f;
        Gs[j * st + d] = in ? dout[orow0 + (int64_t)tq * a.C + d] : 0.0f;
      }
      for (int j = warp; j < ATT_TILE; j += ATT_ROWS) { // D and lse of each query
        int tq = s0 + j;
        float part = 0.0f;
        if (tq < T)
          for (int d = lane; d < hs; d += 32)
            part += dout[orow0 + (int64_t)tq * a.C + d] * out[orow0 + (int64_t)tq * a.C + d];
        part = warp_sum_f(part);
        if (lane == 0) {
          Ds[j] = part;
          Ls[j] = tq < T ? lse_bh[tq] : 0.0f;
        }
      }
      __syncthreads();
      if (s >= T) continue;
      int tq = s0 + lane;
      float p = 0.0f, ds = 0.0f;
      if ((tq >= s || !a.causal) && tq < T) {
        p = expf(dot_sh(k, Qs + lane * st, hs) * a.scale - Ls[lane]);
        ds = p * (dot_sh(v, Gs + lane * st, hs) - Ds[lane]) * a.scale;
      }
      p_sh[lane] = p;
      ds_sh[lane] = ds;
      __syncwarp();
      for (int d = lane; d < hs; d += 32) {
        float x = dk[d], y = dv[d];
        for (int j = 0; j < ATT_TILE; j++) {
          x += ds_sh[j] * Qs[j * st + d];
          y += p_sh[j] * Gs[j * st + d];
        }
        dk[d] = x;
        dv[d] = y;
      }
      __syncwarp();
    }
  }
  if (s >= T) return;
  float *dst = dqkv + ((int64_t)b * T + s) * C3 + a.C + kh * hs;
  for (int d = lane; d < hs; d += 32) {
    dst[d] = acc ? dst[d] + dk[d] : dk[d];
    dst[a.KC + d] = acc ? dst[a.KC + d] + dv[d] : dv[d];
  }
}

/* Checks the shapes; returns the kernels' sizes and the grid (row blocks,
 * NH, B) of forward and dq (dk, dv: KVH in place of NH). */
static AttDims att_dims(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, dim3 *grid) {
  need_ctx();
  RT_CHECK(NH > 0 && KVH > 0 && C % NH == 0 && NH % KVH == 0, "attention needs C % NH == 0 and NH % KVH == 0");
  RT_CHECK(B <= 65535 && NH <= 65535, "attention grid: B and NH must be <= 65535");
  int64_t hs = C / NH;
  AttDims a;
  a.T = dim_int(T);
  a.C = (int)C;
  a.NH = (int)NH;
  a.hs = (int)hs;
  a.KC = (int)(KVH * hs);
  a.C3 = dim_int(C + 2 * KVH * hs);
  a.G = (int)(NH / KVH);
  a.causal = causal != 0;
  a.scale = 1.0f / sqrtf((float)hs);
  *grid = dim3((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS), (unsigned)NH, (unsigned)B);
  return a;
}

void rt_cuda_attention_forward(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                               int64_t KVH, int64_t causal) {
  dim3 grid;
  AttDims a = att_dims(B, T, C, NH, KVH, causal, &grid);
  if (B == 0 || T == 0) return;
  size_t smem = att_forward_smem(a.hs);
  smem_optin((const void *)attention_forward_kernel, smem, "attention forward");
  attention_forward_kernel<<<grid, ATT_ROWS * 32, smem, ctx.stream>>>(out, lse, qkv, a);
  LAUNCH_CHECK();
}

void rt_cuda_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                                int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, int acc) {
  dim3 grid;
  AttDims a = att_dims(B, T, C, NH, KVH, causal, &grid);
  if (B == 0 || T == 0 || !dqkv) return;
  size_t smem = att_dq_smem(a.hs);
  smem_optin((const void *)attention_backward_dq_kernel, smem, "attention backward (dq)");
  attention_backward_dq_kernel<<<grid, ATT_ROWS * 32, smem, ctx.stream>>>(dqkv, dout, qkv, out, lse, a, acc);
  LAUNCH_CHECK();
  smem = att_dkv_smem(a.hs);
  smem_optin((const void *)attention_backward_dkv_kernel, smem, "attention backward (dk, dv)");
  grid.y = (unsigned)KVH;
  attention_backward_dkv_kernel<<<grid, ATT_ROWS * 32, smem, ctx.stream>>>(dqkv, dout, qkv, out, lse, a, acc);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// rope: one thread per (position, frequency i). Its angle's cos and sin, in
// double as cpu.c computes them, serve the pair (i, i + hd/2) of every q and
// k head of the position; the thread also moves elements i and i + hd/2 of
// every v head. Neighbouring threads touch neighbouring i (coalesced), and
// each pair is read before it is written by the same thread (out may be x).

static __global__ void rope_kernel(float *out, const float *x, int64_t rows, int T, int nr, int KV, int hd,
                                   double theta, float factor, float low, float high, float orig, float sign, int acc) {
  int h2 = hd / 2;
  int64_t W = (int64_t)(nr + KV) * hd;
  bool copy_v = !(out == x && !acc); // v is already in place
  GRID_STRIDE(idx, rows * h2) {
    int64_t r = idx / h2;
    int i = (int)(idx % h2);
    double a = (double)(r % T) * rt_rope_freq(theta, i, hd, factor, low, high, orig);
    float c = (float)cos(a), s = sign * (float)sin(a);
    const float *xr = x + r * W;
    float *orow = out + r * W;
    for (int h = 0; h < nr; h++) {
      int64_t k = (int64_t)h * hd + i;
      float x1 = xr[k], x2 = xr[k + h2];
      float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
      orow[k] = acc ? orow[k] + y1 : y1;
      orow[k + h2] = acc ? orow[k + h2] + y2 : y2;
    }
    if (copy_v)
      for (int h = nr; h < nr + KV; h++) {
        int64_t k = (int64_t)h * hd + i;
        orow[k] = acc ? orow[k] + xr[k] : xr[k];
        orow[k + h2] = acc ? orow[k + h2] + xr[k + h2] : xr[k + h2];
      }
  }
}

static void rope(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, const float *s,
                 float sign, int acc) {
  need_ctx();
  RT_CHECK(hd % 2 == 0, "rope needs an even head dimension");
  int64_t n = B * T * (hd / 2);
  if (n <= 0) return;
  rope_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, B * T, dim_int(T), dim_int(H + KV), dim_int(KV),
                                                        dim_int(hd), (double)s[0], s[1], s[2], s[3], s[4], sign, acc);
  LAUNCH_CHECK();
}

void rt_cuda_rope_forward(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                          float theta, float factor, float low, float high, float orig) {
  const float s[5] = {theta, factor, low, high, orig};
  rope(out, x, B, T, H, KV, hd, s, 1.0f, 0);
}

void rt_cuda_rope_backward(float *dx, const float *dout, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                           float theta, float factor, float low, float high, float orig, int acc) {
  const float s[5] = {theta, factor, low, high, orig};
  if (dx) rope(dx, dout, B, T, H, KV, hd, s, -1.0f, acc);
}
