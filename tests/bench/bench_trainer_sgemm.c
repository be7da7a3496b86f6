/* bench_trainer_sgemm.c: the sgemm rate bench_trainer.py compares the trainer
 * against: OpenBLAS's own cblas_sgemm on the matrix products of one GPT-2
 * training step (forward, and the transposed backward products), with
 * OpenBLAS threading over THREADS threads.
 *
 *   bench_trainer_sgemm M C V L THREADS   (M = B*T rows; GPT-2 124M at B=4,
 *                                          T=64: 256 768 50304 12 2)
 *
 * Prints one line per shape (best of several runs) and a last line
 * "sgemm_rate GFLOPS": total FLOPs / total time over one step's products,
 * the per-layer shapes counted L times and the lm-head ones once. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int num_threads);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  const char *name;
  int ta, tb, m, n, k;
} Shape;

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: bench_trainer_sgemm M C V L THREADS\n");
    return 2;
  }
  int M = atoi(argv[1]), C = atoi(argv[2]), V = atoi(argv[3]), L = atoi(argv[4]), th = atoi(argv[5]);
  if (M < 1 || C < 1 || V < 1 || L < 1 || th < 1) {
    fprintf(stderr, "bench_trainer_sgemm: positive sizes and threads, please\n");
    return 2;
  }
  openblas_set_num_threads(th);
  /* C[m,n] = op(A)[m,k] op(B)[k,n]: linear forward x W^T, backward dx = dout W,
   * dW = dout^T x, for the qkv, attention proj, fc and fc proj linears and the
   * lm head (V outputs). */
  const Shape s[] = {
      {"qkv fwd", 0, 1, M, 3 * C, C},    {"qkv dx", 0, 0, M, C, 3 * C},    {"qkv dW", 1, 0, 3 * C, C, M},
      {"proj fwd", 0, 1, M, C, C},       {"proj dx", 0, 0, M, C, C},       {"proj dW", 1, 0, C, C, M},
      {"fc fwd", 0, 1, M, 4 * C, C},     {"fc dx", 0, 0, M, C, 4 * C},     {"fc dW", 1, 0, 4 * C, C, M},
      {"fcproj fwd", 0, 1, M, C, 4 * C}, {"fcproj dx", 0, 0, M, 4 * C, C}, {"fcproj dW", 1, 0, C, 4 * C, M},
      {"lmhead fwd", 0, 1, M, V, C},     {"lmhead dx", 0, 0, M, C, V},     {"lmhead dW", 1, 0, V, C, M},
  };
  int ns = (int)(sizeof s / sizeof s[0]);
  size_t big = 0;
  for (int i = 0; i < ns; i++) {
    size_t a = (size_t)s[i].m * s[i].k, b = (size_t)s[i].k * s[i].n, c = (size_t)s[i].m * s[i].n;
    big = a > big ? a : big, big = b > big ? b : big, big = c > big ? c : big;
  }
  float *A = malloc(big * sizeof(float)), *B = malloc(big * sizeof(float)), *Cm = malloc(big * sizeof(float));
  if (!A || !B || !Cm) {
    fprintf(stderr, "bench_trainer_sgemm: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < big; i++) {
    A[i] = (float)(i % 7) * 0.01f;
    B[i] = (float)(i % 5) * 0.01f;
    Cm[i] = 0.0f;
  }
  double flops = 0.0, secs = 0.0;
  for (int i = 0; i < ns; i++) {
    const Shape *q = &s[i];
    int lda = q->ta ? q->m : q->k, ldb = q->tb ? q->k : q->n;
    double f = 2.0 * q->m * q->n * q->k, best = 1e30;
    int reps = f > 5e9 ? 3 : 7;
    for (int r = 0; r < reps; r++) {
      double t0 = now_s();
      cblas_sgemm(CblasRowMajor, q->ta ? CblasTrans : CblasNoTrans, q->tb ? CblasTrans : CblasNoTrans, q->m, q->n, q->k,
                  1.0f, A, lda, B, ldb, 0.0f, Cm, q->n);
      double t = now_s() - t0;
      best = t < best ? t : best;
    }
    printf("%-11s %c%c m=%6d n=%6d k=%6d  %9.3f ms  %7.1f GFLOP/s\n", q->name, q->ta ? 'T' : 'N', q->tb ? 'T' : 'N',
           q->m, q->n, q->k, 1e3 * best, f / best * 1e-9);
    int times = i < ns - 3 ? L : 1; // the last three are the lm head
    flops += times * f, secs += times * best;
  }
  printf("sgemm_rate %.2f\n", flops / secs * 1e-9);
  free(A), free(B), free(Cm);
  return 0;
}
