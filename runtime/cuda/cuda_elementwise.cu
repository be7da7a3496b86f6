/* cuda_elementwise.cu: the CUDA backend's element-wise ops, activations, scale_channels, layer_scale
 * (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// element-wise: add, mul, relu, gelu, silu (one thread per element, each element read
// before it is written by the same thread: that is what makes the in-place
// pairs of the header safe)

#define SQRT_2_OVER_PI 0.7978845608028654f
#define SQRT1_2 0.7071067811865476f      /* 1 / sqrt 2 */
#define INV_SQRT_2PI 0.3989422804014327f /* 1 / sqrt(2 pi) */

static __global__ void add_forward_kernel(float *out, const float *a, const float *b, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

/* da and db in one pass over dout. A gradient aliasing dout has acc = 0, and
 * writing it is skipped (its value is already there). */
static __global__ void add_backward_kernel(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  bool wa = da && !(da == dout && !acc_da), wb = db && !(db == dout && !acc_db);
  GRID_STRIDE(i, n) {
    float g = dout[i];
    if (wa) da[i] = acc_da ? da[i] + g : g;
    if (wb) db[i] = acc_db ? db[i] + g : g;
  }
}

static __global__ void mul_forward_kernel(float *out, const float *a, const float *b, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

/* As cpu.c: an element's dout, a and b are read before da is written there,
 * and da before db (da may be dout or db, see the header). */
static __global__ void mul_backward_kernel(float *da, float *db, const float *dout, const float *a, const float *b,
                                           int64_t n, int acc_da, int acc_db) {
  GRID_STRIDE(i, n) {
    float g = dout[i], ai = a[i], bi = b[i];
    if (da) da[i] = acc_da ? da[i] + g * bi : g * bi;
    if (db) db[i] = acc_db ? db[i] + g * ai : g * ai;
  }
}

static __global__ void relu_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static __global__ void relu6_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
}

static __global__ void relu6_backward_kernel(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = out[i] > 0.0f && out[i] < 6.0f ? dout[i] : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void sigmoid_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = 1.0f / (1.0f + expf(fminf(fmaxf(-x[i], -80.0f), 80.0f)));
}

static __global__ void sigmoid_backward_kernel(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = dout[i] * out[i] * (1.0f - out[i]);
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __device__ float hardsigmoid1(float x) { return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f; }

static __global__ void hardswish_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] * hardsigmoid1(x[i]);
}

static __global__ void hardswish_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    float g = xi < -3.0f ? 0.0f : xi <= 3.0f ? dout[i] * (xi / 3.0f + 0.5f) : dout[i];
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void hardsigmoid_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) out[i] = hardsigmoid1(x[i]);
}

static __global__ void hardsigmoid_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = x[i] > -3.0f && x[i] < 3.0f ? dout[i] / 6.0f : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void scale_channels_forward_kernel(float *out, const float *x, const float *s, int64_t S, int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] * s[i / S];
}

/* one thread per plane, summed in double; before dx, which may overwrite dout */
static __global__ void scale_channels_ds_kernel(float *ds, const float *dout, const float *x, int64_t NC, int64_t S,
                                                int acc) {
  GRID_STRIDE(p, NC) {
    double sum = 0.0;
    for (int64_t j = 0; j < S; j++) sum += (double)dout[p * S + j] * x[p * S + j];
    ds[p] = acc ? ds[p] + (float)sum : (float)sum;
  }
}

static __global__ void scale_channels_dx_kernel(float *dx, const float *dout, const float *s, int64_t S, int64_t n,
                                                int acc) {
  GRID_STRIDE(i, n) {
    float g = dout[i] * s[i / S];
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void layer_scale_forward_kernel(float *out, const float *x, const float *w, int64_t C, int64_t S,
                                                  int64_t n) {
  GRID_STRIDE(i, n) out[i] = x[i] * w[(i / S) % C];
}

/* one block per channel, its planes of every sample summed in double; before dx, which may overwrite dout */
static __global__ void layer_scale_dw_kernel(float *dw, const float *dout, const float *x, int64_t N, int64_t C,
                                             int64_t S, int acc) {
  __shared__ double sh[32];
  int64_t c = blockIdx.x;
  double sum = 0.0;
  for (int64_t k = threadIdx.x; k < N * S; k += blockDim.x) {
    int64_t i = (k / S * C + c) * S + k % S;
    sum += (double)dout[i] * x[i];
  }
  sum = block_sum_d(sum, sh);
  if (threadIdx.x == 0) dw[c] = acc ? dw[c] + (float)sum : (float)sum;
}

static __global__ void layer_scale_dx_kernel(float *dx, const float *dout, const float *w, int64_t C, int64_t S,
                                             int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = dout[i] * w[(i / S) % C];
    dx[i] = acc ? dx[i] + g : g;
  }
}

static __global__ void relu_backward_kernel(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float g = out[i] > 0.0f ? dout[i] : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

/* approximate: tanh (1) or exact erf (0), x Phi(x). */
static __global__ void gelu_forward_kernel(float *out, const float *x, int64_t n, int approximate) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    if (approximate) {
      float u = SQRT_2_OVER_PI * (xi + 0.044715f * xi * xi * xi);
      out[i] = 0.5f * xi * (1.0f + tanhf(u));
    } else {
      out[i] = 0.5f * xi * (1.0f + erff(xi * SQRT1_2));
    }
  }
}

/* tanh: sech^2 as 1/cosh^2 (accurate where tanh nears +-1; an overflowing
 * cosh gives 0, the right limit). Exact: Phi(x) + x phi(x), as cpu.c. */
