/* text.c: in-memory output, and atomic files and folders. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* Removes a folder that holds only files (the temp folder), best effort. */
static void remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* Makes a folder's renames durable, best effort (not every file system can
 * fsync a folder). */
static void fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/* The folder that holds dir: "a/b" -> "a", "b" -> ".", "/b" -> "/". */
static void parent_of(const char *dir, char *out, size_t cap) {
  snprintf(out, cap, "%s", dir);
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/') out[--n] = 0;
  char *slash = strrchr(out, '/');
  if (!slash) snprintf(out, cap, ".");
  else if (slash == out) out[1] = 0;
  else *slash = 0;
}

/* out = dir (its first dirlen bytes) / name; false when it is too long. */
static bool in_dir(char *out, size_t cap, const char *dir, int dirlen, const char *name) {
  int k = snprintf(out, cap, "%.*s/%s", dirlen, dir, name);
  return k >= 0 && (size_t)k < cap;
}

int text_write_folder(const char *dir, const char *const *name, const Text *out, int n) {
  char tmp[4096], parent[4096], path[4096], final[4096];
  struct stat st;
  bool exists = stat(dir, &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "memplan: error: cannot write %s/: %s exists and is not a folder\n", dir, dir);
    return -1;
  }
  if (!exists && errno != ENOENT) {
    fprintf(stderr, "memplan: error: cannot write %s/: %s\n", dir, strerror(errno));
    return -1;
  }
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  if (len + 64 > sizeof tmp) {
    fprintf(stderr, "memplan: error: the output folder's name is too long: %s\n", dir);
    return -1;
  }
  parent_of(dir, parent, sizeof parent);
  if (exists) snprintf(tmp, sizeof tmp, "%.*s/.memplan-tmp-XXXXXX", (int)len, dir);
  else if (emit_mkdirs(parent)) return -1;
  else snprintf(tmp, sizeof tmp, "%.*s.tmp-XXXXXX", (int)len, dir);
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "memplan: error: cannot create a temporary folder %s: %s\n", tmp, strerror(errno));
    return -1;
  }
  mode_t mask = umask(0); /* mkdtemp makes 0700; the folder gets what mkdir would give */
  umask(mask);
  chmod(tmp, 0777 & ~mask);
  for (int i = 0; i < n; i++) {
    if (!in_dir(path, sizeof path, tmp, (int)strlen(tmp), name[i]) || text_write_atomic(&out[i], path)) {
      fprintf(stderr, "memplan: error: could not write %.*s/%s; %.*s was left as it was\n", (int)len, dir, name[i],
              (int)len, dir);
      remove_flat_dir(tmp);
      return -1;
    }
  }
  if (!exists) {
    if (rename(tmp, dir)) {
      fprintf(stderr, "memplan: error: cannot rename %s to %s: %s\n", tmp, dir, strerror(errno));
      remove_flat_dir(tmp);
      return -1;
    }
    fsync_dir(parent);
    return 0;
  }
  for (int i = 0; i < n; i++) { /* nothing in dir changes if a name there cannot be replaced */
    if (in_dir(final, sizeof final, dir, (int)len, name[i]) && lstat(final, &st) == 0 && S_ISDIR(st.st_mode)) {
      fprintf(stderr, "memplan: error: cannot write %s: it is a folder\n", final);
      remove_flat_dir(tmp);
      return -1;
    }
  }
  for (int i = 0; i < n; i++) {
    in_dir(path, sizeof path, tmp, (int)strlen(tmp), name[i]); /* both fit: written above */
    in_dir(final, sizeof final, dir, (int)len, name[i]);
    if (rename(path, final)) {
      fprintf(stderr, "memplan: error: cannot rename %s to %s: %s (%d of %d files replaced)\n", path, final,
              strerror(errno), i, n);
      remove_flat_dir(tmp);
      return -1;
    }
  }
  rmdir(tmp);
  fsync_dir(dir);
  return 0;
}
