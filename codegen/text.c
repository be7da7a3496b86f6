/* text.c: in-memory output and atomic files. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emit.h"

static void reserve(Text *t, size_t more) {
  if (t->n + more + 1 <= t->cap) return;
  size_t cap = t->cap ? t->cap : 4096;
  while (cap < t->n + more + 1) cap *= 2;
  char *s = realloc(t->s, cap);
  MP_ASSERT(s);
  t->s = s, t->cap = cap;
}

void text_printf(Text *t, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  reserve(t, (size_t)n);
  vsnprintf(t->s + t->n, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  t->n += (size_t)n;
}

void text_append(Text *t, const void *data, size_t n) {
  reserve(t, n);
  memcpy(t->s + t->n, data, n);
  t->n += n;
  t->s[t->n] = 0;
}

void text_json_str(Text *t, const char *s) {
  text_printf(t, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') text_printf(t, "\\%c", *p);
    else if (*p < 0x20) text_printf(t, "\\u%04x", *p);
    else text_printf(t, "%c", *p);
  }
  text_printf(t, "\"");
}

void text_free(Text *t) {
  free(t->s);
  *t = (Text){0};
}

int text_write_atomic(const Text *t, const char *path) {
  size_t n = strlen(path);
  char *tmp = malloc(n + 32);
  MP_ASSERT(tmp);
  snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fprintf(stderr, "memplan: error: cannot write %s: %s\n", tmp, strerror(errno));
    free(tmp);
    return -1;
  }
  bool ok = fwrite(t->s ? t->s : "", 1, t->n, f) == t->n;
  ok = fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "memplan: error: cannot write %s: %s\n", path, strerror(errno));
    remove(tmp);
    free(tmp);
    return -1;
  }
  free(tmp);
  return 0;
}

int emit_mkdirs(const char *dir) {
  char *p = strdup(dir);
  MP_ASSERT(p);
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c != '/' && c != '\0') continue;
    *s = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "memplan: error: cannot create the folder %s: %s\n", p, strerror(errno));
      free(p);
      return -1;
    }
    *s = c;
    if (!c) break;
  }
  free(p);
  return 0;
}
