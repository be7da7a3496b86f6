/* gradcheck.c: the CPU kernels of runtime/memplan_rt.h against double-precision
 * references.
 *
 * For every op a double reference forward defines L(inputs) = sum(out * R) for
 * a fixed random R (for losses, L = loss * R[0]). Central differences of L in
 * double (h = 1e-5, truncation and rounding both far below float precision)
 * give reference gradients; the float kernels must match them:
 *   - forward: kernel output vs the reference output;
 *   - backward, acc = 0, into buffers filled with NaN (so a kernel that reads
 *     an "=" output fails);
 *   - backward, acc = 1, onto random contents (expect contents + gradient);
 *   - backward with one gradient requested at a time, the others NULL.
 * Inputs are drawn as floats, so kernel and reference see the same point.
 * Then: the alias-safe in-place pairs the header lists, cheap value-level
 * forward checks, and AdamW/SGD against hand-computed steps.
 *
 * Error measure: max_i |got - want| / max(|want_i|, 1e-2 max_j |want_j|), so
 * entries near zero are judged against the tensor's scale. */
#include "memplan_rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4   /* float kernels vs double references */
#define EXACT 1e-6 /* the same kernel, in place vs out of place */

static int failures;
static double worst; /* largest error seen by a TOL check */

// ----------------------------------------------------------------------------
// harness

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "%s:%d: out of memory\n", __FILE__, __LINE__);
    exit(1);
  }
  return p;
}
#define NEW(T, n) ((T *)xmalloc((size_t)(n) * sizeof(T)))

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
/* Uniform in [-1, 1), xorshift64*. */
static float frand(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t r = rng_state * 0x2545f4914f6cdd1du;
  return (float)((double)(r >> 40) / (double)(1u << 23) - 1.0);
}

static void fill_rand(float *x, int64_t n, float amp) {
  for (int64_t i = 0; i < n; i++) x[i] = amp * frand();
}

static void fill(float *x, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) x[i] = v;
}

static double check(const char *what, const float *got, const double *want, int64_t n, double tol) {
  double mx = 0.0, err = 0.0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
  double floor = mx > 0.0 ? 1e-2 * mx : 1e-30;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor);
    if (!(e <= err)) err = e; // NaN sticks
  }
  int ok = err <= tol;
  if (!ok) failures++;
  if (tol == TOL && err > worst) worst = err;
  printf("%-4s %-44s max rel err %.2e\n", ok ? "ok" : "FAIL", what, err);
  return err;
}

static double check_f(const char *what, const float *got, const float *want, int64_t n, double tol) {
  double *w = NEW(double, n);
  for (int64_t i = 0; i < n; i++) w[i] = want[i];
  double e = check(what, got, w, n, tol);
  free(w);
  return e;
}

/* Relative error for |want| >= 1, absolute below. */
static void check_scalar(const char *what, double got, double want, double tol) {
  double err = fabs(got - want) / fmax(fabs(want), 1.0);
  int ok = err <= tol;
  if (!ok) failures++;
  printf("%-4s %-44s got %.9g want %.9g\n", ok ? "ok" : "FAIL", what, got, want);
}

// ----------------------------------------------------------------------------
// cases: an op as a reference forward, a kernel forward and a kernel backward

enum { MAXIN = 6 }; /* concat takes six */
typedef struct Case Case;
/* in[k] are the differentiable inputs; out has out_n elements (1 for losses). */
typedef void RefFn(double *out, double *const *in, const Case *c);
typedef void FwdFn(float *out, float *const *in, const Case *c);
/* din[k] may be NULL. For losses dout[0] is the scale. */
typedef void BwdFn(float *const *din, const float *dout, float *const *in, const Case *c, int acc);

struct Case {
  const char *name;
  int nin;             /* differentiable inputs */
  int64_t in_n[MAXIN]; /* elements per input */
  float amp[MAXIN];    /* inputs drawn in [-amp, amp); 0 means 1 */
  float away;          /* inputs drawn with |x| >= away (keeps relu off its kink) */
  int64_t out_n;       /* output elements */
  int64_t d[16];       /* op dims, in the header's order */
  float f;             /* the op's float attribute (layernorm's and rmsnorm's eps, rope's theta) */
  float rs[4];         /* rope's Llama 3 scaling: factor (0: none), low, high, original max positions */
  const int32_t *ids;  /* tokens or targets */
  const float *aux;    /* mse target */
  RefFn *ref;
  FwdFn *fwd;
  BwdFn *bwd;
};

static double objective(const Case *c, double *const *in, const double *R, double *out) {
  c->ref(out, in, c);
  double L = 0.0;
  for (int64_t i = 0; i < c->out_n; i++) L += out[i] * R[i];
  return L;
}

/* g[k] = dL/din[k] by central differences. */
static void fd_grads(double **g, const Case *c, double *const *in, const double *R) {
  const double h = 1e-5;
  double *out = NEW(double, c->out_n);
  for (int k = 0; k < c->nin; k++)
    for (int64_t i = 0; i < c->in_n[k]; i++) {
      double keep = in[k][i];
      in[k][i] = keep + h;
      double lp = objective(c, in, R, out);
      in[k][i] = keep - h;
      double lm = objective(c, in, R, out);
      in[k][i] = keep;
      g[k][i] = (lp - lm) / (2.0 * h);
    }
  free(out);
}

/* Runs backward with the gradients in mask, acc as given, and checks each
 * against base + fd (base = contents before the call, NaN-filled for acc = 0). */
static void check_backward(const Case *c, float *const *in, const float *dout, double *const *fd, unsigned mask,
                           int acc, const char *tag) {
  float *din[MAXIN] = {0};
  float *base[MAXIN] = {0};
  for (int k = 0; k < c->nin; k++) {
    if (!(mask & (1u << k))) continue;
    din[k] = NEW(float, c->in_n[k]);
    base[k] = NEW(float, c->in_n[k]);
    if (acc) fill_rand(base[k], c->in_n[k], 1.0f);
    else fill(base[k], c->in_n[k], NAN);
    memcpy(din[k], base[k], (size_t)c->in_n[k] * sizeof(float));
  }
  c->bwd(din, dout, in, c, acc);
  for (int k = 0; k < c->nin; k++) {
    if (!din[k]) continue;
    double *want = NEW(double, c->in_n[k]);
    for (int64_t i = 0; i < c->in_n[k]; i++) want[i] = fd[k][i] + (acc ? (double)base[k][i] : 0.0);
    char what[96];
    snprintf(what, sizeof what, "%s d%d %s", c->name, k, tag);
    check(what, din[k], want, c->in_n[k], TOL);
    free(want);
    free(din[k]);
    free(base[k]);
  }
}

static void run_case(const Case *c) {
  float *in[MAXIN] = {0};
  double *ind[MAXIN] = {0}, *fd[MAXIN] = {0};
  for (int k = 0; k < c->nin; k++) {
    in[k] = NEW(float, c->in_n[k]);
    ind[k] = NEW(double, c->in_n[k]);
    fd[k] = NEW(double, c->in_n[k]);
    fill_rand(in[k], c->in_n[k], c->amp[k] > 0 ? c->amp[k] : 1.0f);
    for (int64_t i = 0; i < c->in_n[k]; i++) {
      if (c->away > 0 && fabsf(in[k][i]) < c->away) in[k][i] = in[k][i] < 0 ? in[k][i] - c->away : in[k][i] + c->away;
      ind[k][i] = in[k][i];
    }
  }
  float *Rf = NEW(float, c->out_n), *out = NEW(float, c->out_n);
  double *R = NEW(double, c->out_n), *want = NEW(double, c->out_n);
  fill_rand(Rf, c->out_n, 1.0f);
  if (c->out_n == 1) Rf[0] = 2.5f; // the loss scale
  for (int64_t i = 0; i < c->out_n; i++) R[i] = Rf[i];

  char what[96];
  c->ref(want, ind, c);
  fill(out, c->out_n, NAN);
  c->fwd(out, in, c);
  snprintf(what, sizeof what, "%s forward", c->name);
  check(what, out, want, c->out_n, TOL);

  fd_grads(fd, c, ind, R);
  unsigned all = (1u << c->nin) - 1;
  check_backward(c, in, Rf, fd, all, 0, "acc=0");
  check_backward(c, in, Rf, fd, all, 1, "acc=1");
  if (c->nin > 1)
    for (int k = 0; k < c->nin; k++) {
      check_backward(c, in, Rf, fd, 1u << k, 0, "alone acc=0");
      check_backward(c, in, Rf, fd, 1u << k, 1, "alone acc=1");
    }

  for (int k = 0; k < c->nin; k++) {
    free(in[k]);
    free(ind[k]);
    free(fd[k]);
  }
  free(Rf);
  free(out);
  free(R);
  free(want);
}

// ----------------------------------------------------------------------------
// linear: d = M K N; inputs x W [b]

static void ref_linear(double *out, double *const *in, const Case *c) {
  int64_t M = c->d[0], K = c->d[1], N = c->d[2];
  for (int64_t i = 0; i < M; i++)
    for (int64_t n = 0; n < N; n++) {
      double s = c->nin > 2 ? in[2][n] : 0.0;
      for (int64_t k = 0; k < K; k++) s += in[0][i * K + k] * in[1][n * K + k];
      out[i * N + n] = s;
    }
}
static void fwd_linear(float *out, float *const *in, const Case *c) {
  rt_linear_forward(out, in[0], in[1], c->nin > 2 ? in[2] : NULL, c->d[0], c->d[1], c->d[2]);
}
static void bwd_linear(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_linear_backward(din[0], din[1], c->nin > 2 ? din[2] : NULL, dout, in[0], in[1], c->d[0], c->d[1], c->d[2], acc,
                     acc, acc);
}
static void case_linear(const char *name, int64_t M, int64_t K, int64_t N, int bias) {
  Case c = {.name = name,
            .nin = bias ? 3 : 2,
            .in_n = {M * K, N * K, N},
            .out_n = M * N,
            .d = {M, K, N},
            .ref = ref_linear,
            .fwd = fwd_linear,
            .bwd = bwd_linear};
  run_case(&c);
}

// ----------------------------------------------------------------------------
// matmul: d = Bt M K N; inputs a b

static void ref_matmul(double *out, double *const *in, const Case *c) {
  int64_t Bt = c->d[0], M = c->d[1], K = c->d[2], N = c->d[3];
  for (int64_t t = 0; t < Bt; t++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t n = 0; n < N; n++) {
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) s += in[0][(t * M + i) * K + k] * in[1][(t * K + k) * N + n];
        out[(t * M + i) * N + n] = s;
      }
}
static void fwd_matmul(float *out, float *const *in, const Case *c) {
  rt_matmul_forward(out, in[0], in[1], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static void bwd_matmul(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_matmul_backward(din[0], din[1], dout, in[0], in[1], c->d[0], c->d[1], c->d[2], c->d[3], acc, acc);
}

// ----------------------------------------------------------------------------
// element-wise: add, mul (a b), relu, gelu, silu (x); d = n

static void ref_add(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i] + in[1][i];
}
static void fwd_add(float *out, float *const *in, const Case *c) { rt_add_forward(out, in[0], in[1], c->d[0]); }
static void bwd_add(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_add_backward(din[0], din[1], dout, c->d[0], acc, acc);
}

static void ref_mul(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i] * in[1][i];
}
static void fwd_mul(float *out, float *const *in, const Case *c) { rt_mul_forward(out, in[0], in[1], c->d[0]); }
static void bwd_mul(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_mul_backward(din[0], din[1], dout, in[0], in[1], c->d[0], acc, acc);
}
/* mul(x, x): the same tensor in both slots, so one gradient buffer for da and
 * db, written fresh by da (acc as given) and accumulated by db. */
static void ref_mul_self(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i] * in[0][i];
}
static void fwd_mul_self(float *out, float *const *in, const Case *c) { rt_mul_forward(out, in[0], in[0], c->d[0]); }
static void bwd_mul_self(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_mul_backward(din[0], din[0], dout, in[0], in[0], c->d[0], acc, 1);
}

static void ref_relu(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i] > 0 ? in[0][i] : 0.0;
}
static void fwd_relu(float *out, float *const *in, const Case *c) { rt_relu_forward(out, in[0], c->d[0]); }
static void bwd_relu(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  float *out = NEW(float, c->d[0]);
  rt_relu_forward(out, in[0], c->d[0]);
  rt_relu_backward(din[0], dout, out, c->d[0], acc);
  free(out);
}

static void ref_relu6(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = fmin(fmax(in[0][i], 0.0), 6.0);
}
static void fwd_relu6(float *out, float *const *in, const Case *c) { rt_relu6_forward(out, in[0], c->d[0]); }
static void bwd_relu6(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  float *out = NEW(float, c->d[0]);
  rt_relu6_forward(out, in[0], c->d[0]);
  rt_relu6_backward(din[0], dout, out, c->d[0], acc);
  free(out);
}

static void ref_sigmoid(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = 1.0 / (1.0 + exp(-in[0][i]));
}
static void fwd_sigmoid(float *out, float *const *in, const Case *c) { rt_sigmoid_forward(out, in[0], c->d[0]); }
static void bwd_sigmoid(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  float *out = NEW(float, c->d[0]);
  rt_sigmoid_forward(out, in[0], c->d[0]);
  rt_sigmoid_backward(din[0], dout, out, c->d[0], acc);
  free(out);
}

static double ref_hardsigmoid1(double x) { return fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0; }
static void ref_hardswish(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i] * ref_hardsigmoid1(in[0][i]);
}
static void fwd_hardswish(float *out, float *const *in, const Case *c) { rt_hardswish_forward(out, in[0], c->d[0]); }
static void bwd_hardswish(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_hardswish_backward(din[0], dout, in[0], c->d[0], acc);
}

static void ref_hardsigmoid(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = ref_hardsigmoid1(in[0][i]);
}
static void fwd_hardsigmoid(float *out, float *const *in, const Case *c) {
  rt_hardsigmoid_forward(out, in[0], c->d[0]);
}
static void bwd_hardsigmoid(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_hardsigmoid_backward(din[0], dout, in[0], c->d[0], acc);
}

/* d = NC, S: x [NC, S], s [NC] */
static void ref_scale_channels(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0] * c->d[1]; i++) out[i] = in[0][i] * in[1][i / c->d[1]];
}
static void fwd_scale_channels(float *out, float *const *in, const Case *c) {
  rt_scale_channels_forward(out, in[0], in[1], c->d[0], c->d[1]);
}
static void bwd_scale_channels(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_scale_channels_backward(din[0], din[1], dout, in[0], in[1], c->d[0], c->d[1], acc, acc);
}

/* d = N, C, S: x [N, C, S], w [C] */
static void ref_layer_scale(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0] * c->d[1] * c->d[2]; i++) out[i] = in[0][i] * in[1][i / c->d[2] % c->d[1]];
}
static void fwd_layer_scale(float *out, float *const *in, const Case *c) {
  rt_layer_scale_forward(out, in[0], in[1], c->d[0], c->d[1], c->d[2]);
}
static void bwd_layer_scale(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_layer_scale_backward(din[0], din[1], dout, in[0], in[1], c->d[0], c->d[1], c->d[2], acc, acc);
}

/* d = n, approximate (1 tanh, 0 exact erf). */
static double gelu_d(double x, int64_t approximate) {
  const double s = sqrt(2.0 / acos(-1.0));
  if (!approximate) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  return 0.5 * x * (1.0 + tanh(s * (x + 0.044715 * x * x * x)));
}
static void ref_gelu(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = gelu_d(in[0][i], c->d[1]);
}
static void fwd_gelu(float *out, float *const *in, const Case *c) {
  rt_gelu_forward(out, in[0], c->d[0], (int)c->d[1]);
}
static void bwd_gelu(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_gelu_backward(din[0], dout, in[0], c->d[0], (int)c->d[1], acc);
}

static void ref_scale(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = (double)c->f * in[0][i];
}
static void fwd_scale(float *out, float *const *in, const Case *c) { rt_scale_forward(out, in[0], c->d[0], c->f); }
static void bwd_scale(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_scale_backward(din[0], dout, c->d[0], c->f, acc);
}

static void ref_silu(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i] / (1.0 + exp(-in[0][i]));
}
static void fwd_silu(float *out, float *const *in, const Case *c) { rt_silu_forward(out, in[0], c->d[0]); }
static void bwd_silu(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_silu_backward(din[0], dout, in[0], c->d[0], acc);
}

// ----------------------------------------------------------------------------
// layernorm (x w [b]), softmax (x); d = N C, f = eps (layernorm); nin 2 is bias: false

static void ref_layernorm(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], C = c->d[1];
  for (int64_t i = 0; i < N; i++) {
    const double *x = in[0] + i * C;
    double m = 0.0, v = 0.0;
    for (int64_t j = 0; j < C; j++) m += x[j];
    m /= (double)C;
    for (int64_t j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
    double r = 1.0 / sqrt(v / (double)C + (double)c->f);
    for (int64_t j = 0; j < C; j++) out[i * C + j] = (x[j] - m) * r * in[1][j] + (c->nin > 2 ? in[2][j] : 0.0);
  }
}
static void fwd_layernorm(float *out, float *const *in, const Case *c) {
  rt_layernorm_forward(out, NULL, NULL, in[0], in[1], c->nin > 2 ? in[2] : NULL, c->d[0], c->d[1], c->f);
}
static void bwd_layernorm(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  int64_t N = c->d[0], C = c->d[1];
  float *out = NEW(float, N *C), *mean = NEW(float, N), *rstd = NEW(float, N);
  const float *b = c->nin > 2 ? in[2] : NULL;
  float *db = c->nin > 2 ? din[2] : NULL;
  rt_layernorm_forward(out, mean, rstd, in[0], in[1], b, N, C, c->f);
  rt_layernorm_backward(din[0], din[1], db, dout, in[0], in[1], mean, rstd, N, C, c->f, acc, acc, acc);
  free(out);
  free(mean);
  free(rstd);
}

