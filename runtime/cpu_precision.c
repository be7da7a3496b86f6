/* cpu_precision.c: the CPU backend's storage precision (bf16, fp16, NF4, int8 casts), loss scaling, guard mode
 * (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// storage precision and loss scaling

uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                /* nearest even */
}

float from_bf16(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* IEEE binary16, nearest even, subnormals kept. */
static uint16_t to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
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
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* a carry may round up to inf: correct */
  return (uint16_t)(sign | half);
}

static float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0x1fu) x = sign | 0x7f800000u | (mant << 13);
  else if (exp == 0) {
    float f = (float)mant * 0x1p-24f; /* zero or subnormal: exact in float */
    memcpy(&x, &f, 4);
    x |= sign;
  } else x = sign | ((exp + 112u) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

void rt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
}
static uint16_t to_bf16_sr(float f, uint64_t bits) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  if ((x & 0x7fffffffu) == 0x7f800000u) return (uint16_t)(x >> 16);         /* inf */
  return (uint16_t)((x + (uint32_t)(bits & 0xffffu)) >> 16);
}
void rt_f32_to_bf16_sr(uint16_t *dst, const float *src, int64_t n, uint64_t key) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_bf16_sr(src[i], rt_mix64(key ^ (uint64_t)i));
}
void rt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
}
void rt_f32_to_f16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_f16(src[i]);
}
void rt_f16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = from_f16(src[i]);
}
void rt_i8_to_f32(float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i] * (absmax[i / cols] / 127.0f);
}
void rt_nf4_to_f32(float *dst, const uint8_t *src, const float *absmax, int64_t n) {
  static const float nf4[16] = RT_NF4_TABLE;
  for (int64_t i = 0; i < n; i++) dst[i] = nf4[(src[i / 2] >> (i % 2 ? 0 : 4)) & 15] * absmax[i / RT_NF4_BLOCK];
}

int rt_unscale_check(float *g, int64_t n, float inv_scale) {
  int finite = 1;
  for (int64_t i = 0; i < n; i++) {
    finite &= isfinite(g[i]) != 0;
    g[i] *= inv_scale;
  }
  return finite;
}

double rt_grad_sqnorm(const float *g, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
  return s;
}

// ----------------------------------------------------------------------------
// guard mode

enum { RT_CANARY = 0xA5 };

void rt_guard_arm(unsigned char *canary, int64_t n) { memset(canary, RT_CANARY, (size_t)n); }

void rt_guard_check(const unsigned char *canary, int64_t n, int op, const char *layer, const char *buffer) {
  for (int64_t i = 0; i < n; i++)
    if (canary[i] != RT_CANARY) {
      fprintf(stderr, "guard: op %d (%s) wrote past the end of buffer %s (canary byte %lld changed)\n", op, layer,
              buffer, (long long)i);
      exit(5);
    }
}
