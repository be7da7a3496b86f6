/* cuda_optim.cu: the CUDA backend's optimizers, their state in bf16 and 8 bits, gradient clipping (cuda_internal.cuh).
 */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// optimizers: cpu.c's float operations in cpu.c's order, the scalars rounded
// on the host exactly as cpu.c rounds them. The _rn intrinsics forbid nvcc's
// multiply-add contraction, so each step rounds as on the CPU and the
// parameters match cpu.c bit for bit.

/* step and bc2_sqrt for the step being replayed by a CUDA graph. */
static __device__ float rt_adam_scalars[2];

__global__ void adam_scalars_kernel(float step, float bc2_sqrt) {
  rt_adam_scalars[0] = step, rt_adam_scalars[1] = bc2_sqrt;
}

static __global__ void adamw_kernel(float *p, const float *g, float *m, float *v, int64_t n, float step, float bc2_sqrt,
                                    float decay, float eps, float b1, float b2, float a1, float a2, int from_graph) {
  if (from_graph) {
    step = rt_adam_scalars[0];
    bc2_sqrt = rt_adam_scalars[1];
  }
  GRID_STRIDE(i, n) {
    float gi = g[i];
    float mi = __fadd_rn(__fmul_rn(m[i], b1), __fmul_rn(a1, gi));
    float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(a2, __fmul_rn(gi, gi)));
    m[i] = mi;
    v[i] = vi;
    float pd = __fmul_rn(p[i], decay);
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
    p[i] = __fsub_rn(pd, __fdiv_rn(__fmul_rn(step, mi), denom));
  }
}

static __global__ void sgd_kernel(float *p, const float *g, float *buf, int64_t n, float lr, float mom, float wd,
                                  int nesterov) {
  GRID_STRIDE(i, n) {
    float d = __fadd_rn(g[i], __fmul_rn(wd, p[i]));
    if (mom != 0.0f) {
      float bi = __fadd_rn(__fmul_rn(mom, buf[i]), d);
      buf[i] = bi;
      d = nesterov ? __fadd_rn(d, __fmul_rn(mom, bi)) : bi;
    }
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
  }
}

void rt_cuda_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t) {
  need_ctx();
  if (n <= 0) return;
  if (ctx.capturing) { // the scalars depending on t come from rt_cuda_graph_launch
    RT_CHECK(!ctx.graph_adamw || (ctx.lr == lr && ctx.beta1 == beta1 && ctx.beta2 == beta2),
             "a captured step's AdamW updates must share lr and betas");
    ctx.graph_adamw = 1, ctx.lr = lr, ctx.beta1 = beta1, ctx.beta2 = beta2;
  }
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float decay = (float)(1.0 - lr * wd);
  adamw_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(p, g, m, v, n, step, bc2_sqrt, decay, (float)eps, (float)beta1,
                                                         (float)beta2, (float)(1.0 - beta1), (float)(1.0 - beta2),
                                                         ctx.capturing);
  LAUNCH_CHECK();
}

void rt_cuda_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                        int nesterov) {
  need_ctx();
  if (n <= 0) return;
  sgd_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(p, g, buf, n, (float)lr, (float)momentum, (float)wd, nesterov);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// optimizer state in bf16 and in 8 bits: cpu.c's float operations (adam_elem)
// in its order, so the CUDA and CPU trainers agree bit for bit

static __device__ __forceinline__ void adam_elem(float *p, float gi, float *m, float *v, float step, float bc2_sqrt,
                                                 float decay, float eps, float b1, float b2, float a1, float a2) {
  *m = __fadd_rn(__fmul_rn(*m, b1), __fmul_rn(a1, gi));
  *v = __fadd_rn(__fmul_rn(*v, b2), __fmul_rn(a2, __fmul_rn(gi, gi)));
  float pd = __fmul_rn(*p, decay);
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(*v), bc2_sqrt), eps);
  *p = __fsub_rn(pd, __fdiv_rn(__fmul_rn(step, *m), denom));
}

static __global__ void adamw_bf16_kernel(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, float step,
                                         float bc2_sqrt, float decay, float eps, float b1, float b2, float a1, float a2,
                                         int from_graph) {
  if (from_graph) {
    step = rt_adam_scalars[0];
    bc2_sqrt = rt_adam_scalars[1];
  }
  GRID_STRIDE(i, n) {
    float mi = from_bf16(m[i]), vi = from_bf16(v[i]), pi = p[i];
    adam_elem(&pi, g[i], &mi, &vi, step, bc2_sqrt, decay, eps, b1, b2, a1, a2);
    p[i] = pi;
    m[i] = to_bf16(mi);
    v[i] = to_bf16(vi);
  }
}

/* The nearest code of x in the increasing table q (ties to the lower), as cpu.c's qencode. */
static __device__ uint8_t qencode(const float *q, float x) {
  if (x <= q[0]) return 0;
  if (x >= q[255]) return 255;
  int lo = 0;
  for (int step = 128; step; step >>= 1) lo += q[lo + step] <= x ? step : 0;
  return (uint8_t)(__fsub_rn(x, q[lo]) <= __fsub_rn(q[lo + 1], x) ? lo : lo + 1);
}

