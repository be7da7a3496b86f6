/* cuda_dropout.cu: the CUDA backend's dropout and stochastic depth (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// dropout: cpu.c's hash and arithmetic (one thread per 32-element word); the
// key is a kernel argument, so a CUDA graph, which replays the arguments of
// its capture, would repeat one step's masks forever: capturing dropout is
// refused (train without --cuda-graph)

static __global__ void dropout_kernel(float *out, int32_t *mask, const float *x, const int32_t *cmask, int64_t n,
                                      float scale, uint32_t th, uint64_t key, int backward, int acc) {
  GRID_STRIDE(wd, (n + 31) / 32) {
    int64_t end = wd * 32 + 32 < n ? wd * 32 + 32 : n;
    uint32_t bits = cmask ? (uint32_t)cmask[wd] : 0u;
    for (int64_t i = wd * 32; i < end; i++) {
      int kept = cmask ? (int)(bits >> (i & 31) & 1u) : (mix64_dev(key ^ (uint64_t)i) >> 40) >= th;
      if (!cmask) bits |= (uint32_t)kept << (i & 31);
      float g = __fmul_rn(x[i], kept ? scale : 0.0f);
      out[i] = backward && acc ? __fadd_rn(out[i], g) : g;
    }
    if (mask) mask[wd] = (int32_t)bits;
  }
}

static void dropout_launch(float *out, int32_t *mask, const float *x, const int32_t *cmask, int64_t n, float p,
                           int mode, uint64_t key, int backward, int acc) {
  need_ctx();
  RT_CHECK(!ctx.capturing,
           "dropout's random key changes every step and a CUDA graph would replay the captured "
           "one: train this model without --cuda-graph");
  if (n <= 0 || !out) return;
  (void)mode;
  float scale = (float)(1.0 / (1.0 - (double)p));
  uint32_t th = (uint32_t)ceil((double)p * 16777216.0);
  dropout_kernel<<<grid_for((n + 31) / 32, 128), 128, 0, ctx.stream>>>(out, mask, x, cmask, n, scale, th, key, backward,
                                                                       acc);
  LAUNCH_CHECK();
}

void rt_cuda_dropout_forward(float *out, int32_t *mask, const float *x, int64_t n, float p, int mode, uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    need_ctx();
    if (out != x && n > 0)
      CUDA_CHECK(cudaMemcpyAsync(out, x, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  dropout_launch(out, mask, x, NULL, n, p, mode, key, 0, 0);
}

void rt_cuda_dropout_backward(float *dx, const float *dout, const int32_t *mask, int64_t n, float p, int mode,
                              uint64_t key, int acc) {
  dropout_launch(dx, NULL, dout, mask, n, p, mode, key, 1, acc);
}

// stochastic_depth: dropout's hash of (key, row), one draw per row (row 0's for the batch); refused under a
// CUDA graph as dropout is

static __global__ void sd_kernel(float *out, const float *x, int64_t S, int64_t batch, float scale, uint32_t th,
                                 uint64_t key, int acc, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t r = batch ? 0 : i / S;
    float g = __fmul_rn(x[i], (mix64_dev(key ^ (uint64_t)r) >> 40) >= th ? scale : 0.0f);
    out[i] = acc ? __fadd_rn(out[i], g) : g;
  }
}

static void sd_launch(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p, uint64_t key, int acc) {
  need_ctx();
  RT_CHECK(!ctx.capturing,
           "stochastic_depth's random key changes every step and a CUDA graph would replay the captured "
           "one: train this model without --cuda-graph");
  int64_t n = N * S;
  if (n <= 0 || !out) return;
  float scale = (float)(1.0 / (1.0 - (double)p));
  uint32_t th = (uint32_t)ceil((double)p * 16777216.0);
  sd_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(out, x, S, batch, scale, th, key, acc, n);
  LAUNCH_CHECK();
}

void rt_cuda_stochastic_depth_forward(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p,
                                      int mode, uint64_t key) {
  if (mode == RT_MODE_EVAL) {
    need_ctx();
    if (out != x && N * S > 0)
      CUDA_CHECK(cudaMemcpyAsync(out, x, sizeof(float) * (size_t)(N * S), cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  sd_launch(out, x, N, S, batch, p, key, 0);
}

void rt_cuda_stochastic_depth_backward(float *dx, const float *dout, int64_t N, int64_t S, int64_t batch, float p,
                                       int mode, uint64_t key, int acc) {
  (void)mode;
  sd_launch(dx, dout, N, S, batch, p, key, acc);
}
