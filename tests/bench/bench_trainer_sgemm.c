/* bench_trainer_sgemm.c: the sgemm rate bench_trainer.py compares the trainer
 * against: OpenBLAS's own cblas_sgemm, threading over THREADS threads, on the
 * matrix products one training step of a plan runs (bench_trainer.py lists
 * them from plan.json's schedule: every linear and matmul, forward and
 * backward).
 *
 *   bench_trainer_sgemm SHAPES THREADS
 *
 * SHAPES: a text file, one product per line, "m n k ta tb count [label]":
 * C[m,n] = op(A)[m,k] op(B)[k,n], row-major; ta: A is stored [k,m], tb: B is
 * stored [n,k] (the runtime's gemm() convention); count: how many times a step
 * runs it. Blank lines and lines starting with '#' are skipped.
 *
 * Times every shape in each of several rounds (a run of a small product is a
 * batch of calls, long enough for the clock) and keeps each shape's best;
 * prints the kernel OpenBLAS runs ("sgemm kernel: NAME"; OPENBLAS_CORETYPE
 * chooses it), one line per shape and a last line "sgemm_rate GFLOPS": total
 * FLOPs / total time over the step's products, each counted `count` times. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  char label[64];
  int ta, tb, m, n, k;
  long count;
  double best; // seconds, the best of the rounds
} Shape;

/* Reads SHAPES into *out (malloc'd); returns the count, or -1 after a message. */
static int read_shapes(const char *path, Shape **out) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "bench_trainer_sgemm: cannot open %s\n", path);
    return -1;
  }
  Shape *s = NULL;
  int n = 0, cap = 0, lineno = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line + strspn(line, " \t\r\n");
    if (!*p || *p == '#') continue;
    Shape q = {.label = "-"};
    int got = sscanf(p, "%d %d %d %d %d %ld %63s", &q.m, &q.n, &q.k, &q.ta, &q.tb, &q.count, q.label);
    if (got < 6 || q.m < 1 || q.n < 1 || q.k < 1 || (q.ta != 0 && q.ta != 1) || (q.tb != 0 && q.tb != 1) ||
        q.count < 1) {
      fprintf(stderr, "bench_trainer_sgemm: %s:%d: want \"m n k ta tb count [label]\", sizes and count >= 1\n", path,
              lineno);
      fclose(f), free(s);
      return -1;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      Shape *t = realloc(s, (size_t)cap * sizeof *s);
      if (!t) {
        fprintf(stderr, "bench_trainer_sgemm: out of memory\n");
        fclose(f), free(s);
        return -1;
      }
      s = t;
    }
    s[n++] = q;
  }
  fclose(f);
  if (n == 0) {
    fprintf(stderr, "bench_trainer_sgemm: %s lists no products\n", path);
    free(s);
    return -1;
  }
  *out = s;
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: bench_trainer_sgemm SHAPES THREADS\n");
    return 2;
  }
  int th = atoi(argv[2]);
  if (th < 1) {
    fprintf(stderr, "bench_trainer_sgemm: THREADS must be positive\n");
    return 2;
  }
  Shape *s;
  int ns = read_shapes(argv[1], &s);
  if (ns < 0) return 1;
  openblas_set_num_threads(th);
  printf("sgemm kernel: %s\n", openblas_get_corename());
  size_t na = 0, nb = 0, nc = 0;
  for (int i = 0; i < ns; i++) {
    size_t a = (size_t)s[i].m * s[i].k, b = (size_t)s[i].k * s[i].n, c = (size_t)s[i].m * s[i].n;
    na = a > na ? a : na, nb = b > nb ? b : nb, nc = c > nc ? c : nc;
  }
  float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float)), *Cm = malloc(nc * sizeof(float));
  if (!A || !B || !Cm) {
    fprintf(stderr, "bench_trainer_sgemm: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < na; i++) A[i] = (float)(i % 7) * 0.01f;
  for (size_t i = 0; i < nb; i++) B[i] = (float)(i % 5) * 0.01f;
  memset(Cm, 0, nc * sizeof(float));
  /* Rounds over all shapes, each shape's time its best over the rounds: a
   * burst of load elsewhere slows one round of every shape rather than all
   * the runs of a few. */
  double round_flops = 0.0, flops = 0.0, secs = 0.0;
  for (int i = 0; i < ns; i++) {
    s[i].best = 1e30;
    round_flops += 2.0 * s[i].m * s[i].n * s[i].k;
  }
  int rounds = round_flops > 5e10 ? 3 : 7;
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < ns; i++) {
      Shape *q = &s[i];
      int lda = q->ta ? q->m : q->k, ldb = q->tb ? q->k : q->n;
      double f = 2.0 * q->m * q->n * q->k;
      int inner = f >= 2e7 ? 1 : f <= 2e3 ? 10000 : (int)(2e7 / f); // small products: time a batch of calls
      double t0 = now_s();
      for (int j = 0; j < inner; j++)
        cblas_sgemm(CblasRowMajor, q->ta ? CblasTrans : CblasNoTrans, q->tb ? CblasTrans : CblasNoTrans, q->m, q->n,
                    q->k, 1.0f, A, lda, B, ldb, 0.0f, Cm, q->n);
      double t = (now_s() - t0) / inner;
      q->best = t < q->best ? t : q->best;
    }
  long products = 0;
  for (int i = 0; i < ns; i++) {
    const Shape *q = &s[i];
    double f = 2.0 * q->m * q->n * q->k;
    printf("%-36s %c%c m=%6d n=%6d k=%6d x%-5ld %10.4f ms  %7.1f GFLOP/s\n", q->label, q->ta ? 'T' : 'N',
           q->tb ? 'T' : 'N', q->m, q->n, q->k, q->count, 1e3 * q->best, f / q->best * 1e-9);
    flops += (double)q->count * f, secs += (double)q->count * q->best;
    products += q->count;
  }
  printf("sgemm total: %ld products, %.3f GFLOP, %.3f ms at %d threads\n", products, flops * 1e-9, secs * 1e3, th);
  printf("sgemm_rate %.2f\n", flops / secs * 1e-9);
  free(A), free(B), free(Cm), free(s);
  return 0;
}
