/* test_cuda_kernels.c: every kernel of the CUDA backend (runtime/cuda) against
 * the double-precision references of ref.c, on the same random inputs.
 *
 * Built two ways from this one file:
 * - default: the backend under test is rt_cuda_* (device buffers). Without a
 *   usable GPU it prints why and exits 77 (CTest's skip code).
 * - -DTEST_CPU_BACKEND: the backend under test is cpu.c's rt_*. It runs
 *   anywhere, so the build machine checks the references and tolerances that
 *   the GPU run relies on against the CPU backend before any GPU sees them.
 *
 * For every kernel: forward outputs; backward outputs with acc = 0 into
 * buffers filled with NaN (a kernel that reads an "=" output fails), with
 * acc = 1 onto random contents, with some gradients NULL; the alias-safe
 * in-place pairs of memplan_kernels.h; eval paths (lse, mean, rstd NULL). CUDA
 * only: TF32 products, linear without the cuBLASLt epilogue, and run-to-run
 * determinism (bitwise) of the kernels that reduce over rows. The storage
 * casts bit for bit against a double-precision rounding (ties to even,
 * overflow to inf, subnormals, NaN) over 40000 values, and loss scaling's
 * unscale and its per-step verdict.
 *
 * Error measure (as tests/gradcheck.c): max_i |got - want| /
 * max(|want_i|, 1e-2 max_j |want_j|), so entries near zero are judged
 * against the tensor's scale. One table row per checked output:
 * name, max abs err, max rel err, ok/FAIL.
 *
 * Usage: test_cuda_kernels [--quick] [--bench] [FILTER]
 *   --quick  small shapes only (for compute-sanitizer runs)
 *   --bench  CUDA only: also time GPT-2 124M-sized kernels (no checks)
 *   FILTER   only cases whose name contains FILTER
 * Exit status: 0 all ok, 1 a check failed, 77 no GPU (CUDA build).
 */
#ifdef TEST_CPU_BACKEND
#include "memplan_rt.h"
#define UT(fn) rt_##fn
#define BACKEND "cpu.c"
#else
#include "memplan_rt_cuda.h"
#define UT(fn) rt_cuda_##fn
#define BACKEND "cuda"
#endif
#include "ref.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tolerances (max rel err, measure above), about 5x what cpu.c shows in the
 * cuda_refs test. TOL_SUM: outputs that sum hundreds of float terms (matrix
 * products at K = 384 reach 4e-5; attention) or inherit a float rounding of
 * an input-sized value (layernorm's mean at offset 100: 6e-5). TOL: the rest
 * (double reductions, element-wise; CUDA's tanhf/coshf are within 2 ulp).
 * The optimizers must match cpu.c's float sequence exactly. */
#define TOL_SUM 2e-4
#define TOL 5e-5
#define TOL_ATT TOL_SUM
#define TOL_TF32 5e-3 /* TF32 products, judged against the tensor's max (floor 1) */
#define EXACT 0.0

#define WORKSPACE_BYTES ((size_t)32 << 20)

static int failures, checks, quick;
static const char *filter;

// ----------------------------------------------------------------------------
// harness: memory of the backend under test

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "%s:%d: out of memory\n", __FILE__, __LINE__);
    exit(1);
  }
  return p;
}

/* Everything a case allocates is released when it ends. */
#define MAX_ALLOCS 256
static struct {
  void *p;
  int ut; // backend memory (device memory for CUDA)
} allocs[MAX_ALLOCS];
static int nallocs;

static void *track(void *p, int ut) {
  if (nallocs == MAX_ALLOCS) {
    fprintf(stderr, "%s:%d: too many allocations in one case\n", __FILE__, __LINE__);
    exit(1);
  }
  allocs[nallocs].p = p;
  allocs[nallocs++].ut = ut;
  return p;
}

static void release_all(void) {
  for (int i = 0; i < nallocs; i++) {
#ifndef TEST_CPU_BACKEND
    if (allocs[i].ut) {
      rt_cuda_free(allocs[i].p);
      continue;
    }
#endif
    free(allocs[i].p);
  }
  nallocs = 0;
}

static void *host_alloc(size_t bytes) { return track(xmalloc(bytes), 0); }

#ifdef TEST_CPU_BACKEND
static void *ut_alloc(size_t bytes) { return track(xmalloc(bytes), 1); }
static void ut_put(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void ut_get(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
#else
static void *ut_alloc(size_t bytes) { return track(rt_cuda_malloc(bytes), 1); }
static void ut_put(void *dst, const void *src, size_t bytes) { rt_cuda_memcpy_h2d(dst, src, bytes); }
static void ut_get(void *dst, const void *src, size_t bytes) { rt_cuda_memcpy_d2h(dst, src, bytes); }
#endif

// ----------------------------------------------------------------------------
// harness: tensors held twice, once for the reference, once for the backend

typedef struct {
  int64_t n;
  float *ref; // host buffer the reference reads or writes
  float *ut;  // the backend's buffer, same initial contents
} Ten;

typedef struct {
  int64_t n;
  int32_t *ref, *ut;
} Ids;

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
/* Uniform in [-1, 1), xorshift64*. */
static float frand(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t r = rng_state * 0x2545f4914f6cdd1du;
  return (float)((double)(r >> 40) / (double)(1u << 23) - 1.0);
}

static Ten ten_upload(float *host, int64_t n) {
  Ten t = {n, host, ut_alloc((size_t)n * sizeof(float))};
  ut_put(t.ut, host, (size_t)n * sizeof(float));
  return t;
}

static Ten ten_rand(int64_t n, float amp) {
  float *h = host_alloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) h[i] = amp * frand();
  return ten_upload(h, n);
}

static Ten ten_fill(int64_t n, float v) {
  float *h = host_alloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) h[i] = v;
  return ten_upload(h, n);
}

/* A gradient output: NaN for "=" (must not be read), random for "+=". */
static Ten ten_grad(int64_t n, int acc) { return acc ? ten_rand(n, 1.0f) : ten_fill(n, NAN); }

/* Copies of a tensor's current contents on both sides (for a second run). */
static Ten ten_copy(const Ten *t) {
  float *h = host_alloc((size_t)t->n * sizeof(float));
  memcpy(h, t->ref, (size_t)t->n * sizeof(float));
  Ten c = {t->n, h, ut_alloc((size_t)t->n * sizeof(float))};
  float *tmp = xmalloc((size_t)t->n * sizeof(float));
  ut_get(tmp, t->ut, (size_t)t->n * sizeof(float));
  ut_put(c.ut, tmp, (size_t)t->n * sizeof(float));
  free(tmp);
  return c;
}

/* Token ids in [0, V); with skew, every other id is 3 (a frequent token). */
static Ids ids_rand(int64_t n, int64_t V, int skew) {
  Ids t = {n, host_alloc((size_t)n * sizeof(int32_t)), ut_alloc((size_t)n * sizeof(int32_t))};
  for (int64_t i = 0; i < n; i++) {
    int64_t r = (int64_t)((frand() + 1.0f) * 0.5f * (float)V);
    t.ref[i] = (int32_t)(skew && i % 2 && V > 3 ? 3 : (r < V ? r : V - 1));
  }
  ut_put(t.ut, t.ref, (size_t)n * sizeof(int32_t));
  return t;
}

static int selected(const char *name) { return !filter || strstr(name, filter); }

/* One table row: the backend's buffer against the reference's. floor_frac:
 * entries are judged against max(|want_i|, floor_frac * max_j |want_j|). */
static void check_floor(const Ten *t, double tol, double floor_frac, const char *fmt, ...) {
  char name[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  float *got = xmalloc((size_t)t->n * sizeof(float));
  ut_get(got, t->ut, (size_t)t->n * sizeof(float));
  double mx = 0.0, abs_err = 0.0, rel_err = 0.0;
  for (int64_t i = 0; i < t->n; i++) mx = fmax(mx, fabs(t->ref[i]));
  double floor = mx > 0.0 ? floor_frac * mx : 1e-30;
  for (int64_t i = 0; i < t->n; i++) {
    double d = fabs((double)got[i] - t->ref[i]);
    double e = d / fmax(fabs(t->ref[i]), floor);
    if (!(d <= abs_err)) abs_err = d; // NaN sticks
    if (!(e <= rel_err)) rel_err = e;
  }
  free(got);
  int ok = rel_err <= tol;
  failures += !ok;
  checks++;
  printf("%-58s %9.2e %9.2e  %s\n", name, abs_err, rel_err, ok ? "ok" : "FAIL");
}

#define check(t, tol, ...) check_floor((t), (tol), 1e-2, __VA_ARGS__)

#define SHAPE3 "(%lld,%lld,%lld)"
#define LL(x) ((long long)(x))

// ----------------------------------------------------------------------------
// cases: products

static void case_linear(int64_t M, int64_t K, int64_t N, double tol, const char *tag) {
  for (int bias = 0; bias <= 1; bias++) {
    Ten x = ten_rand(M * K, 1), W = ten_rand(N * K, 1), b = ten_rand(N, 1);
    Ten out = ten_fill(M * N, NAN);
    ref_linear_forward(out.ref, x.ref, W.ref, bias ? b.ref : NULL, M, K, N);
    UT(linear_forward)(out.ut, x.ut, W.ut, bias ? b.ut : NULL, M, K, N);
    check_floor(&out, tol, tol == TOL_TF32 ? 1.0 : 1e-2, "linear_forward%s bias=%d " SHAPE3, tag, bias, LL(M), LL(K),
                LL(N));
    release_all();
  }
  // acc patterns (dx, dW, db): all "=", all "+=", mixed; -1 is a NULL gradient
  static const int pat[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 1}, {-1, 0, -1}, {0, -1, -1}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *a = pat[p];
    Ten x = ten_rand(M * K, 1), W = ten_rand(N * K, 1), g = ten_rand(M * N, 1);
    Ten dx = ten_grad(M * K, a[0] > 0), dW = ten_grad(N * K, a[1] > 0), db = ten_grad(N, a[2] > 0);
    ref_linear_backward(a[0] < 0 ? NULL : dx.ref, a[1] < 0 ? NULL : dW.ref, a[2] < 0 ? NULL : db.ref, g.ref, x.ref,
                        W.ref, M, K, N, a[0] > 0, a[1] > 0, a[2] > 0);
    UT(linear_backward)
    (a[0] < 0 ? NULL : dx.ut, a[1] < 0 ? NULL : dW.ut, a[2] < 0 ? NULL : db.ut, g.ut, x.ut, W.ut, M, K, N, a[0] > 0,
     a[1] > 0, a[2] > 0);
    double fl = tol == TOL_TF32 ? 1.0 : 1e-2;
    if (a[0] >= 0) check_floor(&dx, tol, fl, "linear_backward%s dx acc=%d " SHAPE3, tag, a[0], LL(M), LL(K), LL(N));
    if (a[1] >= 0) check_floor(&dW, tol, fl, "linear_backward%s dW acc=%d " SHAPE3, tag, a[1], LL(M), LL(K), LL(N));
    if (a[2] >= 0) check_floor(&db, tol, fl, "linear_backward%s db acc=%d " SHAPE3, tag, a[2], LL(M), LL(K), LL(N));
    release_all();
  }
}

static void case_matmul(int64_t Bt, int64_t M, int64_t K, int64_t N, double tol, const char *tag) {
  double fl = tol == TOL_TF32 ? 1.0 : 1e-2;
  Ten a = ten_rand(Bt * M * K, 1), b = ten_rand(Bt * K * N, 1), out = ten_fill(Bt * M * N, NAN);
  ref_matmul_forward(out.ref, a.ref, b.ref, Bt, M, K, N);
  UT(matmul_forward)(out.ut, a.ut, b.ut, Bt, M, K, N);
  check_floor(&out, tol, fl, "matmul_forward%s Bt=%lld " SHAPE3, tag, LL(Bt), LL(M), LL(K), LL(N));
  for (int acc = 0; acc <= 1; acc++)
    for (int only = 0; only <= 2; only++) { // 0: both, 1: da only, 2: db only
      if (acc && only) continue;
      Ten g = ten_rand(Bt * M * N, 1);
      Ten da = ten_grad(Bt * M * K, acc), db = ten_grad(Bt * K * N, acc);
      ref_matmul_backward(only == 2 ? NULL : da.ref, only == 1 ? NULL : db.ref, g.ref, a.ref, b.ref, Bt, M, K, N, acc,
                          acc);
      UT(matmul_backward)
      (only == 2 ? NULL : da.ut, only == 1 ? NULL : db.ut, g.ut, a.ut, b.ut, Bt, M, K, N, acc, acc);
      if (only != 2) check_floor(&da, tol, fl, "matmul_backward%s da acc=%d%s", tag, acc, only ? " (db NULL)" : "");
      if (only != 1) check_floor(&db, tol, fl, "matmul_backward%s db acc=%d%s", tag, acc, only ? " (da NULL)" : "");
    }
  release_all();
}

// ----------------------------------------------------------------------------
// cases: element-wise

static void case_add(int64_t n) {
  Ten a = ten_rand(n, 1), b = ten_rand(n, 1), out = ten_fill(n, NAN);
  ref_add_forward(out.ref, a.ref, b.ref, n);
  UT(add_forward)(out.ut, a.ut, b.ut, n);
  check(&out, TOL, "add_forward n=%lld", LL(n));
  ref_add_forward(a.ref, a.ref, b.ref, n); // in place: out = a
  UT(add_forward)(a.ut, a.ut, b.ut, n);
  check(&a, TOL, "add_forward in place (out=a)");
  ref_add_forward(b.ref, a.ref, b.ref, n); // out = b
  UT(add_forward)(b.ut, a.ut, b.ut, n);
  check(&b, TOL, "add_forward in place (out=b)");
  release_all();
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), da = ten_grad(n, acc), db = ten_grad(n, !acc);
    ref_add_backward(da.ref, db.ref, g.ref, n, acc, !acc);
    UT(add_backward)(da.ut, db.ut, g.ut, n, acc, !acc);
    check(&da, TOL, "add_backward da acc=%d", acc);
    check(&db, TOL, "add_backward db acc=%d", !acc);
    release_all();
  }
  // da aliases dout (acc_da = 0, a no-op), db accumulates from the same dout
  Ten g = ten_rand(n, 1), db = ten_grad(n, 1);
  ref_add_backward(g.ref, db.ref, g.ref, n, 0, 1);
  UT(add_backward)(g.ut, db.ut, g.ut, n, 0, 1);
  check(&g, TOL, "add_backward in place da=dout");
  check(&db, TOL, "add_backward db acc=1 beside da=dout");
  Ten g2 = ten_rand(n, 1), da = ten_grad(n, 0);
  ref_add_backward(da.ref, g2.ref, g2.ref, n, 0, 0);
  UT(add_backward)(da.ut, g2.ut, g2.ut, n, 0, 0);
  check(&da, TOL, "add_backward da acc=0 beside db=dout");
  check(&g2, TOL, "add_backward in place db=dout");
  release_all();
}

static void case_mul(int64_t n) {
  Ten a = ten_rand(n, 2), b = ten_rand(n, 2), out = ten_fill(n, NAN);
  ref_mul_forward(out.ref, a.ref, b.ref, n);
  UT(mul_forward)(out.ut, a.ut, b.ut, n);
  check(&out, TOL, "mul_forward n=%lld", LL(n));
  // backward before the in-place forwards below overwrite a and b;
  // acc patterns (da, db), -1 a NULL gradient
  static const int pat[][2] = {{0, 0}, {1, 1}, {0, 1}, {-1, 0}, {1, -1}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *k = pat[p];
    Ten g = ten_rand(n, 1), da = ten_grad(n, k[0] > 0), db = ten_grad(n, k[1] > 0);
    ref_mul_backward(k[0] < 0 ? NULL : da.ref, k[1] < 0 ? NULL : db.ref, g.ref, a.ref, b.ref, n, k[0] > 0, k[1] > 0);
    UT(mul_backward)(k[0] < 0 ? NULL : da.ut, k[1] < 0 ? NULL : db.ut, g.ut, a.ut, b.ut, n, k[0] > 0, k[1] > 0);
    if (k[0] >= 0) check(&da, TOL, "mul_backward da acc=%d%s", k[0], k[1] < 0 ? " (db NULL)" : "");
    if (k[1] >= 0) check(&db, TOL, "mul_backward db acc=%d%s", k[1], k[0] < 0 ? " (da NULL)" : "");
  }
  Ten g = ten_rand(n, 1), db = ten_grad(n, 0); // da aliases dout, db reads the same dout
  ref_mul_backward(g.ref, db.ref, g.ref, a.ref, b.ref, n, 0, 0);
  UT(mul_backward)(g.ut, db.ut, g.ut, a.ut, b.ut, n, 0, 0);
  check(&g, TOL, "mul_backward in place da=dout");
  check(&db, TOL, "mul_backward db beside da=dout");
  Ten g2 = ten_rand(n, 1), da = ten_grad(n, 1); // db aliases dout, da accumulates
  ref_mul_backward(da.ref, g2.ref, g2.ref, a.ref, b.ref, n, 1, 0);
  UT(mul_backward)(da.ut, g2.ut, g2.ut, a.ut, b.ut, n, 1, 0);
  check(&da, TOL, "mul_backward da acc=1 beside db=dout");
  check(&g2, TOL, "mul_backward in place db=dout");
  Ten g3 = ten_rand(n, 1), dx = ten_grad(n, 0); // mul(x, x): one gradient buffer
  ref_mul_backward(dx.ref, dx.ref, g3.ref, a.ref, a.ref, n, 0, 1);
  UT(mul_backward)(dx.ut, dx.ut, g3.ut, a.ut, a.ut, n, 0, 1);
  check(&dx, TOL, "mul_backward mul(x, x): da = db, acc_db=1");
  ref_mul_forward(a.ref, a.ref, b.ref, n); // in place: out = a, then out = b
  UT(mul_forward)(a.ut, a.ut, b.ut, n);
  check(&a, TOL, "mul_forward in place (out=a)");
  ref_mul_forward(b.ref, a.ref, b.ref, n);
  UT(mul_forward)(b.ut, a.ut, b.ut, n);
  check(&b, TOL, "mul_forward in place (out=b)");
  release_all();
}

