/* cuda_precision.cu: the CUDA backend's storage precision (casts), loss scaling (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// storage precision: cpu.c's conversions bit for bit (nearest even, NaN kept,
// fp16 subnormals kept, overflow to inf)

static __device__ uint16_t to_f16(float f) {
  uint32_t x = __float_as_uint(f);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e), half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

static __device__ float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) return __uint_as_float(__float_as_uint(__fmul_rn((float)mant, 0x1p-24f)) | sign);
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

static __global__ void f32_to_bf16_kernel(uint16_t *dst, const float *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = to_bf16(src[i]);
}
// rt_f32_to_bf16_sr (memplan_kernels.h): fp32 bits plus 16 random bits, the high half
static __global__ void f32_to_bf16_sr_kernel(uint16_t *dst, const float *src, int64_t n, uint64_t key) {
  GRID_STRIDE(i, n) {
    uint32_t x = __float_as_uint(src[i]);
    if ((x & 0x7fffffffu) >= 0x7f800000u) dst[i] = to_bf16(src[i]); // NaN, inf: as nearest
    else dst[i] = (uint16_t)((x + (uint32_t)(mix64_dev(key ^ (uint64_t)i) & 0xffffu)) >> 16);
  }
}
static __global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = from_bf16(src[i]);
}
static __global__ void f32_to_f16_kernel(uint16_t *dst, const float *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = to_f16(src[i]);
}
static __global__ void f16_to_f32_kernel(float *dst, const uint16_t *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = from_f16(src[i]);
}

#define CAST_LAUNCH(kernel, dst, src, n)                           \
  do {                                                             \
    need_ctx();                                                    \
    if ((n) <= 0) return;                                          \
    kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, n); \
    LAUNCH_CHECK();                                                \
  } while (0)

void rt_cuda_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) { CAST_LAUNCH(f32_to_bf16_kernel, dst, src, n); }
void rt_cuda_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) { CAST_LAUNCH(bf16_to_f32_kernel, dst, src, n); }
void rt_cuda_f32_to_f16(uint16_t *dst, const float *src, int64_t n) { CAST_LAUNCH(f32_to_f16_kernel, dst, src, n); }
void rt_cuda_f16_to_f32(float *dst, const uint16_t *src, int64_t n) { CAST_LAUNCH(f16_to_f32_kernel, dst, src, n); }
void rt_cuda_f32_to_bf16_sr(uint16_t *dst, const float *src, int64_t n, uint64_t key) {
  need_ctx();
  if (n <= 0) return;
  f32_to_bf16_sr_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, n, key);
  LAUNCH_CHECK();
}

// frozen weights (--base-weights): cpu.c's dequantization, the same float operations
static __global__ void i8_to_f32_kernel(float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols) {
  GRID_STRIDE(i, n) dst[i] = (float)src[i] * __fdiv_rn(absmax[i / cols], 127.0f);
}
static __constant__ float nf4_table[16] = RT_NF4_TABLE;
static __global__ void nf4_to_f32_kernel(float *dst, const uint8_t *src, const float *absmax, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = __fmul_rn(nf4_table[(src[i / 2] >> (i % 2 ? 0 : 4)) & 15], absmax[i / RT_NF4_BLOCK]);
}
void rt_cuda_i8_to_f32(float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols) {
  need_ctx();
  if (n <= 0) return;
  i8_to_f32_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, absmax, n, cols);
  LAUNCH_CHECK();
}
void rt_cuda_nf4_to_f32(float *dst, const uint8_t *src, const float *absmax, int64_t n) {
  need_ctx();
  if (n <= 0) return;
  nf4_to_f32_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(dst, src, absmax, n);
  LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// loss scaling: every gradient unscaled on the stream, one flag for all of
// them, read once (one synchronization per step)

static __device__ int rt_nonfinite; // set by any thread that saw inf/nan (same value: no race)

static __global__ void unscale_kernel(float *g, int64_t n, float inv_scale) {
  int bad = 0;
  GRID_STRIDE(i, n) {
    float x = g[i];
    bad |= !isfinite(x);
    g[i] = __fmul_rn(x, inv_scale);
  }
  if (bad) rt_nonfinite = 1;
}

void rt_cuda_unscale_check(float *g, int64_t n, float inv_scale) {
  need_ctx();
  if (n <= 0) return;
  unscale_kernel<<<grid_for(n, 256), 256, 0, ctx.stream>>>(g, n, inv_scale);
  LAUNCH_CHECK();
}

int rt_cuda_all_finite(void) {
  need_ctx();
  int bad = 0;
  static const int zero = 0;
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(&bad, rt_nonfinite, sizeof bad, 0, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaMemcpyToSymbolAsync(rt_nonfinite, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return !bad;
}
