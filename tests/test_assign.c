/* test_assign.c: the offset assigner against brute force and the verifier.
 *
 *   test_assign DATA_DIR      (DATA_DIR holds input.12.csv)
 *
 * Brute force: normalize any packing so every buffer rests on 0 or on a
 * buffer it overlaps; in order of offset, each then sits exactly on the
 * highest top among the earlier buffers it overlaps. So the optimum is the
 * least height over all orders of "stack each buffer on what it overlaps",
 * which for n <= 7 is at most 5040 orders: independent of assign.c's search. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "verify.h"

static int failures;

#define CHECK(c, ...)                                                       \
  do {                                                                      \
    if (!(c)) {                                                             \
      failures++;                                                           \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #c); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
    }                                                                       \
  } while (0)

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* verify_packing on AsgItems; NULL when valid. */
static const char *verify_items(const AsgItem *it, int n, const int64_t *off, int64_t align, int64_t cap) {
  int64_t lo[64], hi[64], sz[64];
  static int64_t *blo, *bhi, *bsz;
  if (n > 64) { /* large instances: heap */
    blo = realloc(blo, sizeof(int64_t) * (size_t)n), bhi = realloc(bhi, sizeof(int64_t) * (size_t)n);
    bsz = realloc(bsz, sizeof(int64_t) * (size_t)n);
  }
  int64_t *L = n > 64 ? blo : lo, *H = n > 64 ? bhi : hi, *S = n > 64 ? bsz : sz;
  for (int i = 0; i < n; i++) {
    L[i] = it[i].lo;
    H[i] = it[i].hi;
    S[i] = it[i].size;
  }
  return verify_packing(n, L, H, S, off, align, cap);
}

/* ---- brute force ---- */

static int64_t stack_order(const AsgItem *it, const int *perm, int n, int64_t align) {
  int64_t off[8], h = 0;
  for (int k = 0; k < n; k++) {
    int i = perm[k];
    off[i] = 0;
    for (int q = 0; q < k; q++) {
      int j = perm[q];
      if (it[i].lo < it[j].hi && it[j].lo < it[i].hi) {
        int64_t top = off[j] + align_up(it[j].size, align);
        if (top > off[i]) off[i] = top;
      }
    }
    if (off[i] + align_up(it[i].size, align) > h) h = off[i] + align_up(it[i].size, align);
  }
  return h;
}

static int64_t brute_rec(const AsgItem *it, int *perm, int k, int n, int64_t align) {
  if (k == n) return stack_order(it, perm, n, align);
  int64_t best = INT64_MAX;
  for (int i = k; i < n; i++) {
    int t = perm[k];
    perm[k] = perm[i], perm[i] = t;
    int64_t h = brute_rec(it, perm, k + 1, n, align);
    if (h < best) best = h;
    perm[i] = perm[k], perm[k] = t;
  }
  return best;
}

static int64_t brute_optimum(const AsgItem *it, int n, int64_t align) {
  int perm[8];
  for (int i = 0; i < n; i++) perm[i] = i;
  return n ? brute_rec(it, perm, 0, n, align) : 0;
}