/* op 0 relu, 1 gelu (tanh approximation), 2 gelu (exact, erf). */
static void case_relu_gelu(int64_t n) {
  for (int op = 0; op < 3; op++) {
    const char *nm = op == 0 ? "relu" : op == 1 ? "gelu tanh" : "gelu exact";
    int approximate = op == 1;
    Ten x = ten_rand(n, 4), out = ten_fill(n, NAN);
    if (op) {
      ref_gelu_forward(out.ref, x.ref, n, approximate);
      UT(gelu_forward)(out.ut, x.ut, n, approximate);
    } else {
      ref_relu_forward(out.ref, x.ref, n);
      UT(relu_forward)(out.ut, x.ut, n);
    }
    check(&out, TOL, "%s_forward n=%lld", nm, LL(n));
    for (int acc = 0; acc <= 1; acc++) {
      Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
      if (op) {
        ref_gelu_backward(dx.ref, g.ref, x.ref, n, approximate, acc);
        UT(gelu_backward)(dx.ut, g.ut, x.ut, n, approximate, acc);
      } else {
        ref_relu_backward(dx.ref, g.ref, out.ref, n, acc);
        UT(relu_backward)(dx.ut, g.ut, out.ut, n, acc);
      }
      check(&dx, TOL, "%s_backward acc=%d", nm, acc);
    }
    Ten g = ten_rand(n, 1); // in place: dx = dout
    if (op) {
      ref_gelu_backward(g.ref, g.ref, x.ref, n, approximate, 0);
      UT(gelu_backward)(g.ut, g.ut, x.ut, n, approximate, 0);
      ref_gelu_forward(x.ref, x.ref, n, approximate);
      UT(gelu_forward)(x.ut, x.ut, n, approximate);
    } else {
      ref_relu_backward(g.ref, g.ref, out.ref, n, 0);
      UT(relu_backward)(g.ut, g.ut, out.ut, n, 0);
      ref_relu_forward(x.ref, x.ref, n);
      UT(relu_forward)(x.ut, x.ut, n);
    }
    check(&g, TOL, "%s_backward in place (dx=dout)", nm);
    check(&x, TOL, "%s_forward in place (out=x)", nm);
    release_all();
  }
}

/* scale by LoRA's alpha / rank (2 here), out of place and in place. */
static void case_scale(int64_t n) {
  Ten x = ten_rand(n, 4), out = ten_fill(n, NAN);
  ref_scale_forward(out.ref, x.ref, n, 2.0);
  UT(scale_forward)(out.ut, x.ut, n, 2.0);
  check(&out, TOL, "scale_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_scale_backward(dx.ref, g.ref, n, 0.5, acc);
    UT(scale_backward)(dx.ut, g.ut, n, 0.5, acc);
    check(&dx, TOL, "scale_backward acc=%d", acc);
  }
  Ten g = ten_rand(n, 1); // in place: dx = dout, then out = x
  ref_scale_backward(g.ref, g.ref, n, 0.5, 0);
  UT(scale_backward)(g.ut, g.ut, n, 0.5, 0);
  check(&g, TOL, "scale_backward in place (dx=dout)");
  ref_scale_forward(x.ref, x.ref, n, 2.0);
  UT(scale_forward)(x.ut, x.ut, n, 2.0);
  check(&x, TOL, "scale_forward in place (out=x)");
  release_all();
}

/* Inputs to +-12: both clamps of relu6, and 0 and 6 exactly (no gradient at the kinks, as torch's). */
static void case_relu6(int64_t n) {
  Ten x = ten_rand(n, 12), out = ten_fill(n, NAN);
  x.ref[0] = 0.0f;
  x.ref[1] = 6.0f;
  ut_put(x.ut, x.ref, (size_t)n * sizeof(float));
  ref_relu6_forward(out.ref, x.ref, n);
  UT(relu6_forward)(out.ut, x.ut, n);
  check(&out, TOL, "relu6_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_relu6_backward(dx.ref, g.ref, out.ref, n, acc);
    UT(relu6_backward)(dx.ut, g.ut, out.ut, n, acc);
    check(&dx, TOL, "relu6_backward acc=%d", acc);
  }
}

/* Inputs to +-12, and two at +-100 where exp(-x) overflows float (the kernels clamp it): the output
 * saturates at 0 and 1. */
static void case_sigmoid(int64_t n) {
  Ten x = ten_rand(n, 12), out = ten_fill(n, NAN);
  x.ref[0] = -100.0f;
  x.ref[1] = 100.0f;
  ut_put(x.ut, x.ref, (size_t)n * sizeof(float));
  ref_sigmoid_forward(out.ref, x.ref, n);
  UT(sigmoid_forward)(out.ut, x.ut, n);
  check(&out, TOL, "sigmoid_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_sigmoid_backward(dx.ref, g.ref, out.ref, n, acc);
    UT(sigmoid_backward)(dx.ut, g.ut, out.ut, n, acc);
    check(&dx, TOL, "sigmoid_backward acc=%d", acc);
  }
}

/* Inputs to +-6: both flat sides and the ramp, and the kinks -3 and 3 exactly (torch's gradients there:
 * hardswish's ramp slope at both ends, -0.5 and 1.5; hardsigmoid's none). Planted once in cpu.c: hardswish's
 * slope x / 6 + 0.5 printed "hardswish_backward acc=0 ... FAIL", hardsigmoid's without / 6 "hardsigmoid_backward
 * acc=0 8.33e-01 5.00e+00 FAIL". */
static void case_hardswish_hardsigmoid(int64_t n) {
  for (int sig = 0; sig <= 1; sig++) {
    Ten x = ten_rand(n, 6), out = ten_fill(n, NAN);
    x.ref[0] = -3.0f;
    x.ref[1] = 3.0f;
    ut_put(x.ut, x.ref, (size_t)n * sizeof(float));
    const char *nm = sig ? "hardsigmoid" : "hardswish";
    if (sig) {
      ref_hardsigmoid_forward(out.ref, x.ref, n);
      UT(hardsigmoid_forward)(out.ut, x.ut, n);
    } else {
      ref_hardswish_forward(out.ref, x.ref, n);
      UT(hardswish_forward)(out.ut, x.ut, n);
    }
    check(&out, TOL, "%s_forward n=%lld", nm, LL(n));
    for (int acc = 0; acc <= 1; acc++) {
      Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
      if (sig) {
        ref_hardsigmoid_backward(dx.ref, g.ref, x.ref, n, acc);
        UT(hardsigmoid_backward)(dx.ut, g.ut, x.ut, n, acc);
      } else {
        ref_hardswish_backward(dx.ref, g.ref, x.ref, n, acc);
        UT(hardswish_backward)(dx.ut, g.ut, x.ut, n, acc);
      }
      check(&dx, TOL, "%s_backward acc=%d", nm, acc);
    }
    release_all();
  }
}

/* NC planes of S: every acc pattern (-1 a NULL gradient), then dx in place of dout beside ds. Planted once in
 * cpu.c: ds summing dout alone printed "scale_channels_backward ds acc=0 1.54e+01 8.96e+00 FAIL". */
static void case_scale_channels(int64_t NC, int64_t S) {
  int64_t n = NC * S;
  Ten x = ten_rand(n, 2), s = ten_rand(NC, 2), out = ten_fill(n, NAN);
  ref_scale_channels_forward(out.ref, x.ref, s.ref, NC, S);
  UT(scale_channels_forward)(out.ut, x.ut, s.ut, NC, S);
  check(&out, TOL, "scale_channels_forward NC=%lld S=%lld", LL(NC), LL(S));
  static const int pat[][2] = {{0, 0}, {1, 1}, {0, 1}, {-1, 0}, {1, -1}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *k = pat[p];
    Ten g = ten_rand(n, 1), dx = ten_grad(n, k[0] > 0), ds = ten_grad(NC, k[1] > 0);
    ref_scale_channels_backward(k[0] < 0 ? NULL : dx.ref, k[1] < 0 ? NULL : ds.ref, g.ref, x.ref, s.ref, NC, S,
                                k[0] > 0, k[1] > 0);
    UT(scale_channels_backward)
    (k[0] < 0 ? NULL : dx.ut, k[1] < 0 ? NULL : ds.ut, g.ut, x.ut, s.ut, NC, S, k[0] > 0, k[1] > 0);
    if (k[0] >= 0) check(&dx, TOL, "scale_channels_backward dx acc=%d", k[0]);
    if (k[1] >= 0) check(&ds, TOL, "scale_channels_backward ds acc=%d", k[1]);
  }
  Ten g = ten_rand(n, 1), ds = ten_grad(NC, 0); // dx aliases dout, ds reads the same dout
  ref_scale_channels_backward(g.ref, ds.ref, g.ref, x.ref, s.ref, NC, S, 0, 0);
  UT(scale_channels_backward)(g.ut, ds.ut, g.ut, x.ut, s.ut, NC, S, 0, 0);
  check(&g, TOL, "scale_channels_backward in place dx=dout");
  check(&ds, TOL, "scale_channels_backward ds beside dx=dout");
  ref_scale_channels_forward(x.ref, x.ref, s.ref, NC, S); // in place: out = x
  UT(scale_channels_forward)(x.ut, x.ut, s.ut, NC, S);
  check(&x, TOL, "scale_channels_forward in place (out=x)");
  release_all();
}

/* N samples of C planes of S: every acc pattern (-1 a NULL gradient), then dx in place of dout beside dw. Planted
 * once in cpu_elementwise.c: dw summing sample 0 alone printed
 * "layer_scale_backward dw acc=0 6.92e+00 1.25e+00 FAIL". */
static void case_layer_scale(int64_t N, int64_t C, int64_t S) {
  int64_t n = N * C * S;
  Ten x = ten_rand(n, 2), w = ten_rand(C, 2), out = ten_fill(n, NAN);
  ref_layer_scale_forward(out.ref, x.ref, w.ref, N, C, S);
  UT(layer_scale_forward)(out.ut, x.ut, w.ut, N, C, S);
  check(&out, TOL, "layer_scale_forward N=%lld C=%lld S=%lld", LL(N), LL(C), LL(S));
  static const int pat[][2] = {{0, 0}, {1, 1}, {0, 1}, {-1, 0}, {1, -1}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *k = pat[p];
    Ten g = ten_rand(n, 1), dx = ten_grad(n, k[0] > 0), dw = ten_grad(C, k[1] > 0);
    ref_layer_scale_backward(k[0] < 0 ? NULL : dx.ref, k[1] < 0 ? NULL : dw.ref, g.ref, x.ref, w.ref, N, C, S, k[0] > 0,
                             k[1] > 0);
    UT(layer_scale_backward)
    (k[0] < 0 ? NULL : dx.ut, k[1] < 0 ? NULL : dw.ut, g.ut, x.ut, w.ut, N, C, S, k[0] > 0, k[1] > 0);
    if (k[0] >= 0) check(&dx, TOL, "layer_scale_backward dx acc=%d", k[0]);
    if (k[1] >= 0) check(&dw, TOL, "layer_scale_backward dw acc=%d", k[1]);
  }
  Ten g = ten_rand(n, 1), dw = ten_grad(C, 0); // dx aliases dout, dw reads the same dout
  ref_layer_scale_backward(g.ref, dw.ref, g.ref, x.ref, w.ref, N, C, S, 0, 0);
  UT(layer_scale_backward)(g.ut, dw.ut, g.ut, x.ut, w.ut, N, C, S, 0, 0);
  check(&g, TOL, "layer_scale_backward in place dx=dout");
  check(&dw, TOL, "layer_scale_backward dw beside dx=dout");
  ref_layer_scale_forward(x.ref, x.ref, w.ref, N, C, S); // in place: out = x
  UT(layer_scale_forward)(x.ut, x.ut, w.ut, N, C, S);
  check(&x, TOL, "layer_scale_forward in place (out=x)");
  release_all();
}

/* Inputs to +-12, and four at +-100 where exp(-x) overflows float (the
 * kernels clamp it): silu(-100) ~ 0, silu(100) = 100. */
static void case_silu(int64_t n) {
  Ten x = ten_rand(n, 12), out = ten_fill(n, NAN);
  x.ref[0] = -100.0f;
  x.ref[1] = 100.0f;
  x.ref[n - 2] = -88.0f;
  x.ref[n - 1] = 88.0f;
  ut_put(x.ut, x.ref, (size_t)n * sizeof(float));
  ref_silu_forward(out.ref, x.ref, n);
  UT(silu_forward)(out.ut, x.ut, n);
  check(&out, TOL, "silu_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_silu_backward(dx.ref, g.ref, x.ref, n, acc);
    UT(silu_backward)(dx.ut, g.ut, x.ut, n, acc);
    check(&dx, TOL, "silu_backward acc=%d", acc);
  }
  Ten g = ten_rand(n, 1); // in place: dx = dout, then out = x
  ref_silu_backward(g.ref, g.ref, x.ref, n, 0);
  UT(silu_backward)(g.ut, g.ut, x.ut, n, 0);
  check(&g, TOL, "silu_backward in place (dx=dout)");
  ref_silu_forward(x.ref, x.ref, n);
  UT(silu_forward)(x.ut, x.ut, n);
  check(&x, TOL, "silu_forward in place (out=x)");
  release_all();
}

// ----------------------------------------------------------------------------
// cases: layernorm, softmax

/* bias 0: b and db NULL (bias: false). */
static void case_layernorm(int64_t N, int64_t C, float eps, int bias) {
  Ten x = ten_rand(N * C, 2), w = ten_rand(C, 1), b = ten_rand(C, 1);
  const float *bref = bias ? b.ref : NULL, *but = bias ? b.ut : NULL;
  // a row offset far from 0 tests the two-pass variance
  for (int64_t j = 0; j < C; j++) x.ref[j] += 100.0f;
  ut_put(x.ut, x.ref, (size_t)C * sizeof(float));
  Ten out = ten_fill(N * C, NAN), mean = ten_fill(N, NAN), rstd = ten_fill(N, NAN);
  ref_layernorm_forward(out.ref, mean.ref, rstd.ref, x.ref, w.ref, bref, N, C, eps);
  UT(layernorm_forward)(out.ut, mean.ut, rstd.ut, x.ut, w.ut, but, N, C, eps);
  check(&out, TOL_SUM, "layernorm_forward (%lld,%lld) eps %g bias %d", LL(N), LL(C), eps, bias);
  check(&mean, TOL, "layernorm_forward mean");
  check(&rstd, TOL, "layernorm_forward rstd");
  Ten out2 = ten_fill(N * C, NAN);
  ref_layernorm_forward(out2.ref, NULL, NULL, x.ref, w.ref, bref, N, C, eps);
  UT(layernorm_forward)(out2.ut, NULL, NULL, x.ut, w.ut, but, N, C, eps);
  check(&out2, TOL_SUM, "layernorm_forward eval (mean, rstd NULL)");
  // backward from the reference statistics, identical on both sides
  ut_put(mean.ut, mean.ref, (size_t)N * sizeof(float));
  ut_put(rstd.ut, rstd.ref, (size_t)N * sizeof(float));
  static const int pat[][3] = {{0, 0, 0}, {1, 1, 1}, {0, 1, -1}, {-1, -1, 0}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *a = pat[p];
    Ten g = ten_rand(N * C, 1);
    Ten dx = ten_grad(N * C, a[0] > 0), dw = ten_grad(C, a[1] > 0), db = ten_grad(C, a[2] > 0);
    int has_db = bias && a[2] >= 0;
    ref_layernorm_backward(a[0] < 0 ? NULL : dx.ref, a[1] < 0 ? NULL : dw.ref, has_db ? db.ref : NULL, g.ref, x.ref,
                           w.ref, mean.ref, rstd.ref, N, C, eps, a[0] > 0, a[1] > 0, a[2] > 0);
    UT(layernorm_backward)
    (a[0] < 0 ? NULL : dx.ut, a[1] < 0 ? NULL : dw.ut, has_db ? db.ut : NULL, g.ut, x.ut, w.ut, mean.ut, rstd.ut, N, C,
     eps, a[0] > 0, a[1] > 0, a[2] > 0);
    if (a[0] >= 0) check(&dx, TOL, "layernorm_backward dx acc=%d", a[0]);
    if (a[1] >= 0) check(&dw, TOL, "layernorm_backward dw acc=%d", a[1]);
    if (has_db) check(&db, TOL, "layernorm_backward db acc=%d", a[2]);
  }
  release_all();
}

/* batchnorm2d on x[N,C,S]: the three modes' outputs, saved statistics and
 * running statistics (updated once by training, untouched by a recompute
 * and by eval), then backward from the reference statistics. */
