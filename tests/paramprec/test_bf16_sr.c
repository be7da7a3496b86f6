/* test_bf16_sr.c: rt_f32_to_bf16_sr, the stochastic rounding that stores a
 * bf16 parameter's update back (--param-precision, planner/basew.h), against
 * a float64 reference of the formula in memplan_kernels.h with the same
 * random bits: bit for bit; unbiased (the mean of many roundings of one x is
 * x within 5 standard deviations; rounding to nearest is not); and the same
 * bits for the same key, other bits for another.
 * Planted once each (2026-12-02): the kernel adding 0x7fff instead of the
 * random bits (round half up): 3 failed, "exact == n", "differs > inexact / 8
 * ..." (another key rounded 0 otherwise) and the mean (1.000000000, |diff|
 * 9.77e-04 > 1.26e-05); the key left out of the bits (mix64(i)): 2 failed,
 * "exact == n" and "differs > inexact / 8 ...". */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../check.h"
#include "memplan_rt.h"

/* splitmix64's output function, as memplan_trainer.h documents mix64 */
static uint64_t mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static double bf16_val(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* float64 reference: |x| between the bf16 values a (toward zero) and b (the
 * next away from zero); b when r / 2^16 >= 1 - (|x| - a) / (b - a). */
static uint16_t ref_sr(float x, uint64_t bits) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
  if ((u & 0x7fffffffu) == 0x7f800000u) return lo;
  double a = fabs(bf16_val(lo)), b = fabs(bf16_val(hi)), frac = (fabs((double)x) - a) / (b - a);
  double r = (double)(bits & 0xffffu) / 65536.0;
  return r >= 1.0 - frac ? hi : lo;
}

int main(void) {
  enum { n = 1 << 20 };
  static float x[n], one[n];
  static uint16_t got[n], again[n], other[n];
  uint64_t s = 12345;
  for (int i = 0; i < n; i++) { /* random magnitudes over decades, both signs, some exact bf16 values */
    s = mix64(s + 1);
    float f = (float)ldexp((double)(s >> 40) / 0x1p24 + 0.5, (int)(s % 41) - 20) * ((s >> 8) & 1 ? -1.0f : 1.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    if (i % 17 == 0) u &= 0xffff0000u;
    memcpy(&x[i], &u, 4);
  }
  x[1] = INFINITY, x[2] = -INFINITY, x[3] = NAN, x[4] = 0.0f, x[5] = -0.0f;
  uint64_t key = 0x243f6a8885a308d3ull;
  rt_f32_to_bf16_sr(got, x, n, key);
  int exact = 0;
  for (int i = 0; i < n; i++) exact += got[i] == ref_sr(x[i], mix64(key ^ (uint64_t)i));
  CHECK(exact == n);
  CHECK(got[1] == 0x7f80 && got[2] == 0xff80 && (got[3] & 0x7fc0) == 0x7fc0 && got[4] == 0 && got[5] == 0x8000);
  /* the same key: the same bits; another key: other roundings of most inexact elements */
  rt_f32_to_bf16_sr(again, x, n, key);
  rt_f32_to_bf16_sr(other, x, n, key + 1);
  CHECK(!memcmp(got, again, sizeof got));
  int differs = 0, inexact = 0;
  for (int i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], 4);
    inexact += (u & 0xffffu) != 0;
    differs += got[i] != other[i];
  }
  printf("inexact %d of %d; another key rounds %d of them otherwise\n", inexact, n, differs);
  CHECK(differs > inexact / 8 && differs < inexact);
  /* unbiased: x = 1 + 2^-10 (an eighth of bf16's step 2^-7 above 1); one
   * rounding's standard deviation 2^-7 sqrt(1/8 * 7/8), n of them average
   * with sigma = that / sqrt(n) = 2.6e-6; held to 5 sigma */
  for (int i = 0; i < n; i++) one[i] = 1.0f + 0x1p-10f;
  rt_f32_to_bf16_sr(got, one, n, key);
  double mean = 0, sigma = 0x1p-7 * sqrt(1.0 / 8 * 7.0 / 8) / sqrt((double)n);
  for (int i = 0; i < n; i++) mean += bf16_val(got[i]) / n;
  printf("mean of %d stochastic roundings of %.9f: %.9f (|diff| %.2e, 5 sigma %.2e)\n", n, 1.0 + 0x1p-10, mean,
         fabs(mean - (1.0 + 0x1p-10)), 5 * sigma);
  CHECK(fabs(mean - (1.0 + 0x1p-10)) < 5 * sigma);
  rt_f32_to_bf16(got, one, n); /* the control: round to nearest always gives 1 */
  double rne = bf16_val(got[0]);
  printf("round to nearest: %.9f\n", rne);
  CHECK(fabs(rne - (1.0 + 0x1p-10)) > 100 * sigma);
  return check_summary("bf16_sr");
}