/* One thread block per quantization block of RT_QBLOCK elements. */
static __global__ void adamw_8bit_kernel(float *p, const float *g, uint8_t *m, uint8_t *v, float *ms, float *vs,
                                         int64_t n, float step, float bc2_sqrt, float decay, float eps, float b1,
                                         float b2, float a1, float a2, int from_graph) {
  __shared__ float q[2][256];
  __shared__ float red[2][RT_QBLOCK / 32];
  if (from_graph) {
    step = rt_adam_scalars[0];
    bc2_sqrt = rt_adam_scalars[1];
  }
  int tid = threadIdx.x;
  q[0][tid] = rt_qmap(0, tid);
  q[1][tid] = rt_qmap(1, tid);
  __syncthreads();
  int64_t b = blockIdx.x, i = b * RT_QBLOCK + tid;
  float mi = 0.0f, vi = 0.0f;
  if (i < n) {
    float pi = p[i];
    mi = __fmul_rn(q[1][m[i]], ms[b]);
    vi = __fmul_rn(q[0][v[i]], vs[b]);
    adam_elem(&pi, g[i], &mi, &vi, step, bc2_sqrt, decay, eps, b1, b2, a1, a2);
    p[i] = pi;
  }
  float am = fabsf(mi), av = vi; // max is exact: any order gives cpu.c's result
  for (int o = 16; o > 0; o >>= 1) {
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, o));
    av = fmaxf(av, __shfl_xor_sync(0xffffffffu, av, o));
  }
  if (tid % 32 == 0) red[0][tid / 32] = am, red[1][tid / 32] = av;
  __syncthreads();
  am = red[0][0], av = red[1][0];
  for (int w = 1; w < RT_QBLOCK / 32; w++) am = fmaxf(am, red[0][w]), av = fmaxf(av, red[1][w]);
  if (i < n) {
    m[i] = am > 0.0f ? qencode(q[1], __fdiv_rn(mi, am)) : 127;
    uint8_t c = av > 0.0f ? qencode(q[0], __fdiv_rn(vi, av)) : 0;
    v[i] = c == 0 && vi > 0.0f ? 1 : c;
  }
  if (tid == 0) ms[b] = am, vs[b] = av;
}

/* The scalars of a low-precision AdamW launch; under capture, records the
 * step's lr and betas as rt_cuda_adamw_update does. */
static void adam_launch_scalars(double lr, double beta1, double beta2, double wd, int64_t t, float *step,
                                float *bc2_sqrt, float *decay) {
  if (ctx.capturing) {
    RT_CHECK(!ctx.graph_adamw || (ctx.lr == lr && ctx.beta1 == beta1 && ctx.beta2 == beta2),
             "a captured step's AdamW updates must share lr and betas");
    ctx.graph_adamw = 1, ctx.lr = lr, ctx.beta1 = beta1, ctx.beta2 = beta2;
  }
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  *step = (float)(lr / bc1), *bc2_sqrt = (float)sqrt(bc2), *decay = (float)(1.0 - lr * wd);
}

void rt_cuda_adamw_update_bf16(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, double lr, double beta1,
                               double beta2, double eps, double wd, int64_t t) {
  need_ctx();
  if (n <= 0) return;
  float step, bc2_sqrt, decay;
  adam_launch_scalars(lr, beta1, beta2, wd, t, &step, &bc2_sqrt, &decay);
  adamw_bf16_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(p, g, m, v, n, step, bc2_sqrt, decay, (float)eps,
                                                              (float)beta1, (float)beta2, (float)(1.0 - beta1),
                                                              (float)(1.0 - beta2), ctx.capturing);
  LAUNCH_CHECK();
}

void rt_cuda_adamw_update_8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *m_scale, float *v_scale,
                               int64_t n, double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  need_ctx();
  if (n <= 0) return;
  float step, bc2_sqrt, decay;
  adam_launch_scalars(lr, beta1, beta2, wd, t, &step, &bc2_sqrt, &decay);
  int64_t blocks = (n + RT_QBLOCK - 1) / RT_QBLOCK;
  RT_CHECK(blocks <= 0x7fffffff, "adamw_update_8bit: too many blocks");
  adamw_8bit_kernel<<<(unsigned)blocks, RT_QBLOCK, 0, ctx.stream>>>(
      p, g, m, v, m_scale, v_scale, n, step, bc2_sqrt, decay, (float)eps, (float)beta1, (float)beta2,
      (float)(1.0 - beta1), (float)(1.0 - beta2), ctx.capturing);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// gradient clipping: the squared global norm in double, deterministic (a
// fixed grid of SQNORM_BLOCKS blocks, each summing a fixed stride in a fixed
// tree; one thread then adds the partials in block order to the total)

enum { SQNORM_BLOCKS = 256, SQNORM_THREADS = 256 };
static __device__ double rt_sqnorm_part[SQNORM_BLOCKS];
static __device__ double rt_sqnorm_total;

static __global__ void sqnorm_part_kernel(const float *g, int64_t n) {
  __shared__ double s[SQNORM_THREADS];
  double acc = 0.0;
  GRID_STRIDE(i, n) {
    double x = (double)g[i];
    acc = __dadd_rn(acc, __dmul_rn(x, x));
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = SQNORM_THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) s[threadIdx.x] = __dadd_rn(s[threadIdx.x], s[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) rt_sqnorm_part[blockIdx.x] = s[0];
}

static __global__ void sqnorm_add_kernel(void) {
  double t = rt_sqnorm_total;
  for (int b = 0; b < SQNORM_BLOCKS; b++) t = __dadd_rn(t, rt_sqnorm_part[b]);
  rt_sqnorm_total = t;
}

void rt_cuda_grad_sqnorm(const float *g, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  sqnorm_part_kernel<<<SQNORM_BLOCKS, SQNORM_THREADS, 0, ctx.stream>>>(g, n);
  LAUNCH_CHECK();
  sqnorm_add_kernel<<<1, 1, 0, ctx.stream>>>();
  LAUNCH_CHECK();
}

double rt_cuda_grad_sqnorm_total(void) {
  need_ctx();
  double t = 0.0;
  static const double zero = 0.0;
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(&t, rt_sqnorm_total, sizeof t, 0, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaMemcpyToSymbolAsync(rt_sqnorm_total, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return t;
}