// rmsnorm (x w); d = N C, f = eps

static void ref_rmsnorm(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], C = c->d[1];
  for (int64_t i = 0; i < N; i++) {
    const double *x = in[0] + i * C;
    double ms = 0.0;
    for (int64_t j = 0; j < C; j++) ms += x[j] * x[j];
    double r = 1.0 / sqrt(ms / (double)C + (double)c->f);
    for (int64_t j = 0; j < C; j++) out[i * C + j] = x[j] * r * in[1][j];
  }
}
static void fwd_rmsnorm(float *out, float *const *in, const Case *c) {
  rt_rmsnorm_forward(out, NULL, in[0], in[1], c->d[0], c->d[1], c->f);
}
static void bwd_rmsnorm(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  int64_t N = c->d[0], C = c->d[1];
  float *out = NEW(float, N *C), *rstd = NEW(float, N);
  rt_rmsnorm_forward(out, rstd, in[0], in[1], N, C, c->f);
  rt_rmsnorm_backward(din[0], din[1], dout, in[0], in[1], rstd, N, C, c->f, acc, acc);
  free(out);
  free(rstd);
}

static void ref_softmax_rows(double *out, const double *x, int64_t N, int64_t C) {
  for (int64_t i = 0; i < N; i++) {
    double mx = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < C; j++) mx = fmax(mx, x[i * C + j]);
    for (int64_t j = 0; j < C; j++) s += out[i * C + j] = exp(x[i * C + j] - mx);
    for (int64_t j = 0; j < C; j++) out[i * C + j] /= s;
  }
}
static void ref_softmax(double *out, double *const *in, const Case *c) {
  ref_softmax_rows(out, in[0], c->d[0], c->d[1]);
}
static void fwd_softmax(float *out, float *const *in, const Case *c) {
  rt_softmax_forward(out, in[0], c->d[0], c->d[1]);
}
static void bwd_softmax(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  float *out = NEW(float, c->d[0] * c->d[1]);
  rt_softmax_forward(out, in[0], c->d[0], c->d[1]);
  rt_softmax_backward(din[0], dout, out, c->d[0], c->d[1], acc);
  free(out);
}

// ----------------------------------------------------------------------------
// attention (qkv); d = B T C NH KVH causal

/* Channels of one position of qkv: C (q) + 2 KVH hs (k, v). */
static int64_t att_c3(const int64_t *d) { return d[2] + 2 * d[4] * (d[2] / d[3]); }

static void ref_attention(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3], KVH = c->d[4], causal = c->d[5], hs = C / NH;
  int64_t C3 = att_c3(c->d), KC = KVH * hs;
  double *p = NEW(double, T);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        // query head h reads kv head h / (NH / KVH), PyTorch's repeat_interleave of k and v
        int64_t kc = C + h / (NH / KVH) * hs, n = causal ? t + 1 : T;
        const double *q = in[0] + (b * T + t) * C3 + h * hs;
        for (int64_t t2 = 0; t2 < n; t2++) {
          const double *k = in[0] + (b * T + t2) * C3 + kc;
          double s = 0.0;
          for (int64_t i = 0; i < hs; i++) s += q[i] * k[i];
          p[t2] = s / sqrt((double)hs);
        }
        ref_softmax_rows(p, p, 1, n);
        for (int64_t i = 0; i < hs; i++) {
          double s = 0.0;
          for (int64_t t2 = 0; t2 < n; t2++) s += p[t2] * in[0][(b * T + t2) * C3 + kc + KC + i];
          out[(b * T + t) * C + h * hs + i] = s;
        }
      }
  free(p);
}
static void fwd_attention(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  float *lse = NEW(float, d[0] * d[3] * d[1]);
  rt_attention_forward(out, lse, in[0], d[0], d[1], d[2], d[3], d[4], d[5]);
  free(lse);
}
static void bwd_attention(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  int64_t B = d[0], T = d[1], C = d[2], NH = d[3];
  float *out = NEW(float, B *T *C), *lse = NEW(float, B *NH *T);
  fill(out, B * T * C, NAN); // forward must write every output and statistic
  fill(lse, B * NH * T, NAN);
  rt_attention_forward(out, lse, in[0], B, T, C, NH, d[4], d[5]);
  rt_attention_backward(din[0], dout, in[0], out, lse, B, T, C, NH, d[4], d[5], acc);
  free(out);
  free(lse);
}

// ----------------------------------------------------------------------------
// cross_attention (q, kv); d = B Tq Tk C NH

static void ref_cross_attention(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], Tq = c->d[1], Tk = c->d[2], C = c->d[3], NH = c->d[4], hs = C / NH;
  double *p = NEW(double, Tk);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < Tq; t++) {
        const double *q = in[0] + (b * Tq + t) * C + h * hs, *k = in[1] + b * Tk * 2 * C + h * hs;
        for (int64_t s = 0; s < Tk; s++) {
          double sc = 0.0;
          for (int64_t i = 0; i < hs; i++) sc += q[i] * k[s * 2 * C + i];
          p[s] = sc / sqrt((double)hs);
        }
        ref_softmax_rows(p, p, 1, Tk);
        for (int64_t i = 0; i < hs; i++) {
          double sum = 0.0;
          for (int64_t s = 0; s < Tk; s++) sum += p[s] * k[s * 2 * C + C + i];
          out[(b * Tq + t) * C + h * hs + i] = sum;
        }
      }
  free(p);
}
static void fwd_cross_attention(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  float *lse = NEW(float, d[0] * d[4] * d[1]);
  rt_cross_attention_forward(out, lse, in[0], in[1], d[0], d[1], d[2], d[3], d[4]);
  free(lse);
}
static void bwd_cross_attention(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  int64_t B = d[0], Tq = d[1], C = d[3], NH = d[4];
  float *out = NEW(float, B *Tq *C), *lse = NEW(float, B *NH *Tq);
  fill(out, B * Tq * C, NAN); // forward must write every output and statistic
  fill(lse, B * NH * Tq, NAN);
  rt_cross_attention_forward(out, lse, in[0], in[1], B, Tq, d[2], C, NH);
  rt_cross_attention_backward(din[0], din[1], dout, in[0], in[1], out, lse, B, Tq, d[2], C, NH, acc, acc);
  free(out);
  free(lse);
}

// ----------------------------------------------------------------------------
// embedding (W; tokens in ids), d = N C V; position embedding (W), d = B T C Wrows

static void ref_embedding(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], C = c->d[1];
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < C; j++) out[i * C + j] = in[0][c->ids[i] * C + j];
}
static void fwd_embedding(float *out, float *const *in, const Case *c) {
  rt_embedding_forward(out, c->ids, in[0], c->d[0], c->d[1], c->d[2]);
}
static void bwd_embedding(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_embedding_backward(din[0], dout, c->ids, c->d[0], c->d[1], c->d[2], acc);
}

static void ref_posemb(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], T = c->d[1], C = c->d[2];
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t j = 0; j < C; j++) out[(b * T + t) * C + j] = in[0][t * C + j];
}
static void fwd_posemb(float *out, float *const *in, const Case *c) {
  rt_position_embedding_forward(out, in[0], c->d[0], c->d[1], c->d[2]);
}
static void bwd_posemb(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_position_embedding_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->d[3], acc);
}

// ----------------------------------------------------------------------------
// rope (qkv); d = B T H KV hd, f = theta, rs = Llama 3's scaling (factor, low, high, original max positions)

/* Hugging Face's _compute_llama3_parameters for frequency i (rs[0] 0: unscaled). */
static double llama3_freq(double theta, int64_t i, int64_t hd, const float *rs) {
  double inv = 1.0 / pow(theta, (double)(2 * i) / (double)hd);
  if (rs[0] == 0) return inv;
  double low_wl = rs[3] / rs[1], high_wl = rs[3] / rs[2], wl = 2 * 3.14159265358979323846 / inv;
  double scaled = wl > low_wl ? inv / rs[0] : inv;
  double smooth = (rs[3] / wl - rs[1]) / (rs[2] - rs[1]);
  int medium = !(wl < high_wl) && !(wl > low_wl);
  return medium ? (1 - smooth) * scaled / rs[0] + smooth * scaled : scaled;
}

static void ref_rope(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], T = c->d[1], nr = c->d[2] + c->d[3], KV = c->d[3], hd = c->d[4], h2 = hd / 2;
  int64_t W = (nr + KV) * hd;
  const double *x = in[0];
  for (int64_t r = 0; r < B * T; r++)
    for (int64_t h = 0; h < nr + KV; h++)
      for (int64_t i = 0; i < h2; i++) {
        int64_t k = r * W + h * hd + i;
        if (h >= nr) { // v
          out[k] = x[k];
          out[k + h2] = x[k + h2];
          continue;
        }
        double a = (double)(r % T) * llama3_freq(c->f, i, hd, c->rs);
        out[k] = x[k] * cos(a) - x[k + h2] * sin(a); // rotate_half: (x1, x2) -> (-x2, x1)
        out[k + h2] = x[k + h2] * cos(a) + x[k] * sin(a);
      }
}
static void fwd_rope(float *out, float *const *in, const Case *c) {
  rt_rope_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->d[3], c->d[4], c->f, c->rs[0], c->rs[1], c->rs[2],
                  c->rs[3]);
}
static void bwd_rope(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_rope_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->d[3], c->d[4], c->f, c->rs[0], c->rs[1], c->rs[2],
                   c->rs[3], acc);
}

// ----------------------------------------------------------------------------
// losses: cross-entropy (logits; targets in ids), d = N V;
// mse (pred; target in aux), d = n

static void ref_cross_entropy(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], V = c->d[1];
  double total = 0.0;
  for (int64_t i = 0; i < N; i++) {
    const double *l = in[0] + i * V;
    double mx = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < V; j++) mx = fmax(mx, l[j]);
    for (int64_t j = 0; j < V; j++) s += exp(l[j] - mx);
    total += mx + log(s) - l[c->ids[i]];
  }
  out[0] = total / (double)N;
}
static void fwd_cross_entropy(float *out, float *const *in, const Case *c) {
  rt_cross_entropy_forward(out, NULL, in[0], c->ids, c->d[0], c->d[1]);
}
static void bwd_cross_entropy(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  float loss, *lse = NEW(float, c->d[0]);
  rt_cross_entropy_forward(&loss, lse, in[0], c->ids, c->d[0], c->d[1]);
  rt_cross_entropy_backward(din[0], in[0], c->ids, lse, c->d[0], c->d[1], dout[0], acc);
  free(lse);
}

static void ref_mse(double *out, double *const *in, const Case *c) {
  double s = 0.0;
  for (int64_t i = 0; i < c->d[0]; i++) {
    double e = in[0][i] - c->aux[i];
    s += e * e;
  }
  out[0] = s / (double)c->d[0];
}
static void fwd_mse(float *out, float *const *in, const Case *c) { rt_mse_forward(out, in[0], c->aux, c->d[0]); }
static void bwd_mse(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_mse_backward(din[0], in[0], c->aux, c->d[0], dout[0], acc);
}

// ----------------------------------------------------------------------------
// conv2d (x W [b]); d = N C H W O Ho Wo kh kw sh sw ph pw dilation groups (kernel, stride, padding: height then
// width); nin 2 is bias: false

static int64_t conv_scratch_n(const int64_t *d) {
  int direct = d[7] == 1 && d[8] == 1 && d[9] == 1 && d[10] == 1 && d[11] == 0 && d[12] == 0;
  return direct ? 0 : d[1] * d[7] * d[8] * d[5] * d[6];
}
/* The input pixel kernel tap (ki, kj) meets at output (oh, ow), or -1 in the padding. */
static int64_t conv_src(const int64_t *d, int64_t oh, int64_t ow, int64_t ki, int64_t kj) {
  int64_t ih = oh * d[9] - d[11] + ki * d[13], iw = ow * d[10] - d[12] + kj * d[13];
  return ih < 0 || ih >= d[2] || iw < 0 || iw >= d[3] ? -1 : ih * d[3] + iw;
}
static void ref_conv2d(double *out, double *const *in, const Case *c) {
  const int64_t *d = c->d;
  int64_t N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], Ho = d[5], Wo = d[6], kh = d[7], kw = d[8], G = d[14];
  int64_t Cg = C / G, Og = O / G;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) {
          double s = c->nin > 2 ? in[2][o] : 0.0;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < kh; ki++)
              for (int64_t kj = 0; kj < kw; kj++) {
                int64_t src = conv_src(d, oh, ow, ki, kj), ch = o / Og * Cg + ci;
                if (src >= 0) s += in[0][(n * C + ch) * H * W + src] * in[1][((o * Cg + ci) * kh + ki) * kw + kj];
              }
          out[((n * O + o) * Ho + oh) * Wo + ow] = s;
        }
}
/* Scratch as the plan gives it: the size the op table asks for, garbage on entry. */
static float *conv_scratch(const Case *c) {
  int64_t n = conv_scratch_n(c->d);
  if (!n) return NULL;
  float *s = NEW(float, n);
  fill(s, n, NAN);
  return s;
}
static void fwd_conv2d(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  float *s = conv_scratch(c);
  rt_conv2d_forward(out, in[0], in[1], c->nin > 2 ? in[2] : NULL, s, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
                    d[8], d[9], d[10], d[11], d[12], d[13], d[14]);
  free(s);
}
static void bwd_conv2d(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  float *s = conv_scratch(c);
  rt_conv2d_backward(din[0], din[1], c->nin > 2 ? din[2] : NULL, dout, in[0], in[1], s, d[0], d[1], d[2], d[3], d[4],
                     d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], acc, acc, acc);
  free(s);
}
/* k, s, p: {height, width} */
static void case_conv2d_hw(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, const int64_t *k,
                           const int64_t *s, const int64_t *p, int64_t dil, int64_t G, int bias) {
  int64_t Ho = (H + 2 * p[0] - dil * (k[0] - 1) - 1) / s[0] + 1, Wo = (W + 2 * p[1] - dil * (k[1] - 1) - 1) / s[1] + 1;
  Case c = {.name = name,
            .nin = bias ? 3 : 2,
            .in_n = {N * C * H * W, O * (C / G) * k[0] * k[1], O},
            .out_n = N * O * Ho * Wo,
            .d = {N, C, H, W, O, Ho, Wo, k[0], k[1], s[0], s[1], p[0], p[1], dil, G},
            .ref = ref_conv2d,
            .fwd = fwd_conv2d,
            .bwd = bwd_conv2d};
  run_case(&c);
}
static void case_conv2d(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int64_t s,
                        int64_t p, int64_t dil, int64_t G, int bias) {
  case_conv2d_hw(name, N, C, H, W, O, (int64_t[]){k, k}, (int64_t[]){s, s}, (int64_t[]){p, p}, dil, G, bias);
}

/* Layers big enough for the parallel paths (im2col and col2im over the
 * pool, products split, depthwise groups one per task), too big for finite
 * differences: forward and the analytic gradients in double, acc = 1 onto
 * random contents. */
static void values_conv2d_case(const char *name, const int64_t *d) {
  int64_t N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], Ho = d[5], Wo = d[6], kh = d[7], kw = d[8], G = d[14];
  int64_t Cg = C / G, Og = O / G, nx = N * C * H * W, nw = O * Cg * kh * kw, ny = N * O * Ho * Wo;
  float *x = NEW(float, nx), *w = NEW(float, nw), *b = NEW(float, O), *dy = NEW(float, ny), *y = NEW(float, ny);
  float *dx = NEW(float, nx), *dw = NEW(float, nw), *db = NEW(float, O);
  double *ry = NEW(double, ny), *rdx = NEW(double, nx), *rdw = NEW(double, nw), *rdb = NEW(double, O);
  fill_rand(x, nx, 1.0f), fill_rand(w, nw, 0.5f), fill_rand(b, O, 1.0f), fill_rand(dy, ny, 1.0f);
  fill_rand(dx, nx, 1.0f), fill_rand(dw, nw, 1.0f), fill_rand(db, O, 1.0f);
  for (int64_t i = 0; i < nx; i++) rdx[i] = dx[i];
  for (int64_t i = 0; i < nw; i++) rdw[i] = dw[i];
  for (int64_t i = 0; i < O; i++) rdb[i] = db[i];
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) {
          int64_t yi = ((n * O + o) * Ho + oh) * Wo + ow;
          double s = b[o], g = dy[yi];
          rdb[o] += g;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < kh; ki++)
              for (int64_t kj = 0; kj < kw; kj++) {
                int64_t src = conv_src(d, oh, ow, ki, kj), wi = ((o * Cg + ci) * kh + ki) * kw + kj;
                if (src < 0) continue;
                int64_t xi = (n * C + o / Og * Cg + ci) * H * W + src;
                s += (double)x[xi] * w[wi];
                rdx[xi] += g * w[wi];
                rdw[wi] += g * x[xi];
              }
          ry[yi] = s;
        }
  float *scr = NEW(float, conv_scratch_n(d) + 1);
  fill(scr, conv_scratch_n(d) + 1, NAN);
  char what[96];
  rt_conv2d_forward(y, x, w, b, scr, N, C, H, W, O, Ho, Wo, kh, kw, d[9], d[10], d[11], d[12], d[13], G);
  snprintf(what, sizeof what, "%s forward", name);
  check(what, y, ry, ny, TOL);
  rt_conv2d_backward(dx, dw, db, dy, x, w, scr, N, C, H, W, O, Ho, Wo, kh, kw, d[9], d[10], d[11], d[12], d[13], G, 1,
                     1, 1);
  snprintf(what, sizeof what, "%s dx acc=1", name);
  check(what, dx, rdx, nx, TOL);
  snprintf(what, sizeof what, "%s dW acc=1", name);
  check(what, dw, rdw, nw, TOL);
  snprintf(what, sizeof what, "%s db acc=1", name);
  check(what, db, rdb, O, TOL);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
  free(ry), free(rdx), free(rdw), free(rdb), free(scr);
}

