/* alloc_count.c: a counting allocator to LD_PRELOAD under a generated
 * trainer. Every malloc-family call adds one to a counter that the trainer
 * reads (memplan_alloc_count, found with dlsym) before and after its training
 * loop; `trainer --check-alloc` fails unless the two readings are equal.
 * glibc routes its own internal allocations (stdio, strdup) and those of
 * other libraries (OpenBLAS, libgomp) through these symbols too. Built
 * with -DALLOC_PROBE it is instead a program that checks the counter counts. */
#define _GNU_SOURCE /* RTLD_DEFAULT, strdup */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ALLOC_PROBE
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

static long count;

static void bump(void) { __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); }

long memplan_alloc_count(void);
long memplan_alloc_count(void) { return __atomic_load_n(&count, __ATOMIC_SEQ_CST); }

void *malloc(size_t n) {
  bump();
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
  bump();
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
  bump();
  return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
void *aligned_alloc(size_t align, size_t n) {
  bump();
  return __libc_memalign(align, n);
}
void *memalign(size_t align, size_t n);
void *memalign(size_t align, size_t n) {
  bump();
  return __libc_memalign(align, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
  bump();
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
#else
#include <dlfcn.h>
/* The probe: with the allocator preloaded, a malloc and a strdup inside
 * libc must each move the counter; without it, the lookup must fail. */
int main(int argc, char **argv) {
  long (*count)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "memplan_alloc_count");
  if (!count) {
    printf("no counting allocator preloaded\n");
    return argc > 1 && !strcmp(argv[1], "--absent") ? 0 : 1;
  }
  long c0 = count();
  void *volatile p = malloc(64);
  long c1 = count();
  char *s = strdup(argv[0]);
  long c2 = count();
  free(p);
  free(s);
  printf("malloc counted %ld, strdup counted %ld\n", c1 - c0, c2 - c1);
  return c1 - c0 == 1 && c2 - c1 == 1 ? 0 : 1;
}
#endif