static __global__ void gelu_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int approximate,
                                            int acc) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    float g;
    if (approximate) {
      float u = SQRT_2_OVER_PI * (xi + 0.044715f * xi * xi * xi);
      float ch = coshf(u);
      float du = SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * xi * xi);
      g = dout[i] * (0.5f * (1.0f + tanhf(u)) + 0.5f * xi * du / (ch * ch));
    } else {
      float cdf = 0.5f * (1.0f + erff(xi * SQRT1_2));
      float pdf = INV_SQRT_2PI * expf(-0.5f * xi * xi);
      g = dout[i] * (cdf + xi * pdf);
    }
    dx[i] = acc ? dx[i] + g : g;
  }
}

/* The CPU's formula: e = exp(-x) clamped at exp(+-80), s = 1 / (1 + e),
 * 1 - s = e s (no inf * 0 for very negative x). */
/* out (+)= f x. */
static __global__ void scale_kernel(float *out, const float *x, int64_t n, float f, int acc) {
  GRID_STRIDE(i, n) out[i] = acc ? out[i] + f * x[i] : f * x[i];
}

static __device__ float silu_e(float x) { return expf(fminf(fmaxf(-x, -80.0f), 80.0f)); }

static __global__ void silu_forward_kernel(float *out, const float *x, int64_t n) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    out[i] = xi / (1.0f + silu_e(xi));
  }
}

static __global__ void silu_backward_kernel(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  GRID_STRIDE(i, n) {
    float xi = x[i];
    float e = silu_e(xi);
    float s = 1.0f / (1.0f + e);
    float g = dout[i] * (s * (1.0f + xi * (e * s)));
    dx[i] = acc ? dx[i] + g : g;
  }
}

void rt_cuda_add_forward(float *out, const float *a, const float *b, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  add_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, a, b, n);
  LAUNCH_CHECK();
}

void rt_cuda_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  need_ctx();
  if (n <= 0 || (!da && !db)) return;
  add_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(da, db, dout, n, acc_da, acc_db);
  LAUNCH_CHECK();
}

void rt_cuda_mul_forward(float *out, const float *a, const float *b, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  mul_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, a, b, n);
  LAUNCH_CHECK();
}

void rt_cuda_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t n,
                          int acc_da, int acc_db) {
  need_ctx();
  if (n <= 0 || (!da && !db)) return;
  mul_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(da, db, dout, a, b, n, acc_da, acc_db);
  LAUNCH_CHECK();
}

void rt_cuda_relu_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  relu_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  relu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, out, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_relu6_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  relu6_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_relu6_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  relu6_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, out, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_sigmoid_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  sigmoid_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_sigmoid_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  sigmoid_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, out, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_hardswish_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  hardswish_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_hardswish_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  hardswish_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_hardsigmoid_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  hardsigmoid_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_hardsigmoid_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  hardsigmoid_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, acc);
  LAUNCH_CHECK();
}

void rt_cuda_scale_channels_forward(float *out, const float *x, const float *s, int64_t NC, int64_t S) {
  need_ctx();
  int64_t n = NC * S;
  if (n <= 0) return;
  scale_channels_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, s, S, n);
  LAUNCH_CHECK();
}

void rt_cuda_scale_channels_backward(float *dx, float *ds, const float *dout, const float *x, const float *s,
                                     int64_t NC, int64_t S, int acc_dx, int acc_ds) {
  need_ctx();
  int64_t n = NC * S;
  if (n <= 0) return;
  if (ds) {
    scale_channels_ds_kernel<<<grid_for(NC, 128), 128, 0, ctx.stream>>>(ds, dout, x, NC, S, acc_ds);
    LAUNCH_CHECK();
  }
  if (dx) {
    scale_channels_dx_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, s, S, n, acc_dx);
    LAUNCH_CHECK();
  }
}

void rt_cuda_layer_scale_forward(float *out, const float *x, const float *w, int64_t N, int64_t C, int64_t S) {
  need_ctx();
  int64_t n = N * C * S;
  if (n <= 0) return;
  layer_scale_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, w, C, S, n);
  LAUNCH_CHECK();
}

void rt_cuda_layer_scale_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, int64_t N,
                                  int64_t C, int64_t S, int acc_dx, int acc_dw) {
  need_ctx();
  int64_t n = N * C * S;
  if (n <= 0) return;
  if (dw) {
    layer_scale_dw_kernel<<<(unsigned)C, LOSS_BLOCK, 0, ctx.stream>>>(dw, dout, x, N, C, S, acc_dw);
    LAUNCH_CHECK();
  }
  if (dx) {
    layer_scale_dx_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, w, C, S, n, acc_dx);
    LAUNCH_CHECK();
  }
}

void rt_cuda_gelu_forward(float *out, const float *x, int64_t n, int approximate) {
  need_ctx();
  if (n <= 0) return;
  gelu_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n, approximate);
  LAUNCH_CHECK();
}

void rt_cuda_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int approximate, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  gelu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, approximate, acc);
  LAUNCH_CHECK();
}

void rt_cuda_scale_forward(float *out, const float *x, int64_t n, double factor) {
  need_ctx();
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n, (float)factor, 0);
  LAUNCH_CHECK();
}

void rt_cuda_scale_backward(float *dx, const float *dout, int64_t n, double factor, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  scale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, n, (float)factor, acc);
  LAUNCH_CHECK();
}

void rt_cuda_silu_forward(float *out, const float *x, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  silu_forward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, n);
  LAUNCH_CHECK();
}

void rt_cuda_silu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  need_ctx();
  if (n <= 0 || !dx) return;
  silu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dx, dout, x, n, acc);
  LAUNCH_CHECK();
}