static void values_conv2d(void) {
  values_conv2d_case("conv2d 16x16 3x3 C8 O16 (parallel)",
                     (int64_t[]){2, 8, 16, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1});
  values_conv2d_case("conv2d depthwise C32 32x32 (groups per task)",
                     (int64_t[]){2, 32, 32, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, 1, 32});
  values_conv2d_case("conv2d 16x16 1x7 C8 O16 (inception_v3's, parallel)",
                     (int64_t[]){2, 8, 16, 16, 16, 16, 16, 1, 7, 1, 1, 0, 3, 1, 1});
}

// ----------------------------------------------------------------------------
// batchnorm2d (x w b); d = N C S (S = H W, 1 for [N, C]), f = eps; train mode
// (batch statistics): the gradient the plan's backward computes

static void ref_batchnorm(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], C = c->d[1], S = c->d[2], M = N * S;
  for (int64_t ch = 0; ch < C; ch++) {
    double m = 0.0, v = 0.0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < S; k++) m += in[0][(n * C + ch) * S + k];
    m /= (double)M;
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < S; k++) v += pow(in[0][(n * C + ch) * S + k] - m, 2);
    double r = 1.0 / sqrt(v / (double)M + (double)c->f);
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < S; k++) {
        int64_t i = (n * C + ch) * S + k;
        out[i] = (in[0][i] - m) * r * in[1][ch] + in[2][ch];
      }
  }
}
/* Training forward on fresh running statistics (zeros, ones), a momentum of 0.1. */
static void fwd_batchnorm(float *out, float *const *in, const Case *c) {
  int64_t C = c->d[1];
  float *rm = NEW(float, C), *rv = NEW(float, C);
  fill(rm, C, 0.0f);
  fill(rv, C, 1.0f);
  rt_batchnorm2d_forward(out, NULL, NULL, in[0], in[1], in[2], rm, rv, c->d[0], C, c->d[2], c->f, 0.1f, RT_MODE_TRAIN,
                         7);
  free(rm);
  free(rv);
}
static void bwd_batchnorm(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  int64_t N = c->d[0], C = c->d[1], S = c->d[2];
  float *out = NEW(float, N *C *S), *mean = NEW(float, C), *rstd = NEW(float, C), *rm = NEW(float, C),
        *rv = NEW(float, C);
  fill(rm, C, 0.0f);
  fill(rv, C, 1.0f);
  rt_batchnorm2d_forward(out, mean, rstd, in[0], in[1], in[2], rm, rv, N, C, S, c->f, 0.1f, RT_MODE_TRAIN, 7);
  rt_batchnorm2d_backward(din[0], din[1], din[2], dout, in[0], in[1], mean, rstd, N, C, S, c->f, 0.1f, RT_MODE_TRAIN, 7,
                          acc, acc, acc);
  free(out);
  free(mean);
  free(rstd);
  free(rm);
  free(rv);
}

/* The modes against double arithmetic on one [N, C, H, W] batch: training
 * updates the running statistics with momentum and the unbiased variance
 * and saves the batch statistics; a recompute gives the same output and
 * statistics and leaves the running ones alone; eval normalizes with the
 * running ones and saves nothing. */
static void values_batchnorm(void) {
  enum { N = 3, C = 5, S = 4, M = N * S };
  const float mom = 0.25f, eps = 1e-3f;
  float x[N * C * S], w[C], b[C], rm[C], rv[C], out[N * C * S], out2[N * C * S], mean[C], rstd[C], mean2[C], rstd2[C];
  fill_rand(x, N * C * S, 2.0f);
  fill_rand(w, C, 1.0f);
  fill_rand(b, C, 1.0f);
  fill_rand(rm, C, 0.5f);
  for (int c = 0; c < C; c++) rv[c] = 0.5f + 0.1f * (float)c;
  float rm0[C], rv0[C];
  memcpy(rm0, rm, sizeof rm);
  memcpy(rv0, rv, sizeof rv);
  double want_rm[C], want_rv[C], want_eval[N * C * S];
  for (int c = 0; c < C; c++) {
    double m = 0.0, v = 0.0;
    for (int n = 0; n < N; n++)
      for (int k = 0; k < S; k++) m += x[(n * C + c) * S + k];
    m /= M;
    for (int n = 0; n < N; n++)
      for (int k = 0; k < S; k++) v += pow(x[(n * C + c) * S + k] - m, 2);
    want_rm[c] = (1.0 - mom) * rm0[c] + mom * m;
    want_rv[c] = (1.0 - mom) * rv0[c] + mom * v / (M - 1); /* unbiased, as torch */
  }
  rt_batchnorm2d_forward(out, mean, rstd, x, w, b, rm, rv, N, C, S, eps, mom, RT_MODE_TRAIN, 1);
  check("batchnorm2d train: running_mean (momentum)", rm, want_rm, C, TOL);
  check("batchnorm2d train: running_var (unbiased)", rv, want_rv, C, TOL);
  float rm1[C], rv1[C];
  memcpy(rm1, rm, sizeof rm);
  memcpy(rv1, rv, sizeof rv);
  fill(out2, N * C * S, NAN);
  rt_batchnorm2d_forward(out2, mean2, rstd2, x, w, b, rm, rv, N, C, S, eps, mom, RT_MODE_RECOMPUTE, 1);
  check_f("batchnorm2d recompute: out as in training", out2, out, N * C * S, EXACT);
  check_f("batchnorm2d recompute: saved mean as in training", mean2, mean, C, EXACT);
  check_f("batchnorm2d recompute: saved rstd as in training", rstd2, rstd, C, EXACT);
  check_f("batchnorm2d recompute: running_mean untouched", rm, rm1, C, 0.0);
  check_f("batchnorm2d recompute: running_var untouched", rv, rv1, C, 0.0);
  for (int c = 0; c < C; c++)
    for (int n = 0; n < N; n++)
      for (int k = 0; k < S; k++) {
        int i = (n * C + c) * S + k;
        want_eval[i] = (x[i] - (double)rm[c]) / sqrt((double)rv[c] + eps) * w[c] + b[c];
      }
  fill(out2, N * C * S, NAN);
  rt_batchnorm2d_forward(out2, NULL, NULL, x, w, b, rm, rv, N, C, S, eps, mom, RT_MODE_EVAL, 0);
  check("batchnorm2d eval: the running statistics normalize", out2, want_eval, N * C * S, TOL);
  check_f("batchnorm2d eval: running_mean untouched", rm, rm1, C, 0.0);
  check_f("batchnorm2d eval: running_var untouched", rv, rv1, C, 0.0);
}

// ----------------------------------------------------------------------------
// pooling (x); d = N C H W Ho Wo k s p (global_avgpool: NC HW)

/* torch's first maximum of a window, in double (the same float values) */
static int64_t ref_pool_argmax(const double *x, const int64_t *d, int64_t ho, int64_t wo) {
  int64_t H = d[2], W = d[3], k = d[6], s = d[7], p = d[8], best = -1;
  for (int64_t h = ho * s - p; h < ho * s - p + k; h++)
    for (int64_t w = wo * s - p; w < wo * s - p + k; w++)
      if (h >= 0 && h < H && w >= 0 && w < W && (best < 0 || x[h * W + w] > x[best])) best = h * W + w;
  return best;
}
static void ref_maxpool(double *out, double *const *in, const Case *c) {
  const int64_t *d = c->d;
  for (int64_t pl = 0; pl < d[0] * d[1]; pl++)
    for (int64_t i = 0; i < d[4] * d[5]; i++)
      out[pl * d[4] * d[5] + i] =
          in[0][pl * d[2] * d[3] + ref_pool_argmax(in[0] + pl * d[2] * d[3], d, i / d[5], i % d[5])];
}
static void fwd_maxpool(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  rt_maxpool2d_forward(out, in[0], d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]);
}
static void bwd_maxpool(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  rt_maxpool2d_backward(din[0], dout, in[0], d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], acc);
}
/* zero padding counted in the divisor (count_include_pad): k k, but for a window past the padded input (ceil_mode)
 * its pixels within it */
static void ref_avgpool(double *out, double *const *in, const Case *c) {
  const int64_t *d = c->d;
  int64_t H = d[2], W = d[3], Ho = d[4], Wo = d[5], k = d[6], s = d[7], p = d[8];
  for (int64_t pl = 0; pl < d[0] * d[1]; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++) {
      double sum = 0.0;
      for (int64_t h = i / Wo * s - p; h < i / Wo * s - p + k; h++)
        for (int64_t w = i % Wo * s - p; w < i % Wo * s - p + k; w++)
          if (h >= 0 && h < H && w >= 0 && w < W) sum += in[0][pl * H * W + h * W + w];
      int64_t h0 = i / Wo * s - p, w0 = i % Wo * s - p;
      int64_t div = ((h0 + k < H + p ? h0 + k : H + p) - h0) * ((w0 + k < W + p ? w0 + k : W + p) - w0);
      out[pl * Ho * Wo + i] = sum / (double)div;
    }
}
static void fwd_avgpool(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  rt_avgpool2d_forward(out, in[0], d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]);
}
static void bwd_avgpool(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  const int64_t *d = c->d;
  rt_avgpool2d_backward(din[0], dout, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], acc);
}
/* d for a pool over [N,C,H,W] with kernel k, stride s, padding p */
#define POOL_DIMS(N, C, H, W, k, s, p) \
  { N, C, H, W, ((H) + 2 * (p) - (k)) / (s) + 1, ((W) + 2 * (p) - (k)) / (s) + 1, k, s, p }
static void case_maxpool(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s,
                         int64_t p) {
  Case c = {.name = name,
            .nin = 1,
            .in_n = {N * C * H * W},
            .amp = {50.0f}, /* values far apart next to h: no window's maximum changes under it */
            .d = POOL_DIMS(N, C, H, W, k, s, p),
            .ref = ref_maxpool,
            .fwd = fwd_maxpool,
            .bwd = bwd_maxpool};
  c.out_n = N * C * c.d[4] * c.d[5];
  run_case(&c);
}
static void case_avgpool(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s,
                         int64_t p) {
  Case c = {.name = name,
            .nin = 1,
            .in_n = {N * C * H * W},
            .d = POOL_DIMS(N, C, H, W, k, s, p),
            .ref = ref_avgpool,
            .fwd = fwd_avgpool,
            .bwd = bwd_avgpool};
  c.out_n = N * C * c.d[4] * c.d[5];
  run_case(&c);
}
/* ceil_mode: torch's output size (rounded up, less a last window starting past the input and its left padding) */
static void case_avgpool_ceil(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s,
                              int64_t p) {
  int64_t o[2], n[2] = {H, W};
  for (int i = 0; i < 2; i++) {
    o[i] = (n[i] + 2 * p - k + s - 1) / s + 1;
    if ((o[i] - 1) * s >= n[i] + p) o[i]--;
  }
  Case c = {.name = name,
            .nin = 1,
            .in_n = {N * C * H * W},
            .out_n = N * C * o[0] * o[1],
            .d = {N, C, H, W, o[0], o[1], k, s, p},
            .ref = ref_avgpool,
            .fwd = fwd_avgpool,
            .bwd = bwd_avgpool};
  run_case(&c);
}

/* torch's adaptive windows: [floor(o n / out), ceil((o + 1) n / out)); d = N C H W Ho Wo */
static void ref_adaptive_pool(double *out, double *const *in, const Case *c) {
  const int64_t *d = c->d;
  int64_t H = d[2], W = d[3], Ho = d[4], Wo = d[5];
  for (int64_t pl = 0; pl < d[0] * d[1]; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++) {
      int64_t h0 = (int64_t)floor((double)(i / Wo) * H / Ho), h1 = (int64_t)ceil((double)(i / Wo + 1) * H / Ho);
      int64_t w0 = (int64_t)floor((double)(i % Wo) * W / Wo), w1 = (int64_t)ceil((double)(i % Wo + 1) * W / Wo);
      double sum = 0.0;
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) sum += in[0][pl * H * W + h * W + w];
      out[pl * Ho * Wo + i] = sum / (double)((h1 - h0) * (w1 - w0));
    }
}
static void fwd_adaptive_pool(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  rt_adaptive_avgpool2d_forward(out, in[0], d[0], d[1], d[2], d[3], d[4], d[5]);
}
static void bwd_adaptive_pool(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  const int64_t *d = c->d;
  rt_adaptive_avgpool2d_backward(din[0], dout, d[0], d[1], d[2], d[3], d[4], d[5], acc);
}
static void case_adaptive_pool(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  Case c = {.name = name,
            .nin = 1,
            .in_n = {N * C * H * W},
            .out_n = N * C * Ho * Wo,
            .d = {N, C, H, W, Ho, Wo},
            .ref = ref_adaptive_pool,
            .fwd = fwd_adaptive_pool,
            .bwd = bwd_adaptive_pool};
  run_case(&c);
}

static void ref_gap(double *out, double *const *in, const Case *c) {
  for (int64_t pl = 0; pl < c->d[0]; pl++) {
    double sum = 0.0;
    for (int64_t i = 0; i < c->d[1]; i++) sum += in[0][pl * c->d[1] + i];
    out[pl] = sum / (double)c->d[1];
  }
}
static void fwd_gap(float *out, float *const *in, const Case *c) {
  rt_global_avgpool_forward(out, in[0], c->d[0], c->d[1]);
}
static void bwd_gap(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_global_avgpool_backward(din[0], dout, c->d[0], c->d[1], acc);
}

// ----------------------------------------------------------------------------
// dropout (x); d = n key mask (1: backward reads the forward's mask, 0: it
// regenerates it from the key), f = p. The reference draws the mask from the
// hash of memplan_kernels.h itself, so the finite differences are those of the
// forward with the same mask.

static int dropout_keep_d(uint64_t key, int64_t i, double p) {
  uint64_t z = (key ^ (uint64_t)i) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 40) >= ceil(p * 16777216.0);
}
static void ref_dropout(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++)
    out[i] = dropout_keep_d((uint64_t)c->d[1], i, c->f) ? in[0][i] / (1.0 - (double)c->f) : 0.0;
}
static void fwd_dropout(float *out, float *const *in, const Case *c) {
  rt_dropout_forward(out, NULL, in[0], c->d[0], c->f, RT_MODE_TRAIN, (uint64_t)c->d[1]);
}
static void bwd_dropout(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  int64_t n = c->d[0];
  int32_t *mask = NULL;
  if (c->d[2]) { /* the mask the forward stores */
    float *out = NEW(float, n);
    mask = NEW(int32_t, (n + 31) / 32);
    rt_dropout_forward(out, mask, in[0], n, c->f, RT_MODE_TRAIN, (uint64_t)c->d[1]);
    free(out);
  }
  rt_dropout_backward(din[0], dout, mask, n, c->f, RT_MODE_TRAIN, (uint64_t)c->d[1], acc);
  free(mask);
}

// stochastic_depth (x); d = N S batch key, f = p: dropout's draw per row (row 0's for the batch).
static void ref_sd(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0] * c->d[1]; i++)
    out[i] = dropout_keep_d((uint64_t)c->d[3], c->d[2] ? 0 : i / c->d[1], c->f) ? in[0][i] / (1.0 - (double)c->f) : 0.0;
}
static void fwd_sd(float *out, float *const *in, const Case *c) {
  rt_stochastic_depth_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->f, RT_MODE_TRAIN, (uint64_t)c->d[3]);
}
static void bwd_sd(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_stochastic_depth_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->f, RT_MODE_TRAIN, (uint64_t)c->d[3], acc);
}

// ----------------------------------------------------------------------------
// linear_cross_entropy: d = N V K R; inputs x W [b]; targets in ids. Forward
// runs the eval path (statistics NULL); backward runs the training forward
// (statistics into buffers) and then the backward kernel with the scale.