static void case_batchnorm2d(int64_t N, int64_t C, int64_t S, float eps, float mom) {
  int64_t n = N * C * S;
  Ten x = ten_rand(n, 2), w = ten_rand(C, 1), b = ten_rand(C, 1), rm = ten_rand(C, 0.5f), rv = ten_fill(C, 0.75f);
  for (int64_t i = 0; i < S; i++) x.ref[i] += 50.0f; // channel 0 far from 0: the two-pass variance
  ut_put(x.ut, x.ref, (size_t)S * sizeof(float));
  static const int modes[] = {RT_MODE_TRAIN, RT_MODE_RECOMPUTE, RT_MODE_EVAL};
  static const char *const mname[] = {"train", "recompute", "eval"};
  Ten mean = ten_fill(C, NAN), rstd = ten_fill(C, NAN);
  for (int k = 0; k < 3; k++) {
    Ten out = ten_fill(n, NAN);
    int ev = modes[k] == RT_MODE_EVAL;
    ref_batchnorm2d_forward(out.ref, ev ? NULL : mean.ref, ev ? NULL : rstd.ref, x.ref, w.ref, b.ref, rm.ref, rv.ref, N,
                            C, S, eps, mom, modes[k], 1);
    UT(batchnorm2d_forward)
    (out.ut, ev ? NULL : mean.ut, ev ? NULL : rstd.ut, x.ut, w.ut, b.ut, rm.ut, rv.ut, N, C, S, eps, mom, modes[k], 1);
    check(&out, TOL_SUM, "batchnorm2d_forward %s " SHAPE3 " eps %g", mname[k], LL(N), LL(C), LL(S), eps);
    if (!ev) check(&mean, TOL, "batchnorm2d_forward %s mean", mname[k]);
    if (!ev) check(&rstd, TOL, "batchnorm2d_forward %s rstd", mname[k]);
    check(&rm, TOL, "batchnorm2d_forward %s running_mean", mname[k]);
    check(&rv, TOL, "batchnorm2d_forward %s running_var", mname[k]);
  }
  ut_put(mean.ut, mean.ref, (size_t)C * sizeof(float));
  ut_put(rstd.ut, rstd.ref, (size_t)C * sizeof(float));
  static const int pat[][3] = {{0, 0, 0}, {1, 1, 1}, {0, 1, -1}, {-1, -1, 0}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *a = pat[p];
    Ten g = ten_rand(n, 1), dx = ten_grad(n, a[0] > 0), dw = ten_grad(C, a[1] > 0), db = ten_grad(C, a[2] > 0);
    ref_batchnorm2d_backward(a[0] < 0 ? NULL : dx.ref, a[1] < 0 ? NULL : dw.ref, a[2] < 0 ? NULL : db.ref, g.ref, x.ref,
                             w.ref, mean.ref, rstd.ref, N, C, S, eps, mom, RT_MODE_TRAIN, 1, a[0] > 0, a[1] > 0,
                             a[2] > 0);
    UT(batchnorm2d_backward)
    (a[0] < 0 ? NULL : dx.ut, a[1] < 0 ? NULL : dw.ut, a[2] < 0 ? NULL : db.ut, g.ut, x.ut, w.ut, mean.ut, rstd.ut, N,
     C, S, eps, mom, RT_MODE_TRAIN, 1, a[0] > 0, a[1] > 0, a[2] > 0);
    if (a[0] >= 0) check(&dx, TOL, "batchnorm2d_backward dx acc=%d", a[0]);
    if (a[1] >= 0) check(&dw, TOL_SUM, "batchnorm2d_backward dw acc=%d", a[1]);
    if (a[2] >= 0) check(&db, TOL_SUM, "batchnorm2d_backward db acc=%d", a[2]);
  }
  release_all();
}

static void case_rmsnorm(int64_t N, int64_t C, float eps) {
  Ten x = ten_rand(N * C, 2), w = ten_rand(C, 1);
  Ten out = ten_fill(N * C, NAN), rstd = ten_fill(N, NAN);
  ref_rmsnorm_forward(out.ref, rstd.ref, x.ref, w.ref, N, C, eps);
  UT(rmsnorm_forward)(out.ut, rstd.ut, x.ut, w.ut, N, C, eps);
  check(&out, TOL_SUM, "rmsnorm_forward (%lld,%lld) eps %g", LL(N), LL(C), eps);
  check(&rstd, TOL, "rmsnorm_forward rstd");
  Ten out2 = ten_fill(N * C, NAN);
  ref_rmsnorm_forward(out2.ref, NULL, x.ref, w.ref, N, C, eps);
  UT(rmsnorm_forward)(out2.ut, NULL, x.ut, w.ut, N, C, eps);
  check(&out2, TOL_SUM, "rmsnorm_forward eval (rstd NULL)");
  ut_put(rstd.ut, rstd.ref, (size_t)N * sizeof(float)); // backward from the reference rstd on both sides
  static const int pat[][2] = {{0, 0}, {1, 1}, {0, -1}, {-1, 0}};
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    const int *a = pat[p];
    Ten g = ten_rand(N * C, 1);
    Ten dx = ten_grad(N * C, a[0] > 0), dw = ten_grad(C, a[1] > 0);
    ref_rmsnorm_backward(a[0] < 0 ? NULL : dx.ref, a[1] < 0 ? NULL : dw.ref, g.ref, x.ref, w.ref, rstd.ref, N, C, eps,
                         a[0] > 0, a[1] > 0);
    UT(rmsnorm_backward)
    (a[0] < 0 ? NULL : dx.ut, a[1] < 0 ? NULL : dw.ut, g.ut, x.ut, w.ut, rstd.ut, N, C, eps, a[0] > 0, a[1] > 0);
    if (a[0] >= 0) check(&dx, TOL, "rmsnorm_backward dx acc=%d", a[0]);
    if (a[1] >= 0) check(&dw, TOL, "rmsnorm_backward dw acc=%d", a[1]);
  }
  release_all();
}

static void case_softmax(int64_t N, int64_t C) {
  Ten x = ten_rand(N * C, 5), out = ten_fill(N * C, NAN);
  ref_softmax_forward(out.ref, x.ref, N, C);
  UT(softmax_forward)(out.ut, x.ut, N, C);
  check(&out, TOL, "softmax_forward (%lld,%lld)", LL(N), LL(C));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(N * C, 1), dx = ten_grad(N * C, acc);
    ref_softmax_backward(dx.ref, g.ref, out.ref, N, C, acc);
    UT(softmax_backward)(dx.ut, g.ut, out.ut, N, C, acc);
    check(&dx, TOL, "softmax_backward acc=%d", acc);
  }
  Ten g = ten_rand(N * C, 1);
  ref_softmax_backward(g.ref, g.ref, out.ref, N, C, 0);
  UT(softmax_backward)(g.ut, g.ut, out.ut, N, C, 0);
  check(&g, TOL, "softmax_backward in place (dx=dout)");
  ref_softmax_forward(x.ref, x.ref, N, C);
  UT(softmax_forward)(x.ut, x.ut, N, C);
  check(&x, TOL, "softmax_forward in place (out=x)");
  release_all();
}

// ----------------------------------------------------------------------------
// cases: attention

/* NH query heads, KVH kv heads (grouped-query when fewer), causal or not. */
static void case_attention(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal) {
  char shape[96];
  snprintf(shape, sizeof shape, "B=%lld T=%lld C=%lld NH=%lld KVH=%lld%s", LL(B), LL(T), LL(C), LL(NH), LL(KVH),
           causal ? "" : " full");
  int64_t C3 = C + 2 * KVH * (C / NH);
  Ten qkv = ten_rand(B * T * C3, 1.5f);
  Ten out = ten_fill(B * T * C, NAN), lse = ten_fill(B * NH * T, NAN);
  ref_attention_forward(out.ref, lse.ref, qkv.ref, B, T, C, NH, KVH, causal);
  UT(attention_forward)(out.ut, lse.ut, qkv.ut, B, T, C, NH, KVH, causal);
  check(&out, TOL_ATT, "attention_forward out %s", shape);
  check(&lse, TOL_ATT, "attention_forward lse");
  Ten out2 = ten_fill(B * T * C, NAN);
  ref_attention_forward(out2.ref, NULL, qkv.ref, B, T, C, NH, KVH, causal);
  UT(attention_forward)(out2.ut, NULL, qkv.ut, B, T, C, NH, KVH, causal);
  check(&out2, TOL_ATT, "attention_forward eval (lse NULL)");
  // backward from the reference out and lse, identical on both sides
  ut_put(out.ut, out.ref, (size_t)out.n * sizeof(float));
  ut_put(lse.ut, lse.ref, (size_t)lse.n * sizeof(float));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(B * T * C, 1), dqkv = ten_grad(B * T * C3, acc);
    ref_attention_backward(dqkv.ref, g.ref, qkv.ref, out.ref, lse.ref, B, T, C, NH, KVH, causal, acc);
    UT(attention_backward)(dqkv.ut, g.ut, qkv.ut, out.ut, lse.ut, B, T, C, NH, KVH, causal, acc);
    check(&dqkv, TOL_ATT, "attention_backward dqkv acc=%d", acc);
  }
  release_all();
}

/* window_attention of [B,H,W,3C] in ws x ws windows rolled by shift: forward (and eval), backward acc 0 and 1 of
 * dqkv and the table. */
static void case_window_attention(int64_t B, int64_t H, int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  char shape[96];
  snprintf(shape, sizeof shape, "B=%lld %lldx%lld C=%lld NH=%lld ws=%lld shift=%lld", LL(B), LL(H), LL(W), LL(C),
           LL(NH), LL(ws), LL(shift));
  int64_t n = B * H * W, R = (2 * ws - 1) * (2 * ws - 1);
  Ten qkv = ten_rand(n * 3 * C, 1.5f), table = ten_rand(R * NH, 1);
  Ten out = ten_fill(n * C, NAN), lse = ten_fill(n * NH, NAN), out2 = ten_fill(n * C, NAN);
  ref_window_attention_forward(out.ref, lse.ref, qkv.ref, table.ref, B, H, W, C, NH, ws, shift);
  UT(window_attention_forward)(out.ut, lse.ut, qkv.ut, table.ut, B, H, W, C, NH, ws, shift);
  check(&out, TOL_ATT, "window_attention_forward out %s", shape);
  check(&lse, TOL_ATT, "window_attention_forward lse");
  ref_window_attention_forward(out2.ref, NULL, qkv.ref, table.ref, B, H, W, C, NH, ws, shift);
  UT(window_attention_forward)(out2.ut, NULL, qkv.ut, table.ut, B, H, W, C, NH, ws, shift);
  check(&out2, TOL_ATT, "window_attention_forward eval (lse NULL)");
  ut_put(out.ut, out.ref, (size_t)out.n * sizeof(float));
  ut_put(lse.ut, lse.ref, (size_t)lse.n * sizeof(float));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n * C, 1), dqkv = ten_grad(n * 3 * C, acc), dt = ten_grad(R * NH, acc);
    ref_window_attention_backward(dqkv.ref, dt.ref, g.ref, qkv.ref, table.ref, out.ref, lse.ref, B, H, W, C, NH, ws,
                                  shift, acc, acc);
    UT(window_attention_backward)
    (dqkv.ut, dt.ut, g.ut, qkv.ut, table.ut, out.ut, lse.ut, B, H, W, C, NH, ws, shift, acc, acc);
    check(&dqkv, TOL_ATT, "window_attention_backward dqkv acc=%d", acc);
    check(&dt, TOL_ATT, "window_attention_backward dtable acc=%d", acc);
  }
}

/* cross_attention: Tq queries to Tk context positions, NH heads; both
 * gradients, then each alone (the other NULL). */
static void case_cross_attention(int64_t B, int64_t Tq, int64_t Tk, int64_t C, int64_t NH) {
  char shape[96];
  snprintf(shape, sizeof shape, "B=%lld Tq=%lld Tk=%lld C=%lld NH=%lld", LL(B), LL(Tq), LL(Tk), LL(C), LL(NH));
  Ten q = ten_rand(B * Tq * C, 1.5f), kv = ten_rand(B * Tk * 2 * C, 1.5f);
  Ten out = ten_fill(B * Tq * C, NAN), lse = ten_fill(B * NH * Tq, NAN);
  ref_cross_attention_forward(out.ref, lse.ref, q.ref, kv.ref, B, Tq, Tk, C, NH);
  UT(cross_attention_forward)(out.ut, lse.ut, q.ut, kv.ut, B, Tq, Tk, C, NH);
  check(&out, TOL_ATT, "cross_attention_forward out %s", shape);
  check(&lse, TOL_ATT, "cross_attention_forward lse");
  ut_put(out.ut, out.ref, (size_t)out.n * sizeof(float));
  ut_put(lse.ut, lse.ref, (size_t)lse.n * sizeof(float));
  for (int acc = 0; acc <= 1; acc++)
    for (int which = 0; which < 3; which++) { // both, dq alone, dkv alone
      Ten g = ten_rand(B * Tq * C, 1), dq = ten_grad(B * Tq * C, acc), dkv = ten_grad(B * Tk * 2 * C, acc);
      float *rq = which == 2 ? NULL : dq.ref, *uq = which == 2 ? NULL : dq.ut;
      float *rkv = which == 1 ? NULL : dkv.ref, *ukv = which == 1 ? NULL : dkv.ut;
      ref_cross_attention_backward(rq, rkv, g.ref, q.ref, kv.ref, out.ref, lse.ref, B, Tq, Tk, C, NH, acc, acc);
      UT(cross_attention_backward)(uq, ukv, g.ut, q.ut, kv.ut, out.ut, lse.ut, B, Tq, Tk, C, NH, acc, acc);
      if (which != 2) check(&dq, TOL_ATT, "cross_attention_backward dq acc=%d gradients %d", acc, which);
      if (which != 1) check(&dkv, TOL_ATT, "cross_attention_backward dkv acc=%d gradients %d", acc, which);
    }
  release_all();
}

// ----------------------------------------------------------------------------
// cases: embeddings

static void case_embedding(int64_t N, int64_t C, int64_t V, int skew) {
  Ids tok = ids_rand(N, V, skew);
  Ten W = ten_rand(V * C, 1), out = ten_fill(N * C, NAN);
  ref_embedding_forward(out.ref, tok.ref, W.ref, N, C, V);
  UT(embedding_forward)(out.ut, tok.ut, W.ut, N, C, V);
  check(&out, EXACT, "embedding_forward N=%lld C=%lld V=%lld%s", LL(N), LL(C), LL(V), skew ? " skewed" : "");
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(N * C, 1), dW = ten_grad(V * C, acc);
    ref_embedding_backward(dW.ref, g.ref, tok.ref, N, C, V, acc);
    UT(embedding_backward)(dW.ut, g.ut, tok.ut, N, C, V, acc);
    check(&dW, TOL, "embedding_backward acc=%d", acc);
  }
  release_all();
}

static void case_position_embedding(int64_t B, int64_t T, int64_t C, int64_t Wrows) {
  Ten W = ten_rand(Wrows * C, 1), out = ten_fill(B * T * C, NAN);
  ref_position_embedding_forward(out.ref, W.ref, B, T, C);
  UT(position_embedding_forward)(out.ut, W.ut, B, T, C);
  check(&out, EXACT, "position_embedding_forward B=%lld T=%lld C=%lld", LL(B), LL(T), LL(C));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(B * T * C, 1), dW = ten_grad(Wrows * C, acc);
    ref_position_embedding_backward(dW.ref, g.ref, B, T, C, Wrows, acc);
    UT(position_embedding_backward)(dW.ut, g.ut, B, T, C, Wrows, acc);
    check(&dW, TOL, "position_embedding_backward acc=%d Wrows=%lld", acc, LL(Wrows));
  }
  release_all();
}

/* rope over qkv [B, T, (H + 2 KV) hd]: forward, backward (acc 0 and 1), both
 * in place. Small theta makes every frequency's angle wrap within T. */
static void case_rope(int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta, const float *sc) {
  int64_t n = B * T * (H + 2 * KV) * hd;
  Ten x = ten_rand(n, 2), out = ten_fill(n, NAN);
  ref_rope_forward(out.ref, x.ref, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3]);
  UT(rope_forward)(out.ut, x.ut, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3]);
  check(&out, TOL, "rope_forward B=%lld T=%lld H=%lld KV=%lld hd=%lld theta %g factor %g", LL(B), LL(T), LL(H), LL(KV),
        LL(hd), theta, sc[0]);
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_rope_backward(dx.ref, g.ref, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3], acc);
    UT(rope_backward)(dx.ut, g.ut, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3], acc);
    check(&dx, TOL, "rope_backward acc=%d", acc);
  }
  Ten g = ten_rand(n, 1); // in place: dx = dout, then out = x
  ref_rope_backward(g.ref, g.ref, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3], 0);
  UT(rope_backward)(g.ut, g.ut, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3], 0);
  check(&g, TOL, "rope_backward in place (dx=dout)");
  ref_rope_forward(x.ref, x.ref, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3]);
  UT(rope_forward)(x.ut, x.ut, B, T, H, KV, hd, theta, sc[0], sc[1], sc[2], sc[3]);
  check(&x, TOL, "rope_forward in place (out=x)");
  release_all();
}

// ----------------------------------------------------------------------------
// cases: shape ops. They move data only, so every output equals the reference
// exactly (class_token's dW sums the batch in double, in order, as ref.c).