static uint64_t rng(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static int random_instance(AsgItem *it, uint64_t *s) {
  int n = 1 + (int)(rng(s) % 7);
  int span = 4 + (int)(rng(s) % 10);
  for (int i = 0; i < n; i++) {
    int64_t a = (int64_t)(rng(s) % (uint64_t)span), b = (int64_t)(rng(s) % (uint64_t)span);
    if (a > b) {
      int64_t t = a;
      a = b, b = t;
    }
    it[i] = (AsgItem){a, b + 1, 1 + (int64_t)(rng(s) % 9)};
  }
  return n;
}

static void test_brute_force(void) {
  uint64_t s = 42;
  AsgItem it[8];
  int64_t off[8];
  for (int t = 0; t < 3000; t++) {
    int n = random_instance(it, &s);
    int64_t align = t % 3 == 0 ? 4 : 1;
    int64_t opt = brute_optimum(it, n, align);
    AsgResult r = assign_offsets(it, n, align, 5.0, off);
    CHECK(r.height == opt, "case %d: height %lld, brute force %lld", t, (long long)r.height, (long long)opt);
    CHECK(r.optimal, "case %d: optimum not proven", t);
    CHECK(r.lower_bound <= opt, "case %d: bound above optimum", t);
    const char *e = verify_items(it, n, off, align, r.height);
    CHECK(!e, "case %d: %s", t, e);
    /* The decision version agrees at the optimum and one unit below it. */
    CHECK(assign_fit(it, n, align, opt, 5.0, off) == 1, "case %d: fit at optimum", t);
    e = verify_items(it, n, off, align, opt);
    CHECK(!e, "case %d: fit packing: %s", t, e);
    CHECK(assign_fit(it, n, align, opt - 1, 5.0, off) == 0, "case %d: fits below optimum", t);
  }
}

/* The portfolio alone is a valid packing and never below the bound. */
static void test_portfolio_only(void) {
  uint64_t s = 7;
  AsgItem it[8];
  int64_t off[8];
  for (int t = 0; t < 500; t++) {
    int n = random_instance(it, &s);
    AsgResult r = assign_offsets(it, n, 1, 0, off);
    CHECK(r.height >= r.lower_bound, "case %d", t);
    const char *e = verify_items(it, n, off, 1, r.height);
    CHECK(!e, "case %d: %s", t, e);
  }
}

/* ---- files ---- */

static int read_csv(const char *path, AsgItem *it, int max) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  int n = 0;
  if (!fgets(line, sizeof line, f)) n = -1;
  while (n >= 0 && n < max && fgets(line, sizeof line, f)) {
    char id[64];
    long long a, b, c;
    if (sscanf(line, "%63[^,],%lld,%lld,%lld", id, &a, &b, &c) == 4) it[n++] = (AsgItem){a, b, c};
  }
  fclose(f);
  return n;
}

static void test_readme_example(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/input.12.csv", dir);
  AsgItem it[16];
  int64_t off[16];
  int n = read_csv(path, it, 16);
  CHECK(n == 5, "%s: read %d rows", path, n);
  if (n != 5) return;
  AsgResult r = assign_offsets(it, n, 1, 1.0, off);
  CHECK(r.height == 12 && r.optimal, "height %lld", (long long)r.height);
  CHECK(assign_lower_bound(it, n, 1) == 12, "bound");
  const char *e = verify_items(it, n, off, 1, 12);
  CHECK(!e, "%s", e);
  CHECK(assign_fit(it, n, 1, 11, 1.0, off) == 0, "fits in 11 (below the bound)");
}

/* ---- edge cases and determinism ---- */

static void test_edges(void) {
  int64_t off[4] = {-1, -1, -1, -1};
  AsgResult r = assign_offsets(NULL, 0, 1, 1.0, off);
  CHECK(r.height == 0 && r.optimal, "empty");
  AsgItem one = {5, 6, 3};
  r = assign_offsets(&one, 1, 8, 1.0, off);
  CHECK(r.height == 8 && off[0] == 0, "one item, aligned: %lld", (long long)r.height);
  AsgItem zero[2] = {{0, 2, 0}, {1, 3, 0}};
  r = assign_offsets(zero, 2, 1, 1.0, off);
  CHECK(r.height == 0 && off[0] == 0 && off[1] == 0, "zero sizes");
  CHECK(!verify_items(zero, 2, off, 1, 0), "zero sizes verify");
  /* Half-open lifetimes: touching buffers share bytes. */
  AsgItem touch[2] = {{0, 5, 10}, {5, 9, 10}};
  r = assign_offsets(touch, 2, 1, 1.0, off);
  CHECK(r.height == 10 && r.lower_bound == 10, "touching: %lld", (long long)r.height);
}

static int gen(AsgItem *it, int n, uint64_t seed) {
  uint64_t s = seed;
  for (int i = 0; i < n; i++) {
    int64_t a = (int64_t)(rng(&s) % 1000), len = 1 + (int64_t)(rng(&s) % 60);
    it[i] = (AsgItem){a, a + len, 1 + (int64_t)(rng(&s) % 5000)};
  }
  return n;
}

