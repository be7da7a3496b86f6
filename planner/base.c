/* base.c: arena, diagnostics, checked arithmetic. */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void mp_internal_error(const char *file, int line, const char *what) {
  fprintf(stderr, "%s:%d: internal error: %s\n(this is a bug in memplan; please report it with the model file)\n", file,
          line, what);
  abort();
}

struct ArBlock {
  ArBlock *next;
  size_t used, cap;
  max_align_t data[];
};

/* ar_alloc without the zeroing. */
static void *ar_raw(Arena *a, size_t n) {
  size_t al = sizeof(max_align_t);
  n = (n + al - 1) / al * al;
  if (!a->head || a->head->cap - a->head->used < n) {
    ArBlock **spare = &a->spare, *b;
    while (*spare && (*spare)->cap < n) spare = &(*spare)->next;
    if (*spare) {
      b = *spare;
      *spare = b->next;
    } else {
      size_t cap = n > (1u << 20) ? n : (1u << 20);
      b = malloc(sizeof(ArBlock) + cap);
      if (!b) {
        fprintf(stderr, "memplan: error: out of memory (asked for %zu bytes)\n", n);
        exit(1);
      }
      b->cap = cap;
    }
    b->next = a->head;
    b->used = 0;
    a->head = b;
  }
  void *p = (char *)a->head->data + a->head->used;
  a->head->used += n;
  return p;
}

void *ar_alloc(Arena *a, size_t n) {
  void *p = ar_raw(a, n);
  memset(p, 0, n);
  return p;
}

/* The last allocation of the newest block grows where it is when the block
 * has room (a growing VEC, the usual case, is copied no more); elsewhere
 * only the bytes past the copy are zeroed. */
void *ar_grow(Arena *a, void *old, size_t oldn, size_t newn) {
  size_t al = sizeof(max_align_t), r = (oldn + al - 1) / al * al, rn = (newn + al - 1) / al * al;
  ArBlock *h = a->head;
  if (old && oldn && newn > oldn && h && (char *)old + r == (char *)h->data + h->used && h->used - r + rn <= h->cap) {
    h->used += rn - r;
    memset((char *)old + oldn, 0, newn - oldn);
    return old;
  }
  size_t keep = old && oldn ? (oldn < newn ? oldn : newn) : 0;
  char *p = ar_raw(a, newn);
  if (keep) memcpy(p, old, keep);
  memset(p + keep, 0, newn - keep);
  return p;
}

char *ar_strdup(Arena *a, const char *s) {
  size_t n = strlen(s);
  char *p = ar_alloc(a, n + 1);
  memcpy(p, s, n);
  return p;
}