static void ref_lce(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], V = c->d[1], K = c->d[2];
  double total = 0.0, *z = malloc(sizeof(double) * (size_t)V);
  for (int64_t i = 0; i < N; i++) {
    double mx = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < V; j++) {
      double v = c->nin > 2 ? in[2][j] : 0.0;
      for (int64_t k = 0; k < K; k++) v += in[0][i * K + k] * in[1][j * K + k];
      z[j] = v;
      mx = fmax(mx, v);
    }
    for (int64_t j = 0; j < V; j++) s += exp(z[j] - mx);
    total += mx + log(s) - z[c->ids[i]];
  }
  free(z);
  out[0] = total / (double)N;
}
static float *lce_scratch(const Case *c) { return NEW(float, c->d[3] * c->d[1] + c->d[0]); }
static void fwd_lce(float *out, float *const *in, const Case *c) {
  float *s = lce_scratch(c);
  rt_linear_cross_entropy_forward(out, NULL, NULL, NULL, in[0], in[1], c->nin > 2 ? in[2] : NULL, c->ids, s, c->d[0],
                                  c->d[1], c->d[2], c->d[3]);
  free(s);
}
static void bwd_lce(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  int64_t N = c->d[0], V = c->d[1], K = c->d[2];
  float loss, *s = lce_scratch(c), *sdx = NEW(float, N *K), *sdw = NEW(float, V *K), *sdb = NEW(float, V);
  fill(sdx, N * K, NAN); // the training forward writes every statistic ("=")
  fill(sdw, V * K, NAN);
  fill(sdb, V, NAN);
  const float *b = c->nin > 2 ? in[2] : NULL;
  rt_linear_cross_entropy_forward(&loss, sdx, sdw, sdb, in[0], in[1], b, c->ids, s, N, V, K, c->d[3]);
  rt_linear_cross_entropy_backward(din[0], din[1], b ? din[2] : NULL, sdx, sdw, sdb, NULL, N, V, K, c->d[3], dout[0],
                                   acc, acc, acc);
  free(s);
  free(sdx);
  free(sdw);
  free(sdb);
}
static void case_lce(const char *name, int64_t N, int64_t V, int64_t K, int64_t R, int bias, const int32_t *ids) {
  run_case(&(Case){.name = name,
                   .nin = bias ? 3 : 2,
                   .in_n = {N * K, V * K, V},
                   .amp = {1.0f, 1.5f, 1.0f},
                   .out_n = 1,
                   .d = {N, V, K, R},
                   .ids = ids,
                   .ref = ref_lce,
                   .fwd = fwd_lce,
                   .bwd = bwd_lce});
}

/* Above the threshold for parallel rows and products: the fused kernels
 * against linear + cross_entropy's (the same math, other summation orders:
 * TOL), the training forward's loss equal to eval's, and the backward in
 * place (statistics scaled where they are) equal to out of place. */
static void values_lce(void) {
  int64_t N = 300, V = 700, K = 24, R = 128;
  float *x = NEW(float, N *K), *w = NEW(float, V *K), *b = NEW(float, V), *z = NEW(float, N *V);
  float *lse = NEW(float, N), *s = NEW(float, R *V + N);
  float *gx = NEW(float, N *K), *gw = NEW(float, V *K), *gb = NEW(float, V);
  float *sx = NEW(float, N *K), *sw = NEW(float, V *K), *sb = NEW(float, V);
  float *ox = NEW(float, N *K), *ow = NEW(float, V *K), *ob = NEW(float, V);
  int32_t *y = NEW(int32_t, N);
  fill_rand(x, N * K, 1.0f);
  fill_rand(w, V * K, 1.0f);
  fill_rand(b, V, 1.0f);
  for (int64_t i = 0; i < N; i++) y[i] = (int32_t)((i * 131) % V);
  float want, got_eval, got_train;
  rt_linear_forward(z, x, w, b, N, K, V);
  rt_cross_entropy_forward(&want, lse, z, y, N, V);
  rt_cross_entropy_backward(z, z, y, lse, N, V, 1.0f, 0);
  rt_linear_backward(gx, gw, gb, z, x, w, N, K, V, 0, 0, 0);
  rt_linear_cross_entropy_forward(&got_eval, NULL, NULL, NULL, x, w, b, y, s, N, V, K, R);
  rt_linear_cross_entropy_forward(&got_train, sx, sw, sb, x, w, b, y, s, N, V, K, R);
  check_scalar("linear_cross_entropy loss vs linear + cross_entropy", got_eval, want, 1e-6);
  check_scalar("linear_cross_entropy training loss = eval loss", got_train, got_eval, 0.0);
  check_f("linear_cross_entropy dx vs linear + cross_entropy", sx, gx, N * K, TOL);
  check_f("linear_cross_entropy dW vs linear + cross_entropy", sw, gw, V * K, TOL);
  check_f("linear_cross_entropy db vs linear + cross_entropy", sb, gb, V, TOL);
  rt_linear_cross_entropy_backward(ox, ow, ob, sx, sw, sb, NULL, N, V, K, R, 2.5f, 0, 0, 0);
  rt_linear_cross_entropy_backward(sx, sw, sb, sx, sw, sb, NULL, N, V, K, R, 2.5f, 0, 0, 0);
  check_f("in place linear_cross_entropy backward (dx, sdx)", sx, ox, N * K, EXACT);
  check_f("in place linear_cross_entropy backward (dW, sdW)", sw, ow, V * K, EXACT);
  check_f("in place linear_cross_entropy backward (db, sdb)", sb, ob, V, EXACT);
  float *all[] = {x, w, b, z, lse, s, gx, gw, gb, sx, sw, sb, ox, ow, ob};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  free(y);
}

static void lce_checks(void) {
  static const int32_t ids[7] = {0, 6, 2, 2, 5, 1, 6};
  case_lce("linear_cross_entropy (one chunk)", 5, 7, 4, 5, 1, ids);
  case_lce("linear_cross_entropy (chunks of 2, last short)", 5, 7, 4, 2, 1, ids);
  case_lce("linear_cross_entropy (no bias, chunks of 1)", 7, 7, 3, 1, 0, ids);
  values_lce();
}