static void test_determinism(void) {
  enum { N = 300 };
  static AsgItem it[N];
  static int64_t a[N], b[N];
  gen(it, N, 99);
  for (double tl = 0; tl <= 0.05; tl += 0.05) {
    AsgResult r1 = assign_offsets(it, N, 64, tl, a);
    AsgResult r2 = assign_offsets(it, N, 64, tl, b);
    CHECK(r1.height == r2.height && !memcmp(a, b, sizeof a), "two runs differ (limit %g)", tl);
    const char *e = verify_items(it, N, a, 64, r1.height);
    CHECK(!e, "%s", e);
    CHECK(r1.height >= r1.lower_bound && r1.lower_bound == assign_lower_bound(it, N, 64), "bound");
  }
}

/* Never worse than plain best fit in any ordering. */
static void test_vs_best_fit(void) {
  enum { N = 400 };
  static AsgItem it[N];
  static int64_t off[N];
  for (uint64_t seed = 1; seed <= 20; seed++) {
    gen(it, N, seed);
    AsgResult r = assign_offsets(it, N, 1, 0.05, off);
    CHECK(!verify_items(it, N, off, 1, r.height), "seed %llu", (unsigned long long)seed);
    for (int o = 0; o < ASSIGN_N_ORDERINGS; o++) {
      int64_t h = assign_best_fit(it, N, 1, o, off);
      CHECK(!verify_items(it, N, off, 1, h), "best fit %s", assign_ordering_name(o));
      CHECK(r.height <= h, "seed %llu: %lld above %s %lld", (unsigned long long)seed, (long long)r.height,
            assign_ordering_name(o), (long long)h);
    }
  }
}

/* A training-step-like instance of exactly n buffers: weights and optimizer
 * state live throughout, each forward activation until its backward op
 * (nested lifetimes), short temporaries and gradients in between. */
static int gen_training(AsgItem *it, int n, uint64_t seed) {
  uint64_t s = seed;
  int k = 0, L = n / 10; /* forward ops */
  int64_t T = 2 * L + 2;
  for (int i = 0; i < L && k < n; i++) { /* activation i: forward i .. backward */
    int64_t size = 256 * (1 + (int64_t)(rng(&s) % 64));
    it[k++] = (AsgItem){i, T - 1 - i, size};
  }
  while (k < n) {
    int64_t t = (int64_t)(rng(&s) % (uint64_t)T), kind = (int64_t)(rng(&s) % 8);
    int64_t size = 256 * (1 + (int64_t)(rng(&s) % 128));
    if (kind == 0) it[k++] = (AsgItem){0, T, size}; /* weight, m, v */
    else it[k++] = (AsgItem){t, t + 1 + kind % 3, size};
  }
  return n;
}

/* On a 2,000-buffer training step, assign_offsets (heuristics only, and with
 * a little search) is never above plain best fit in any ordering. */
static void test_training_vs_best_fit(void) {
  enum { N = 2000 };
  static AsgItem it[N];
  static int64_t off[N];
  for (uint64_t seed = 1; seed <= 3; seed++) {
    gen_training(it, N, seed);
    for (double tl = 0; tl <= 0.1; tl += 0.1) {
      AsgResult r = assign_offsets(it, N, 256, tl, off);
      const char *e = verify_items(it, N, off, 256, r.height);
      CHECK(!e, "seed %llu: %s", (unsigned long long)seed, e);
      for (int o = 0; o < ASSIGN_N_ORDERINGS; o++) {
        int64_t h = assign_best_fit(it, N, 256, o, off);
        CHECK(!verify_items(it, N, off, 256, h), "best fit %s", assign_ordering_name(o));
        CHECK(r.height <= h, "seed %llu, limit %g: %lld above %s %lld", (unsigned long long)seed, tl,
              (long long)r.height, assign_ordering_name(o), (long long)h);
      }
    }
  }
}