/* flatten and reshape (the same contract): a copy, "+=", and in place. */
static void case_flatten(int64_t n) {
  Ten x = ten_rand(n, 1), out = ten_fill(n, NAN);
  ref_flatten_forward(out.ref, x.ref, n);
  UT(flatten_forward)(out.ut, x.ut, n);
  check(&out, EXACT, "flatten_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_flatten_backward(dx.ref, g.ref, n, acc);
    UT(flatten_backward)(dx.ut, g.ut, n, acc);
    check(&dx, EXACT, "flatten_backward acc=%d", acc);
  }
  ref_flatten_forward(x.ref, x.ref, n); // in place: nothing moves
  UT(flatten_forward)(x.ut, x.ut, n);
  check(&x, EXACT, "flatten_forward in place (out=x)");
  ref_flatten_backward(x.ref, x.ref, n, 0);
  UT(flatten_backward)(x.ut, x.ut, n, 0);
  check(&x, EXACT, "flatten_backward in place (dx=dout)");
  release_all();
}

static void case_reshape(int64_t n) {
  Ten x = ten_rand(n, 1), out = ten_fill(n, NAN);
  ref_reshape_forward(out.ref, x.ref, n);
  UT(reshape_forward)(out.ut, x.ut, n);
  check(&out, EXACT, "reshape_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_reshape_backward(dx.ref, g.ref, n, acc);
    UT(reshape_backward)(dx.ut, g.ut, n, acc);
    check(&dx, EXACT, "reshape_backward acc=%d", acc);
  }
  ref_reshape_forward(x.ref, x.ref, n);
  UT(reshape_forward)(x.ut, x.ut, n);
  check(&x, EXACT, "reshape_forward in place (out=x)");
  ref_reshape_backward(x.ref, x.ref, n, 0);
  UT(reshape_backward)(x.ut, x.ut, n, 0);
  check(&x, EXACT, "reshape_backward in place (dx=dout)");
  release_all();
}

/* x [A, P, M, Q, Z] -> [A, Q, M, P, Z] */
static void case_transpose(int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z) {
  int64_t n = A * P * M * Q * Z;
  Ten x = ten_rand(n, 1), out = ten_fill(n, NAN);
  ref_transpose_forward(out.ref, x.ref, A, P, M, Q, Z);
  UT(transpose_forward)(out.ut, x.ut, A, P, M, Q, Z);
  check(&out, EXACT, "transpose_forward A=%lld P=%lld M=%lld Q=%lld Z=%lld", LL(A), LL(P), LL(M), LL(Q), LL(Z));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
    ref_transpose_backward(dx.ref, g.ref, A, P, M, Q, Z, acc);
    UT(transpose_backward)(dx.ut, g.ut, A, P, M, Q, Z, acc);
    check(&dx, EXACT, "transpose_backward acc=%d", acc);
  }
  release_all();
}

/* concat of k inputs [O, n_i, In]; backward with mixed acc flags and a NULL
 * gradient, then a tensor concatenated with itself (one gradient buffer). */
static void case_concat(int64_t O, int64_t In, int k, const int64_t *nk) {
  int64_t n[6] = {0};
  Ten a[6], da[6];
  const float *ar[6] = {0}, *au[6] = {0};
  for (int i = 0; i < k; i++) {
    n[i] = nk[i];
    a[i] = ten_rand(O * n[i] * In, 1);
    ar[i] = a[i].ref, au[i] = a[i].ut;
  }
  int64_t W = n[0] + n[1] + n[2] + n[3] + n[4] + n[5];
  Ten out = ten_fill(O * W * In, NAN);
  ref_concat_forward(out.ref, ar[0], ar[1], ar[2], ar[3], ar[4], ar[5], O, In, n[0], n[1], n[2], n[3], n[4], n[5]);
  UT(concat_forward)(out.ut, au[0], au[1], au[2], au[3], au[4], au[5], O, In, n[0], n[1], n[2], n[3], n[4], n[5]);
  check(&out, EXACT, "concat_forward O=%lld In=%lld inputs=%d", LL(O), LL(In), k);
  Ten g = ten_rand(O * W * In, 1);
  float *dr[6] = {0}, *du[6] = {0};
  int acc[6] = {0};
  for (int i = 0; i < k; i++) {
    acc[i] = i % 2;
    da[i] = ten_grad(O * n[i] * In, acc[i]);
    if (i != 1) dr[i] = da[i].ref, du[i] = da[i].ut; // slot 1: no gradient wanted
  }
  ref_concat_backward(dr[0], dr[1], dr[2], dr[3], dr[4], dr[5], g.ref, O, In, n[0], n[1], n[2], n[3], n[4], n[5],
                      acc[0], acc[1], acc[2], acc[3], acc[4], acc[5]);
  UT(concat_backward)
  (du[0], du[1], du[2], du[3], du[4], du[5], g.ut, O, In, n[0], n[1], n[2], n[3], n[4], n[5], acc[0], acc[1], acc[2],
   acc[3], acc[4], acc[5]);
  for (int i = 0; i < k; i++)
    if (i != 1) check(&da[i], EXACT, "concat_backward da%d acc=%d", i, acc[i]);
  // concat(a0, a0): da0 is both gradients, "=" then "+="
  Ten gs = ten_rand(O * 2 * n[0] * In, 1), d = ten_grad(O * n[0] * In, 0);
  ref_concat_backward(d.ref, d.ref, NULL, NULL, NULL, NULL, gs.ref, O, In, n[0], n[0], 0, 0, 0, 0, 0, 1, 0, 0, 0, 0);
  UT(concat_backward)(d.ut, d.ut, NULL, NULL, NULL, NULL, gs.ut, O, In, n[0], n[0], 0, 0, 0, 0, 0, 1, 0, 0, 0, 0);
  check(&d, EXACT, "concat_backward (a, a): one gradient buffer");
  release_all();
}

static void case_class_token(int64_t B, int64_t N, int64_t C) {
  Ten x = ten_rand(B * N * C, 1), w = ten_rand(C, 1), out = ten_fill(B * (N + 1) * C, NAN);
  ref_class_token_forward(out.ref, x.ref, w.ref, B, N, C);
  UT(class_token_forward)(out.ut, x.ut, w.ut, B, N, C);
  check(&out, EXACT, "class_token_forward B=%lld N=%lld C=%lld", LL(B), LL(N), LL(C));
  static const int pat[][2] = {{0, 0}, {1, 1}, {-1, 0}, {0, -1}}; // -1: a NULL gradient
  for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
    Ten g = ten_rand(B * (N + 1) * C, 1), dx = ten_grad(B * N * C, pat[p][0] > 0), dw = ten_grad(C, pat[p][1] > 0);
    ref_class_token_backward(pat[p][0] < 0 ? NULL : dx.ref, pat[p][1] < 0 ? NULL : dw.ref, g.ref, B, N, C,
                             pat[p][0] > 0, pat[p][1] > 0);
    UT(class_token_backward)
    (pat[p][0] < 0 ? NULL : dx.ut, pat[p][1] < 0 ? NULL : dw.ut, g.ut, B, N, C, pat[p][0] > 0, pat[p][1] > 0);
    if (pat[p][0] >= 0) check(&dx, EXACT, "class_token_backward dx acc=%d", pat[p][0]);
    if (pat[p][1] >= 0) check(&dw, EXACT, "class_token_backward dW acc=%d", pat[p][1]);
  }
  release_all();
}

static void case_select(int64_t O, int64_t N, int64_t In, int64_t index) {
  Ten x = ten_rand(O * N * In, 1), out = ten_fill(O * In, NAN);
  ref_select_forward(out.ref, x.ref, O, N, In, index);
  UT(select_forward)(out.ut, x.ut, O, N, In, index);
  check(&out, EXACT, "select_forward O=%lld N=%lld In=%lld index=%lld", LL(O), LL(N), LL(In), LL(index));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(O * In, 1), dx = ten_grad(O * N * In, acc);
    ref_select_backward(dx.ref, g.ref, O, N, In, index, acc);
    UT(select_backward)(dx.ut, g.ut, O, N, In, index, acc);
    check(&dx, EXACT, "select_backward acc=%d", acc);
  }
  release_all();
}

static void case_pad(int64_t O, int64_t N, int64_t In, int64_t Nout) {
  Ten x = ten_rand(O * N * In, 1), out = ten_fill(O * Nout * In, NAN);
  ref_pad_forward(out.ref, x.ref, O, N, In, Nout);
  UT(pad_forward)(out.ut, x.ut, O, N, In, Nout);
  check(&out, EXACT, "pad_forward O=%lld N=%lld In=%lld Nout=%lld", LL(O), LL(N), LL(In), LL(Nout));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(O * Nout * In, 1), dx = ten_grad(O * N * In, acc);
    ref_pad_backward(dx.ref, g.ref, O, N, In, Nout, acc);
    UT(pad_backward)(dx.ut, g.ut, O, N, In, Nout, acc);
    check(&dx, EXACT, "pad_backward acc=%d", acc);
  }
  release_all();
}

// ----------------------------------------------------------------------------
// cases: losses

static void case_cross_entropy(int64_t N, int64_t V) {
  Ten logits = ten_rand(N * V, 4);
  Ids tgt = ids_rand(N, V, 0);
  Ten loss = ten_fill(1, NAN), lse = ten_fill(N, NAN);
  ref_cross_entropy_forward(loss.ref, lse.ref, logits.ref, tgt.ref, N, V);
  UT(cross_entropy_forward)(loss.ut, lse.ut, logits.ut, tgt.ut, N, V);
  check(&loss, TOL, "cross_entropy_forward loss N=%lld V=%lld", LL(N), LL(V));
  check(&lse, TOL, "cross_entropy_forward lse");
  Ten loss2 = ten_fill(1, NAN);
  ref_cross_entropy_forward(loss2.ref, NULL, logits.ref, tgt.ref, N, V);
  UT(cross_entropy_forward)(loss2.ut, NULL, logits.ut, tgt.ut, N, V);
  check(&loss2, TOL, "cross_entropy_forward eval (lse NULL)");
  ut_put(lse.ut, lse.ref, (size_t)N * sizeof(float));
  for (int acc = 0; acc <= 1; acc++) {
    Ten d = ten_grad(N * V, acc);
    ref_cross_entropy_backward(d.ref, logits.ref, tgt.ref, lse.ref, N, V, 2.5f, acc);
    UT(cross_entropy_backward)(d.ut, logits.ut, tgt.ut, lse.ut, N, V, 2.5f, acc);
    check(&d, TOL, "cross_entropy_backward acc=%d scale=2.5", acc);
  }
  ref_cross_entropy_backward(logits.ref, logits.ref, tgt.ref, lse.ref, N, V, 1.0f, 0);
  UT(cross_entropy_backward)(logits.ut, logits.ut, tgt.ut, lse.ut, N, V, 1.0f, 0);
  check(&logits, TOL, "cross_entropy_backward in place (dlogits=logits)");
  release_all();
}

static void case_linear_cross_entropy(int64_t N, int64_t V, int64_t K, int64_t R) {
  for (int bias = 0; bias <= 1; bias++) {
    Ten x = ten_rand(N * K, 1), W = ten_rand(V * K, 1), b = ten_rand(V, 1), s = ten_fill(R * V + N, NAN);
    Ids tgt = ids_rand(N, V, 0);
    const float *br = bias ? b.ref : NULL, *bu = bias ? b.ut : NULL;
    Ten loss = ten_fill(1, NAN);
    ref_linear_cross_entropy_forward(loss.ref, NULL, NULL, NULL, x.ref, W.ref, br, tgt.ref, s.ref, N, V, K, R);
    UT(linear_cross_entropy_forward)(loss.ut, NULL, NULL, NULL, x.ut, W.ut, bu, tgt.ut, s.ut, N, V, K, R);
    check(&loss, TOL_SUM, "linear_cross_entropy_forward eval bias=%d N=%lld V=%lld K=%lld R=%lld", bias, LL(N), LL(V),
          LL(K), LL(R));
    Ten l2 = ten_fill(1, NAN), dx = ten_fill(N * K, NAN), dW = ten_fill(V * K, NAN), db = ten_fill(V, NAN);
    ref_linear_cross_entropy_forward(l2.ref, dx.ref, dW.ref, bias ? db.ref : NULL, x.ref, W.ref, br, tgt.ref, s.ref, N,
                                     V, K, R);
    UT(linear_cross_entropy_forward)
    (l2.ut, dx.ut, dW.ut, bias ? db.ut : NULL, x.ut, W.ut, bu, tgt.ut, s.ut, N, V, K, R);
    check(&l2, TOL_SUM, "linear_cross_entropy_forward train loss bias=%d", bias);
    check(&dx, TOL_SUM, "linear_cross_entropy_forward train dx bias=%d", bias);
    check(&dW, TOL_SUM, "linear_cross_entropy_forward train dW bias=%d", bias);
    if (bias) check(&db, TOL_SUM, "linear_cross_entropy_forward train db");
    release_all();
  }
  for (int acc = 0; acc <= 1; acc++) { // backward: the statistics scaled
    Ten sdx = ten_rand(N * K, 1), sdW = ten_rand(V * K, 1), sdb = ten_rand(V, 1);
    Ten dx = ten_grad(N * K, acc), dW = ten_grad(V * K, acc), db = ten_grad(V, acc);
    ref_linear_cross_entropy_backward(dx.ref, dW.ref, db.ref, sdx.ref, sdW.ref, sdb.ref, NULL, N, V, K, R, 2.5f, acc,
                                      acc, acc);
    UT(linear_cross_entropy_backward)
    (dx.ut, dW.ut, db.ut, sdx.ut, sdW.ut, sdb.ut, NULL, N, V, K, R, 2.5f, acc, acc, acc);
    check(&dx, TOL, "linear_cross_entropy_backward dx acc=%d scale=2.5", acc);
    check(&dW, TOL, "linear_cross_entropy_backward dW acc=%d", acc);
    check(&db, TOL, "linear_cross_entropy_backward db acc=%d", acc);
    if (!acc) { // in place: each gradient over its statistic
      ref_linear_cross_entropy_backward(sdx.ref, sdW.ref, NULL, sdx.ref, sdW.ref, NULL, NULL, N, V, K, R, 0.5f, 0, 0,
                                        0);
      UT(linear_cross_entropy_backward)
      (sdx.ut, sdW.ut, NULL, sdx.ut, sdW.ut, NULL, NULL, N, V, K, R, 0.5f, 0, 0, 0);
      check(&sdx, TOL, "linear_cross_entropy_backward in place (dx=sdx), no db");
      check(&sdW, TOL, "linear_cross_entropy_backward in place (dW=sdW)");
    }
    release_all();
  }
}

static void case_mse(int64_t n) {
  Ten pred = ten_rand(n, 1), target = ten_rand(n, 1), loss = ten_fill(1, NAN);
  ref_mse_forward(loss.ref, pred.ref, target.ref, n);
  UT(mse_forward)(loss.ut, pred.ut, target.ut, n);
  check(&loss, TOL, "mse_forward n=%lld", LL(n));
  for (int acc = 0; acc <= 1; acc++) {
    Ten d = ten_grad(n, acc);
    ref_mse_backward(d.ref, pred.ref, target.ref, n, 0.5f, acc);
    UT(mse_backward)(d.ut, pred.ut, target.ut, n, 0.5f, acc);
    check(&d, TOL, "mse_backward acc=%d scale=0.5", acc);
  }
  release_all();
}

// ----------------------------------------------------------------------------
// cases: conv2d (the scratch the plan gives: C kh kw Ho Wo floats, NaN on entry;
// none for 1x1 at stride 1 without padding). k, s, p: {height, width}.

static void case_conv2d_hw(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, const int64_t *k, const int64_t *s,
                           const int64_t *p, int64_t d, int64_t G) {
  int64_t Ho = (H + 2 * p[0] - d * (k[0] - 1) - 1) / s[0] + 1, Wo = (W + 2 * p[1] - d * (k[1] - 1) - 1) / s[1] + 1;
  int64_t nx = N * C * H * W, nw = O * (C / G) * k[0] * k[1], ny = N * O * Ho * Wo;
  int direct = k[0] == 1 && k[1] == 1 && s[0] == 1 && s[1] == 1 && p[0] == 0 && p[1] == 0;
  int64_t nscr = direct ? 0 : C * k[0] * k[1] * Ho * Wo;
#define CONV_SHAPE "N=%lld C=%lld %lldx%lld O=%lld k=%lldx%lld s=%lld,%lld p=%lld,%lld d=%lld G=%lld"
#define CONV_ARGS \
  LL(N), LL(C), LL(H), LL(W), LL(O), LL(k[0]), LL(k[1]), LL(s[0]), LL(s[1]), LL(p[0]), LL(p[1]), LL(d), LL(G)
#define CONV_GEOM k[0], k[1], s[0], s[1], p[0], p[1], d, G
  for (int bias = 0; bias <= 1; bias++) {
    Ten x = ten_rand(nx, 1), w = ten_rand(nw, 1), b = ten_rand(O, 1), out = ten_fill(ny, NAN);
    float *scr = nscr ? ten_fill(nscr, NAN).ut : NULL;
    ref_conv2d_forward(out.ref, x.ref, w.ref, bias ? b.ref : NULL, NULL, N, C, H, W, O, Ho, Wo, CONV_GEOM);
    UT(conv2d_forward)(out.ut, x.ut, w.ut, bias ? b.ut : NULL, scr, N, C, H, W, O, Ho, Wo, CONV_GEOM);
    check(&out, TOL_SUM, "conv2d_forward bias=%d " CONV_SHAPE, bias, CONV_ARGS);
    release_all();
  }
  // acc patterns (dx, dW, db): all "=", all "+=", mixed; -1 is a NULL gradient
  static const int pat[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 1}, {-1, 0, -1}, {0, -1, -1}};
  for (size_t q = 0; q < sizeof pat / sizeof pat[0]; q++) {
    const int *a = pat[q];
    Ten x = ten_rand(nx, 1), w = ten_rand(nw, 1), g = ten_rand(ny, 1);
    Ten dx = ten_grad(nx, a[0] > 0), dw = ten_grad(nw, a[1] > 0), db = ten_grad(O, a[2] > 0);
    float *scr = nscr ? ten_fill(nscr, NAN).ut : NULL;
    ref_conv2d_backward(a[0] < 0 ? NULL : dx.ref, a[1] < 0 ? NULL : dw.ref, a[2] < 0 ? NULL : db.ref, g.ref, x.ref,
                        w.ref, NULL, N, C, H, W, O, Ho, Wo, CONV_GEOM, a[0] > 0, a[1] > 0, a[2] > 0);
    UT(conv2d_backward)
    (a[0] < 0 ? NULL : dx.ut, a[1] < 0 ? NULL : dw.ut, a[2] < 0 ? NULL : db.ut, g.ut, x.ut, w.ut, scr, N, C, H, W, O,
     Ho, Wo, CONV_GEOM, a[0] > 0, a[1] > 0, a[2] > 0);
    if (a[0] >= 0) check(&dx, TOL_SUM, "conv2d_backward dx acc=%d " CONV_SHAPE, a[0], CONV_ARGS);
    if (a[1] >= 0) check(&dw, TOL_SUM, "conv2d_backward dW acc=%d " CONV_SHAPE, a[1], CONV_ARGS);
    if (a[2] >= 0) check(&db, TOL, "conv2d_backward db acc=%d " CONV_SHAPE, a[2], CONV_ARGS);
    release_all();
  }
