/* base.h: what every pass uses: the compilation arena (ar_), growable arrays,
 * source locations and user diagnostics (diag_), checked 64-bit arithmetic
 * (ck_), and the internal-bug check (MP_ASSERT). */
#ifndef MEMPLAN_BASE_H
#define MEMPLAN_BASE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Internal bugs (never user errors) abort with the place they were found. */
#define MP_ASSERT(c) ((c) ? (void)0 : mp_internal_error(__FILE__, __LINE__, #c))
_Noreturn void mp_internal_error(const char *file, int line, const char *what);

/* One arena per compilation owns the IR and every pass's tables; freed once. */
typedef struct ArBlock ArBlock;
typedef struct {
  ArBlock *head;  /* newest block first */
  ArBlock *spare; /* blocks ar_reset kept, for the next allocations */
} Arena;

void *ar_alloc(Arena *a, size_t n);                           /* zeroed, max-aligned */
void *ar_grow(Arena *a, void *old, size_t oldn, size_t newn); /* copy into new */
char *ar_strdup(Arena *a, const char *s);
char *ar_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ar_free(Arena *a);
/* Moves from's blocks into a (what they hold is then freed with a); from is left empty. */
void ar_adopt(Arena *a, Arena *from);
/* Frees everything allocated in a but keeps its blocks for the allocations
 * that follow: a loop that builds and drops a plan per candidate reuses the
 * same memory instead of handing it back to malloc (and the kernel) each
 * time. */
void ar_reset(Arena *a);

/* Growable array living in an arena: VEC(int) v = {0}; VEC_PUSH(ar, v, 3); */
#define VEC(T)  \
  struct {      \
    T *v;       \
    int n, cap; \
  }
#define VEC_PUSH(ar, vec, x)                                                                                  \
  do {                                                                                                        \
    if ((vec).n == (vec).cap) {                                                                               \
      int nc_ = (vec).cap ? 2 * (vec).cap : 8;                                                                \
      (vec).v = ar_grow((ar), (vec).v, sizeof(*(vec).v) * (size_t)(vec).cap, sizeof(*(vec).v) * (size_t)nc_); \
      (vec).cap = nc_;                                                                                        \
    }                                                                                                         \
    (vec).v[(vec).n++] = (x);                                                                                 \
  } while (0)

/* A place in a source file; line 0 means "no place" (command line, internal). */
typedef struct {
  const char *file; /* path as the user gave it */
  int line, col;    /* 1-based */
} Loc;

/* User errors: "path:line:col: error: message", the source line and a caret,
 * then exit(1) -- or a longjmp to diag_catch's buffer when one is set (tests,
 * fuzzers). Source text is registered by the loader so carets can be drawn. */
void diag_register_source(const char *file, const char *text, size_t len);
_Noreturn void diag_error(Loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void diag_verror(Loc loc, const char *fmt, va_list ap);
void diag_catch(jmp_buf *jb);      /* NULL restores exit(1) */
jmp_buf *diag_catcher(void);       /* the current one, to restore after a local catch */
_Noreturn void diag_rethrow(void); /* after cleaning up: on to the catcher, or exit(1) */
const char *diag_last(void);       /* the last error message (for tests) */

/* Checked 64-bit arithmetic: false on overflow. */
static inline bool ck_add(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool ck_mul(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
int64_t ck_mul_or_die(Loc loc, const char *what, int64_t a, int64_t b);
int64_t ck_add_or_die(Loc loc, const char *what, int64_t a, int64_t b);

int64_t mp_align_up(int64_t x, int64_t a);
/* Human-readable bytes into buf: "1.50 GiB (1610612736 B)". */
const char *mp_fmt_bytes(char *buf, size_t n, int64_t bytes);
/* Every input file of memplan (the YAML model, show's and import-hf's plan,
 * import-hf's safetensors, pack's CSV) is opened here for reading in binary
 * mode: without blocking (a FIFO with no writer would hang open()), and only
 * when it is a regular file. NULL with *why set otherwise: errno's text, or
 * "it is a FIFO, not a regular file" (a directory, a device, a socket). */
FILE *mp_open_input(const char *path, const char **why);
/* String keys to int values: open addressing over arena arrays. Keys are
 * not copied (they must outlive the map). */
typedef struct {
  const char **key;
  int *val;
  int cap, n;
} StrMap;
/* The value slot of key k, made (holding INT32_MIN) when k is new. */
int *strmap_slot(Arena *ar, StrMap *m, const char *k);
/* Whether k holds a value other than INT32_MIN; the value goes to *v. */
bool strmap_get(const StrMap *m, const char *k, int *v);

/* Levenshtein distance, for "did you mean" suggestions. */
int mp_edit_distance(const char *a, const char *b);
/* Time since an unspecified start, in seconds (monotonic). */
double mp_now(void);

#endif