static void gradchecks(void) {
  case_linear("linear", 4, 6, 5, 1);
  case_linear("linear (no bias)", 4, 6, 5, 0);
  case_linear("linear (N=70)", 3, 4, 70, 1); // db spans two column blocks
  run_case(&(Case){.name = "matmul",
                   .nin = 2,
                   .in_n = {2 * 3 * 4, 2 * 4 * 5},
                   .out_n = 2 * 3 * 5,
                   .d = {2, 3, 4, 5},
                   .ref = ref_matmul,
                   .fwd = fwd_matmul,
                   .bwd = bwd_matmul});
  run_case(&(Case){.name = "add",
                   .nin = 2,
                   .in_n = {11, 11},
                   .out_n = 11,
                   .d = {11},
                   .ref = ref_add,
                   .fwd = fwd_add,
                   .bwd = bwd_add});
  run_case(&(Case){.name = "mul",
                   .nin = 2,
                   .in_n = {11, 11},
                   .amp = {2.0f, 2.0f},
                   .out_n = 11,
                   .d = {11},
                   .ref = ref_mul,
                   .fwd = fwd_mul,
                   .bwd = bwd_mul});
  run_case(&(Case){.name = "mul (x, x): da and db one buffer",
                   .nin = 1,
                   .in_n = {11},
                   .out_n = 11,
                   .d = {11},
                   .ref = ref_mul_self,
                   .fwd = fwd_mul_self,
                   .bwd = bwd_mul_self});
  run_case(&(Case){.name = "relu",
                   .nin = 1,
                   .in_n = {13},
                   .away = 0.05f,
                   .out_n = 13,
                   .d = {13},
                   .ref = ref_relu,
                   .fwd = fwd_relu,
                   .bwd = bwd_relu});
  // To +-10: both clamps. Planted once: backward without the "< 6" clamp printed "FAIL relu6 d0 acc=0 max rel err
  // 1.02e+02".
  run_case(&(Case){.name = "relu6",
                   .nin = 1,
                   .in_n = {17},
                   .amp = {10.0f},
                   .away = 0.05f,
                   .out_n = 17,
                   .d = {17},
                   .ref = ref_relu6,
                   .fwd = fwd_relu6,
                   .bwd = bwd_relu6});
  // Planted once: backward with y (1 + y) printed "FAIL sigmoid d0 acc=0 max rel err 1.13e+03".
  run_case(&(Case){.name = "sigmoid",
                   .nin = 1,
                   .in_n = {15},
                   .amp = {8.0f},
                   .out_n = 15,
                   .d = {15},
                   .ref = ref_sigmoid,
                   .fwd = fwd_sigmoid,
                   .bwd = bwd_sigmoid});
  // To +-5: both flat sides and the ramp (no input within the step of the kinks -3, 3). Planted once: backward
  // with x / 6 + 0.5 for x / 3 + 0.5 printed "FAIL hardswish d0 acc=0 max rel err
  // 1.85e+00".
  run_case(&(Case){.name = "hardswish",
                   .nin = 1,
                   .in_n = {19},
                   .amp = {5.0f},
                   .out_n = 19,
                   .d = {19},
                   .ref = ref_hardswish,
                   .fwd = fwd_hardswish,
                   .bwd = bwd_hardswish});
  // Planted once: backward without the / 6 printed "FAIL hardsigmoid d0 acc=0 max rel err 5.00e+00".
  run_case(&(Case){.name = "hardsigmoid",
                   .nin = 1,
                   .in_n = {19},
                   .amp = {5.0f},
                   .out_n = 19,
                   .d = {19},
                   .ref = ref_hardsigmoid,
                   .fwd = fwd_hardsigmoid,
                   .bwd = bwd_hardsigmoid});
  // 6 planes of 5. Planted once: ds summing dout alone (no x) printed "FAIL scale_channels d1 acc=0 max
  // rel err 8.48e+00".
  run_case(&(Case){.name = "scale_channels",
                   .nin = 2,
                   .in_n = {30, 6},
                   .amp = {2.0f, 2.0f},
                   .out_n = 30,
                   .d = {6, 5},
                   .ref = ref_scale_channels,
                   .fwd = fwd_scale_channels,
                   .bwd = bwd_scale_channels});
  // 2 samples of 3 channels of 4: dw sums over both samples. Planted once: dw summing sample 0 alone printed
  // "FAIL layer_scale d1 acc=0 max rel err 1.33e+00".
  run_case(&(Case){.name = "layer_scale",
                   .nin = 2,
                   .in_n = {24, 3},
                   .amp = {2.0f, 2.0f},
                   .out_n = 24,
                   .d = {2, 3, 4},
                   .ref = ref_layer_scale,
                   .fwd = fwd_layer_scale,
                   .bwd = bwd_layer_scale});
  run_case(&(Case){.name = "gelu",
                   .nin = 1,
                   .in_n = {40},
                   .amp = {4.0f},
                   .out_n = 40,
                   .d = {40, 1},
                   .ref = ref_gelu,
                   .fwd = fwd_gelu,
                   .bwd = bwd_gelu});
  // Exact (erf) to +-6: both tails, where phi(x) underflows in float.
  run_case(&(Case){.name = "gelu exact",
                   .nin = 1,
                   .in_n = {40},
                   .amp = {6.0f},
                   .out_n = 40,
                   .d = {40, 0},
                   .ref = ref_gelu,
                   .fwd = fwd_gelu,
                   .bwd = bwd_gelu});
  // To +-8: both tails of the sigmoid, and the minimum of silu near x = -1.28.
  run_case(&(Case){.name = "scale",
                   .nin = 1,
                   .in_n = {17},
                   .out_n = 17,
                   .d = {17},
                   .f = 2.5f,
                   .ref = ref_scale,
                   .fwd = fwd_scale,
                   .bwd = bwd_scale});
  run_case(&(Case){.name = "silu",
                   .nin = 1,
                   .in_n = {40},
                   .amp = {8.0f},
                   .out_n = 40,
                   .d = {40},
                   .ref = ref_silu,
                   .fwd = fwd_silu,
                   .bwd = bwd_silu});
  run_case(&(Case){.name = "layernorm",
                   .nin = 3,
                   .in_n = {3 * 8, 8, 8},
                   .out_n = 3 * 8,
                   .d = {3, 8},
                   .f = 1e-5f,
                   .ref = ref_layernorm,
                   .fwd = fwd_layernorm,
                   .bwd = bwd_layernorm});
  // Variance near eps, so a wrong eps or an unbiased variance shows; C = 70
  // spans two column blocks in the dw/db reduction.
  run_case(&(Case){.name = "layernorm (small var, C=70)",
                   .nin = 3,
                   .in_n = {3 * 70, 70, 70},
                   .amp = {0.005f},
                   .out_n = 3 * 70,
                   .d = {3, 70},
                   .f = 1e-5f,
                   .ref = ref_layernorm,
                   .fwd = fwd_layernorm,
                   .bwd = bwd_layernorm});
  // A written eps (0.25, against a variance near 1/3) with the bias: an eps
  // ignored (1e-5 used) scales the output by ~1.3.
  run_case(&(Case){.name = "layernorm (eps 0.25 ~ var)",
                   .nin = 3,
                   .in_n = {3 * 8, 8, 8},
                   .out_n = 3 * 8,
                   .d = {3, 8},
                   .f = 0.25f,
                   .ref = ref_layernorm,
                   .fwd = fwd_layernorm,
                   .bwd = bwd_layernorm});
  // bias: false (b and db NULL), eps 3e-3 against a variance near 3.3e-3;
  // C = 70 spans two column blocks in the dw reduction.
  run_case(&(Case){.name = "layernorm (no bias, eps 3e-3 ~ var, C=70)",
                   .nin = 2,
                   .in_n = {3 * 70, 70},
                   .amp = {0.1f},
                   .out_n = 3 * 70,
                   .d = {3, 70},
                   .f = 3e-3f,
                   .ref = ref_layernorm,
                   .fwd = fwd_layernorm,
                   .bwd = bwd_layernorm});
  // [N, C, H, W] with H W = 6, and the [N, C] form (S = 1); eps 0.05 against
  // variances near 1/3 (amp 1), so an eps ignored or misplaced shows.
  run_case(&(Case){.name = "batchnorm2d [N,C,H,W]",
                   .nin = 3,
                   .in_n = {4 * 3 * 6, 3, 3},
                   .out_n = 4 * 3 * 6,
                   .d = {4, 3, 6},
                   .f = 0.05f,
                   .ref = ref_batchnorm,
                   .fwd = fwd_batchnorm,
                   .bwd = bwd_batchnorm});
  run_case(&(Case){.name = "batchnorm2d [N,C]",
                   .nin = 3,
                   .in_n = {6 * 5, 5, 5},
                   .amp = {2.0f},
                   .out_n = 6 * 5,
                   .d = {6, 5, 1},
                   .f = 1e-5f,
                   .ref = ref_batchnorm,
                   .fwd = fwd_batchnorm,
                   .bwd = bwd_batchnorm});
  run_case(&(Case){.name = "rmsnorm",
                   .nin = 2,
                   .in_n = {3 * 8, 8},
                   .out_n = 3 * 8,
                   .d = {3, 8},
                   .f = 1e-5f,
                   .ref = ref_rmsnorm,
                   .fwd = fwd_rmsnorm,
                   .bwd = bwd_rmsnorm});
  // Mean square near eps, so an eps ignored or added outside the root
  // shows; C = 70 spans two column blocks in the dw reduction.
  run_case(&(Case){.name = "rmsnorm (eps 1e-3 ~ mean square, C=70)",
                   .nin = 2,
                   .in_n = {3 * 70, 70},
                   .amp = {0.05f},
                   .out_n = 3 * 70,
                   .d = {3, 70},
                   .f = 1e-3f,
                   .ref = ref_rmsnorm,
                   .fwd = fwd_rmsnorm,
                   .bwd = bwd_rmsnorm});
  run_case(&(Case){.name = "softmax",
                   .nin = 1,
                   .in_n = {4 * 7},
                   .amp = {3.0f},
                   .out_n = 4 * 7,
                   .d = {4, 7},
                   .ref = ref_softmax,
                   .fwd = fwd_softmax,
                   .bwd = bwd_softmax});
  // Cross-attention: 7 queries to 5 context positions (Tq != Tk), 2 heads of
  // 6 (the dot product's tail); dk, dv sum over every query of the batch.
  run_case(&(Case){.name = "cross_attention",
                   .nin = 2,
                   .in_n = {2 * 7 * 12, 2 * 5 * 24},
                   .amp = {1.5f, 1.5f},
                   .out_n = 2 * 7 * 12,
                   .d = {2, 7, 5, 12, 2},
                   .ref = ref_cross_attention,
                   .fwd = fwd_cross_attention,
                   .bwd = bwd_cross_attention});
  run_case(&(Case){.name = "attention",
                   .nin = 1,
                   .in_n = {2 * 5 * 3 * 8},
                   .amp = {1.5f},
                   .out_n = 2 * 5 * 8,
                   .d = {2, 5, 8, 2, 2, 1},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  // Head size 12: the dot product's eight-lane body and its tail.
  run_case(&(Case){.name = "attention (hs=12)",
                   .nin = 1,
                   .in_n = {1 * 4 * 3 * 24},
                   .out_n = 1 * 4 * 24,
                   .d = {1, 4, 24, 2, 2, 1},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  // Longer rows, three heads: recomputed probabilities across many positions.
  run_case(&(Case){.name = "attention (T=17, NH=3)",
                   .nin = 1,
                   .in_n = {2 * 17 * 3 * 48},
                   .out_n = 2 * 17 * 48,
                   .d = {2, 17, 48, 3, 3, 1},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  // Grouped-query: 6 query heads read 2 kv heads, 3 each (dk, dv sum over a
  // group); qkv is C + 2 * 2 * hs = 24 + 16 channels.
  run_case(&(Case){.name = "attention GQA (NH=6 KVH=2)",
                   .nin = 1,
                   .in_n = {2 * 7 * 40},
                   .amp = {1.5f},
                   .out_n = 2 * 7 * 24,
                   .d = {2, 7, 24, 6, 2, 1},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  // Multi-query: one kv head for all 4 query heads.
  run_case(&(Case){.name = "attention MQA (NH=4 KVH=1)",
                   .nin = 1,
                   .in_n = {2 * 6 * 24},
                   .amp = {1.5f},
                   .out_n = 2 * 6 * 16,
                   .d = {2, 6, 16, 4, 1, 1},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  // Not causal: every query sees all T keys, the later ones included.
  run_case(&(Case){.name = "attention full (not causal)",
                   .nin = 1,
                   .in_n = {2 * 5 * 3 * 8},
                   .amp = {1.5f},
                   .out_n = 2 * 5 * 8,
                   .d = {2, 5, 8, 2, 2, 0},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  run_case(&(Case){.name = "attention full GQA (NH=4 KVH=2)",
                   .nin = 1,
                   .in_n = {1 * 9 * 32},
                   .amp = {1.5f},
                   .out_n = 1 * 9 * 16,
                   .d = {1, 9, 16, 4, 2, 0},
                   .ref = ref_attention,
                   .fwd = fwd_attention,
                   .bwd = bwd_attention});
  static const int32_t tokens[9] = {3, 1, 3, 0, 3, 5, 1, 3, 0}; // rows 2, 4, 6 unused
  run_case(&(Case){.name = "embedding",
                   .nin = 1,
                   .in_n = {7 * 5},
                   .out_n = 9 * 5,
                   .d = {9, 5, 7},
                   .ids = tokens,
                   .ref = ref_embedding,
                   .fwd = fwd_embedding,
                   .bwd = bwd_embedding});
  run_case(&(Case){.name = "embedding (C=70)",
                   .nin = 1,
                   .in_n = {7 * 70},
                   .out_n = 9 * 70,
                   .d = {9, 70, 7},
                   .ids = tokens,
                   .ref = ref_embedding,
                   .fwd = fwd_embedding,
                   .bwd = bwd_embedding});
  // Wrows > T: rows T.. are zeroed with acc = 0, untouched with acc = 1.
  run_case(&(Case){.name = "position_embedding",
                   .nin = 1,
                   .in_n = {6 * 5},
                   .out_n = 3 * 4 * 5,
                   .d = {3, 4, 5, 6},
                   .ref = ref_posemb,
                   .fwd = fwd_posemb,
                   .bwd = bwd_posemb});
  // Grouped kv heads (4 q heads, 2 kv heads), T = 7 and theta 2: every
  // frequency's angle passes pi within the sequence, so a wrong sign, pairing
  // or frequency shows at some position.
  run_case(&(Case){.name = "rope (H=4 KV=2 hd=6, theta 2)",
                   .nin = 1,
                   .in_n = {2 * 7 * 8 * 6},
                   .out_n = 2 * 7 * 8 * 6,
                   .d = {2, 7, 4, 2, 6},
                   .f = 2.0f,
                   .ref = ref_rope,
                   .fwd = fwd_rope,
                   .bwd = bwd_rope});
  // kv_heads = heads at the default theta: only the low frequencies turn far.
  run_case(&(Case){.name = "rope (H=KV=2 hd=8, theta 10000)",
                   .nin = 1,
                   .in_n = {1 * 9 * 6 * 8},
                   .out_n = 1 * 9 * 6 * 8,
                   .d = {1, 9, 2, 2, 8},
                   .f = 10000.0f,
                   .ref = ref_rope,
                   .fwd = fwd_rope,
                   .bwd = bwd_rope});
  // Llama 3's scaling (factor 8, low 1, high 4, 32 original positions), hd 16,
  // theta 100: wavelengths 6.3, 11, 20, 35, ... 350 cross both band edges (8
  // and 32): kept, smoothed and divided frequencies all turn within T = 9.
  run_case(&(Case){.name = "rope (H=4 KV=2 hd=16, theta 100, llama3 scaling)",
                   .nin = 1,
                   .in_n = {1 * 9 * 8 * 16},
                   .out_n = 1 * 9 * 8 * 16,
                   .d = {1, 9, 4, 2, 16},
                   .f = 100.0f,
                   .rs = {8, 1, 4, 32},
                   .ref = ref_rope,
                   .fwd = fwd_rope,
                   .bwd = bwd_rope});
  // One kv head for three q heads (multi-query), hd = 2: one frequency.
  run_case(&(Case){.name = "rope (H=3 KV=1 hd=2, theta 10000)",
                   .nin = 1,
                   .in_n = {2 * 5 * 5 * 2},
                   .out_n = 2 * 5 * 5 * 2,
                   .d = {2, 5, 3, 1, 2},
                   .f = 10000.0f,
                   .ref = ref_rope,
                   .fwd = fwd_rope,
                   .bwd = bwd_rope});
  static const int32_t targets[5] = {0, 6, 2, 2, 5};
  run_case(&(Case){.name = "cross_entropy",
                   .nin = 1,
                   .in_n = {5 * 7},
                   .amp = {3.0f},
                   .out_n = 1,
                   .d = {5, 7},
                   .ids = targets,
                   .ref = ref_cross_entropy,
                   .fwd = fwd_cross_entropy,
                   .bwd = bwd_cross_entropy});
  float mse_target[12];
  fill_rand(mse_target, 12, 1.0f);
  run_case(&(Case){.name = "mse",
                   .nin = 1,
                   .in_n = {12},
                   .out_n = 1,
                   .d = {12},
                   .aux = mse_target,
                   .ref = ref_mse,
                   .fwd = fwd_mse,
                   .bwd = bwd_mse});
  /* conv2d: N C H W O k stride padding dilation groups bias */
  case_conv2d("conv2d 3x3 pad 1", 2, 3, 5, 5, 4, 3, 1, 1, 1, 1, 1);
  case_conv2d("conv2d stride 2, non-square 7x6", 2, 2, 7, 6, 3, 3, 2, 1, 1, 1, 1);
  case_conv2d("conv2d dilation 2", 1, 2, 7, 7, 2, 3, 1, 2, 2, 1, 1);
  case_conv2d("conv2d groups 2", 2, 4, 5, 4, 6, 3, 1, 0, 1, 2, 1);
  case_conv2d("conv2d depthwise (groups = C = 3)", 2, 3, 5, 5, 3, 3, 1, 1, 1, 3, 1);
  case_conv2d("conv2d depthwise x2 (C 3, out 6), no bias", 2, 3, 5, 4, 6, 3, 2, 1, 1, 3, 0);
  case_conv2d("conv2d 2x2 stride 2, no bias", 2, 3, 6, 4, 4, 2, 2, 0, 1, 1, 0);
  case_conv2d("conv2d 1x1 (no scratch)", 2, 4, 3, 5, 3, 1, 1, 0, 1, 1, 1);
  case_conv2d("conv2d 1x1 groups 2 (no scratch)", 2, 4, 3, 5, 6, 1, 1, 0, 1, 2, 0);
  case_conv2d("conv2d 1x1 stride 2 (im2col)", 2, 3, 5, 5, 2, 1, 2, 0, 1, 1, 1);
  /* non-square (inception_v3's 1x7 and 7x1 with padding (0, 3) and (3, 0)): kernel, stride, padding {h, w}.
   * Planted once: im2col's row taking ki = r / kh % kh (the square formula with kh) printed "FAIL conv2d 3x1 pad
   * (1, 0), no bias forward max rel err 3.57e+01" */
  case_conv2d_hw("conv2d 1x3 pad (0, 1)", 2, 2, 4, 5, 3, (int64_t[]){1, 3}, (int64_t[]){1, 1}, (int64_t[]){0, 1}, 1, 1,
                 1);
  case_conv2d_hw("conv2d 3x1 pad (1, 0), no bias", 2, 2, 5, 4, 3, (int64_t[]){3, 1}, (int64_t[]){1, 1},
                 (int64_t[]){1, 0}, 1, 1, 0);
  case_conv2d_hw("conv2d 2x3 stride (2, 1) pad (1, 0) dilation 2", 1, 2, 7, 6, 2, (int64_t[]){2, 3}, (int64_t[]){2, 1},
                 (int64_t[]){1, 0}, 2, 1, 1);
  case_conv2d_hw("conv2d 1x1 stride (1, 2) (im2col)", 2, 2, 3, 5, 2, (int64_t[]){1, 1}, (int64_t[]){1, 2},
                 (int64_t[]){0, 0}, 1, 1, 1);
}

// ----------------------------------------------------------------------------
// shape ops: flatten, reshape (n); transpose (A P M Q Z); concat (O In n0..n5,
// inputs a0..); class_token (B N C; x W); select (O N In index)

static void ref_copy(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0]; i++) out[i] = in[0][i];
}
static void fwd_flatten(float *out, float *const *in, const Case *c) { rt_flatten_forward(out, in[0], c->d[0]); }
static void bwd_flatten(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_flatten_backward(din[0], dout, c->d[0], acc);
}
static void fwd_reshape(float *out, float *const *in, const Case *c) { rt_reshape_forward(out, in[0], c->d[0]); }
static void bwd_reshape(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_reshape_backward(din[0], dout, c->d[0], acc);
}

static void ref_transpose(double *out, double *const *in, const Case *c) {
  int64_t A = c->d[0], P = c->d[1], M = c->d[2], Q = c->d[3], Z = c->d[4];
  for (int64_t a = 0; a < A; a++)
    for (int64_t p = 0; p < P; p++)
      for (int64_t m = 0; m < M; m++)
        for (int64_t q = 0; q < Q; q++)
          for (int64_t z = 0; z < Z; z++)
            out[(((a * Q + q) * M + m) * P + p) * Z + z] = in[0][(((a * P + p) * M + m) * Q + q) * Z + z];
}
static void fwd_transpose(float *out, float *const *in, const Case *c) {
  rt_transpose_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->d[3], c->d[4]);
}
static void bwd_transpose(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_transpose_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->d[3], c->d[4], acc);
}

static void ref_concat(double *out, double *const *in, const Case *c) {
  int64_t O = c->d[0], In = c->d[1], W = 0;
  for (int k = 0; k < c->nin; k++) W += c->d[2 + k];
  for (int64_t r = 0; r < O; r++)
    for (int k = 0, off = 0; k < c->nin; off += (int)c->d[2 + k++])
      for (int64_t j = 0; j < c->d[2 + k] * In; j++) out[(r * W + off) * In + j] = in[k][r * c->d[2 + k] * In + j];
}
static void fwd_concat(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  rt_concat_forward(out, in[0], in[1], in[2], in[3], in[4], in[5], d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
}
static void bwd_concat(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  const int64_t *d = c->d;
  rt_concat_backward(din[0], din[1], din[2], din[3], din[4], din[5], dout, d[0], d[1], d[2], d[3], d[4], d[5], d[6],
                     d[7], acc, acc, acc, acc, acc, acc);
}
/* concat(a, a): one gradient buffer, written by the first slice and
 * accumulated by the second. */
static void ref_concat_self(double *out, double *const *in, const Case *c) {
  double *two[2] = {in[0], in[0]};
  Case c2 = *c;
  c2.nin = 2;
  ref_concat(out, two, &c2);
}
static void fwd_concat_self(float *out, float *const *in, const Case *c) {
  rt_concat_forward(out, in[0], in[0], NULL, NULL, NULL, NULL, c->d[0], c->d[1], c->d[2], c->d[3], 0, 0, 0, 0);
}
static void bwd_concat_self(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_concat_backward(din[0], din[0], NULL, NULL, NULL, NULL, dout, c->d[0], c->d[1], c->d[2], c->d[3], 0, 0, 0, 0, acc,
                     1, 0, 0, 0, 0);
}

static void ref_class_token(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], N = c->d[1], C = c->d[2];
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t <= N; t++)
      for (int64_t j = 0; j < C; j++) out[(b * (N + 1) + t) * C + j] = t ? in[0][(b * N + t - 1) * C + j] : in[1][j];
}
static void fwd_class_token(float *out, float *const *in, const Case *c) {
  rt_class_token_forward(out, in[0], in[1], c->d[0], c->d[1], c->d[2]);
}
static void bwd_class_token(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_class_token_backward(din[0], din[1], dout, c->d[0], c->d[1], c->d[2], acc, acc);
}

static void ref_select(double *out, double *const *in, const Case *c) {
  int64_t O = c->d[0], N = c->d[1], In = c->d[2], index = c->d[3];
  for (int64_t r = 0; r < O; r++)
    for (int64_t i = 0; i < In; i++) out[r * In + i] = in[0][(r * N + index) * In + i];
}
static void fwd_select(float *out, float *const *in, const Case *c) {
  rt_select_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static void bwd_select(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_select_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->d[3], acc);
}

/* pad: x as [O, N, In] to [O, Nout, In], zeros after (Nout > N) or cut (Nout < N) */
static void ref_pad(double *out, double *const *in, const Case *c) {
  int64_t O = c->d[0], N = c->d[1], In = c->d[2], No = c->d[3];
  for (int64_t o = 0; o < O; o++)
    for (int64_t n = 0; n < No; n++)
      for (int64_t i = 0; i < In; i++) out[(o * No + n) * In + i] = n < N ? in[0][(o * N + n) * In + i] : 0.0;
}
static void fwd_pad(float *out, float *const *in, const Case *c) {
  rt_pad_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static void bwd_pad(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_pad_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->d[3], acc);
}

static void gradchecks_shape(void) {
  // pad of [3, 4, 5] on the middle axis: 2 zero rows after, then a crop of 3 rows (F.pad's negative padding).
  // Planted once: cpu_shape.c's pad_copy leaving the padded rows unwritten printed
  // "FAIL pad (after 2) forward max rel err nan" and "FAIL pad (crop 3) d0 acc=0 max rel err nan".
  run_case(&(Case){.name = "pad (after 2)",
                   .nin = 1,
                   .in_n = {3 * 4 * 5},
                   .out_n = 3 * 6 * 5,
                   .d = {3, 4, 5, 6},
                   .ref = ref_pad,
                   .fwd = fwd_pad,
                   .bwd = bwd_pad});
  run_case(&(Case){.name = "pad (crop 3)",
                   .nin = 1,
                   .in_n = {3 * 4 * 5},
                   .out_n = 3 * 1 * 5,
                   .d = {3, 4, 5, 1},
                   .ref = ref_pad,
                   .fwd = fwd_pad,
                   .bwd = bwd_pad});
  run_case(&(Case){.name = "flatten",
                   .nin = 1,
                   .in_n = {30},
                   .out_n = 30,
                   .d = {30},
                   .ref = ref_copy,
                   .fwd = fwd_flatten,
                   .bwd = bwd_flatten});
  run_case(&(Case){.name = "reshape",
                   .nin = 1,
                   .in_n = {30},
                   .out_n = 30,
                   .d = {30},
                   .ref = ref_copy,
                   .fwd = fwd_reshape,
                   .bwd = bwd_reshape});
  // x [2, 3, 4, 5, 2] with dims 1 and 3 swapped: axes apart, rows of 2
  run_case(&(Case){.name = "transpose (dims 1, 3 of 5)",
                   .nin = 1,
                   .in_n = {2 * 3 * 4 * 5 * 2},
                   .out_n = 2 * 3 * 4 * 5 * 2,
                   .d = {2, 3, 4, 5, 2},
                   .ref = ref_transpose,
                   .fwd = fwd_transpose,
                   .bwd = bwd_transpose});
  // dims 0 and 2 of [3, 4, 5]: the last dim swapped across a middle one (Z = 1, M = 4)
  run_case(&(Case){.name = "transpose (dims 0, 2 of 3)",
                   .nin = 1,
                   .in_n = {3 * 4 * 5},
                   .out_n = 3 * 4 * 5,
                   .d = {1, 3, 4, 5, 1},
                   .ref = ref_transpose,
                   .fwd = fwd_transpose,
                   .bwd = bwd_transpose});
  // [B, C, N] -> [B, N, C] (transpose(1, 2)): larger than a tile on both sides
  run_case(&(Case){.name = "transpose (last two, 33 x 35)",
                   .nin = 1,
                   .in_n = {2 * 33 * 35},
                   .out_n = 2 * 33 * 35,
                   .d = {2, 33, 1, 35, 1},
                   .ref = ref_transpose,
                   .fwd = fwd_transpose,
                   .bwd = bwd_transpose});
  // axis 1 of [2, n_k, 3], three inputs of unequal sizes
  run_case(&(Case){.name = "concat (axis 1, 3 inputs)",
                   .nin = 3,
                   .in_n = {2 * 2 * 3, 2 * 1 * 3, 2 * 4 * 3},
                   .out_n = 2 * 7 * 3,
                   .d = {2, 3, 2, 1, 4},
                   .ref = ref_concat,
                   .fwd = fwd_concat,
                   .bwd = bwd_concat});
  // the last axis, six inputs
  run_case(&(Case){.name = "concat (last axis, 6 inputs)",
                   .nin = 6,
                   .in_n = {3, 6, 3, 9, 3, 3},
                   .out_n = 27,
                   .d = {3, 1, 1, 2, 1, 3, 1, 1},
                   .ref = ref_concat,
                   .fwd = fwd_concat,
                   .bwd = bwd_concat});
  run_case(&(Case){.name = "concat (a, a): one gradient buffer",
                   .nin = 1,
                   .in_n = {2 * 3 * 4},
                   .out_n = 2 * 6 * 4,
                   .d = {2, 4, 3, 3},
                   .ref = ref_concat_self,
                   .fwd = fwd_concat_self,
                   .bwd = bwd_concat_self});
  // C = 70 spans two column blocks of dW's sum over the batch
  run_case(&(Case){.name = "class_token (B=3 N=4 C=70)",
                   .nin = 2,
                   .in_n = {3 * 4 * 70, 70},
                   .out_n = 3 * 5 * 70,
                   .d = {3, 4, 70},
                   .ref = ref_class_token,
                   .fwd = fwd_class_token,
                   .bwd = bwd_class_token});
  run_case(&(Case){.name = "select (axis 1 of 3, index 2)",
                   .nin = 1,
                   .in_n = {2 * 4 * 3},
                   .out_n = 2 * 3,
                   .d = {2, 4, 3, 2},
                   .ref = ref_select,
                   .fwd = fwd_select,
                   .bwd = bwd_select});
  run_case(&(Case){.name = "select (last axis, index 0)",
                   .nin = 1,
                   .in_n = {5 * 3},
                   .out_n = 5,
                   .d = {5, 3, 1, 0},
                   .ref = ref_select,
                   .fwd = fwd_select,
                   .bwd = bwd_select});
}

/* flatten and reshape in place (out = x, dx = dout): nothing moves; and their
 * copies above the parallel threshold. */
static void alias_shape(void) {
  enum { N = 40000 };
  float *x = NEW(float, N), *keep = NEW(float, N), *y = NEW(float, N);
  fill_rand(x, N, 1.0f);
  memcpy(keep, x, sizeof(float) * N);
  rt_flatten_forward(x, x, N);
  rt_reshape_backward(x, x, N, 0);
  check_f("in place flatten, reshape: x unchanged", x, keep, N, 0.0);
  rt_reshape_forward(y, x, N);
  check_f("reshape copy (40000, parallel)", y, keep, N, 0.0);
  rt_flatten_backward(y, x, N, 1);
  for (int i = 0; i < N; i++) keep[i] *= 2.0f;
  check_f("flatten backward += (40000, parallel)", y, keep, N, 0.0);
  free(x);
  free(keep);
  free(y);
  case_maxpool("maxpool2d (9x7, k3 s2 p1)", 2, 3, 9, 7, 3, 2, 1); /* stride != kernel, padding, odd sizes */
  case_maxpool("maxpool2d (6x5, k4 s1 p2)", 1, 2, 6, 5, 4, 1, 2); /* overlapping windows, padding k/2 */
  case_maxpool("maxpool2d (8x8, k2)", 2, 2, 8, 8, 2, 2, 0);
  case_avgpool("avgpool2d (9x7, k3 s2 p1)", 2, 3, 9, 7, 3, 2, 1); /* padding counted in the divisor */
  case_avgpool("avgpool2d (6x5, k4 s1 p2)", 1, 2, 6, 5, 4, 1, 2);
  /* ceil_mode: last windows past the padded input, divided by their pixels within it. Planted once in cpu_conv.c:
   * the divisor k k printed "FAIL avgpool2d ceil_mode (6x5, k3 s2) forward max rel err 3.33e-01" */
  case_avgpool_ceil("avgpool2d ceil_mode (6x5, k3 s2)", 2, 3, 6, 5, 3, 2, 0);
  case_avgpool_ceil("avgpool2d ceil_mode (5x7, k2 s3 p1)", 1, 2, 5, 7, 2, 3, 1);
  /* ceil_mode's sizes: 6x5 by k3 s2 to 3x2 (floor: 2x2), the last windows past the input's end */
  Case mc = {.name = "maxpool2d (6x5, k3 s2, ceil_mode)",
             .nin = 1,
             .in_n = {2 * 3 * 6 * 5},
             .amp = {50.0f},
             .out_n = 2 * 3 * 3 * 2,
             .d = {2, 3, 6, 5, 3, 2, 3, 2, 0},
             .ref = ref_maxpool,
             .fwd = fwd_maxpool,
             .bwd = bwd_maxpool};
  run_case(&mc);
  /* uneven windows (9 to 4: 0-2, 2-4, 4-6, 6-8, overlapping), 7 to 3; and more outputs than inputs (2 to 5: windows
   * of one and two). Planted once in cpu.c: the windows' end floor((o + 1) n / out) printed "FAIL adaptive_avgpool2d
   * (9x7 to 4x3) forward max rel err 7.07e+01" and "FAIL adaptive_avgpool2d (2x3 to 5x7) d0 acc=0 max rel err
   * 2.26e+00". */
  case_adaptive_pool("adaptive_avgpool2d (9x7 to 4x3)", 2, 3, 9, 7, 4, 3);
  case_adaptive_pool("adaptive_avgpool2d (2x3 to 5x7)", 1, 2, 2, 3, 5, 7);
  run_case(&(Case){.name = "global_avgpool",
                   .nin = 1,
                   .in_n = {6 * 35},
                   .out_n = 6,
                   .d = {6, 35},
                   .ref = ref_gap,
                   .fwd = fwd_gap,
                   .bwd = bwd_gap});
  for (int stored = 0; stored <= 1; stored++)
    run_case(&(Case){.name = stored ? "dropout p=0.3 (mask read)" : "dropout p=0.3 (mask regenerated)",
                     .nin = 1,
                     .in_n = {101},
                     .out_n = 101,
                     .d = {101, 0x5eed, stored},
                     .f = 0.3f,
                     .ref = ref_dropout,
                     .fwd = fwd_dropout,
                     .bwd = bwd_dropout});
  // 12 rows of 5 at p = 0.5 (key 0x5eed drops 6 of them), and the batch mode (this key keeps the batch).
  // Planted once: cpu.c drawing row r + 1's keep printed "FAIL stochastic_depth row forward max rel err 1.02e+02".
  for (int batch = 0; batch <= 1; batch++)
    run_case(&(Case){.name = batch ? "stochastic_depth batch" : "stochastic_depth row",
                     .nin = 1,
                     .in_n = {60},
                     .out_n = 60,
                     .d = {12, 5, batch, 0x5eed},
                     .f = 0.5f,
                     .ref = ref_sd,
                     .fwd = fwd_sd,
                     .bwd = bwd_sd});
}

// ----------------------------------------------------------------------------
// in place: each alias-safe pair gives the same result as separate buffers

enum { AN = 40000 }; /* above the kernels' threshold for going parallel */

static void alias_elementwise(void) {
  float *a = NEW(float, AN), *b = NEW(float, AN), *g = NEW(float, AN);
  float *want = NEW(float, AN), *io = NEW(float, AN);
  fill_rand(a, AN, 2.0f);
  fill_rand(b, AN, 1.0f);
  fill_rand(g, AN, 1.0f);
  rt_add_forward(want, a, b, AN);
  memcpy(io, a, sizeof(float) * AN);
  rt_add_forward(io, io, b, AN);
  check_f("in place add forward (out, a)", io, want, AN, EXACT);
  memcpy(io, b, sizeof(float) * AN);
  rt_add_forward(io, a, io, AN);
  check_f("in place add forward (out, b)", io, want, AN, EXACT);

  float *db = NEW(float, AN);
  memcpy(io, g, sizeof(float) * AN);
  rt_add_backward(io, db, io, AN, 0, 0); // da aliases dout
  check_f("in place add backward (da, dout)", io, g, AN, EXACT);
  check_f("in place add backward (da, dout): db", db, g, AN, EXACT);
  memcpy(io, g, sizeof(float) * AN);
  fill_rand(db, AN, 1.0f);
  for (int64_t i = 0; i < AN; i++) want[i] = db[i] + g[i];
  rt_add_backward(db, io, io, AN, 1, 0); // db aliases dout, da accumulates
  check_f("in place add backward (db, dout)", io, g, AN, EXACT);
  check_f("in place add backward (db, dout): da acc=1", db, want, AN, EXACT);
  free(db);

  rt_mul_forward(want, a, b, AN);
  memcpy(io, a, sizeof(float) * AN);
  rt_mul_forward(io, io, b, AN);
  check_f("in place mul forward (out, a)", io, want, AN, EXACT);
  memcpy(io, b, sizeof(float) * AN);
  rt_mul_forward(io, a, io, AN);
  check_f("in place mul forward (out, b)", io, want, AN, EXACT);
  float *wa = NEW(float, AN), *wb = NEW(float, AN), *gb = NEW(float, AN);
  rt_mul_backward(wa, wb, g, a, b, AN, 0, 0);
  memcpy(io, g, sizeof(float) * AN);
  rt_mul_backward(io, gb, io, a, b, AN, 0, 0); // da aliases dout
  check_f("in place mul backward (da, dout)", io, wa, AN, EXACT);
  check_f("in place mul backward (da, dout): db", gb, wb, AN, EXACT);
  memcpy(io, g, sizeof(float) * AN);
  rt_mul_backward(gb, io, io, a, b, AN, 0, 0); // db aliases dout
  check_f("in place mul backward (db, dout)", io, wb, AN, EXACT);
  check_f("in place mul backward (db, dout): da", gb, wa, AN, EXACT);
  free(wa);
  free(wb);
  free(gb);

  rt_relu_forward(want, a, AN);
  memcpy(io, a, sizeof(float) * AN);
  rt_relu_forward(io, io, AN);
  check_f("in place relu forward (out, x)", io, want, AN, EXACT);
  float *out = NEW(float, AN);
  rt_relu_forward(out, a, AN);
  rt_relu_backward(want, g, out, AN, 0);
  memcpy(io, g, sizeof(float) * AN);
  rt_relu_backward(io, io, out, AN, 0);
  check_f("in place relu backward (dx, dout)", io, want, AN, EXACT);

  for (int approximate = 0; approximate <= 1; approximate++) {
    rt_gelu_forward(want, a, AN, approximate);
    memcpy(io, a, sizeof(float) * AN);
    rt_gelu_forward(io, io, AN, approximate);
    check_f(approximate ? "in place gelu forward (out, x)" : "in place exact gelu forward (out, x)", io, want, AN,
            EXACT);
    rt_gelu_backward(want, g, a, AN, approximate, 0);
    memcpy(io, g, sizeof(float) * AN);
    rt_gelu_backward(io, io, a, AN, approximate, 0);
    check_f(approximate ? "in place gelu backward (dx, dout)" : "in place exact gelu backward (dx, dout)", io, want, AN,
            EXACT);
  }

  rt_silu_forward(want, a, AN);
  memcpy(io, a, sizeof(float) * AN);
  rt_silu_forward(io, io, AN);
  check_f("in place silu forward (out, x)", io, want, AN, EXACT);
  rt_silu_backward(want, g, a, AN, 0);
  memcpy(io, g, sizeof(float) * AN);
  rt_silu_backward(io, io, a, AN, 0);
  check_f("in place silu backward (dx, dout)", io, want, AN, EXACT);

  free(a);
  free(b);
  free(g);
  free(want);
  free(io);
  free(out);
}

static void alias_rows(void) {
  const int64_t N = 300, C = 129;
  float *x = NEW(float, N *C), *g = NEW(float, N *C), *out = NEW(float, N *C);
  float *want = NEW(float, N *C), *io = NEW(float, N *C);
  fill_rand(x, N * C, 4.0f);
  fill_rand(g, N * C, 1.0f);
  rt_softmax_forward(out, x, N, C);
  memcpy(io, x, sizeof(float) * N * C);
  rt_softmax_forward(io, io, N, C);
  check_f("in place softmax forward (out, x)", io, out, N * C, EXACT);
  rt_softmax_backward(want, g, out, N, C, 0);
  memcpy(io, g, sizeof(float) * N * C);
  rt_softmax_backward(io, io, out, N, C, 0);
  check_f("in place softmax backward (dx, dout)", io, want, N * C, EXACT);

  int32_t *y = NEW(int32_t, N);
  for (int64_t i = 0; i < N; i++) y[i] = (int32_t)((i * 37) % C);
  float loss, *lse = NEW(float, N);
  rt_cross_entropy_forward(&loss, lse, x, y, N, C);
  rt_cross_entropy_backward(want, x, y, lse, N, C, 1.0f, 0);
  memcpy(io, x, sizeof(float) * N * C);
  rt_cross_entropy_backward(io, io, y, lse, N, C, 1.0f, 0);
  check_f("in place cross_entropy backward (dlogits, logits)", io, want, N * C, EXACT);
  free(x);
  free(g);
  free(out);
  free(want);
  free(io);
  free(y);
  free(lse);
}

/* rope over B T positions of (H + 2 KV) heads of hd, above the threshold for
 * going parallel; theta 3 so the angles wrap. */
static void alias_rope(void) {
  enum { B = 3, T = 40, H = 4, KV = 2, HD = 20, RN = B * T * (H + 2 * KV) * HD };
  float *x = NEW(float, RN), *g = NEW(float, RN), *want = NEW(float, RN), *io = NEW(float, RN);
  fill_rand(x, RN, 2.0f);
  fill_rand(g, RN, 1.0f);
  rt_rope_forward(want, x, B, T, H, KV, HD, 3.0f, 8, 1, 4, 16);
  memcpy(io, x, sizeof(float) * RN);
  rt_rope_forward(io, io, B, T, H, KV, HD, 3.0f, 8, 1, 4, 16);
  check_f("in place rope forward (out, x)", io, want, RN, EXACT);
  rt_rope_backward(want, g, B, T, H, KV, HD, 3.0f, 8, 1, 4, 16, 0);
  memcpy(io, g, sizeof(float) * RN);
  rt_rope_backward(io, io, B, T, H, KV, HD, 3.0f, 8, 1, 4, 16, 0);
  check_f("in place rope backward (dx, dout)", io, want, RN, EXACT);
  free(x);
  free(g);
  free(want);
  free(io);
}

/* dropout's pairs, above the parallel threshold, the mask stored and not */
static void alias_dropout(void) {
  float *x = NEW(float, AN), *g = NEW(float, AN), *want = NEW(float, AN), *io = NEW(float, AN);
  int32_t *mask = NEW(int32_t, (AN + 31) / 32);
  fill_rand(x, AN, 2.0f);
  fill_rand(g, AN, 1.0f);
  rt_dropout_forward(want, mask, x, AN, 0.2f, RT_MODE_TRAIN, 99);
  memcpy(io, x, sizeof(float) * AN);
  rt_dropout_forward(io, NULL, io, AN, 0.2f, RT_MODE_RECOMPUTE, 99);
  check_f("in place dropout forward (out, x)", io, want, AN, EXACT);
  rt_dropout_backward(want, g, mask, AN, 0.2f, RT_MODE_TRAIN, 99, 0);
  memcpy(io, g, sizeof(float) * AN);
  rt_dropout_backward(io, io, NULL, AN, 0.2f, RT_MODE_TRAIN, 99, 0);
  check_f("in place dropout backward (dx, dout), regenerated", io, want, AN, EXACT);
  rt_dropout_forward(io, NULL, x, AN, 0.2f, RT_MODE_EVAL, 0);
  check_f("dropout eval forward: the identity", io, x, AN, EXACT);
  free(x);
  free(g);
  free(want);
  free(io);
  free(mask);
}

// ----------------------------------------------------------------------------
// value-level forward checks

static void values_softmax_ce(void) {
  enum { N = 3, V = 50 };
  float x[N * V], p[N * V];
  for (int i = 0; i < N * V; i++) x[i] = 1000.0f + 5.0f * frand(); // exp would overflow
  rt_softmax_forward(p, x, N, V);
  for (int i = 0; i < N; i++) {
    double s = 0.0;
    for (int j = 0; j < V; j++) s += p[i * V + j];
    check_scalar("softmax row sums to 1 (logits ~1000)", s, 1.0, 1e-5);
  }
  int32_t y[N] = {0, 17, 49};
  float loss, lse[N];
  fill(x, N * V, 500.0f);
  rt_cross_entropy_forward(&loss, lse, x, y, N, V);
  check_scalar("cross_entropy of uniform logits = log V", loss, log((double)V), 1e-5);
  check_scalar("cross_entropy lse of uniform logits", lse[1], 500.0 + log((double)V), 1e-6);
  float mse;
  float pred[4] = {1, 2, 3, 4}, tgt[4] = {1, 0, 3, 8};
  rt_mse_forward(&mse, pred, tgt, 4);
  check_scalar("mse of known values = 5", mse, 5.0, 1e-7);
}

static void values_gelu_layernorm(void) {
  float x[4] = {0.0f, 1.0f, -10.0f, 10.0f}, y[4];
  rt_gelu_forward(y, x, 4, 1);
  check_scalar("gelu(0) = 0", y[0], 0.0, 1e-7);
  check_scalar("gelu(1) = 0.8411920 (tanh approximation)", y[1], 0.84119199, 1e-6);
  check_scalar("gelu(-10) = 0", y[2], 0.0, 1e-7);
  check_scalar("gelu(10) = 10", y[3], 10.0, 1e-7);
  rt_gelu_forward(y, x, 4, 0);
  check_scalar("exact gelu(0) = 0", y[0], 0.0, 1e-7);
  check_scalar("exact gelu(1) = Phi(1) = 0.8413447", y[1], 0.8413447460685429, 1e-6);
  check_scalar("exact gelu(-10) = 0", y[2], 0.0, 1e-7);
  check_scalar("exact gelu(10) = 10", y[3], 10.0, 1e-7);
  float gx[2] = {1.0f, -1.0f}, gd[2] = {1.0f, 1.0f}, gy[2];
  rt_gelu_backward(gy, gd, gx, 2, 0, 0);
  check_scalar("exact gelu'(1) = Phi(1) + phi(1) = 1.0833155", gy[0], 1.0833154705876864, 1e-6);
  check_scalar("exact gelu'(-1) = Phi(-1) - phi(-1) = -0.0833155", gy[1], -0.08331547058768629, 1e-6);
  float sx[3] = {1.0f, -100.0f, 100.0f}, sy[3];
  rt_silu_forward(sy, sx, 3);
  check_scalar("silu(1) = 1/(1 + e^-1) = 0.7310586", sy[0], 0.73105857863, 1e-6);
  check_scalar("silu(-100) = 0", sy[1], 0.0, 1e-7);
  check_scalar("silu(100) = 100", sy[2], 100.0, 1e-7);

  enum { N = 2, C = 64 };
  float in[N * C], out[N * C], w[C], b[C], mean[N], rstd[N];
  fill_rand(in, N * C, 3.0f);
  fill(w, C, 1.0f);
  fill(b, C, 0.0f);
  rt_layernorm_forward(out, mean, rstd, in, w, b, N, C, 1e-5f);
  for (int i = 0; i < N; i++) {
    double m = 0.0, v = 0.0, xm = 0.0, xv = 0.0;
    for (int j = 0; j < C; j++) {
      m += out[i * C + j];
      xm += in[i * C + j];
    }
    m /= C;
    xm /= C;
    for (int j = 0; j < C; j++) {
      v += (out[i * C + j] - m) * (out[i * C + j] - m);
      xv += (in[i * C + j] - xm) * (in[i * C + j] - xm);
    }
    v /= C; // biased, like PyTorch
    xv /= C;
    check_scalar("layernorm saved mean", mean[i], xm, 1e-6);
    check_scalar("layernorm saved rstd = 1/sqrt(var + 1e-5)", rstd[i], 1.0 / sqrt(xv + 1e-5), 1e-6);
    check_scalar("layernorm row mean = 0", m, 0.0, 1e-6);
    check_scalar("layernorm row var = var/(var+eps)", v, xv / (xv + 1e-5), 1e-5);
  }
}

/* Hugging Face's convention by hand: at t = 1 with hd 4 and theta 100, pair
 * (0, 2) turns by 1 rad and pair (1, 3) by 100^(-1/2) = 0.1 rad (not the
 * interleaved pairs (0, 1), (2, 3) of GPT-J); t = 0 and v are unchanged. */
static void values_rope(void) {
  float x[2 * 12] = {0}, y[2 * 12]; // T = 2 rows of q k v, one head each of hd 4
  for (int r = 0; r < 2; r++) {
    x[r * 12 + 0] = 1.0f;                                           // q = (1, 0, 0, 0)
    x[r * 12 + 4 + 1] = 1.0f;                                       // k = (0, 1, 0, 0)
    for (int j = 0; j < 4; j++) x[r * 12 + 8 + j] = (float)(5 + j); // v = (5, 6, 7, 8)
  }
  rt_rope_forward(y, x, 1, 2, 1, 1, 4, 100.0f, 0, 0, 0, 0);
  check_f("rope at t = 0: unchanged", y, x, 12, 0.0);
  const float *q = y + 12, *k = y + 16, *v = y + 20;
  check_scalar("rope t=1 q[0] = cos 1", q[0], cos(1.0), 1e-7);
  check_scalar("rope t=1 q[2] = sin 1 (pairs i, i + hd/2)", q[2], sin(1.0), 1e-7);
  check_scalar("rope t=1 q[1] = 0", q[1], 0.0, 1e-7);
  check_scalar("rope t=1 k[1] = cos 0.1", k[1], cos(0.1), 1e-7);
  check_scalar("rope t=1 k[3] = sin 0.1 (angle t theta^(-2i/hd))", k[3], sin(0.1), 1e-7);
  check_f("rope t=1 v unchanged", v, x + 20, 4, 0.0);
}

/* lse[b,h,t] = log sum over the keys t2 that query t sees (causal: t2 <= t)
 * of exp(q_t . k_t2 / sqrt(hs)), in double; d = B T C NH KVH causal. */
static void ref_attention_lse(double *lse, const float *qkv, const int64_t *d) {
  int64_t B = d[0], T = d[1], C = d[2], NH = d[3], hs = C / NH, C3 = att_c3(d);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        const float *q = qkv + (b * T + t) * C3 + h * hs;
        double s = 0.0;
        for (int64_t t2 = 0; t2 < (d[5] ? t + 1 : T); t2++) {
          const float *k = qkv + (b * T + t2) * C3 + C + h / (NH / d[4]) * hs;
          double x = 0.0;
          for (int64_t i = 0; i < hs; i++) x += (double)q[i] * k[i];
          s += exp(x / sqrt((double)hs));
        }
        lse[(b * NH + h) * T + t] = log(s);
      }
}

static void values_attention(void) {
  enum { B = 2, T = 6, C = 8, NH = 2 };
  const int64_t d[6] = {B, T, C, NH, NH, 1};
  float qkv[B * T * 3 * C], out[B * T * C], out2[B * T * C], lse[B * NH * T];
  double want[B * NH * T];
  fill_rand(qkv, B * T * 3 * C, 2.0f);
  rt_attention_forward(out, lse, qkv, B, T, C, NH, NH, 1);
  rt_attention_forward(out2, NULL, qkv, B, T, C, NH, NH, 1);
  check_f("attention eval (lse = NULL) = training output", out2, out, B * T * C, 0.0);
  ref_attention_lse(want, qkv, d);
  check("attention saved lse (log-sum-exp of scores)", lse, want, B * NH * T, TOL);
  // Position 0 attends only to itself: its output is its own v, its lse its score.
  for (int b = 0; b < B; b++) check_f("attention at t=0 = v", out + b * T * C, qkv + b * T * 3 * C + 2 * C, C, 1e-7);
  // Multi-query, not causal: both query heads read the one kv head, every key.
  const int64_t dm[6] = {B, T, C, NH, 1, 0};
  rt_attention_forward(out, lse, qkv, B, T, C, NH, 1, 0);
  ref_attention_lse(want, qkv, dm);
  check("attention MQA non-causal saved lse", lse, want, B * NH * T, TOL);
  // Scaled scores near 128 overflow expf unless the row max is subtracted.
  for (int i = 0; i < B * T * 3 * C; i++) qkv[i] = 8.0f + 0.1f * frand();
  rt_attention_forward(out, lse, qkv, B, T, C, NH, NH, 1);
  ref_attention_lse(want, qkv, d);
  check("attention lse with large scores", lse, want, B * NH * T, TOL);
}

/* Products large enough that gemm() splits them over threads (by rows of C,
 * or by columns when C is wider), against direct double sums: the finite-
 * difference cases above are too small to be split. */
static void values_linear_split(void) {
  enum { M = 96, K = 64, N = 130 };
  float *x = NEW(float, M *K), *W = NEW(float, N *K), *b = NEW(float, N);
  float *g = NEW(float, M *N), *out = NEW(float, M *N);
  float *dx = NEW(float, M *K), *dW = NEW(float, N *K), *db = NEW(float, N);
  double *want = NEW(double, N *K > M * N ? N * K : M * N);
  fill_rand(x, M * K, 1.0f);
  fill_rand(W, N * K, 1.0f);
  fill_rand(b, N, 1.0f);
  fill_rand(g, M * N, 1.0f);
  rt_linear_forward(out, x, W, b, M, K, N);
  for (int i = 0; i < M; i++)
    for (int n = 0; n < N; n++) {
      double s = b[n];
      for (int k = 0; k < K; k++) s += (double)x[i * K + k] * W[n * K + k];
      want[i * N + n] = s;
    }
  check("linear forward, split over threads", out, want, M * N, TOL);
  fill_rand(dx, M * K, 1.0f); // acc = 1 onto these
  float *dx0 = NEW(float, M *K);
  memcpy(dx0, dx, sizeof(float) * M * K);
  fill(dW, N * K, NAN);
  rt_linear_backward(dx, dW, db, g, x, W, M, K, N, 1, 0, 0);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) {
      double s = dx0[i * K + k];
      for (int n = 0; n < N; n++) s += (double)g[i * N + n] * W[n * K + k];
      want[i * K + k] = s;
    }
  check("linear dx acc=1, split over threads", dx, want, M * K, TOL);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) {
      double s = 0.0;
      for (int i = 0; i < M; i++) s += (double)g[i * N + n] * x[i * K + k];
      want[n * K + k] = s;
    }
  check("linear dW acc=0, split over threads", dW, want, N * K, TOL);
  free(x), free(W), free(b), free(g), free(out), free(dx), free(dx0), free(dW), free(db);
  free(want);
}

// ----------------------------------------------------------------------------
// optimizers against hand-computed steps

static void values_optimizers(void) {
  // AdamW, t = 1, lr 0.1, wd 0.1: p = 0.99 (decay); m = 0.05, v = 0.00025;
  // m/(1-0.9) = 0.5, sqrt(v/(1-0.999)) = 0.5; p = 0.99 - 0.1 * 0.5/(0.5+1e-8).
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  rt_adamw_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.1, 1);
  check_scalar("adamw step 1: p", p, 0.89, 1e-6);
  check_scalar("adamw step 1: m", m, 0.05, 1e-6);
  check_scalar("adamw step 1: v", v, 0.00025, 1e-6);
  // Step 2, g = -1: p = 0.89*0.99 = 0.8811; m = 0.045 - 0.1 = -0.055;
  // v = 0.00024975 + 0.001 = 0.00124975; mhat = -0.055/0.19 = -0.289473684;
  // vhat = 0.00124975/0.001999 = 0.625187594, sqrt = 0.790688053;
  // p = 0.8811 + (0.1/0.19) * 0.055/(0.790688053 + 1e-8) = 0.917710354.
  g = -1.0f;
  rt_adamw_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.1, 2);
  check_scalar("adamw step 2: p", p, 0.917710354, 1e-6);
  check_scalar("adamw step 2: m", m, -0.055, 1e-6);
  check_scalar("adamw step 2: v", v, 0.00124975, 1e-6);

  // SGD, lr 0.1, wd 0.1, momentum 0.9, g = 0.5: g' = 0.6, buf = 0.6, p = 0.94;
  // step 2: g' = 0.5 + 0.094 = 0.594, buf = 0.54 + 0.594 = 1.134, p = 0.8266.
  float q = 1.0f, buf = 0.0f;
  g = 0.5f;
  rt_sgd_update(&q, &g, &buf, 1, 0.1, 0.9, 0.1, 0);
  check_scalar("sgd momentum step 1: p", q, 0.94, 1e-6);
  rt_sgd_update(&q, &g, &buf, 1, 0.1, 0.9, 0.1, 0);
  check_scalar("sgd momentum step 2: p", q, 0.8266, 1e-6);
  check_scalar("sgd momentum step 2: buf", buf, 1.134, 1e-6);
  // Nesterov: buf = 0.6, step g' + 0.9 buf = 1.14, p = 0.886.
  q = 1.0f;
  buf = 0.0f;
  rt_sgd_update(&q, &g, &buf, 1, 0.1, 0.9, 0.1, 1);
  check_scalar("sgd nesterov step 1: p", q, 0.886, 1e-6);
  check_scalar("sgd nesterov step 1: buf", buf, 0.6, 1e-6);
  // No momentum, no buffer: p = 1 - 0.1 * 0.6.
  q = 1.0f;
  rt_sgd_update(&q, &g, NULL, 1, 0.1, 0.0, 0.1, 0);
  check_scalar("sgd plain step: p", q, 0.94, 1e-6);
}

// ----------------------------------------------------------------------------
// window_attention (qkv, table); d = B H W C NH ws shift. The reference follows torchvision's
// shifted_window_attention step by step: torch.roll by -shift, windows cut row-major, the index
// buffer built from relative coordinates, the mask from its h/w slices, the roll back.

static int64_t ref_win_band(int64_t i, int64_t n, int64_t ws, int64_t shift) { // slices (0,-ws),(-ws,-s),(-s,None)
  return i < n - ws ? 0 : i < n - shift ? 1 : 2;
}
static void ref_window_attention(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], H = c->d[1], W = c->d[2], C = c->d[3], NH = c->d[4], ws = c->d[5], sh = c->d[6];
  int64_t hs = C / NH, N = ws * ws, src[64], lab[64];
  double p[64];
  for (int64_t b = 0; b < B; b++)
    for (int64_t wy = 0; wy < H / ws; wy++)
      for (int64_t wx = 0; wx < W / ws; wx++) {
        for (int64_t t = 0; t < N; t++) { // rolled position (r, cc) reads x[(r + sh) % H, (cc + sh) % W]
          int64_t r = wy * ws + t / ws, cc = wx * ws + t % ws;
          src[t] = b * H * W + (r + sh) % H * W + (cc + sh) % W;
          lab[t] = sh ? ref_win_band(r, H, ws, sh) * 3 + ref_win_band(cc, W, ws, sh) : 0;
        }
        for (int64_t h = 0; h < NH; h++)
          for (int64_t i = 0; i < N; i++) {
            for (int64_t j = 0; j < N; j++) {
              double s = 0.0;
              for (int64_t e = 0; e < hs; e++)
                s += in[0][src[i] * 3 * C + h * hs + e] * in[0][src[j] * 3 * C + C + h * hs + e];
              int64_t dy = i / ws - j / ws + ws - 1, dx = i % ws - j % ws + ws - 1; // coords[i] - coords[j], shifted
              p[j] =
                  s / sqrt((double)hs) + in[1][(dy * (2 * ws - 1) + dx) * NH + h] + (lab[i] != lab[j] ? -100.0 : 0.0);
            }
            ref_softmax_rows(p, p, 1, N);
            for (int64_t e = 0; e < hs; e++) {
              double s = 0.0;
              for (int64_t j = 0; j < N; j++) s += p[j] * in[0][src[j] * 3 * C + 2 * C + h * hs + e];
              out[src[i] * C + h * hs + e] = s;
            }
          }
      }
}
static void fwd_window_attention(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  float *lse = NEW(float, d[0] * d[4] * d[1] * d[2]);
  rt_window_attention_forward(out, lse, in[0], in[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6]);
  free(lse);
}
static void bwd_window_attention(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  int64_t n = d[0] * d[1] * d[2];
  float *out = NEW(float, n *d[3]), *lse = NEW(float, n *d[4]);
  fill(out, n * d[3], NAN); // forward must write every output and statistic
  fill(lse, n * d[4], NAN);
  rt_window_attention_forward(out, lse, in[0], in[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6]);
  rt_window_attention_backward(din[0], din[1], dout, in[0], in[1], out, lse, d[0], d[1], d[2], d[3], d[4], d[5], d[6],
                               acc, acc);
  free(out);
  free(lse);
}
static void gradchecks_window(void) {
  // A 4x6 map of 2x2 windows rolled by 1 (the mask's three bands on each axis), 2 heads of 4; and a
  // 3x3 window unshifted on a 3x6 map with 3 heads of 2. Planted once: the roll undone
  // at the wrong side ((r - shift) instead of (r + shift) in rt_window_pos, memplan_kernels.h) printed
  // "FAIL window_attention (2x2, shift 1) forward max rel err 6.40e+01" (and its gradients).
  run_case(&(Case){.name = "window_attention (2x2, shift 1)",
                   .nin = 2,
                   .in_n = {2 * 4 * 6 * 24, 9 * 2},
                   .amp = {1.5f, 1.0f},
                   .out_n = 2 * 4 * 6 * 8,
                   .d = {2, 4, 6, 8, 2, 2, 1},
                   .ref = ref_window_attention,
                   .fwd = fwd_window_attention,
                   .bwd = bwd_window_attention});
  run_case(&(Case){.name = "window_attention (3x3, no shift)",
                   .nin = 2,
                   .in_n = {1 * 3 * 6 * 18, 25 * 3},
                   .out_n = 1 * 3 * 6 * 6,
                   .d = {1, 3, 6, 6, 3, 3, 0},
                   .ref = ref_window_attention,
                   .fwd = fwd_window_attention,
                   .bwd = bwd_window_attention});
}

// diffusion ops (runtime/cpu_diffusion.c)

// groupnorm (x [w b]); d = N C S G, f = eps; nin 1 is affine: false
static void ref_groupnorm(double *out, double *const *in, const Case *c) {
  int64_t N = c->d[0], C = c->d[1], S = c->d[2], G = c->d[3], m = C / G * S;
  for (int64_t ng = 0; ng < N * G; ng++) {
    const double *x = in[0] + ng * m;
    double mu = 0.0, v = 0.0;
    for (int64_t j = 0; j < m; j++) mu += x[j];
    mu /= (double)m;
    for (int64_t j = 0; j < m; j++) v += (x[j] - mu) * (x[j] - mu);
    double r = 1.0 / sqrt(v / (double)m + (double)c->f);
    for (int64_t j = 0; j < m; j++) {
      int64_t ch = ng % G * (C / G) + j / S;
      out[ng * m + j] = (x[j] - mu) * r * (c->nin > 1 ? in[1][ch] : 1.0) + (c->nin > 1 ? in[2][ch] : 0.0);
    }
  }
}
static void fwd_groupnorm(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  rt_groupnorm_forward(out, NULL, NULL, in[0], c->nin > 1 ? in[1] : NULL, c->nin > 1 ? in[2] : NULL, d[0], d[1], d[2],
                       d[3], c->f);
}
static void bwd_groupnorm(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  float *out = NEW(float, d[0] * d[1] * d[2]), *mean = NEW(float, d[0] * d[3]), *rstd = NEW(float, d[0] * d[3]);
  const float *w = c->nin > 1 ? in[1] : NULL, *b = c->nin > 1 ? in[2] : NULL;
  rt_groupnorm_forward(out, mean, rstd, in[0], w, b, d[0], d[1], d[2], d[3], c->f);
  rt_groupnorm_backward(din[0], c->nin > 1 ? din[1] : NULL, c->nin > 1 ? din[2] : NULL, dout, in[0], w, mean, rstd,
                        d[0], d[1], d[2], d[3], c->f, acc, acc, acc);
  free(out);
  free(mean);
  free(rstd);
}

// add_channels (x e); d = NC S
static void ref_add_channels(double *out, double *const *in, const Case *c) {
  for (int64_t i = 0; i < c->d[0] * c->d[1]; i++) out[i] = in[0][i] + in[1][i / c->d[1]];
}
static void fwd_add_channels(float *out, float *const *in, const Case *c) {
  rt_add_channels_forward(out, in[0], in[1], c->d[0], c->d[1]);
}
static void bwd_add_channels(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_add_channels_backward(din[0], din[1], dout, c->d[0], c->d[1], acc, acc);
}

// upsample (x); d = NC H W s
static void ref_upsample(double *out, double *const *in, const Case *c) {
  int64_t NC = c->d[0], H = c->d[1], W = c->d[2], s = c->d[3];
  for (int64_t pl = 0; pl < NC; pl++)
    for (int64_t y = 0; y < H * s; y++)
      for (int64_t z = 0; z < W * s; z++) out[(pl * H * s + y) * W * s + z] = in[0][(pl * H + y / s) * W + z / s];
}
static void fwd_upsample(float *out, float *const *in, const Case *c) {
  rt_upsample_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static void bwd_upsample(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  (void)in;
  rt_upsample_backward(din[0], dout, c->d[0], c->d[1], c->d[2], c->d[3], acc);
}

// timestep_embedding (t); d = B D flip, f = downscale_freq_shift, rs[0] = max_period. diffusers' formula:
// exponent = -ln(max_period) arange(half) / (half - shift); emb = t exp(exponent); [sin, cos] (flip: [cos, sin])
static void ref_temb(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], D = c->d[1], h = D / 2;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t i = 0; i < h; i++) {
      double a = in[0][b] * exp(-log((double)c->rs[0]) * (double)i / ((double)h - (double)c->f));
      out[b * D + (c->d[2] ? h + i : i)] = sin(a);
      out[b * D + (c->d[2] ? i : h + i)] = cos(a);
    }
    if (D % 2) out[b * D + D - 1] = 0.0;
  }
}
static void fwd_temb(float *out, float *const *in, const Case *c) {
  rt_timestep_embedding_forward(out, in[0], c->d[0], c->d[1], c->d[2], c->f, c->rs[0]);
}
static void bwd_temb(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  rt_timestep_embedding_backward(din[0], dout, in[0], c->d[0], c->d[1], c->d[2], c->f, c->rs[0], acc);
}

