/* bench_convt.c: one training step's conv_transpose2d kernels of the CPU
 * runtime (forward, then backward: dx, dW, db), the best of REPS runs, for
 * bench_convt.py to print against torch's F.conv_transpose2d.
 *
 *   bench_convt N C H W O k s p THREADS REPS
 *
 * x [N, C, H, W], W [C, O, k, k], bias [O]; output padding 0. Prints
 * "convt_ms FWD BWD" (milliseconds) and, as a check that the kernels ran,
 * "convt_sum S" (the output's sum, in double). The scratch is the plan's:
 * O k k H W floats (planner/ops.c, convt_scratch). The direct loop nests
 * it replaced (main at 18bab91, no scratch argument) were measured with this
 * program against that runtime. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "memplan_rt.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *rand_buf(int64_t n, unsigned *seed) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!p) {
    fprintf(stderr, "bench_convt: out of memory (%lld floats)\n", (long long)n);
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
  return p;
}

int main(int argc, char **argv) {
  if (argc != 11) {
    fprintf(stderr, "usage: bench_convt N C H W O k s p THREADS REPS\n");
    return 2;
  }
  int64_t a[8];
  for (int i = 0; i < 8; i++) a[i] = strtoll(argv[i + 1], NULL, 10);
  int64_t N = a[0], C = a[1], H = a[2], W = a[3], O = a[4], k = a[5], s = a[6], p = a[7];
  int threads = atoi(argv[9]), reps = atoi(argv[10]);
  int64_t Ho = (H - 1) * s - 2 * p + k, Wo = (W - 1) * s - 2 * p + k;
  rt_set_threads(threads);
  unsigned seed = 1;
  float *x = rand_buf(N * C * H * W, &seed), *w = rand_buf(C * O * k * k, &seed), *b = rand_buf(O, &seed);
  float *out = rand_buf(N * O * Ho * Wo, &seed), *g = rand_buf(N * O * Ho * Wo, &seed);
  float *dx = rand_buf(N * C * H * W, &seed), *dw = rand_buf(C * O * k * k, &seed), *db = rand_buf(O, &seed);
  float *scratch = rand_buf(O * k * k * H * W, &seed);
  double best_f = 1e30, best_b = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    rt_conv_transpose2d_forward(out, x, w, b, scratch, N, C, H, W, O, Ho, Wo, k, s, p);
    double t1 = now_s();
    rt_conv_transpose2d_backward(dx, dw, db, g, x, w, scratch, N, C, H, W, O, Ho, Wo, k, s, p, 0, 0, 0);
    double t2 = now_s();
    if (t1 - t0 < best_f) best_f = t1 - t0;
    if (t2 - t1 < best_b) best_b = t2 - t1;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < N * O * Ho * Wo; i++) sum += out[i];
  printf("convt_ms %.3f %.3f\nconvt_sum %.6e\n", 1e3 * best_f, 1e3 * best_b, sum);
  free(x), free(w), free(b), free(out), free(g), free(dx), free(dw), free(db), free(scratch);
  return 0;
}
