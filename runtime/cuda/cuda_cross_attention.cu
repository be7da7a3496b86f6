/* cuda_cross_attention.cu: the CUDA backend's cross-attention (cuda_internal.cuh).
 *
 * Layout (as cpu_cross_attention.c): q[b,t,h*hs+d]; kv[b,s,:] = k (C) | v (C);
 * out as q; lse[b,h,t]. Every query sees all Tk keys.
 *
 * One warp per row, XA_ROWS warps a block, reading the other side straight
 * from global memory (the context is short: SD's 77 tokens stay in L2), in
 * tiles of 32 positions, one per lane:
 * - forward, a row per query: online softmax over key tiles (running max m,
 *   sum l, output rescaled when m grows); saves lse = m + log l.
 * - backward dq, a row per query: ds = p (dout.v - D) scale, dq += ds k.
 * - backward dk, dv, a row per key: over query tiles, dv += p dout,
 *   dk += ds q (D = dout.out recomputed per tile).
 * Every gradient element has one writer, so no atomics and acc = 0 is a
 * plain store; the accumulators of a row live in shared memory. */
#include "cuda_internal.cuh"

#define XA_ROWS 8

typedef struct {
  int Tq, Tk, C, NH, hs;
  float scale;
} XaDims;

static __device__ float xa_dot(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int d = 0; d < n; d++) s += a[d] * b[d];
  return s;
}

/* Shared floats per warp: two rows of hs and a tile of 32. */
static size_t xa_smem(int hs) { return sizeof(float) * XA_ROWS * ((size_t)2 * hs + 32); }