// conv_transpose2d (x W [b]); d = N C H W O Ho Wo k s p: the scatter form, not the kernels' im2col products
static void ref_convt(double *out, double *const *in, const Case *c) {
  const int64_t *d = c->d;
  int64_t N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], Ho = d[5], Wo = d[6], k = d[7], s = d[8], p = d[9];
  for (int64_t i = 0; i < N * O * Ho * Wo; i++) out[i] = c->nin > 2 ? in[2][i / (Ho * Wo) % O] : 0.0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t ci = 0; ci < C; ci++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++)
          for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < k; i++)
              for (int64_t j = 0; j < k; j++) {
                int64_t y = h * s - p + i, z = w * s - p + j;
                if (y < 0 || y >= Ho || z < 0 || z >= Wo) continue;
                out[((n * O + o) * Ho + y) * Wo + z] +=
                    in[0][((n * C + ci) * H + h) * W + w] * in[1][((ci * O + o) * k + i) * k + j];
              }
}
/* The plan's scratch: O k k H W floats (none at k = s = 1, p = 0), garbage on entry. */
static float *convt_scratch(const Case *c) {
  const int64_t *d = c->d;
  if (d[7] == 1 && d[8] == 1 && d[9] == 0) return NULL;
  int64_t n = d[4] * d[7] * d[7] * d[2] * d[3];
  float *s = NEW(float, n);
  fill(s, n, NAN);
  return s;
}
static void fwd_convt(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  float *s = convt_scratch(c);
  rt_conv_transpose2d_forward(out, in[0], in[1], c->nin > 2 ? in[2] : NULL, s, d[0], d[1], d[2], d[3], d[4], d[5], d[6],
                              d[7], d[8], d[9]);
  free(s);
}
static void bwd_convt(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  float *s = convt_scratch(c);
  rt_conv_transpose2d_backward(din[0], din[1], c->nin > 2 ? din[2] : NULL, dout, in[0], in[1], s, d[0], d[1], d[2],
                               d[3], d[4], d[5], d[6], d[7], d[8], d[9], acc, acc, acc);
  free(s);
}
static void case_convt(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int64_t s,
                       int64_t p, int64_t op, int bias) {
  int64_t Ho = (H - 1) * s - 2 * p + k + op, Wo = (W - 1) * s - 2 * p + k + op;
  run_case(&(Case){.name = name,
                   .nin = bias ? 3 : 2,
                   .in_n = {N * C * H * W, C * O * k * k, O},
                   .out_n = N * O * Ho * Wo,
                   .d = {N, C, H, W, O, Ho, Wo, k, s, p},
                   .ref = ref_convt,
                   .fwd = fwd_convt,
                   .bwd = bwd_convt});
}

