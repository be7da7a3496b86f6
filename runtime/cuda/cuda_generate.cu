/* cuda_generate.cu: generation from a planned KV cache on the device, the
 * CUDA twin of cpu_generate.c (TrModel.decode_run of trainer.cu): the same
 * decode ops, on n rows at positions pos..pos+n-1 in the device arena, the
 * rt_cuda_* kernels for what the eval plan already runs and two kernels of
 * its own: rope at an offset position, and attention of each new row over
 * its layer's cache. Everything is enqueued on the runtime's stream; the
 * caller uploads the tokens before and downloads the logits after. */
#include "memplan_rt_cuda.h"
#include "memplan_trainer.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DEC_CHECK(call)                                                                          \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "cuda_generate.cu:%d: %s: %s\n", __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static cudaStream_t dec_stream(void) { return (cudaStream_t)rt_cuda_stream(); }

/* One thread per (row, frequency): every q and k head of the row turned by
 * position pos + row (cpu_generate.c's rope_task). */
__global__ void dec_rope(float *x, int64_t n, int64_t pos, int64_t H, int64_t KV, int64_t hd, float theta, float f1,
                         float f2, float f3, float f4) {
  int64_t h2 = hd / 2, id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= n * h2) return;
  int64_t r = id / h2, i = id % h2, W = (H + 2 * KV) * hd;
  double a = (double)(pos + r) * rt_rope_freq(theta, i, hd, f1, f2, f3, f4);
  float c = (float)cos(a), s = (float)sin(a);
  float *row = x + r * W;
  for (int64_t h = 0; h < H + KV; h++) {
    float x1 = row[h * hd + i], x2 = row[h * hd + i + h2];
    row[h * hd + i] = x1 * c - x2 * s, row[h * hd + i + h2] = x2 * c + x1 * s;
  }
}

/* K and V of the n new rows into the cache at positions pos.. */
__global__ void dec_cache_write(float *K, float *V, const float *qkv, int64_t n, int64_t pos, int64_t C, int64_t KC) {
  int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= n * KC) return;
  int64_t r = id / KC, j = id % KC, C3 = C + 2 * KC;
  K[(pos + r) * KC + j] = qkv[r * C3 + C + j];
  V[(pos + r) * KC + j] = qkv[r * C3 + C + KC + j];
}

#define DEC_THREADS 128

/* One block per query row (r, h): its scores over the cache's positions
 * 0..pos+r in shared memory, their softmax (the max first, as the CPU), then
 * the weighted sum of V, one thread per output channel. */
__global__ void dec_attention(float *out, const float *qkv, const float *K, const float *V, int64_t pos, int64_t H,
                              int64_t KV, int64_t hd) {
  extern __shared__ float p[];
  __shared__ float red[DEC_THREADS];
  int64_t r = blockIdx.x / H, h = blockIdx.x % H, n = pos + r + 1, KC = KV * hd, C3 = (H + 2 * KV) * hd;
  const float *q = qkv + r * C3 + h * hd, *k = K + h / (H / KV) * hd, *v = V + h / (H / KV) * hd;
  float scale = 1.0f / sqrtf((float)hd), mx = -INFINITY;
  for (int64_t t = threadIdx.x; t < n; t += blockDim.x) {
    float s = 0.0f;
    for (int64_t i = 0; i < hd; i++) s += q[i] * k[t * KC + i];
    p[t] = s * scale;
    mx = fmaxf(mx, p[t]);
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t t = threadIdx.x; t < n; t += blockDim.x) sum += p[t] = expf(p[t] - mx);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  float inv = 1.0f / red[0];
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc = 0.0f;
    for (int64_t t = 0; t < n; t++) acc += p[t] * v[t * KC + i];
    out[r * H * hd + h * hd + i] = acc * inv;
  }
}

static unsigned blocks(int64_t n) { return (unsigned)((n + 255) / 256); }

extern "C" void tr_cuda_decode(const TrModel *m, unsigned char *arena, int64_t n, int64_t pos) {
  cudaStream_t st = dec_stream();
  for (int i = 0; i < m->ndecode; i++) {
    const TrDecodeOp *o = &m->decode[i];
    float *out = (float *)(arena + o->out);
    const float *x = o->in[0] >= 0 ? (const float *)(arena + o->in[0]) : NULL;
    const float *b = o->in[1] >= 0 ? (const float *)(arena + o->in[1]) : NULL;
    const float *c = o->in[2] >= 0 ? (const float *)(arena + o->in[2]) : NULL;
    int64_t w = o->cols;
    switch (o->kind) {
    case TR_DEC_EMBEDDING: rt_cuda_embedding_forward(out, (const int32_t *)x, b, n, w, m->vocab); break;
    case TR_DEC_POSITION:
      DEC_CHECK(cudaMemcpyAsync(out, x + pos * w, (size_t)(n * w) * sizeof(float), cudaMemcpyDeviceToDevice, st));
      break;
    case TR_DEC_ADD: rt_cuda_add_forward(out, x, b, n * w); break;
    case TR_DEC_MUL: rt_cuda_mul_forward(out, x, b, n * w); break;
    case TR_DEC_GELU: rt_cuda_gelu_forward(out, x, n * w, (int)o->d[0]); break;
    case TR_DEC_SILU: rt_cuda_silu_forward(out, x, n * w); break;
    case TR_DEC_LAYERNORM: rt_cuda_layernorm_forward(out, NULL, NULL, x, b, c, n, w, o->f[0]); break;
    case TR_DEC_RMSNORM: rt_cuda_rmsnorm_forward(out, NULL, x, b, n, w, o->f[0]); break;
    case TR_DEC_LINEAR: rt_cuda_linear_forward(out, x, b, c, n, o->d[0], w); break;
    case TR_DEC_LOGITS: rt_cuda_linear_forward(out, x + (n - 1) * o->d[0], b, c, 1, o->d[0], w); break;
    case TR_DEC_ROPE: {
      int64_t all = n * (o->d[0] + 2 * o->d[1]) * o->d[2];
      if (out != x) DEC_CHECK(cudaMemcpyAsync(out, x, (size_t)all * sizeof(float), cudaMemcpyDeviceToDevice, st));
      dec_rope<<<blocks(n * (o->d[2] / 2)), 256, 0, st>>>(out, n, pos, o->d[0], o->d[1], o->d[2], o->f[0], o->f[1],
                                                          o->f[2], o->f[3], o->f[4]);
      DEC_CHECK(cudaGetLastError());
      break;
    }
    case TR_DEC_ATTENTION: {
      int64_t KC = o->d[1] * o->d[2];
      float *K = (float *)(arena + o->cache), *V = K + m->gen_context * KC;
      dec_cache_write<<<blocks(n * KC), 256, 0, st>>>(K, V, x, n, pos, o->d[0] * o->d[2], KC);
      DEC_CHECK(cudaGetLastError());
      size_t shared = (size_t)m->gen_context * sizeof(float); /* the longest row of scores */
      if (shared > 48 * 1024)
        DEC_CHECK(cudaFuncSetAttribute(dec_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
      dec_attention<<<(unsigned)(n * o->d[0]), DEC_THREADS, shared, st>>>(out, x, K, V, pos, o->d[0], o->d[1], o->d[2]);
      DEC_CHECK(cudaGetLastError());
      break;
    }
    }
  }
}
