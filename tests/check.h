/* check.h: the C unit tests' CHECK: counts checks, reports a failed one with
 * file:line and its text, and goes on; main returns check_summary(name). */
#ifndef MEMPLAN_TEST_CHECK_H
#define MEMPLAN_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(c)                                                            \
  do {                                                                      \
    checks++;                                                               \
    if (!(c)) {                                                             \
      failures++;                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    }                                                                       \
  } while (0)

/* Prints "NAME: N checks, M failed"; the exit status: 1 when any failed. */
static inline int check_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, checks, failures);
  return failures ? 1 : 0;
}

#endif