/* The portfolio's tie-breaks, on three buffers whose orderings differ only
 * in them: w lives over the whole run [0, 4) (size 2), a = [2, 4) and
 * b = [0, 3) have size 4. Every ordering meets the bound 10; the offsets
 * show which order each placed them in (worked by hand). */
static void test_ordering_tie_breaks(void) {
  AsgItem it[3] = {{2, 4, 4}, {0, 3, 4}, {0, 4, 2}}; /* a, b, w */
  static const struct {
    const char *name;
    int64_t a, b, w;
  } want[] = {
      {"best-fit/size", 4, 0, 8},     /* XLA spatial, size, then duration: b, a, w */
      {"best-fit/duration", 6, 2, 0}, /* XLA temporal, duration, then size: w, b, a */
      {"best-fit/tflite", 6, 2, 0},   /* whole run first, then size, then start: w, b, a */
      {"best-fit/end", 0, 6, 4},      /* end descending, then size: a, w, b */
  };
  int found = 0;
  for (int o = 0; o < ASSIGN_N_ORDERINGS; o++) {
    const char *name = assign_ordering_name(o);
    CHECK(name != NULL, "ordering %d has no name", o);
    for (int q = 0; q < o; q++) CHECK(strcmp(name, assign_ordering_name(q)), "two orderings named %s", name);
    for (int k = 0; k < (int)(sizeof want / sizeof want[0]); k++)
      if (name && !strcmp(name, want[k].name)) {
        int64_t off[3];
        int64_t h = assign_best_fit(it, 3, 1, o, off);
        found++;
        CHECK(h == 10 && off[0] == want[k].a && off[1] == want[k].b && off[2] == want[k].w,
              "%s: height %lld, offsets a %lld b %lld w %lld", name, (long long)h, (long long)off[0], (long long)off[1],
              (long long)off[2]);
      }
  }
  CHECK(found == (int)(sizeof want / sizeof want[0]), "%d of the tie-break orderings found", found);
  CHECK(assign_ordering_name(ASSIGN_N_ORDERINGS) == NULL && assign_ordering_name(-1) == NULL, "names past the end");
}

/* A leaf of 4,500 buffers is too large for the exact search: iterated
 * greedy gets it below the best plain greedy within 0.3 s of work, the same
 * packing on every run (the work budget, not the clock, ends it), and
 * assign_fit makes it fit a capacity below the best greedy. */
static void test_iterated_greedy(void) {
  enum { N = 4500 };
  static AsgItem it[N];
  static int64_t a[N], b[N];
  gen(it, N, 3);
  int64_t greedy = INT64_MAX;
  for (int o = 0; o < ASSIGN_N_ORDERINGS; o++) {
    int64_t h = assign_best_fit(it, N, 1, o, a);
    if (h < greedy) greedy = h;
  }
  AsgResult r1 = assign_offsets(it, N, 1, 0.3, a);
  AsgResult r2 = assign_offsets(it, N, 1, 0.3, b);
  CHECK(r1.height < greedy, "iterated greedy %lld, best plain greedy %lld", (long long)r1.height, (long long)greedy);
  CHECK(!strcmp(r1.method, "iterated-greedy"), "method %s", r1.method);
  CHECK(r1.height == r2.height && !memcmp(a, b, sizeof a), "two runs differ");
  const char *e = verify_items(it, N, a, 1, r1.height);
  CHECK(!e, "%s", e);
  /* Deciding a capacity below every greedy uses it too. */
  CHECK(assign_fit(it, N, 1, greedy - 1, 0.3, b) == 1, "does not fit %lld", (long long)(greedy - 1));
  e = verify_items(it, N, b, 1, greedy - 1);
  CHECK(!e, "%s", e);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests/data";
  test_edges();
  test_brute_force();
  test_portfolio_only();
  test_readme_example(dir);
  test_determinism();
  test_vs_best_fit();
  test_training_vs_best_fit();
  test_ordering_tie_breaks();
  test_iterated_greedy();
  if (failures) {
    fprintf(stderr, "test_assign: %d failures\n", failures);
    return 1;
  }
  printf("test_assign: ok\n");
  return 0;
}