static __global__ void xa_forward_kernel(float *out, float *lse, const float *q, const float *kv, XaDims a) {
  extern __shared__ float sm[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, hs = a.hs, C2 = 2 * a.C;
  int h = blockIdx.y, b = blockIdx.z, t = blockIdx.x * XA_ROWS + warp;
  if (t >= a.Tq) return; // warps are independent: no block barrier below
  float *qs = sm + warp * (2 * hs + 32), *o = qs + hs, *p_sh = o + hs;
  const float *qr = q + ((int64_t)b * a.Tq + t) * a.C + h * hs, *k = kv + (int64_t)b * a.Tk * C2 + h * hs;
  const float *v = k + a.C;
  for (int d = lane; d < hs; d += 32) {
    qs[d] = qr[d];
    o[d] = 0.0f;
  }
  __syncwarp();
  float m = -INFINITY, l = 0.0f;
  for (int s0 = 0; s0 < a.Tk; s0 += 32) {
    int s = s0 + lane;
    float score = s < a.Tk ? xa_dot(qs, k + (int64_t)s * C2, hs) * a.scale : -INFINITY;
    float mnew = fmaxf(m, warp_max_f(score)); // finite: key s0 exists
    float p = s < a.Tk ? expf(score - mnew) : 0.0f;
    float corr = expf(m - mnew); // 0 on the first tile
    l = l * corr + warp_sum_f(p);
    m = mnew;
    p_sh[lane] = p;
    __syncwarp();
    int jn = min(32, a.Tk - s0);
    for (int d = lane; d < hs; d += 32) {
      float acc = o[d] * corr;
      for (int j = 0; j < jn; j++) acc += p_sh[j] * v[(int64_t)(s0 + j) * C2 + d];
      o[d] = acc;
    }
    __syncwarp();
  }
  float inv = 1.0f / l;
  float *orow = out + ((int64_t)b * a.Tq + t) * a.C + h * hs;
  for (int d = lane; d < hs; d += 32) orow[d] = o[d] * inv;
  if (lse && lane == 0) lse[((int64_t)b * a.NH + h) * a.Tq + t] = m + logf(l);
}

static __global__ void xa_dq_kernel(float *dq, const float *dout, const float *q, const float *kv, const float *out,
                                    const float *lse, XaDims a, int acc) {
  extern __shared__ float sm[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, hs = a.hs, C2 = 2 * a.C;
  int h = blockIdx.y, b = blockIdx.z, t = blockIdx.x * XA_ROWS + warp;
  if (t >= a.Tq) return;
  float *qs = sm + warp * (2 * hs + 32), *g = qs + hs, *ds_sh = g + hs;
  int64_t row = ((int64_t)b * a.Tq + t) * a.C + h * hs;
  const float *k = kv + (int64_t)b * a.Tk * C2 + h * hs, *v = k + a.C;
  float part = 0.0f;
  for (int d = lane; d < hs; d += 32) {
    qs[d] = q[row + d];
    g[d] = dout[row + d];
    part += g[d] * out[row + d];
  }
  float D = warp_sum_f(part), L = lse[((int64_t)b * a.NH + h) * a.Tq + t];
  __syncwarp();
  float r[8]; // dq[lane + 32 i], hs <= 256
  for (int i = 0; i < 8; i++) r[i] = 0.0f;
  for (int s0 = 0; s0 < a.Tk; s0 += 32) {
    int s = s0 + lane;
    float ds = 0.0f;
    if (s < a.Tk) {
      float p = expf(xa_dot(qs, k + (int64_t)s * C2, hs) * a.scale - L);
      ds = p * (xa_dot(g, v + (int64_t)s * C2, hs) - D) * a.scale;
    }
    ds_sh[lane] = ds;
    __syncwarp();
    int jn = min(32, a.Tk - s0);
    for (int i = 0; i < 8 && lane + 32 * i < hs; i++)
      for (int j = 0; j < jn; j++) r[i] += ds_sh[j] * k[(int64_t)(s0 + j) * C2 + lane + 32 * i];
    __syncwarp();
  }
  for (int i = 0; i < 8 && lane + 32 * i < hs; i++) {
    float *dst = dq + row + lane + 32 * i;
    *dst = acc ? *dst + r[i] : r[i];
  }
}

/* A row per key s of head h: sums over every query t of its batch. */
static __global__ void xa_dkv_kernel(float *dkv, const float *dout, const float *q, const float *kv, const float *out,
                                     const float *lse, XaDims a, int acc) {
  extern __shared__ float sm[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, hs = a.hs, C2 = 2 * a.C;
  int h = blockIdx.y, b = blockIdx.z, s = blockIdx.x * XA_ROWS + warp;
  if (s >= a.Tk) return;
  float *ks = sm + warp * (2 * hs + 32), *vs = ks + hs, *sh = vs + hs; // sh: p (16) and ds (16) of a tile
  const float *krow = kv + ((int64_t)b * a.Tk + s) * C2 + h * hs;
  for (int d = lane; d < hs; d += 32) {
    ks[d] = krow[d];
    vs[d] = krow[a.C + d];
  }
  __syncwarp();
  float rk[8], rv[8]; // dk, dv [lane + 32 i], hs <= 256
  for (int i = 0; i < 8; i++) rk[i] = rv[i] = 0.0f;
  const float *qb = q + (int64_t)b * a.Tq * a.C + h * hs, *gb = dout + (int64_t)b * a.Tq * a.C + h * hs;
  const float *ob = out + (int64_t)b * a.Tq * a.C + h * hs, *lb = lse + ((int64_t)b * a.NH + h) * a.Tq;
  for (int t0 = 0; t0 < a.Tq; t0 += 16) {
    int t = t0 + lane % 16;
    if (lane < 16) { // lanes 0..15 score queries t0..t0+15; 16..31 idle
      float p = 0.0f, ds = 0.0f;
      if (t < a.Tq) {
        const float *qr = qb + (int64_t)t * a.C, *g = gb + (int64_t)t * a.C;
        p = expf(xa_dot(qr, ks, hs) * a.scale - lb[t]);
        ds = p * (xa_dot(g, vs, hs) - xa_dot(g, ob + (int64_t)t * a.C, hs)) * a.scale;
      }
      sh[lane] = p;
      sh[16 + lane] = ds;
    }
    __syncwarp();
    int jn = min(16, a.Tq - t0);
    for (int i = 0; i < 8 && lane + 32 * i < hs; i++)
      for (int j = 0; j < jn; j++) {
        int64_t off = (int64_t)(t0 + j) * a.C + lane + 32 * i;
        rv[i] += sh[j] * gb[off];
        rk[i] += sh[16 + j] * qb[off];
      }
    __syncwarp();
  }
  float *dst = dkv + ((int64_t)b * a.Tk + s) * C2 + h * hs;
  for (int i = 0; i < 8 && lane + 32 * i < hs; i++) {
    int d = lane + 32 * i;
    dst[d] = acc ? dst[d] + rk[i] : rk[i];
    dst[a.C + d] = acc ? dst[a.C + d] + rv[i] : rv[i];
  }
}

/* Checks the shapes; the sizes the kernels use. */
static XaDims xa_dims(int64_t B, int64_t Tq, int64_t Tk, int64_t C, int64_t NH) {
  need_ctx();
  RT_CHECK(NH > 0 && C % NH == 0, "cross_attention needs C % NH == 0");
  RT_CHECK(C / NH <= 256, "cross_attention on CUDA needs a head size <= 256");
  RT_CHECK(B <= 65535 && NH <= 65535, "cross_attention grid: B and NH must be <= 65535");
  XaDims a;
  a.Tq = dim_int(Tq);
  a.Tk = dim_int(Tk);
  a.C = dim_int(2 * C) / 2;
  a.NH = (int)NH;
  a.hs = (int)(C / NH);
  a.scale = 1.0f / sqrtf((float)a.hs);
  return a;
}

static dim3 xa_grid(int rows, int NH, int64_t B) {
  return dim3((unsigned)((rows + XA_ROWS - 1) / XA_ROWS), (unsigned)NH, (unsigned)B);
}

void rt_cuda_cross_attention_forward(float *out, float *lse, const float *q, const float *kv, int64_t B, int64_t Tq,
                                     int64_t Tk, int64_t C, int64_t NH) {
  XaDims a = xa_dims(B, Tq, Tk, C, NH);
  if (B == 0 || Tq == 0 || Tk == 0) return;
  xa_forward_kernel<<<xa_grid(a.Tq, a.NH, B), XA_ROWS * 32, xa_smem(a.hs), ctx.stream>>>(out, lse, q, kv, a);
  LAUNCH_CHECK();
}

void rt_cuda_cross_attention_backward(float *dq, float *dkv, const float *dout, const float *q, const float *kv,
                                      const float *out, const float *lse, int64_t B, int64_t Tq, int64_t Tk, int64_t C,
                                      int64_t NH, int acc_dq, int acc_dkv) {
  XaDims a = xa_dims(B, Tq, Tk, C, NH);
  if (B == 0 || Tq == 0 || Tk == 0) return;
  size_t smem = xa_smem(a.hs);
  if (dq) {
    xa_dq_kernel<<<xa_grid(a.Tq, a.NH, B), XA_ROWS * 32, smem, ctx.stream>>>(dq, dout, q, kv, out, lse, a, acc_dq);
    LAUNCH_CHECK();
  }
  if (dkv) {
    xa_dkv_kernel<<<xa_grid(a.Tk, a.NH, B), XA_ROWS * 32, smem, ctx.stream>>>(dkv, dout, q, kv, out, lse, a, acc_dkv);
    LAUNCH_CHECK();
  }
}
