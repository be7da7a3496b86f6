/* trainer_util.c: the trainer program's helpers (errors, allocation, clocks, sizes) and random numbers
 * (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// helpers

int tr_rank = 0, tr_ranks = 1;

__attribute__((format(printf, 1, 2))) _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fputs("trainer: error: ", stderr);
  if (tr_ranks > 1) fprintf(stderr, "rank %d: ", tr_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

void *xmalloc(size_t n, const char *what) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory allocating %zu bytes for %s", n, what);
  return p;
}

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Peak resident set size of this process, bytes. */
int64_t peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (int64_t)ru.ru_maxrss * 1024;
}

const char *fmt_bytes(char *buf, size_t n, int64_t b) {
  if (b >= ((int64_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (1 << 30));
  else snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
  return buf;
}

/* A duration for the progress lines: "8.41 s", "3m07s", "2h05m". */
const char *fmt_secs(char *buf, size_t n, double s) {
  if (!(s < 1e9)) snprintf(buf, n, "?");
  else if (s < 60) snprintf(buf, n, "%.2f s", s);
  else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
  else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
  return buf;
}

// ----------------------------------------------------------------------------
// random numbers: splitmix64, for initialization and the synthetic data

uint64_t mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* A hash of (tag, a, b): the synthetic data set's only source of randomness. */
uint64_t key3(uint64_t tag, uint64_t a, uint64_t b) { return mix64(mix64(mix64(tag) ^ a) ^ b); }

/* The random key of an op with mode_arg (memplan_trainer.h): the same for
 * its forward, recompute and backward, new each micro-batch and step. */
uint64_t op_key_seed;
uint64_t tr_op_key(int64_t t, int mb, uint64_t layer) {
  return mix64(mix64(mix64(op_key_seed) ^ (uint64_t)t) ^ ((uint64_t)(uint32_t)mb << 32 ^ layer));
}

/* Uniform in [0, 1) with 24 bits: exact in float, double and Python. */
double unit24(uint64_t h) { return (double)(h >> 40) * 0x1p-24; }

double rng_uniform(Rng *r) { /* [0, 1), 53 bits */
  r->s += 0x9e3779b97f4a7c15u;
  return (double)(mix64(r->s) >> 11) * 0x1p-53;
}

double rng_normal(Rng *r) { /* Box-Muller */
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  double rad = sqrt(-2.0 * log(1.0 - u1)), th = 6.283185307179586 * u2;
  r->spare = rad * sin(th), r->has_spare = 1;
  return rad * cos(th);
}