#undef CONV_SHAPE
#undef CONV_ARGS
#undef CONV_GEOM
}

static void case_conv2d(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int64_t s, int64_t p,
                        int64_t d, int64_t G) {
  case_conv2d_hw(N, C, H, W, O, (int64_t[]){k, k}, (int64_t[]){s, s}, (int64_t[]){p, p}, d, G);
}

// ----------------------------------------------------------------------------
// cases: pooling and dropout

/* torch's pooled size, ceil_mode rounding up less a last window past the input and its left padding */
static int64_t pool_size(int64_t n, int64_t k, int64_t s, int64_t p, int ceil_mode) {
  int64_t o = (n + 2 * p - k + (ceil_mode ? s - 1 : 0)) / s + 1;
  return ceil_mode && (o - 1) * s >= n + p ? o - 1 : o;
}

/* maxpool2d or avgpool2d over [N,C,H,W]: forward, backward acc 0 and 1. is_max 2: maxpool2d with ceil_mode; -1:
 * avgpool2d with ceil_mode. */
static void case_pool(int is_max, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t p) {
  int ceil_mode = is_max == 2 || is_max == -1;
  int64_t Ho = pool_size(H, k, s, p, ceil_mode), Wo = pool_size(W, k, s, p, ceil_mode);
  int64_t nx = N * C * H * W, ny = N * C * Ho * Wo;
  const char *name = is_max > 0 ? "maxpool2d" : "avgpool2d";
  Ten x = ten_rand(nx, 2), out = ten_fill(ny, NAN);
  if (is_max > 0) {
    ref_maxpool2d_forward(out.ref, x.ref, N, C, H, W, Ho, Wo, k, s, p);
    UT(maxpool2d_forward)(out.ut, x.ut, N, C, H, W, Ho, Wo, k, s, p);
  } else {
    ref_avgpool2d_forward(out.ref, x.ref, N, C, H, W, Ho, Wo, k, s, p);
    UT(avgpool2d_forward)(out.ut, x.ut, N, C, H, W, Ho, Wo, k, s, p);
  }
  check(&out, TOL, "%s_forward (%lld,%lld,%lld,%lld) k=%lld s=%lld p=%lld", name, LL(N), LL(C), LL(H), LL(W), LL(k),
        LL(s), LL(p));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(ny, 1), dx = ten_grad(nx, acc);
    if (is_max > 0) {
      ref_maxpool2d_backward(dx.ref, g.ref, x.ref, N, C, H, W, Ho, Wo, k, s, p, acc);
      UT(maxpool2d_backward)(dx.ut, g.ut, x.ut, N, C, H, W, Ho, Wo, k, s, p, acc);
    } else {
      ref_avgpool2d_backward(dx.ref, g.ref, N, C, H, W, Ho, Wo, k, s, p, acc);
      UT(avgpool2d_backward)(dx.ut, g.ut, N, C, H, W, Ho, Wo, k, s, p, acc);
    }
    check(&dx, TOL, "%s_backward acc=%d", name, acc);
  }
  release_all();
}

/* adaptive_avgpool2d of [N,C,H,W] to Ho x Wo: forward, backward acc 0 and 1. Planted once in cpu.c: the
 * windows' end floor((o + 1) n / out) (torch's is the ceiling) printed "adaptive_avgpool2d_forward (2,3,9,7) to
 * 4x3  8.48e-01  3.49e+01  FAIL" and each backward FAIL. */
static void case_adaptive_pool(int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  int64_t nx = N * C * H * W, ny = N * C * Ho * Wo;
  Ten x = ten_rand(nx, 2), out = ten_fill(ny, NAN);
  ref_adaptive_avgpool2d_forward(out.ref, x.ref, N, C, H, W, Ho, Wo);
  UT(adaptive_avgpool2d_forward)(out.ut, x.ut, N, C, H, W, Ho, Wo);
  check(&out, TOL, "adaptive_avgpool2d_forward (%lld,%lld,%lld,%lld) to %lldx%lld", LL(N), LL(C), LL(H), LL(W), LL(Ho),
        LL(Wo));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(ny, 1), dx = ten_grad(nx, acc);
    ref_adaptive_avgpool2d_backward(dx.ref, g.ref, N, C, H, W, Ho, Wo, acc);
    UT(adaptive_avgpool2d_backward)(dx.ut, g.ut, N, C, H, W, Ho, Wo, acc);
    check(&dx, TOL, "adaptive_avgpool2d_backward acc=%d", acc);
  }
  release_all();
}

static void case_global_avgpool(int64_t NC, int64_t HW) {
  Ten x = ten_rand(NC * HW, 2), out = ten_fill(NC, NAN);
  ref_global_avgpool_forward(out.ref, x.ref, NC, HW);
  UT(global_avgpool_forward)(out.ut, x.ut, NC, HW);
  check(&out, TOL, "global_avgpool_forward NC=%lld HW=%lld", LL(NC), LL(HW));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(NC, 1), dx = ten_grad(NC * HW, acc);
    ref_global_avgpool_backward(dx.ref, g.ref, NC, HW, acc);
    UT(global_avgpool_backward)(dx.ut, g.ut, NC, HW, acc);
    check(&dx, TOL, "global_avgpool_backward acc=%d", acc);
  }
  release_all();
}

/* The mask words of both sides, bit for bit. */
static void check_mask(const Ids *m, const char *what) {
  int32_t *got = xmalloc((size_t)m->n * sizeof(int32_t));
  ut_get(got, m->ut, (size_t)m->n * sizeof(int32_t));
  int64_t bad = 0;
  for (int64_t i = 0; i < m->n; i++) bad += got[i] != m->ref[i];
  free(got);
  failures += bad != 0;
  checks++;
  printf("%-58s %9lld %9s  %s\n", what, (long long)bad, "words", bad ? "FAIL" : "ok");
}

/* N rows of S, row and batch modes: train, the backward's redraw (in place too), eval's copy. Planted once in
 * cpu.c: the forward drawing row r + 1's keep printed "stochastic_depth_forward N=256 S=3136 batch=0 2.86e+00 1.00e+02
 * FAIL". */
static void case_stochastic_depth(int64_t N, int64_t S, float p, uint64_t key) {
  int64_t n = N * S;
  for (int batch = 0; batch <= 1; batch++) {
    Ten x = ten_rand(n, 2), out = ten_fill(n, NAN), e = ten_fill(n, NAN);
    ref_stochastic_depth_forward(out.ref, x.ref, N, S, batch, p, RT_MODE_TRAIN, key);
    UT(stochastic_depth_forward)(out.ut, x.ut, N, S, batch, p, RT_MODE_TRAIN, key);
    check(&out, TOL, "stochastic_depth_forward N=%lld S=%lld batch=%d", LL(N), LL(S), batch);
    for (int acc = 0; acc <= 1; acc++) {
      Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
      ref_stochastic_depth_backward(dx.ref, g.ref, N, S, batch, p, RT_MODE_TRAIN, key, acc);
      UT(stochastic_depth_backward)(dx.ut, g.ut, N, S, batch, p, RT_MODE_TRAIN, key, acc);
      check(&dx, TOL, "stochastic_depth_backward acc=%d batch=%d", acc, batch);
    }
    Ten g = ten_rand(n, 1); /* in place: dx = dout */
    ref_stochastic_depth_backward(g.ref, g.ref, N, S, batch, p, RT_MODE_TRAIN, key, 0);
    UT(stochastic_depth_backward)(g.ut, g.ut, N, S, batch, p, RT_MODE_TRAIN, key, 0);
    check(&g, TOL, "stochastic_depth_backward in place (dx=dout)");
    ref_stochastic_depth_forward(e.ref, x.ref, N, S, batch, p, RT_MODE_EVAL, 0);
    UT(stochastic_depth_forward)(e.ut, x.ut, N, S, batch, p, RT_MODE_EVAL, 0);
    check(&e, TOL, "stochastic_depth_forward eval (out = x)");
    release_all();
  }
}

static void case_dropout(int64_t n, float p, uint64_t key) {
  int64_t words = (n + 31) / 32;
  Ids mask = {words, host_alloc((size_t)words * sizeof(int32_t)), ut_alloc((size_t)words * sizeof(int32_t))};
  Ten x = ten_rand(n, 2), out = ten_fill(n, NAN);
  ref_dropout_forward(out.ref, mask.ref, x.ref, n, p, RT_MODE_TRAIN, key);
  UT(dropout_forward)(out.ut, mask.ut, x.ut, n, p, RT_MODE_TRAIN, key);
  check(&out, TOL, "dropout_forward n=%lld p=%g", LL(n), p);
  check_mask(&mask, "dropout_forward mask");
  int64_t kept = 0; /* the hash keeps about 1 - p of the elements */
  for (int64_t i = 0; i < n; i++) kept += (mask.ref[i / 32] >> (i % 32)) & 1;
  double frac = (double)kept / (double)n, sd = sqrt(p * (1.0 - p) / (double)n);
  int ok = fabs(frac - (1.0 - p)) <= 5 * sd + 1e-9;
  failures += !ok, checks++;
  printf("%-58s %9.4f %9.4f  %s\n", "dropout kept fraction vs 1 - p", frac, 1.0 - p, ok ? "ok" : "FAIL");
  for (int acc = 0; acc <= 1; acc++)
    for (int stored = 0; stored <= 1; stored++) {
      Ten g = ten_rand(n, 1), dx = ten_grad(n, acc);
      ref_dropout_backward(dx.ref, g.ref, stored ? mask.ref : NULL, n, p, RT_MODE_TRAIN, key, acc);
      UT(dropout_backward)(dx.ut, g.ut, stored ? mask.ut : NULL, n, p, RT_MODE_TRAIN, key, acc);
      check(&dx, TOL, "dropout_backward acc=%d mask %s", acc, stored ? "read" : "regenerated");
    }
  Ten g = ten_rand(n, 1); /* in place: dx = dout, the mask regenerated; out = x */
  ref_dropout_backward(g.ref, g.ref, NULL, n, p, RT_MODE_TRAIN, key, 0);
  UT(dropout_backward)(g.ut, g.ut, NULL, n, p, RT_MODE_TRAIN, key, 0);
  check(&g, TOL, "dropout_backward in place (dx=dout)");
  Ten y = ten_copy(&x);
  ref_dropout_forward(y.ref, NULL, y.ref, n, p, RT_MODE_RECOMPUTE, key);
  UT(dropout_forward)(y.ut, NULL, y.ut, n, p, RT_MODE_RECOMPUTE, key);
  check(&y, TOL, "dropout_forward recompute in place (out=x, no mask)");
  Ten e = ten_fill(n, NAN);
  ref_dropout_forward(e.ref, NULL, x.ref, n, p, RT_MODE_EVAL, 0);
  UT(dropout_forward)(e.ut, NULL, x.ut, n, p, RT_MODE_EVAL, 0);
  check(&e, EXACT, "dropout_forward eval (identity)");
  release_all();
}

// ----------------------------------------------------------------------------
// cases: optimizers (several steps, state carried on both sides)

