/* cpu_blas.c: the CPU trainer's BLAS library and the kernel it runs.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels once, when
 * it loads, from the CPU it recognizes. A CPU newer than the library is not
 * recognized, and the library falls back to a generic kernel: Debian 12's
 * OpenBLAS 0.3.21 runs its Prescott (SSE3) kernel on Sapphire Rapids Xeons,
 * a quarter of what the CPU does with its AVX-512 kernel (sgemm 256x3072x768
 * on 2 threads: 34 GFLOP/s Prescott, 115 Haswell, 267 SkylakeX).
 *
 * The library reads OPENBLAS_CORETYPE only while it loads, before main, so
 * setting it in the running process does nothing. rt_blas_select therefore
 * restarts the trainer (execv of the program /proc/self/exe names, with the
 * same arguments) with OPENBLAS_CORETYPE set to the best kernel this CPU
 * runs, when the library detected a worse one; the restarted process sees
 * MEMPLAN_BLAS_DETECTED (what the library had detected) and says what
 * happened. It runs first thing in main, before MPI, threads or files are
 * set up, so the restart repeats nothing. A user's own OPENBLAS_CORETYPE always wins, and
 * --no-blas-select keeps what the library detected.
 *
 * Kernels are ranked by the instructions they use: AVX-512 (SkylakeX and
 * its bf16 successors, whose sgemm is SkylakeX's), AVX2 with FMA (Haswell,
 * Zen), and everything older (Prescott, Core2, Nehalem, Sandybridge, ...).
 * A name this file does not know is left alone. The CPU's own features come
 * from cpuid through the compiler's __builtin_cpu_supports, which also
 * checks that the OS saves the vector registers (XGETBV).
 */
#include "memplan_rt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS's extensions, weak: a trainer linked to another CBLAS has none,
 * and its header line says "BLAS: not OpenBLAS". */
__attribute__((weak)) char *openblas_get_corename(void);
__attribute__((weak)) char *openblas_get_config(void);

/* The environment variable that carries the library's own detection across
 * the restart (and marks the restarted process, so it never restarts again). */
#define RT_BLAS_DETECTED "MEMPLAN_BLAS_DETECTED"
/* Test hook: treat OPENBLAS_CORETYPE as what the library detected by itself,
 * so a test can make the library really load a generic kernel and see the
 * trainer replace it (tests/e2e/e2e.py blas). */
#define RT_BLAS_TEST_HOOK "MEMPLAN_TEST_CORETYPE_AS_DETECTED"

/* OpenBLAS's core names (0.3.21's dynamic.c) ranked by the instructions
 * their kernels use: 3 AVX-512, 2 AVX2 with FMA, 1 older; 0: not known here. */
static int kernel_rank(const char *core) {
  static const struct {
    const char *name;
    int rank;
  } cores[] = {{"SkylakeX", 3},    {"Cooperlake", 3},  {"SapphireRapids", 3}, {"Haswell", 2},      {"Zen", 2},
               {"Katmai", 1},      {"Coppermine", 1},  {"Northwood", 1},      {"Prescott", 1},     {"Banias", 1},
               {"Atom", 1},        {"Core2", 1},       {"Penryn", 1},         {"Dunnington", 1},   {"Nehalem", 1},
               {"Athlon", 1},      {"Opteron", 1},     {"Opteron(SSE3)", 1},  {"Opteron_SSE3", 1}, {"Barcelona", 1},
               {"Nano", 1},        {"Sandybridge", 1}, {"Bobcat", 1},         {"Bulldozer", 1},    {"Piledriver", 1},
               {"Steamroller", 1}, {"Excavator", 1},   {"Unknown", 1}};
  for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
    if (!strcasecmp(core, cores[i].name)) return cores[i].rank;
  return 0;
}

/* The best OpenBLAS kernel this CPU runs, with the instruction set that
 * earns it ("AVX-512", "AVX2"), or NULL when it has neither. */
static const char *best_kernel(const char **isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    *isa = "AVX-512";
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *isa = "AVX2";
    return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
  }
#endif
  *isa = NULL;
  return NULL;
}

/* "OpenBLAS 0.3.21" from the configuration string ("OpenBLAS 0.3.21
 * NO_LAPACKE DYNAMIC_ARCH ..."). */
static void library_name(char *buf, size_t n) {
  const char *cfg = openblas_get_config ? openblas_get_config() : NULL;
  int len = 0, words = 0;
  if (cfg)
    while (cfg[len] && (cfg[len] != ' ' || ++words < 2)) len++;
  snprintf(buf, n, "%.*s", len > 0 ? len : 8, len > 0 ? cfg : "OpenBLAS");
}

static char rt_blas_line[256];

const char *rt_blas_select(char **argv, int select) {
  if (!openblas_get_corename) {
    snprintf(rt_blas_line, sizeof rt_blas_line, "not OpenBLAS (the kernel it runs is its own choice)");
    return rt_blas_line;
  }
  char lib[64];
  library_name(lib, sizeof lib);
  const char *core = openblas_get_corename();
  const char *isa, *best = best_kernel(&isa);
  const char *detected = getenv(RT_BLAS_DETECTED), *user = getenv("OPENBLAS_CORETYPE");
  if (detected) { /* the restarted process */
    if (best && !strcasecmp(core, best))
      snprintf(rt_blas_line, sizeof rt_blas_line, "%s, %s kernel (auto-selected: the library detected %s on an %s CPU)",
               lib, core, detected, isa);
    else
      snprintf(rt_blas_line, sizeof rt_blas_line,
               "%s, %s kernel (selecting %s failed; set OPENBLAS_CORETYPE to choose)", lib, core, best ? best : "?");
    unsetenv(RT_BLAS_DETECTED);
    return rt_blas_line;
  }
  int as_detected = getenv(RT_BLAS_TEST_HOOK) != NULL;
  if (user && *user && !as_detected) {
    snprintf(rt_blas_line, sizeof rt_blas_line, "%s, %s kernel (OPENBLAS_CORETYPE=%.40s)", lib, core, user);
    return rt_blas_line;
  }
  int have = kernel_rank(core);
  if (best && have && have < kernel_rank(best)) {
    if (!select) {
      snprintf(rt_blas_line, sizeof rt_blas_line,
               "%s, %s kernel (detected; this %s CPU runs the faster %s kernel without --no-blas-select)", lib, core,
               isa, best);
      return rt_blas_line;
    }
    /* the program's path, not "/proc/self/exe" itself: under a tool that
     * runs the program inside its own process (valgrind), the link names the
     * program while exec of the link itself would start the tool's binary */
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0 && setenv("OPENBLAS_CORETYPE", best, 1) == 0 && setenv(RT_BLAS_DETECTED, core, 1) == 0) {
      self[len] = '\0';
      fflush(NULL);
      execv(self, argv);
    }
    /* only an exec that failed returns: go on with the library's choice */
    int err = errno;
    unsetenv(RT_BLAS_DETECTED);
    snprintf(rt_blas_line, sizeof rt_blas_line,
             "%s, %s kernel (detected; restarting with OPENBLAS_CORETYPE=%s failed: %s)", lib, core, best,
             strerror(err));
    return rt_blas_line;
  }
  snprintf(rt_blas_line, sizeof rt_blas_line, "%s, %s kernel (detected)", lib, core);
  return rt_blas_line;
}