char *ar_printf(Arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  char *p = ar_alloc(a, (size_t)n + 1);
  if ((size_t)n < sizeof small) memcpy(p, small, (size_t)n + 1);
  else vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

/* Puts the list from in front of *list. */
static void blocks_prepend(ArBlock **list, ArBlock *from) {
  if (!from) return;
  ArBlock *last = from;
  while (last->next) last = last->next;
  last->next = *list;
  *list = from;
}

void ar_adopt(Arena *a, Arena *from) {
  if (a->head) /* behind a's newest block, which goes on serving a's allocations */
    blocks_prepend(&a->head->next, from->head);
  else a->head = from->head;
  blocks_prepend(&a->spare, from->spare);
  *from = (Arena){0};
}

void ar_reset(Arena *a) {
  blocks_prepend(&a->spare, a->head);
  a->head = NULL;
}

static void blocks_free(ArBlock *b) {
  while (b) {
    ArBlock *n = b->next;
    free(b);
    b = n;
  }
}

void ar_free(Arena *a) {
  blocks_free(a->head);
  blocks_free(a->spare);
  *a = (Arena){0};
}

/* ---- diagnostics ---- */

#define MAX_SOURCES 16
/* Keyed by a copy of the file name: a caller that loads again (tests,
 * fuzzers, micro-batch reloads) may have freed the old name and text, and
 * registering the same name replaces the entry, so a caret never reads
 * freed text. */
static struct {
  char *file;
  const char *text;
  size_t len;
} sources[MAX_SOURCES];
static int nsources, next_victim;
static jmp_buf *catcher;
static char last_msg[1024];

void diag_register_source(const char *file, const char *text, size_t len) {
  int i = 0;
  while (i < nsources && strcmp(sources[i].file, file) != 0) i++;
  if (i == nsources) {
    char *copy = strdup(file);
    if (!copy) return;
    if (i == MAX_SOURCES) { /* the oldest goes; carets are a nicety */
      i = next_victim, next_victim = (next_victim + 1) % MAX_SOURCES;
      free(sources[i].file);
    } else {
      nsources++;
    }
    sources[i].file = copy;
  }
  sources[i].text = text;
  sources[i].len = len;
}

void diag_catch(jmp_buf *jb) { catcher = jb; }
jmp_buf *diag_catcher(void) { return catcher; }

void diag_rethrow(void) {
  if (catcher) longjmp(*catcher, 1);
  exit(1);
}
const char *diag_last(void) { return last_msg; }

/* Prints the source line of loc and a caret under its column. Tabs are kept
 * so the caret lines up in a terminal. */
static void print_caret(Loc loc) {
  for (int i = 0; i < nsources; i++) {
    if (strcmp(sources[i].file, loc.file) != 0) continue;
    const char *p = sources[i].text, *end = p + sources[i].len;
    for (int ln = 1; ln < loc.line && p < end; p++)
      if (*p == '\n') ln++;
    const char *e = p;
    while (e < end && *e != '\n' && *e != '\r') e++;
    if (e - p > 200) e = p + 200;
    fprintf(stderr, "%.*s\n", (int)(e - p), p);
    for (int c = 1; c < loc.col && p + c - 1 < e; c++) fputc(p[c - 1] == '\t' ? '\t' : ' ', stderr);
    fputs("^\n", stderr);
    return;
  }
}

static void report(const char *kind, Loc loc, const char *fmt, va_list ap) {
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (loc.file && loc.line > 0)
    snprintf(last_msg, sizeof last_msg, "%s:%d:%d: %s: %s", loc.file, loc.line, loc.col, kind, msg);
  else if (loc.file) snprintf(last_msg, sizeof last_msg, "%s: %s: %s", loc.file, kind, msg);
  else snprintf(last_msg, sizeof last_msg, "memplan: %s: %s", kind, msg);
  fprintf(stderr, "%s\n", last_msg);
  if (loc.file && loc.line > 0) print_caret(loc);
}

void diag_verror(Loc loc, const char *fmt, va_list ap) {
  report("error", loc, fmt, ap);
  if (catcher) longjmp(*catcher, 1);
  exit(1);
}

void diag_error(Loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(loc, fmt, ap);
}

int64_t ck_mul_or_die(Loc loc, const char *what, int64_t a, int64_t b) {
  int64_t r;
  if (!ck_mul(a, b, &r))
    diag_error(loc, "integer overflow computing %s (%lld * %lld does not fit in 64 bits); use smaller dims", what,
               (long long)a, (long long)b);
  return r;
}

int64_t ck_add_or_die(Loc loc, const char *what, int64_t a, int64_t b) {
  int64_t r;
  if (!ck_add(a, b, &r))
    diag_error(loc, "integer overflow computing %s (%lld + %lld does not fit in 64 bits); use smaller dims", what,
               (long long)a, (long long)b);
  return r;
}

int64_t mp_align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

const char *mp_fmt_bytes(char *buf, size_t n, int64_t b) {
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0) snprintf(buf, n, "%lld B", (long long)b);
  else snprintf(buf, n, "%.2f %s", v, unit[u]);
  return buf;
}

static uint64_t str_hash(const char *s) { /* FNV-1a */
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

int *strmap_slot(Arena *ar, StrMap *m, const char *k) {
  if (2 * (m->n + 1) > m->cap) { /* at most half full: grow and reinsert */
    StrMap old = *m;
    m->cap = old.cap ? 2 * old.cap : 256;
    m->key = ar_alloc(ar, sizeof(char *) * (size_t)m->cap);
    m->val = ar_alloc(ar, sizeof(int) * (size_t)m->cap);
    m->n = 0;
    for (int i = 0; i < old.cap; i++)
      if (old.key[i]) *strmap_slot(ar, m, old.key[i]) = old.val[i];
  }
  size_t i = str_hash(k) & (size_t)(m->cap - 1);
  while (m->key[i] && strcmp(m->key[i], k) != 0) i = (i + 1) & (size_t)(m->cap - 1);
  if (!m->key[i]) {
    m->key[i] = k;
    m->val[i] = INT32_MIN;
    m->n++; /* counts every key, so the table grows */
  }
  return &m->val[i];
}

bool strmap_get(const StrMap *m, const char *k, int *v) {
  if (!m->cap) return false;
  size_t i = str_hash(k) & (size_t)(m->cap - 1);
  while (m->key[i]) {
    if (strcmp(m->key[i], k) == 0) {
      *v = m->val[i];
      return m->val[i] != INT32_MIN;
    }
    i = (i + 1) & (size_t)(m->cap - 1);
  }
  return false;
}

int mp_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return 1 << 20;
  int d[65][65];
  for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

double mp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

FILE *mp_open_input(const char *path, const char **why) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = strerror(errno);
    return NULL;
  }
  struct stat st;
  int e = fstat(fd, &st) != 0 ? errno : 0;
  *why = e                      ? strerror(e)
         : S_ISREG(st.st_mode)  ? NULL
         : S_ISDIR(st.st_mode)  ? "it is a directory, not a regular file"
         : S_ISFIFO(st.st_mode) ? "it is a FIFO, not a regular file"
         : S_ISCHR(st.st_mode)  ? "it is a character device, not a regular file"
         : S_ISBLK(st.st_mode)  ? "it is a block device, not a regular file"
         : S_ISSOCK(st.st_mode) ? "it is a socket, not a regular file"
                                : "it is not a regular file";
  FILE *f = NULL;
  if (!*why && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) f = fdopen(fd, "rb");
  if (!f) {
    if (!*why) *why = strerror(errno);
    close(fd);
  }
  return f;
}