static void case_adamw(int64_t n) {
  Ten p = ten_rand(n, 1), m = ten_fill(n, 0), v = ten_fill(n, 0);
  Ten p32 = ten_copy(&p), m32 = ten_copy(&m), v32 = ten_copy(&v);
  for (int64_t t = 1; t <= 3; t++) {
    Ten g = ten_rand(n, 1e-2f * (float)t);
    ref_adamw_update(p.ref, g.ref, m.ref, v.ref, n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
    UT(adamw_update)(p.ut, g.ut, m.ut, v.ut, n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
    ref_adamw_update_f32(p32.ref, g.ref, m32.ref, v32.ref, n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
    UT(adamw_update)(p32.ut, g.ut, m32.ut, v32.ut, n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
  }
  check(&p, TOL, "adamw_update p, 3 steps, n=%lld", LL(n));
  check(&m, TOL, "adamw_update m");
  check(&v, TOL, "adamw_update v");
  check(&p32, EXACT, "adamw_update p == cpu.c's float sequence");
  check(&m32, EXACT, "adamw_update m == cpu.c's float sequence");
  check(&v32, EXACT, "adamw_update v == cpu.c's float sequence");
  release_all();
}

static void case_sgd(int64_t n) {
  static const struct {
    double mom, wd;
    int nesterov;
  } cfg[] = {{0.0, 0.0, 0}, {0.9, 0.01, 0}, {0.9, 0.01, 1}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    Ten p = ten_rand(n, 1), buf = ten_fill(n, 0);
    Ten p32 = ten_copy(&p), buf32 = ten_copy(&buf);
    int nb = cfg[c].mom == 0.0; // momentum 0: buf may be NULL
    for (int t = 1; t <= 3; t++) {
      Ten g = ten_rand(n, 1);
      ref_sgd_update(p.ref, g.ref, nb ? NULL : buf.ref, n, 0.1, cfg[c].mom, cfg[c].wd, cfg[c].nesterov);
      UT(sgd_update)
      (p.ut, g.ut, nb ? NULL : buf.ut, n, 0.1, cfg[c].mom, cfg[c].wd, cfg[c].nesterov);
      ref_sgd_update_f32(p32.ref, g.ref, nb ? NULL : buf32.ref, n, 0.1, cfg[c].mom, cfg[c].wd, cfg[c].nesterov);
      UT(sgd_update)
      (p32.ut, g.ut, nb ? NULL : buf32.ut, n, 0.1, cfg[c].mom, cfg[c].wd, cfg[c].nesterov);
    }
    check(&p, TOL, "sgd_update p momentum=%.1f nesterov=%d, 3 steps", cfg[c].mom, cfg[c].nesterov);
    if (!nb) check(&buf, TOL, "sgd_update buf");
    check(&p32, EXACT, "sgd_update p == cpu.c's float sequence");
    release_all();
  }
}

// ----------------------------------------------------------------------------
// cases: low-precision optimizer state (--opt-state bf16, 8bit). The backend
// computes in float, the reference in double; both round the moments once, so
// a stored moment may differ only where the two straddle a rounding boundary:
// by one bf16 pattern, or by one code of the 8-bit map. Each step starts
// both sides from the backend's state, so a flip never compounds.

static void opt_row(const char *what, int64_t bad, int64_t flips) {
  failures += bad != 0;
  checks++;
  printf("%-58s %9lld %9lld  %s\n", what, LL(bad), LL(flips), bad ? "FAIL" : "ok");
}

/* A byte buffer on both sides (host copy for the reference). */
static void *bytes_both(size_t bytes, void **ut) {
  void *h = host_alloc(bytes);
  memset(h, 0, bytes);
  *ut = ut_alloc(bytes);
  ut_put(*ut, h, bytes);
  return h;
}

static double bf16_val(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static void case_adamw_bf16(int64_t n) {
  Ten p = ten_rand(n, 1);
  void *mu, *vu;
  uint16_t *m = bytes_both((size_t)n * 2, &mu), *v = bytes_both((size_t)n * 2, &vu);
  uint16_t *mg = host_alloc((size_t)n * 2), *vg = host_alloc((size_t)n * 2), *m0 = host_alloc((size_t)n * 2);
  int64_t bad = 0, flips = 0;
  for (int64_t t = 1; t <= 3; t++) {
    Ten g = ten_rand(n, 1e-2f * (float)t);
    memcpy(m0, m, (size_t)n * 2);
    ref_adamw_update_bf16(p.ref, g.ref, m, v, n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
    UT(adamw_update_bf16)(p.ut, g.ut, mu, vu, n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
    ut_get(mg, mu, (size_t)n * 2);
    ut_get(vg, vu, (size_t)n * 2);
    for (int64_t i = 0; i < n; i++) {
      int dm = abs((int)mg[i] - (int)m[i]), dv = abs((int)vg[i] - (int)v[i]);
      /* one float rounding apart: at most one bf16 step; but m = 0.9 m + 0.1 g
       * may cancel, and then the float terms' rounding (4 eps of their size)
       * is many steps of the tiny result (seen: 0x3144 against 0x3146, 2e-9
       * from terms of 1e-3). v's terms are positive: it never cancels. */
      double mr = bf16_val(m[i]), terms = 0.9 * fabs(bf16_val(m0[i])) + 0.1 * fabs((double)g.ref[i]);
      int m_ok = dm <= 1 || fabs(bf16_val(mg[i]) - mr) <= ldexp(fabs(mr), -7) + 4 * FLT_EPSILON * terms;
      bad += !m_ok || dv > 1;
      flips += (dm == 1) + (dv == 1);
    }
    check(&p, TOL, "adamw_update_bf16 p, step %lld, n=%lld", LL(t), LL(n));
    memcpy(m, mg, (size_t)n * 2), memcpy(v, vg, (size_t)n * 2);
    ut_get(p.ref, p.ut, (size_t)n * sizeof(float));
  }
  opt_row("adamw_update_bf16 m, v: patterns within 1 (bad, flips)", bad, flips);
  release_all();
}

/* The map itself: increasing, 0 and +-1 where documented, and the round trip
 * of any x in [-1, 1] (signed) or [0, 1] (unsigned) through the nearest code
 * within half the spacing of the two codes around x. */
static void case_qmap(void) {
  int64_t bad = 0;
  for (int s = 0; s < 2; s++)
    for (int c = 1; c < 256; c++) bad += !(rt_qmap(s, c) > rt_qmap(s, c - 1));
  bad += rt_qmap(1, 127) != 0.0f || rt_qmap(0, 0) != 0.0f || rt_qmap(1, 255) != 1.0f || rt_qmap(0, 255) != 1.0f;
  bad += rt_qmap(1, 128) != (float)(1e-6 * 0.55) || rt_qmap(1, 0) != -rt_qmap(1, 254);
  opt_row("rt_qmap: increasing, 0, 1, -M[126], 5.5e-7 (bad)", bad, 0);
}

static double qspacing(int is_signed, double x) { /* of the codes around x (the top one outside the map) */
  int c = 0;
  while (c < 254 && (double)rt_qmap(is_signed, c + 1) <= x) c++;
  if (x < (double)rt_qmap(is_signed, 0)) c = 253; /* -1: clamped to -M[126], the top spacing */
  return (double)rt_qmap(is_signed, c + 1) - (double)rt_qmap(is_signed, c);
}

static void case_adamw_8bit(int64_t n) {
  int64_t nb = (n + RT_QBLOCK - 1) / RT_QBLOCK;
  Ten p = ten_rand(n, 1), ms = ten_fill(nb, 0), vs = ten_fill(nb, 0);
  void *mu, *vu;
  uint8_t *m = bytes_both((size_t)n, &mu), *v = bytes_both((size_t)n, &vu);
  uint8_t *mg = host_alloc((size_t)n), *vg = host_alloc((size_t)n);
  float *g0 = host_alloc((size_t)n * sizeof(float));
  int64_t bad = 0, flips = 0, trip = 0, zero = 0;
  for (int64_t t = 0; t <= 3; t++) {
    /* t = 0: betas 0 from zero state, so m = g, v = g^2 exactly encoded: the round trip */
    double b1 = t ? 0.9 : 0.0, b2 = t ? 0.95 : 0.0;
    Ten g = ten_rand(n, 1e-2f * (float)(t + 1));
    for (int64_t i = 0; i < n; i++) {
      if (i / RT_QBLOCK == 1) g.ref[i] = 0.0f;                         /* a block of zeros */
      if (i / RT_QBLOCK == 2) g.ref[i] *= i % 7 ? 1e-5f : 1.0f;        /* wide range: v below the map */
      if (i / RT_QBLOCK == 3) g.ref[i] = i % RT_QBLOCK ? 0.0f : -1.0f; /* one negative outlier */
    }
    ut_put(g.ut, g.ref, (size_t)n * sizeof(float));
    memcpy(g0, g.ref, (size_t)n * sizeof(float));
    ref_adamw_update_8bit(p.ref, g.ref, m, v, ms.ref, vs.ref, n, 1e-3, b1, b2, 1e-8, 0.1, t ? t : 1);
    UT(adamw_update_8bit)(p.ut, g.ut, mu, vu, ms.ut, vs.ut, n, 1e-3, b1, b2, 1e-8, 0.1, t ? t : 1);
    ut_get(mg, mu, (size_t)n);
    ut_get(vg, vu, (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      int dm = abs((int)mg[i] - (int)m[i]), dv = abs((int)vg[i] - (int)v[i]);
      bad += dm > 1 || dv > 1; /* one float rounding apart: at most one code */
      flips += (dm == 1) + (dv == 1);
    }
    check(&ms, TOL, "adamw_update_8bit m_scale, step %lld", LL(t));
    check(&vs, TOL, "adamw_update_8bit v_scale");
    check(&p, TOL, "adamw_update_8bit p, n=%lld", LL(n));
    ut_get(ms.ref, ms.ut, (size_t)nb * sizeof(float));
    ut_get(vs.ref, vs.ut, (size_t)nb * sizeof(float));
    if (t == 0) /* |decode(encode(x)) - x| <= half the local spacing, x = g / scale, and v's floor */
      for (int64_t i = 0; i < n; i++) {
        float sm = ms.ref[i / RT_QBLOCK], sv = vs.ref[i / RT_QBLOCK];
        double gm = g0[i], gv = (double)g0[i] * g0[i];
        double em = fabs((double)rt_qmap(1, mg[i]) * sm - gm), ev = fabs((double)rt_qmap(0, vg[i]) * sv - gv);
        double xm = sm > 0 ? gm / sm : 0, xv = sv > 0 ? gv / sv : 0;
        trip += em > (0.5 * qspacing(1, xm) + 1e-6) * sm || ev > (0.5 * qspacing(0, xv) + 1e-6) * sv;
        trip += g0[i] != 0.0f && vg[i] == 0; /* positive v never decodes to 0 */
        zero += i / RT_QBLOCK == 1 && (mg[i] != 127 || vg[i] != 0 || sm != 0.0f || sv != 0.0f);
      }
    memcpy(m, mg, (size_t)n), memcpy(v, vg, (size_t)n);
    ut_get(p.ref, p.ut, (size_t)n * sizeof(float));
  }
  opt_row("adamw_update_8bit codes within 1 (bad, flips), 4 steps", bad, flips);
  opt_row("adamw_update_8bit round trip: half the code spacing", trip, 0);
  opt_row("adamw_update_8bit zero block: scale 0, codes of 0", zero, 0);
  release_all();
}

// ----------------------------------------------------------------------------
// cases: storage precision and loss scaling

/* Rounds a to a binary format with M mantissa bits and normal exponents
 * Emin..Emax (fp16: 10, -14, 15; bf16: 7, -126, 127), ties to even, in
 * double: a / quantum is exact, nearbyint rounds to even. Returns the bit
 * pattern; overflow gives inf. NaN is handled by the caller. */
static uint16_t ref_encode(float f, int M, int Emin, int Emax) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  uint32_t inf = (uint32_t)(Emax - Emin + 2) << M;
  if (isinf(a)) return (uint16_t)(sign | inf);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  int E = e - 1 < Emin ? Emin : e - 1;
  double r = nearbyint(a / ldexp(1.0, E - M));
  uint32_t bits = ((uint32_t)(E - Emin + 1) << M) + (uint32_t)r - (1u << M);
  return (uint16_t)(sign | (bits >= inf ? inf : bits));
}

static double ref_decode(uint16_t h, int M, int Emin, int Emax) {
  int all_ones = Emax - Emin + 2, exp = (h >> M) & all_ones; /* the exponent field */
  double m = h & ((1 << M) - 1), v;
  if (exp == all_ones) v = m ? NAN : INFINITY;
  else if (exp == 0) v = ldexp(m, Emin - M);
  else v = ldexp(m + (double)(1 << M), exp - 1 + Emin - M);
  return h >> 15 ? -v : v;
}

/* rt_f32_to_bf16_sr's formula (memplan_kernels.h) in double: |x| between the
 * bf16 values a (toward zero) and b (the next; past the largest finite one,
 * 2^128, where round to nearest goes to inf too), b when r / 2^16 >= 1 -
 * (|x| - a) / (b - a), r the low 16 bits of splitmix64's output of key ^ i.
 * Planted once (2026-12-02): cpu.c adding 0x7fff instead of r: cuda_refs'
 * row "f32_to_bf16_sr: bits, stochastic rounding" 12440 mismatch FAIL. */
static int ref_bf16_sr_ok(float x, uint16_t got, uint64_t key, int64_t i) {
  if (isnan(x)) return (got & 0x7fc0) == 0x7fc0;
  uint32_t u;
  memcpy(&u, &x, 4);
  uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
  if (isinf(x)) return got == lo;
  uint64_t z = (key ^ (uint64_t)i) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  uint32_t la = (uint32_t)lo << 16, lb = (uint32_t)hi << 16;
  float fa, fb;
  memcpy(&fa, &la, 4);
  memcpy(&fb, &lb, 4);
  double a = fabs((double)fa), b = isinf(fb) ? 0x1p128 : fabs((double)fb);
  double frac = (fabs((double)x) - a) / (b - a);
  return got == ((double)(z & 0xffff) / 65536.0 >= 1.0 - frac ? hi : lo);
}

/* One table row for a conversion: bit patterns (or floats) equal to the
 * reference's, NaN for NaN. */
static void cast_row(const char *what, int64_t n, int64_t bad, int64_t first) {
  failures += bad != 0;
  checks++;
  printf("%-58s %9lld %9s  %s\n", what, LL(bad), first >= 0 ? "mismatch" : "-", bad ? "FAIL" : "ok");
  if (bad) printf("  first mismatch at element %lld of %lld\n", LL(first), LL(n));
}

static void case_casts(int M, int Emin, int Emax, const char *name) {
  int is_bf16 = M == 7;
  /* inputs: specials, ties and edges, float subnormals, then random floats
   * over the whole exponent range */
  enum { N = 40000 };
  float *x = host_alloc(N * sizeof(float));
  static const float special[] = {0.0f,          -0.0f,          INFINITY,        -INFINITY,      NAN,
                                  1.0f,          -1.0f,          65504.0f,        65519.0f,       65520.0f,
                                  65536.0f,      6.1035156e-05f, 5.9604645e-08f,  2.9802322e-08f, 2.9802326e-08f,
                                  3.4028235e38f, 1e-45f,         1.17549435e-38f, 3.0e-39f};
  int64_t n = 0;
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[n++] = special[i];
  for (int i = 0; n < N; i++) {
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    uint32_t b = (uint32_t)(rng_state >> 32);
    if (i % 4 == 0) b = (b & 0xFFFF0000u) | 0x8000u;                           /* a bf16 tie */
    if (i % 4 == 1) b = (b & 0xFFFFE000u) | 0x1000u;                           /* an fp16 tie (in range or not) */
    if (i % 4 == 2) b = (b & 0x80000000u) | (0x33000000u + (b & 0x07FFFFFFu)); /* near fp16's range */
    float f;
    memcpy(&f, &b, 4);
    x[n++] = f;
  }
  float *dx = ut_alloc(N * sizeof(float)), *back = ut_alloc(N * sizeof(float));
  uint16_t *dh = ut_alloc(N * sizeof(uint16_t)), *h = host_alloc(N * sizeof(uint16_t));
  float *fb = host_alloc(N * sizeof(float));
  ut_put(dx, x, N * sizeof(float));
  if (is_bf16) {
    UT(f32_to_bf16)(dh, dx, N);
    UT(bf16_to_f32)(back, dh, N);
  } else {
    UT(f32_to_f16)(dh, dx, N);
    UT(f16_to_f32)(back, dh, N);
  }
  ut_get(h, dh, N * sizeof(uint16_t));
  ut_get(fb, back, N * sizeof(float));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < N; i++) {
    uint16_t want = ref_encode(x[i], M, Emin, Emax);
    int ok = isnan(x[i]) ? isnan(ref_decode(h[i], M, Emin, Emax)) : h[i] == want;
    if (!ok && !bad++) first = i;
  }
  char what[96];
  snprintf(what, sizeof what, "f32_to_%s: bits, round to nearest even (%d values)", name, N);
  cast_row(what, N, bad, first);
  bad = 0, first = -1;
  for (int64_t i = 0; i < N; i++) { /* widening is exact: every pattern decodes */
    double want = ref_decode(h[i], M, Emin, Emax);
    int ok = isnan(want) ? isnan(fb[i]) : (double)fb[i] == want && !signbit(fb[i]) == !signbit(want);
    if (!ok && !bad++) first = i;
  }
  snprintf(what, sizeof what, "%s_to_f32: exact widening", name);
  cast_row(what, N, bad, first);
  if (is_bf16) { /* a bf16 parameter's update stored back (--param-precision) */
    uint64_t key = 0x243f6a8885a308d3ull;
    UT(f32_to_bf16_sr)(dh, dx, N, key);
    ut_get(h, dh, N * sizeof(uint16_t));
    bad = 0, first = -1;
    for (int64_t i = 0; i < N; i++)
      if (!ref_bf16_sr_ok(x[i], h[i], key, i) && !bad++) first = i;
    cast_row("f32_to_bf16_sr: bits, stochastic rounding (the key's random bits)", N, bad, first);
  }
  release_all();
}

/* Loss scaling: every gradient of a step multiplied by 1/scale, and one
 * verdict for the step: all finite, or not (the step is then skipped). */
static int unscale_step(float **g, const int64_t *n, int k, float inv) {
#ifdef TEST_CPU_BACKEND
  int ok = 1;
  for (int i = 0; i < k; i++) ok &= UT(unscale_check)(g[i], n[i], inv);
  return ok;
#else
  for (int i = 0; i < k; i++) UT(unscale_check)(g[i], n[i], inv);
  return rt_cuda_all_finite();
#endif
}

static void case_unscale(void) {
  int64_t n[2] = {10007, 333};
  const float inv = 1.0f / 1024.0f;
  Ten a = ten_rand(n[0], 3000.0f), b = ten_rand(n[1], 3000.0f);
  float *g[2] = {a.ut, b.ut};
  int verdict = unscale_step(g, n, 2, inv);
  for (int64_t i = 0; i < n[0]; i++) a.ref[i] *= inv; /* a power of two: exact */
  for (int64_t i = 0; i < n[1]; i++) b.ref[i] *= inv;
  check(&a, EXACT, "unscale_check g * (1/scale), first gradient");
  check(&b, EXACT, "unscale_check g * (1/scale), second gradient");
  static const float poison[] = {INFINITY, -INFINITY, NAN};
  int verdicts_ok = verdict == 1;
  for (int p = 0; p < 3; p++) {
    Ten c = ten_rand(n[0], 1.0f), d = ten_rand(n[1], 1.0f);
    float v = poison[p];
    ut_put((float *)d.ut + n[1] - 1, &v, sizeof v); /* the last element of the last gradient */
    float *h[2] = {c.ut, d.ut};
    verdicts_ok &= unscale_step(h, n, 2, inv) == 0;
    verdicts_ok &= unscale_step(h, n, 1, inv) == 1; /* the record starts afresh */
  }
  failures += !verdicts_ok;
  checks++;
  printf("%-58s %9s %9s  %s\n", "unscale verdicts: finite 1; inf, -inf, NaN 0; then reset", "-", "-",
         verdicts_ok ? "ok" : "FAIL");
  release_all();
}

/* Gradient clipping: the squared global norm over several gradients, each
 * backend summing in double in its own order (cpu.c: index order; CUDA: a
 * fixed grid and tree), against long double. n terms of at most 1 (|g| <= 1
 * here) summed in double are off by at most n * 2^-53 relative (the sum's
 * terms are positive): 1e-11 covers n ~ 1e5. A second run must give the
 * same bits (the order is fixed), and the total resets after each read. */
static double sqnorm_step(float **g, const int64_t *n, int k) {
#ifdef TEST_CPU_BACKEND
  double s = 0.0;
  for (int i = 0; i < k; i++) s += UT(grad_sqnorm)(g[i], n[i]);
  return s;
#else
  for (int i = 0; i < k; i++) UT(grad_sqnorm)(g[i], n[i]);
  return rt_cuda_grad_sqnorm_total();
#endif
}

static void case_grad_sqnorm(void) {
  int64_t n[3] = {100003, 333, 1};
  Ten a = ten_rand(n[0], 1.0f), b = ten_rand(n[1], 0.001f), c = ten_rand(n[2], 1.0f);
  float *g[3] = {a.ut, b.ut, c.ut};
  double got = sqnorm_step(g, n, 3), again = sqnorm_step(g, n, 3), one = sqnorm_step(g, n, 1);
  double want = ref_grad_sqnorm(a.ref, n[0]) + ref_grad_sqnorm(b.ref, n[1]) + ref_grad_sqnorm(c.ref, n[2]);
  double want1 = ref_grad_sqnorm(a.ref, n[0]), rel = fabs(got - want) / want;
  int ok = rel <= 1e-11 && got == again && fabs(one - want1) <= 1e-11 * want1;
  failures += !ok;
  checks++;
  printf("%-58s %9.2e %9.2e  %s\n", "grad_sqnorm: 3 gradients in double; rerun equal; reset", rel, 1e-11,
         ok ? "ok" : "FAIL");
  release_all();
}

// ----------------------------------------------------------------------------
// CUDA only: determinism, and timing of GPT-2 124M-sized kernels

#ifndef TEST_CPU_BACKEND
/* Two backend buffers must be equal bit for bit (run-to-run determinism). */
static void check_same(const Ten *a, const Ten *b, const char *what) {
  size_t bytes = (size_t)a->n * sizeof(float);
  float *x = xmalloc(bytes), *y = xmalloc(bytes);
  ut_get(x, a->ut, bytes);
  ut_get(y, b->ut, bytes);
  double abs_err = 0.0;
  for (int64_t i = 0; i < a->n; i++) abs_err = fmax(abs_err, fabs((double)x[i] - y[i]));
  int ok = memcmp(x, y, bytes) == 0;
  free(x);
  free(y);
  failures += !ok;
  checks++;
  printf("%-58s %9.2e %9s  %s\n", what, abs_err, "-", ok ? "ok" : "FAIL");
}

/* The kernels that sum over rows, run twice on the same inputs. */
static void case_determinism(void) {
  int64_t B = 2, T = 256, C = 256, NH = 4, N = 4096, V = 300;
  Ten qkv = ten_rand(B * T * 3 * C, 1.5f), out = ten_fill(B * T * C, 0);
  Ten lse = ten_fill(B * NH * T, 0), g = ten_rand(B * T * C, 1);
  UT(attention_forward)(out.ut, lse.ut, qkv.ut, B, T, C, NH, NH, 1);
  Ten d1 = ten_fill(B * T * 3 * C, 0), d2 = ten_fill(B * T * 3 * C, 0);
  UT(attention_backward)(d1.ut, g.ut, qkv.ut, out.ut, lse.ut, B, T, C, NH, NH, 1, 0);
  UT(attention_backward)(d2.ut, g.ut, qkv.ut, out.ut, lse.ut, B, T, C, NH, NH, 1, 0);
  check_same(&d1, &d2, "determinism: attention_backward twice");
  // grouped-query (2 query heads per kv head; the qkv buffer's first 2C per
  // position), non-causal: dk, dv sum over a group
  UT(attention_forward)(out.ut, lse.ut, qkv.ut, B, T, C, NH, 2, 0);
  UT(attention_backward)(d1.ut, g.ut, qkv.ut, out.ut, lse.ut, B, T, C, NH, 2, 0, 0);
  UT(attention_backward)(d2.ut, g.ut, qkv.ut, out.ut, lse.ut, B, T, C, NH, 2, 0, 0);
  check_same(&d1, &d2, "determinism: attention_backward GQA twice");
  Ids tok = ids_rand(N, V, 1);
  Ten ge = ten_rand(N * C, 1), e1 = ten_fill(V * C, 0), e2 = ten_fill(V * C, 0);
  UT(embedding_backward)(e1.ut, ge.ut, tok.ut, N, C, V, 0);
  UT(embedding_backward)(e2.ut, ge.ut, tok.ut, N, C, V, 0);
  check_same(&e1, &e2, "determinism: embedding_backward twice");
  Ten x = ten_rand(N * C, 1), w = ten_rand(C, 1), m = ten_rand(N, 1), r = ten_rand(N, 1);
  Ten w1 = ten_fill(C, 0), w2 = ten_fill(C, 0), b1 = ten_fill(C, 0), b2 = ten_fill(C, 0);
  UT(layernorm_backward)(NULL, w1.ut, b1.ut, ge.ut, x.ut, w.ut, m.ut, r.ut, N, C, 1e-5f, 0, 0, 0);
  UT(layernorm_backward)(NULL, w2.ut, b2.ut, ge.ut, x.ut, w.ut, m.ut, r.ut, N, C, 1e-5f, 0, 0, 0);
  check_same(&w1, &w2, "determinism: layernorm_backward dw twice");
  check_same(&b1, &b2, "determinism: layernorm_backward db twice");
  Ten logits = ten_rand(64 * 5000, 4), l1 = ten_fill(1, 0), l2 = ten_fill(1, 0);
  Ids tgt = ids_rand(64, 5000, 0);
  UT(cross_entropy_forward)(l1.ut, NULL, logits.ut, tgt.ut, 64, 5000);
  UT(cross_entropy_forward)(l2.ut, NULL, logits.ut, tgt.ut, 64, 5000);
  check_same(&l1, &l2, "determinism: cross_entropy_forward twice");
  release_all();
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

#define TIME(label, flops, stmt)                                                                 \
  do {                                                                                           \
    stmt;                                                                                        \
    rt_cuda_synchronize();                                                                       \
    double t0_ = now_ms();                                                                       \
    for (int it_ = 0; it_ < 5; it_++) stmt;                                                      \
    rt_cuda_synchronize();                                                                       \
    double ms_ = (now_ms() - t0_) / 5;                                                           \
    if ((flops) > 0) printf("%-46s %9.3f ms %8.1f TFLOP/s\n", label, ms_, (flops) / ms_ * 1e-9); \
    else printf("%-46s %9.3f ms\n", label, ms_);                                                 \
  } while (0)

/* GPT-2 124M at B=8, T=1024 (no checks; inputs random, outputs discarded). */
static void bench(void) {
  int64_t B = 8, T = 1024, C = 768, NH = 12, V = 50304, M = B * T;
  printf("\ntiming, GPT-2 124M shapes, B=%lld T=%lld (mean of 5 after a warm-up)\n", LL(B), LL(T));
  float *x = ut_alloc((size_t)M * 4 * C * 4), *W = ut_alloc((size_t)4 * C * C * 4);
  float *bias = ut_alloc((size_t)4 * C * 4), *y = ut_alloc((size_t)M * 4 * C * 4);
  float *dx = ut_alloc((size_t)M * 4 * C * 4), *dW = ut_alloc((size_t)4 * C * C * 4);
  float *qkv = ut_alloc((size_t)M * 3 * C * 4), *dqkv = ut_alloc((size_t)M * 3 * C * 4);
  float *lse = ut_alloc((size_t)B * NH * T * 4), *mean = ut_alloc((size_t)M * 4);
  float *rstd = ut_alloc((size_t)M * 4), *logits = ut_alloc((size_t)M * V * 4);
  float *loss = ut_alloc(4), *wte = ut_alloc((size_t)V * C * 4);
  Ten r = ten_rand(M * 3 * C, 1); // random qkv (zeros would make attention trivial)
  ut_put(qkv, r.ref, (size_t)M * 3 * C * 4);
  rt_cuda_memset_zero(x, (size_t)M * 4 * C * 4);
  rt_cuda_memset_zero(W, (size_t)4 * C * C * 4);
  rt_cuda_memset_zero(bias, (size_t)4 * C * 4);
  rt_cuda_memset_zero(logits, (size_t)M * V * 4);
  rt_cuda_memset_zero(wte, (size_t)V * C * 4);
  Ids tgt = ids_rand(M, V, 0);
  double fl = 2.0 * M * C * 4 * C;
  for (int tf32 = 0; tf32 <= 1; tf32++) {
    rt_cuda_set_tf32(tf32);
    printf("-- %s\n", tf32 ? "TF32" : "fp32");
    TIME("linear_forward fc (8192x768 -> 3072, bias)", fl, UT(linear_forward)(y, x, W, bias, M, C, 4 * C));
    TIME("linear_backward fc (dx, dW, db)", 2 * fl, UT(linear_backward)(dx, dW, bias, y, x, W, M, C, 4 * C, 0, 0, 0));
    TIME("linear_forward lm head (8192x768 -> 50304)", 2.0 * M * C * V,
         UT(linear_forward)(logits, x, wte, NULL, M, C, V));
  }
  rt_cuda_set_tf32(0);
  double fa = 4.0 * B * NH * T * T / 2 * (C / NH);
  TIME("attention_forward", fa, UT(attention_forward)(y, lse, qkv, B, T, C, NH, NH, 1));
  TIME("attention_backward", 2.5 * fa, UT(attention_backward)(dqkv, y, qkv, y, lse, B, T, C, NH, NH, 1, 0));
  TIME("attention_forward GQA (4 kv heads)", fa, UT(attention_forward)(y, lse, qkv, B, T, C, NH, 4, 1));
  TIME("attention_backward GQA (4 kv heads)", 2.5 * fa,
       UT(attention_backward)(dqkv, y, qkv, y, lse, B, T, C, NH, 4, 1, 0));
  TIME("layernorm_forward (8192x768)", 0, UT(layernorm_forward)(y, mean, rstd, qkv, W, bias, M, C, 1e-5f));
  TIME("layernorm_backward", 0, UT(layernorm_backward)(dx, dW, bias, y, qkv, W, mean, rstd, M, C, 1e-5f, 0, 0, 0));
  TIME("gelu_forward (8192x3072)", 0, UT(gelu_forward)(y, dx, M * 4 * C, 1));
  TIME("cross_entropy_forward (8192x50304)", 0, UT(cross_entropy_forward)(loss, lse, logits, tgt.ut, M, V));
  TIME("cross_entropy_backward (in place)", 0, UT(cross_entropy_backward)(logits, logits, tgt.ut, lse, M, V, 1.0f, 0));
  TIME("embedding_backward (8192 tokens, V=50304)", 0, UT(embedding_backward)(logits, y, tgt.ut, M, C, V, 0));
  int64_t np = 100000000; // p, g, m, v: four slices of the logits buffer
  TIME("adamw_update (100M parameters)", 0,
       UT(adamw_update)(logits, logits + np, logits + 2 * np, logits + 3 * np, np, 1e-3, 0.9, 0.95, 1e-8, 0.1, 1));
  release_all();
}
#endif

// ----------------------------------------------------------------------------

#define RUN(name, call)       \
  do {                        \
    if (selected(name)) call; \
  } while (0)

// ----------------------------------------------------------------------------
// diffusion ops (cpu_diffusion.c, cuda_diffusion.cu)

/* groupnorm of [N, C, S] in G groups (affine or not): forward with its statistics, backward with every gradient
 * from the reference's statistics, acc 0 and 1. */
static void case_groupnorm(int64_t N, int64_t C, int64_t S, int64_t G, int affine) {
  int64_t n = N * C * S;
  Ten x = ten_rand(n, 2), w = ten_rand(C, 1), b = ten_rand(C, 1), out = ten_fill(n, NAN);
  Ten mean = ten_fill(N * G, NAN), rstd = ten_fill(N * G, NAN);
  const float *wr = affine ? w.ref : NULL, *br = affine ? b.ref : NULL, *wu = affine ? w.ut : NULL,
              *bu = affine ? b.ut : NULL;
  ref_groupnorm_forward(out.ref, mean.ref, rstd.ref, x.ref, wr, br, N, C, S, G, 1e-5f);
  UT(groupnorm_forward)(out.ut, mean.ut, rstd.ut, x.ut, wu, bu, N, C, S, G, 1e-5f);
  check(&out, TOL, "groupnorm_forward (%lld,%lld,%lld) G=%lld affine=%d", LL(N), LL(C), LL(S), LL(G), affine);
  check(&mean, TOL, "groupnorm_forward mean");
  check(&rstd, TOL, "groupnorm_forward rstd");
  Ten m = ten_upload(mean.ref, N * G), r = ten_upload(rstd.ref, N * G);
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(n, 1), dx = ten_grad(n, acc), dw = ten_grad(C, acc), db = ten_grad(C, acc);
    ref_groupnorm_backward(dx.ref, dw.ref, db.ref, g.ref, x.ref, wr, m.ref, r.ref, N, C, S, G, 1e-5f, acc, acc, acc);
    UT(groupnorm_backward)(dx.ut, dw.ut, db.ut, g.ut, x.ut, wu, m.ut, r.ut, N, C, S, G, 1e-5f, acc, acc, acc);
    check(&dx, TOL_SUM, "groupnorm_backward dx acc=%d", acc);
    check(&dw, TOL_SUM, "groupnorm_backward dw acc=%d", acc);
    check(&db, TOL_SUM, "groupnorm_backward db acc=%d", acc);
  }
  release_all();
}

static void case_add_channels(int64_t NC, int64_t S) {
  Ten x = ten_rand(NC * S, 1), e = ten_rand(NC, 1), out = ten_fill(NC * S, NAN);
  ref_add_channels_forward(out.ref, x.ref, e.ref, NC, S);
  UT(add_channels_forward)(out.ut, x.ut, e.ut, NC, S);
  check(&out, TOL, "add_channels_forward (%lld,%lld)", LL(NC), LL(S));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(NC * S, 1), dx = ten_grad(NC * S, acc), de = ten_grad(NC, acc);
    ref_add_channels_backward(dx.ref, de.ref, g.ref, NC, S, acc, acc);
    UT(add_channels_backward)(dx.ut, de.ut, g.ut, NC, S, acc, acc);
    check(&dx, TOL, "add_channels_backward dx acc=%d", acc);
    check(&de, TOL_SUM, "add_channels_backward de acc=%d", acc);
  }
  release_all();
}

static void case_upsample(int64_t NC, int64_t H, int64_t W, int64_t sc) {
  int64_t no = NC * H * W * sc * sc;
  Ten x = ten_rand(NC * H * W, 1), out = ten_fill(no, NAN);
  ref_upsample_forward(out.ref, x.ref, NC, H, W, sc);
  UT(upsample_forward)(out.ut, x.ut, NC, H, W, sc);
  check(&out, 0.0, "upsample_forward (%lld,%lld,%lld) x%lld", LL(NC), LL(H), LL(W), LL(sc));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(no, 1), dx = ten_grad(NC * H * W, acc);
    ref_upsample_backward(dx.ref, g.ref, NC, H, W, sc, acc);
    UT(upsample_backward)(dx.ut, g.ut, NC, H, W, sc, acc);
    check(&dx, TOL, "upsample_backward acc=%d", acc);
  }
  release_all();
}

/* timesteps 0 .. 999 as DDPM draws them */
static void case_timestep_embedding(int64_t B, int64_t D, int64_t flip, float shift) {
  Ten t = ten_rand(B, 500), out = ten_fill(B * D, NAN);
  for (int64_t b = 0; b < B; b++) t.ref[b] = floorf(t.ref[b] + 500.0f);
  ut_put(t.ut, t.ref, (size_t)B * sizeof(float));
  ref_timestep_embedding_forward(out.ref, t.ref, B, D, flip, shift, 10000.0f);
  UT(timestep_embedding_forward)(out.ut, t.ut, B, D, flip, shift, 10000.0f);
  check(&out, TOL, "timestep_embedding_forward B=%lld D=%lld flip=%lld", LL(B), LL(D), LL(flip));
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(B * D, 1), dt = ten_grad(B, acc);
    ref_timestep_embedding_backward(dt.ref, g.ref, t.ref, B, D, flip, shift, 10000.0f, acc);
    UT(timestep_embedding_backward)(dt.ut, g.ut, t.ut, B, D, flip, shift, 10000.0f, acc);
    check(&dt, TOL_SUM, "timestep_embedding_backward acc=%d", acc);
  }
  release_all();
}

/* conv_transpose2d: the scratch the plan gives (O k k H W floats, NaN on entry; none for k = s = 1, p = 0), bias
 * or none; backward with every gradient (= and +=), then dW alone and dx alone */
static void case_conv_transpose2d(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int64_t s,
                                  int64_t p, int64_t op) {
  int64_t Ho = (H - 1) * s - 2 * p + k + op, Wo = (W - 1) * s - 2 * p + k + op, nx = N * C * H * W,
          ny = N * O * Ho * Wo, nscr = k == 1 && s == 1 && p == 0 ? 0 : O * k * k * H * W;
  for (int bias = 0; bias <= 1; bias++) {
    Ten x = ten_rand(nx, 1), w = ten_rand(C * O * k * k, 1), b = ten_rand(O, 1), out = ten_fill(ny, NAN);
    float *scr = nscr ? ten_fill(nscr, NAN).ut : NULL;
    ref_conv_transpose2d_forward(out.ref, x.ref, w.ref, bias ? b.ref : NULL, NULL, N, C, H, W, O, Ho, Wo, k, s, p);
    UT(conv_transpose2d_forward)(out.ut, x.ut, w.ut, bias ? b.ut : NULL, scr, N, C, H, W, O, Ho, Wo, k, s, p);
    check(&out, TOL_SUM, "conv_transpose2d_forward bias=%d (%lld,%lld,%lld,%lld) O=%lld k%lld s%lld p%lld op%lld", bias,
          LL(N), LL(C), LL(H), LL(W), LL(O), LL(k), LL(s), LL(p), LL(op));
    release_all();
  }
  // acc patterns (dx, dW, db): all "=", all "+=", dW alone, dx alone; -1 is a NULL gradient
  static const int pat[][3] = {{0, 0, 0}, {1, 1, 1}, {-1, 1, -1}, {1, -1, -1}};
  for (size_t q = 0; q < sizeof pat / sizeof pat[0]; q++) {
    const int *a = pat[q];
    Ten x = ten_rand(nx, 1), w = ten_rand(C * O * k * k, 1), g = ten_rand(ny, 1);
    Ten dx = ten_grad(nx, a[0] > 0), dw = ten_grad(C * O * k * k, a[1] > 0), db = ten_grad(O, a[2] > 0);
    float *scr = nscr ? ten_fill(nscr, NAN).ut : NULL;
    ref_conv_transpose2d_backward(a[0] < 0 ? NULL : dx.ref, a[1] < 0 ? NULL : dw.ref, a[2] < 0 ? NULL : db.ref, g.ref,
                                  x.ref, w.ref, NULL, N, C, H, W, O, Ho, Wo, k, s, p, a[0] > 0, a[1] > 0, a[2] > 0);
    UT(conv_transpose2d_backward)
    (a[0] < 0 ? NULL : dx.ut, a[1] < 0 ? NULL : dw.ut, a[2] < 0 ? NULL : db.ut, g.ut, x.ut, w.ut, scr, N, C, H, W, O,
     Ho, Wo, k, s, p, a[0] > 0, a[1] > 0, a[2] > 0);
    if (a[0] >= 0) check(&dx, TOL_SUM, "conv_transpose2d_backward dx acc=%d k%lld s%lld", a[0], LL(k), LL(s));
    if (a[1] >= 0) check(&dw, TOL_SUM, "conv_transpose2d_backward dW acc=%d k%lld s%lld", a[1], LL(k), LL(s));
    if (a[2] >= 0) check(&db, TOL_SUM, "conv_transpose2d_backward db acc=%d k%lld s%lld", a[2], LL(k), LL(s));
    release_all();
  }
}

/* ddpm_noise: the same t (exactly), eps and x_t from the same key; backward from the reference's t */
static void case_ddpm_noise(int64_t B, int64_t S, uint64_t key) {
  Ten x0 = ten_rand(B * S, 1), xt = ten_fill(B * S, NAN), eps = ten_fill(B * S, NAN), t = ten_fill(B, NAN);
  ref_ddpm_noise_forward(xt.ref, eps.ref, t.ref, x0.ref, B, S, 1000, 1e-4f, 0.02f, RT_MODE_TRAIN, key);
  UT(ddpm_noise_forward)(xt.ut, eps.ut, t.ut, x0.ut, B, S, 1000, 1e-4f, 0.02f, RT_MODE_TRAIN, key);
  check(&t, 0.0, "ddpm_noise_forward t B=%lld S=%lld", LL(B), LL(S));
  check(&eps, TOL, "ddpm_noise_forward eps");
  check(&xt, TOL, "ddpm_noise_forward x_t");
  Ten tt = ten_upload(t.ref, B);
  for (int acc = 0; acc <= 1; acc++) {
    Ten g = ten_rand(B * S, 1), dx = ten_grad(B * S, acc);
    ref_ddpm_noise_backward(dx.ref, g.ref, tt.ref, B, S, 1000, 1e-4f, 0.02f, RT_MODE_RECOMPUTE, key, acc);
    UT(ddpm_noise_backward)(dx.ut, g.ut, tt.ut, B, S, 1000, 1e-4f, 0.02f, RT_MODE_RECOMPUTE, key, acc);
    check(&dx, TOL, "ddpm_noise_backward acc=%d", acc);
  }
  release_all();
}

int main(int argc, char **argv) {
  int do_bench = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--bench")) do_bench = 1;
    else filter = argv[i];
  }
#ifndef TEST_CPU_BACKEND
  if (rt_cuda_device_count() == 0) {
    printf("test_cuda_kernels: no CUDA device or driver: skipped\n");
    return 77;
  }
  void *ws = rt_cuda_malloc(WORKSPACE_BYTES);
  rt_cuda_init(ws, WORKSPACE_BYTES);
  size_t free_b = 0, total_b = 0;
  rt_cuda_mem_info(&free_b, &total_b);
  printf("device memory: %.1f GiB free of %.1f GiB\n", free_b / 1073741824.0, total_b / 1073741824.0);
#else
  rt_set_threads(4);
#endif
  printf("backend %s against double references%s\n", BACKEND, quick ? " (quick)" : "");
  printf("%-58s %9s %9s  %s\n", "kernel / output", "max abs", "max rel", "ok");
  RUN("linear", case_linear(37, 61, 53, TOL_SUM, ""));
  if (!quick) RUN("linear", case_linear(256, 384, 320, TOL_SUM, ""));
  RUN("matmul", case_matmul(3, 17, 29, 23, TOL_SUM, ""));
  if (!quick) RUN("matmul", case_matmul(4, 64, 96, 128, TOL_SUM, ""));
  RUN("add", case_add(quick ? 1000 : 100003));
  RUN("mul", case_mul(quick ? 1000 : 100003));
  RUN("relu_gelu", case_relu_gelu(quick ? 1000 : 100003));
  RUN("silu", case_silu(quick ? 1000 : 100003));
  RUN("scale", case_scale(quick ? 1000 : 100003));
  RUN("relu6", case_relu6(quick ? 1000 : 100003));
  RUN("sigmoid", case_sigmoid(quick ? 1000 : 100003));
  RUN("hardswish", case_hardswish_hardsigmoid(quick ? 1000 : 100003));
  RUN("scale_channels", case_scale_channels(24, 49));
  RUN("scale_channels", case_scale_channels(quick ? 6 : 300, quick ? 100 : 3136));
  RUN("layer_scale", case_layer_scale(3, 5, 7));
  RUN("layer_scale", case_layer_scale(quick ? 2 : 16, quick ? 24 : 96, quick ? 49 : 3136));
  RUN("layernorm", case_layernorm(67, 129, 1e-5f, 1));
  if (!quick) RUN("layernorm", case_layernorm(512, 768, 1e-5f, 1));
  RUN("layernorm", case_layernorm(67, 129, 0.5f, 0)); // eps ~ var (1.33): an eps ignored shows; b, db NULL
  RUN("layernorm", case_layernorm(33, 64, 1e-6f, 0));
  RUN("batchnorm2d", case_batchnorm2d(8, 6, 49, 1e-5f, 0.1f)); // [N,C,H,W], H W = 7x7
  RUN("batchnorm2d", case_batchnorm2d(33, 70, 1, 0.5f, 0.3f)); // [N,C]; eps ~ var: an eps ignored shows
  if (!quick) RUN("batchnorm2d", case_batchnorm2d(32, 64, 28 * 28, 1e-5f, 0.1f));
  RUN("rmsnorm", case_rmsnorm(67, 129, 1e-5f));
  if (!quick) RUN("rmsnorm", case_rmsnorm(512, 2048, 1e-6f));
  RUN("softmax", case_softmax(50, 1000));
  RUN("softmax", case_softmax(33, 7));
  RUN("cross_attention", case_cross_attention(2, 67, 13, 96, 4));         // head size 24, ragged query and key tiles
  RUN("cross_attention", case_cross_attention(1, 40, 77, 320, 2));        // SD's 77-token context, head size 160
  RUN("attention", case_attention(2, 67, 96, 4, 4, 1));                   // head size 24, ragged tiles
  RUN("attention", case_attention(1, 33, 40, 5, 5, 1));                   // head size 8
  RUN("window_attention", case_window_attention(2, 14, 21, 96, 3, 7, 3)); // torchvision's 7x7, shifted by 3
  RUN("window_attention", case_window_attention(1, 8, 8, 24, 2, 4, 0));   // unshifted
  RUN("attention", case_attention(2, 67, 96, 4, 2, 1));                   // grouped-query: 2 query heads per kv head
  RUN("attention", case_attention(2, 45, 48, 6, 1, 1));                   // multi-query: one kv head for all 6
  RUN("attention", case_attention(2, 67, 96, 4, 4, 0));                   // not causal: every query sees all T keys
  RUN("attention", case_attention(1, 50, 64, 4, 2, 0));                   // not causal, grouped-query
  if (!quick) {
    RUN("attention", case_attention(2, 128, 128, 2, 2, 1)); // head size 64
    RUN("attention", case_attention(1, 100, 240, 2, 2, 1)); // head size 120
    RUN("attention", case_attention(1, 40, 512, 2, 2, 1));  // head size 256 (large shared memory)
    RUN("attention", case_attention(1, 130, 512, 8, 2, 1)); // Llama-like: head size 64, 4 per kv head
    RUN("attention", case_attention(1, 40, 512, 2, 1, 0));  // head size 256, multi-query, not causal
  }
  RUN("embedding", case_embedding(1000, 100, 50, 0)); // many repeats per row
  RUN("embedding", case_embedding(777, 70, 5000, 1)); // one very frequent token
  RUN("position_embedding", case_position_embedding(3, 17, 40, 24));
  static const float none[4] = {0}, llama3[4] = {8, 1, 4, 8192};            // Llama 3.1's rope_scaling
  RUN("rope", case_rope(2, 67, 8, 2, 64, 10000.0f, none));                  // grouped kv heads (4:1)
  RUN("rope", case_rope(3, 13, 3, 3, 6, 2.0f, none));                       // kv_heads = heads, hd 6, every angle wraps
  RUN("rope", case_rope(2, 67, 8, 2, 64, 500000.0f, llama3));               // all three bands of the scaling
  if (!quick) RUN("rope", case_rope(2, 1024, 32, 8, 128, 500000.0f, none)); // Llama 3 8B's heads and theta
  RUN("flatten", case_flatten(100003));
  RUN("reshape", case_reshape(4099));
  RUN("transpose", case_transpose(3, 37, 1, 45, 1)); // [B, C, N] -> [B, N, C]: ragged tiles
  RUN("transpose", case_transpose(2, 5, 7, 3, 4));   // axes apart, inner rows of 4
  RUN("transpose", case_transpose(3, 40, 3, 36, 1)); // axes apart, the last one swapped: Z = 1, M = 3
  RUN("transpose", case_transpose(1, 1, 300, 1, 1)); // an axis with itself: a copy
  RUN("concat", case_concat(3, 5, 2, (const int64_t[]){4, 7}));
  RUN("concat", case_concat(2, 1, 6, (const int64_t[]){1, 2, 3, 1, 5, 2})); // six inputs, last axis
  RUN("class_token", case_class_token(3, 17, 40));
  RUN("select", case_select(4, 9, 33, 0));             // ViT's read-out: the class token
  RUN("select", case_select(6, 5, 1, 4));              // the last axis, last index
  RUN("pad", case_pad(6, 5, 33, 7));                   // Swin's map padded to whole windows
  RUN("pad", case_pad(6, 7, 33, 5));                   // and cut back
  RUN("transpose", case_transpose(8, 192, 1, 196, 1)); // ViT-Ti/16's patches at batch 8: 196 of 192
  RUN("class_token", case_class_token(8, 196, 192));
#ifndef TEST_CPU_BACKEND
  if (!quick) { // ViT-B/16 at batch 32: 196 patches of 768 (seconds for the CPU build's references)
    RUN("transpose", case_transpose(32, 768, 1, 196, 1));
    RUN("class_token", case_class_token(32, 196, 768));
    RUN("select", case_select(32, 197, 768, 0));
  }
#endif
  RUN("cross_entropy", case_cross_entropy(300, 10));
  RUN("cross_entropy", case_cross_entropy(quick ? 4 : 64, 50257));
  RUN("linear_cross_entropy", case_linear_cross_entropy(37, 53, 24, 16));
  RUN("linear_cross_entropy", case_linear_cross_entropy(quick ? 8 : 32, quick ? 1000 : 50257, 32, quick ? 3 : 12));
  RUN("mse", case_mse(10007));
  RUN("conv2d", case_conv2d(2, 3, 9, 7, 4, 3, 1, 1, 1, 1));   // 3x3 padded, non-square
  RUN("conv2d", case_conv2d(2, 4, 11, 10, 6, 3, 2, 2, 2, 2)); // stride 2, dilation 2, groups 2
  RUN("conv2d", case_conv2d(2, 8, 9, 9, 8, 3, 1, 1, 1, 8));   // depthwise
  RUN("conv2d", case_conv2d(3, 8, 5, 6, 12, 1, 1, 0, 1, 1));  // 1x1: no scratch
  // inception_v3's 1x7 and 7x1 (padding (0, 3), (3, 0)) and a 3x2 of strides (2, 1). Planted once in cpu_conv.c:
  // im2col's row taking ki = r / kh % kh printed "conv2d_forward bias=0 ... k=7x1 ... 7.61e+00 1.06e+02 FAIL"
  RUN("conv2d", case_conv2d_hw(2, 3, 8, 9, 4, (int64_t[]){1, 7}, (int64_t[]){1, 1}, (int64_t[]){0, 3}, 1, 1));
  RUN("conv2d", case_conv2d_hw(2, 3, 9, 8, 4, (int64_t[]){7, 1}, (int64_t[]){1, 1}, (int64_t[]){3, 0}, 1, 1));
  RUN("conv2d", case_conv2d_hw(2, 4, 9, 8, 4, (int64_t[]){3, 2}, (int64_t[]){2, 1}, (int64_t[]){1, 0}, 1, 2));
  if (!quick) RUN("conv2d", case_conv2d(2, 32, 16, 16, 32, 3, 1, 1, 1, 1)); // products of K = 288
  RUN("maxpool2d", case_pool(1, 2, 3, 9, 7, 3, 2, 1));                      // stride != kernel, padding, odd sizes
  RUN("maxpool2d", case_pool(1, 2, 5, 8, 8, 2, 2, 0));                      // ResNet's stem-like, no overlap
  RUN("maxpool2d", case_pool(1, 1, 2, 6, 5, 4, 1, 2));                      // overlapping windows, padding = kernel/2
  RUN("avgpool2d", case_pool(0, 2, 3, 9, 7, 3, 2, 1));                      // padding counted (count_include_pad)
  RUN("avgpool2d", case_pool(0, 1, 2, 6, 5, 4, 1, 2));
  RUN("maxpool2d", case_pool(2, 2, 3, 6, 5, 3, 2, 0)); // ceil_mode: 3x2, not 2x2
  RUN("maxpool2d", case_pool(2, 1, 2, 5, 7, 2, 3, 1)); // ceil_mode, 5: a last window dropped
  // avgpool2d ceil_mode: last windows past the padded input, their divisor less than k k. Planted once in
  // cpu_conv.c: the divisor k k printed "avgpool2d_forward (2,3,6,5) k=3 s=2 p=0 4.78e-01 3.33e-01 FAIL"
  RUN("avgpool2d", case_pool(-1, 2, 3, 6, 5, 3, 2, 0));
  RUN("avgpool2d", case_pool(-1, 1, 2, 5, 7, 2, 3, 1));
  RUN("adaptive_avgpool2d", case_adaptive_pool(2, 3, 9, 7, 4, 3)); // uneven, overlapping windows
  RUN("adaptive_avgpool2d", case_adaptive_pool(1, 2, 2, 3, 7, 7)); // more outputs than inputs (VGG at 64)
  RUN("global_avgpool", case_global_avgpool(24, 49));
  RUN("global_avgpool", case_global_avgpool(3, quick ? 100 : 3136));
  RUN("dropout", case_dropout(quick ? 1000 : 100003, 0.1f, 0x1234567890abcdefull));
  RUN("dropout", case_dropout(77, 0.5f, 42)); // a partial last mask word
  RUN("dropout", case_dropout(64, 0.0f, 7));  // p = 0 keeps everything
  RUN("stochastic_depth", case_stochastic_depth(quick ? 16 : 256, quick ? 50 : 3136, 0.3f, 0x1234567890abcdefull));
  RUN("groupnorm", case_groupnorm(2, 8, 25, 4, 1));
  RUN("groupnorm", case_groupnorm(3, 6, 7, 6, 0)); // affine: false, one channel per group ([B, C, T])
  RUN("add_channels", case_add_channels(12, 49));
  RUN("upsample", case_upsample(6, 7, 5, 2));
  RUN("upsample", case_upsample(2, 3, 4, 3));
  RUN("timestep_embedding", case_timestep_embedding(16, 32, 1, 0.0f));       // UNet2DModel's flip, shift 0
  RUN("timestep_embedding", case_timestep_embedding(5, 9, 0, 1.0f));         // odd dim: a zero column
  RUN("conv_transpose2d", case_conv_transpose2d(2, 4, 7, 7, 3, 4, 2, 1, 0)); // 7 -> 14, the U-Net's
  RUN("conv_transpose2d", case_conv_transpose2d(1, 3, 5, 4, 2, 3, 2, 1, 1)); // output_padding
  RUN("conv_transpose2d", case_conv_transpose2d(2, 5, 3, 4, 6, 1, 1, 0, 0)); // 1x1: no scratch
  RUN("ddpm_noise", case_ddpm_noise(8, 1000, 0x1234567890abcdefull));
  RUN("adamw", case_adamw(10007));
  RUN("sgd", case_sgd(10007));
  RUN("adamw_bf16", case_adamw_bf16(10007));
  RUN("adamw_8bit", case_qmap());
  RUN("adamw_8bit", case_adamw_8bit(10007));
  RUN("adamw_8bit", case_adamw_8bit(100)); /* one partial block */
  RUN("cast", case_casts(7, -126, 127, "bf16"));
  RUN("cast", case_casts(10, -14, 15, "f16"));
  RUN("unscale", case_unscale());
  RUN("grad_sqnorm", case_grad_sqnorm());
#ifndef TEST_CPU_BACKEND
  rt_cuda_set_tf32(1);
  RUN("tf32", case_linear(64, 256, 96, TOL_TF32, " tf32"));
  RUN("tf32", case_matmul(2, 32, 128, 48, TOL_TF32, " tf32"));
  rt_cuda_set_tf32(0);
  rt_cuda_set_cublaslt(0);
  RUN("nolt", case_linear(37, 61, 53, TOL_SUM, " no-cublasLt"));
  rt_cuda_set_cublaslt(1);
  RUN("determinism", case_determinism());
#endif
  printf("%d checks, %d failed\n", checks, failures);
#ifndef TEST_CPU_BACKEND
  if (do_bench) bench();
  rt_cuda_shutdown();
  rt_cuda_free(ws);
#else
  (void)do_bench;
#endif
  return failures ? 1 : 0;
}