// ddpm_noise (x0); d = B S T key, f = beta_start, rs[0] = beta_end. The reference draws t and eps from the
// header's hash itself (in double), so the finite differences are those of x_t at fixed draws.
static uint64_t mix64_t(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double ddpm_u(uint64_t key, uint64_t j) { return ((double)(mix64_t(key ^ j) >> 11) + 0.5) * 0x1p-53; }
static int64_t ddpm_t_ref(uint64_t key, int64_t b, int64_t T) {
  return (int64_t)((mix64_t(mix64_t(key ^ 0x74696d65u) ^ (uint64_t)b) >> 11) % (uint64_t)T);
}
static double ddpm_eps_ref(uint64_t key, int64_t i) {
  uint64_t q = (uint64_t)i / 2;
  double r = sqrt(-2.0 * log(ddpm_u(key, 2 * q))), th = 6.283185307179586 * ddpm_u(key, 2 * q + 1);
  return r * (i % 2 ? sin(th) : cos(th));
}
static double ddpm_abar_ref(int64_t t, int64_t T, double b0, double b1) {
  double a = 1.0;
  for (int64_t i = 0; i <= t; i++) a *= 1.0 - (b0 + (b1 - b0) * (double)i / (double)(T - 1));
  return a;
}
static void ref_ddpm(double *out, double *const *in, const Case *c) {
  int64_t B = c->d[0], S = c->d[1], T = c->d[2];
  uint64_t key = (uint64_t)c->d[3];
  for (int64_t b = 0; b < B; b++) {
    double ab = ddpm_abar_ref(ddpm_t_ref(key, b, T), T, c->f, c->rs[0]);
    for (int64_t i = b * S; i < (b + 1) * S; i++) out[i] = sqrt(ab) * in[0][i] + sqrt(1.0 - ab) * ddpm_eps_ref(key, i);
  }
}
static void fwd_ddpm(float *out, float *const *in, const Case *c) {
  const int64_t *d = c->d;
  float *eps = NEW(float, d[0] * d[1]), *t = NEW(float, d[0]);
  rt_ddpm_noise_forward(out, eps, t, in[0], d[0], d[1], d[2], c->f, c->rs[0], RT_MODE_TRAIN, (uint64_t)d[3]);
  free(eps);
  free(t);
}
static void bwd_ddpm(float *const *din, const float *dout, float *const *in, const Case *c, int acc) {
  const int64_t *d = c->d;
  float *xt = NEW(float, d[0] * d[1]), *eps = NEW(float, d[0] * d[1]), *t = NEW(float, d[0]);
  rt_ddpm_noise_forward(xt, eps, t, in[0], d[0], d[1], d[2], c->f, c->rs[0], RT_MODE_TRAIN, (uint64_t)d[3]);
  rt_ddpm_noise_backward(din[0], dout, t, d[0], d[1], d[2], c->f, c->rs[0], RT_MODE_RECOMPUTE, (uint64_t)d[3], acc);
  free(xt);
  free(eps);
  free(t);
}

/* The draws themselves: eps and t equal the reference's, a recompute repeats them bit for bit, another key
 * changes them, eps is N(0, 1) to sampling precision and t covers 0 .. T-1. */
static void values_ddpm(void) {
  enum { B = 64, S = 4096, T = 1000 };
  float *x0 = NEW(float, B *S), *xt = NEW(float, B *S), *eps = NEW(float, B *S), *t = NEW(float, B);
  float *xt2 = NEW(float, B *S), *eps2 = NEW(float, B *S), *t2 = NEW(float, B);
  fill_rand(x0, B * S, 1.0f);
  uint64_t key = 0x1234567887654321ull;
  rt_ddpm_noise_forward(xt, eps, t, x0, B, S, T, 1e-4f, 0.02f, RT_MODE_TRAIN, key);
  rt_ddpm_noise_forward(xt2, eps2, t2, x0, B, S, T, 1e-4f, 0.02f, RT_MODE_RECOMPUTE, key);
  check_f("ddpm_noise recompute: the same x_t", xt2, xt, B * S, 0.0);
  check_f("ddpm_noise recompute: the same t", t2, t, B, 0.0);
  double *want = NEW(double, B *S), *tw = NEW(double, B);
  for (int64_t i = 0; i < B * S; i++) want[i] = ddpm_eps_ref(key, i);
  for (int64_t b = 0; b < B; b++) tw[b] = (double)ddpm_t_ref(key, b, T);
  check("ddpm_noise eps: Box-Muller of the key's hash", eps, want, B * S, TOL);
  check("ddpm_noise t: the key's hash mod T", t, tw, B, 0.0);
  double m = 0.0, v = 0.0, tmin = T, tmax = -1;
  for (int64_t i = 0; i < B * S; i++) m += eps[i];
  m /= B * S;
  for (int64_t i = 0; i < B * S; i++) v += (eps[i] - m) * (eps[i] - m);
  v /= B * S;
  for (int64_t b = 0; b < B; b++) tmin = fmin(tmin, t[b]), tmax = fmax(tmax, t[b]);
  // 262144 draws: the mean's standard error is 0.002, the variance's 0.0028; 5 of them each
  check_scalar("ddpm_noise eps mean 0 (5 standard errors: 0.01)", m, 0.0, 0.01);
  check_scalar("ddpm_noise eps variance 1 (5 standard errors: 0.014)", v, 1.0, 0.014);
  check_scalar("ddpm_noise t within [0, T) and spread (min < 100)", tmin < 100 && tmax < T && tmin >= 0, 1.0, 0.0);
  rt_ddpm_noise_forward(xt2, eps2, t2, x0, B, S, T, 1e-4f, 0.02f, RT_MODE_TRAIN, key + 1);
  int same = 0;
  for (int64_t i = 0; i < B * S; i++) same += eps2[i] == eps[i];
  check_scalar("ddpm_noise another key draws other noise", same < 16, 1.0, 0.0);
  // abar at the schedule's ends: 1 - 1e-4 at t = 0 and prod (1 - beta) = 4.04e-5 at t = 999 (diffusers' value)
  check_scalar("ddpm abar(999) = 4.0358e-5", ddpm_abar_ref(999, 1000, (double)1e-4f, (double)0.02f) * 1e5, 4.0358,
               1e-4);
  free(x0), free(xt), free(eps), free(t), free(xt2), free(eps2), free(t2), free(want), free(tw);
}

/* add_channels' alias-safe pairs (its ops.c entry's inplace_fwd and inplace_bwd): (out, x) and, with acc 0,
 * (dx, dout), de summed before dx overwrites dout. Planted once: the sum after dx's write (dx = 2 dout) printed
 * "FAIL in place add_channels backward: de max rel err 1.00e+00". */
static void alias_add_channels(void) {
  enum { NC = 6, S = 40 };
  float x[NC * S], e[NC], want[NC * S], io[NC * S], de[NC], de2[NC];
  fill_rand(x, NC * S, 1.0f);
  fill_rand(e, NC, 1.0f);
  rt_add_channels_forward(want, x, e, NC, S);
  memcpy(io, x, sizeof io);
  rt_add_channels_forward(io, io, e, NC, S);
  check_f("in place add_channels forward (out, x)", io, want, NC * S, EXACT);
  rt_add_channels_backward(want, de, x, NC, S, 0, 0);
  memcpy(io, x, sizeof io);
  rt_add_channels_backward(io, de2, io, NC, S, 0, 0);
  check_f("in place add_channels backward (dx, dout)", io, want, NC * S, EXACT);
  check_f("in place add_channels backward: de", de2, de, NC, EXACT);
}

static void gradchecks_diffusion(void) {
  alias_add_channels();
  // Planted once: groupnorm's dx reading w of channel j % Cg instead of j / S printed "FAIL groupnorm (N=2 C=6
  // S=5 G=3) d0 acc=0 max rel err 3.57e+00".
  run_case(&(Case){.name = "groupnorm (N=2 C=6 S=5 G=3)",
                   .nin = 3,
                   .in_n = {2 * 6 * 5, 6, 6},
                   .out_n = 2 * 6 * 5,
                   .d = {2, 6, 5, 3},
                   .f = 1e-5f,
                   .ref = ref_groupnorm,
                   .fwd = fwd_groupnorm,
                   .bwd = bwd_groupnorm});
  run_case(&(Case){.name = "groupnorm (affine: false, G=C=4)",
                   .nin = 1,
                   .in_n = {3 * 4 * 7},
                   .amp = {0.01f}, /* variance near eps: a wrong eps shows */
                   .out_n = 3 * 4 * 7,
                   .d = {3, 4, 7, 4},
                   .f = 1e-5f,
                   .ref = ref_groupnorm,
                   .fwd = fwd_groupnorm,
                   .bwd = bwd_groupnorm});
  run_case(&(Case){.name = "add_channels (NC=6 S=7)",
                   .nin = 2,
                   .in_n = {6 * 7, 6},
                   .out_n = 6 * 7,
                   .d = {6, 7},
                   .ref = ref_add_channels,
                   .fwd = fwd_add_channels,
                   .bwd = bwd_add_channels});
  run_case(&(Case){.name = "upsample (3x2 by 2)",
                   .nin = 1,
                   .in_n = {3 * 3 * 2},
                   .out_n = 3 * 3 * 2 * 4,
                   .d = {3, 3, 2, 2},
                   .ref = ref_upsample,
                   .fwd = fwd_upsample,
                   .bwd = bwd_upsample});
  run_case(&(Case){.name = "upsample (2x3 by 3)",
                   .nin = 1,
                   .in_n = {2 * 2 * 3},
                   .out_n = 2 * 2 * 3 * 9,
                   .d = {2, 2, 3, 3},
                   .ref = ref_upsample,
                   .fwd = fwd_upsample,
                   .bwd = bwd_upsample});
  // timesteps to +-20: a = t f spans several periods of the first frequencies
  run_case(&(Case){.name = "timestep_embedding (D=8, shift 1)",
                   .nin = 1,
                   .in_n = {3},
                   .amp = {20.0f},
                   .out_n = 3 * 8,
                   .d = {3, 8, 0},
                   .f = 1.0f,
                   .rs = {10000.0f},
                   .ref = ref_temb,
                   .fwd = fwd_temb,
                   .bwd = bwd_temb});
  run_case(&(Case){.name = "timestep_embedding (D=9 odd, flip, shift 0)",
                   .nin = 1,
                   .in_n = {2},
                   .amp = {20.0f},
                   .out_n = 2 * 9,
                   .d = {2, 9, 1},
                   .f = 0.0f,
                   .rs = {100.0f},
                   .ref = ref_temb,
                   .fwd = fwd_temb,
                   .bwd = bwd_temb});
  case_convt("conv_transpose2d (k4 s2 p1)", 2, 3, 3, 4, 2, 4, 2, 1, 0, 1);
  case_convt("conv_transpose2d (k3 s2 p1 output_padding 1)", 1, 2, 3, 3, 3, 3, 2, 1, 1, 1);
  case_convt("conv_transpose2d (k2 s1, no bias)", 2, 2, 2, 3, 2, 2, 1, 0, 0, 0);
  case_convt("conv_transpose2d (1x1, no scratch)", 2, 3, 2, 3, 2, 1, 1, 0, 0, 1);
  run_case(&(Case){.name = "ddpm_noise (B=3 S=10)",
                   .nin = 1,
                   .in_n = {3 * 10},
                   .out_n = 3 * 10,
                   .d = {3, 10, 1000, 0x5eed},
                   .f = 1e-4f,
                   .rs = {0.02f},
                   .ref = ref_ddpm,
                   .fwd = fwd_ddpm,
                   .bwd = bwd_ddpm});
  values_ddpm();
}

int main(void) {
  rt_set_threads(2);
  gradchecks();
  gradchecks_shape();
  gradchecks_window();
  gradchecks_diffusion();
  lce_checks();
  alias_elementwise();
  alias_shape();
  alias_rows();
  alias_rope();
  alias_dropout();
  values_softmax_ce();
  values_gelu_layernorm();
  values_batchnorm();
  values_rope();
  values_attention();
  values_linear_split();
  values_conv2d();
  values_optimizers();
  printf("worst relative error against double references: %.2e (tolerance %.0e)\n", worst, TOL);
  if (failures) printf("%d check(s) FAILED\n", failures);
  return failures ? 1 : 0;
}
