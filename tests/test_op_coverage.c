/* test_op_coverage.c: every op of the op table (planner/ops.c, read through
 * op_info, so there is no second list of ops) has the tests and the
 * documentation an op needs (issue #13, item 3). Each item is found in the
 * source tree itself:
 *
 * 1. Gradient check: tests/gradcheck.c runs a Case (run_case: finite
 *    differences of a double reference) whose .fwd function calls
 *    rt_<op>_forward and whose .bwd function calls rt_<op>_backward; the
 *    Case is written in a function that main() reaches.
 * 2. PyTorch reference: tests/reference/plan_torch.py compares a name with
 *    "<op>" (its dispatch on op names), and a model that a reference test
 *    runs holds the op once the planner's loader has read it (so attention
 *    counts where causal_self_attention lowers to it). Reference tests are
 *    the memplan_reference calls in the .cmake files of tests/, each the
 *    model of its memplan_e2e_build fixture; the --perturb-lr and
 *    --dropout-seed ones are left out (they must fail).
 * 3. CUDA comparison: tests/gpu/test_cuda_kernels.c calls UT(<kernel>) for
 *    each of the op's kernels in a function that also calls a ref_*
 *    reference (tests/gpu/ref.c) and that main() reaches.
 * 4. Op table row: a row of docs/model-format.md's "## Ops" table names `<op>` in its
 *    first cell.
 * 5. Error test (ops with attributes): a .yaml file of tests/errors whose
 *    "# expect:" error points into a layer `op: <op>` and names one of the
 *    op's keys, as 'key' or as "key = "; tests/planner.cmake registers every
 *    file there as error_<name>, which checks the exact message.
 *
 * What applies to which op:
 * - ops written in YAML (a shape rule, rules.h): all five;
 * - composite ops (OpInfo.composite, causal_self_attention): 2 as a layer
 *   `op: <op>` in a reference model's file (plans hold its parts, never it),
 *   4 and 5; its parts carry the kernels;
 * - optimizer updates (no shape rule, kernel rt_<op>_update: adamw, sgd): 1 as a
 *   check of the update against hand-computed steps (a function of
 *   gradcheck.c that main() reaches calls rt_<op>_update; an update has no
 *   gradient), 2 as plan_torch.py comparing the optimizer type with "<op>"
 *   and a reference model that names it (`type: <op>`), and 3; not 4 and 5
 *   (they are not layers and have no attributes);
 * - cast (no shape rule; kernels rt_f32_to_<h> and rt_<h>_to_f32 for each 2-byte
 *   dtype <h>): 3 only. A cast has no gradient and gradcheck.c tests no
 *   conversions (the CPU build of test_cuda_kernels.c, CTest cuda_refs,
 *   checks cpu.c's bit for bit); the reference tests run fp32 plans, which
 *   hold no casts (precision_and_microbatch covers storage precision).
 * - collectives (allreduce, reduce_scatter, all_gather: no shape rule, no
 *   kernels; the trainers' MPI and NCCL calls of a plan for N ranks): none
 *   of the five. tests/mpi.cmake (label mpi) trains plans holding each of
 *   them against one process at N times the batch.
 *
 * C and Python are read with comments blanked (C also: string contents,
 * preprocessor lines, code under #if 0; Python: docstrings), so a case that
 * is commented out does not count. A missing kernel's message also says
 * whether runtime/memplan_kernels.h, the one list both runtimes and the GPU
 * test's references expand, declares it: that is how an op kind with other
 * kernel names than these rules expect shows up.
 *
 * Usage: test_op_coverage SOURCE_DIR [--pretend-op NAME:KEY]...
 *   --pretend-op also checks a fictitious YAML op NAME with one attribute
 *   KEY, which has none of the five (CTest op_coverage_detects_gaps).
 * Prints a line per op, and under each op that lacks an item what is missing
 * and where to add it. Exit status: 0 nothing missing, 1 an item missing,
 * 2 usage or an unreadable file. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "graph.h"
#include "load.h"
#include "ops.h"
#include "rules.h"

static Arena ar;
static const char *srcdir;

#define MAX_KERNELS 8

static bool is_id(char c) { return c == '_' || isalnum((unsigned char)c); }

_Noreturn static void die(const char *what, const char *path) {
  fprintf(stderr, "test_op_coverage: %s %s\n", what, path);
  exit(2);
}

/* The whole file, NUL-terminated; NULL when it cannot be opened. */
static char *read_path(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) die("out of memory reading", path);
  for (;;) {
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
    if (n + 1 == cap) {
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) die("out of memory reading", path);
      buf = nb;
    }
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) die("cannot read", path);
  char *out = ar_alloc(&ar, n + 1);
  memcpy(out, buf, n);
  free(buf);
  if (len) *len = n;
  return out;
}

/* SOURCE_DIR/rel, which must exist. */
static char *read_src(const char *rel, size_t *len) {
  const char *path = ar_printf(&ar, "%s/%s", srcdir, rel);
  char *t = read_path(path, len);
  if (!t) die("cannot read", path);
  return t;
}

/* ---- C sources: code only, top-level functions, what main() reaches ---- */

typedef struct {
  const char *name;
  size_t body, end; /* code[body] is its '{', code[end] its '}' */
  bool reached;     /* main() calls it, directly or not, or takes its address */
} Func;

typedef struct {
  const char *rel;
  char *code;
  size_t n;
  VEC(Func) fn;
} CSrc;

/* Comments and the contents of string and character literals become spaces
 * (newlines stay, so offsets and lines are kept). */
static void blank_comments_and_literals(char *c, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (c[i] == '/' && c[i + 1] == '/') {
      while (i < n && c[i] != '\n') c[i++] = ' ';
    } else if (c[i] == '/' && c[i + 1] == '*') {
      c[i++] = ' ';
      c[i++] = ' ';
      while (i < n && !(c[i] == '*' && c[i + 1] == '/')) {
        if (c[i] != '\n') c[i] = ' ';
        i++;
      }
      if (i < n) {
        c[i++] = ' ';
        c[i++] = ' ';
      }
    } else if (c[i] == '"' || c[i] == '\'') {
      char q = c[i++];
      while (i < n && c[i] != q && c[i] != '\n') {
        if (c[i] == '\\' && i + 1 < n && c[i + 1] != '\n') c[i++] = ' ';
        c[i++] = ' ';
      }
      if (i < n && c[i] == q) i++;
    } else {
      i++;
    }
  }
}

/* Preprocessor lines (with their continuations) and the lines under #if 0
 * (up to its #else, #elif or #endif) become spaces. */
static void blank_preprocessor(char *c, size_t n) {
  int skip = 0; /* #if nesting inside an #if 0; 0: not skipping */
  size_t i = 0;
  while (i < n) {
    size_t eol = i;
    while (eol < n && c[eol] != '\n') eol++;
    size_t p = i;
    while (p < eol && (c[p] == ' ' || c[p] == '\t')) p++;
    bool directive = p < eol && c[p] == '#';
    if (directive) {
      size_t w = p + 1;
      while (w < eol && (c[w] == ' ' || c[w] == '\t')) w++;
      const char *d = c + w;
      bool is_if = !strncmp(d, "if", 2);
      if (skip) {
        if (is_if) skip++;
        else if (!strncmp(d, "endif", 5)) skip--;
        else if (skip == 1 && (!strncmp(d, "else", 4) || !strncmp(d, "elif", 4))) skip = 0;
      } else if (!strncmp(d, "if", 2) && !is_id(d[2])) {
        size_t v = w + 2;
        while (v < eol && (c[v] == ' ' || c[v] == '\t')) v++;
        if (c[v] == '0' && !is_id(c[v + 1])) skip = 1;
      }
    }
    if (directive || skip) {
      /* the line, and its continuations when a directive ends in a backslash */
      for (;;) {
        bool cont = directive && eol > i && c[eol - 1] == '\\';
        for (size_t k = i; k < eol; k++) c[k] = ' ';
        i = eol < n ? eol + 1 : n;
        if (!cont || i >= n) break;
        eol = i;
        while (eol < n && c[eol] != '\n') eol++;
      }
    } else {
      i = eol < n ? eol + 1 : n;
    }
  }
}

/* The brace that closes the one at i (n when unbalanced). */
static size_t closing_brace(const char *c, size_t n, size_t i) {
  int depth = 0;
  for (; i < n; i++) {
    if (c[i] == '{') depth++;
    if (c[i] == '}' && --depth == 0) return i;
  }
  return n;
}

/* Next identifier in [*i, end): its start and length; numbers are skipped.
 * Returns false at end. */
static bool next_id(const char *c, size_t *i, size_t end, size_t *start, size_t *len) {
  size_t k = *i;
  while (k < end) {
    if (!is_id(c[k])) {
      k++;
      continue;
    }
    size_t s = k;
    while (k < end && is_id(c[k])) k++;
    if (isdigit((unsigned char)c[s])) continue;
    *start = s;
    *len = k - s;
    *i = k;
    return true;
  }
  *i = end;
  return false;
}

static bool id_is(const char *c, size_t start, size_t len, const char *name) {
  return strlen(name) == len && !strncmp(c + start, name, len);
}

static size_t skip_space(const char *c, size_t i, size_t end) {
  while (i < end && isspace((unsigned char)c[i])) i++;
  return i;
}

static int find_func(const CSrc *s, const char *c, size_t start, size_t len) {
  for (int k = 0; k < s->fn.n; k++)
    if (id_is(c, start, len, s->fn.v[k].name)) return k;
  return -1;
}

static CSrc *read_c(const char *rel) {
  CSrc *s = ar_alloc(&ar, sizeof *s);
  s->rel = rel;
  s->code = read_src(rel, &s->n);
  blank_comments_and_literals(s->code, s->n);
  blank_preprocessor(s->code, s->n);
  /* top-level functions: a '{' at depth 0 right after a parameter list */
  const char *c = s->code;
  for (size_t i = 0; i < s->n; i++) {
    if (c[i] != '{') continue;
    size_t close = closing_brace(c, s->n, i), j = i;
    while (j > 0 && isspace((unsigned char)c[j - 1])) j--;
    if (j > 0 && c[j - 1] == ')') {
      int depth = 0;
      size_t k = j - 1;
      for (;;) {
        if (c[k] == ')') depth++;
        if (c[k] == '(' && --depth == 0) break;
        if (k == 0) break;
        k--;
      }
      while (k > 0 && isspace((unsigned char)c[k - 1])) k--;
      size_t b = k;
      while (b > 0 && is_id(c[b - 1])) b--;
      if (b < k) {
        Func f = {.name = ar_printf(&ar, "%.*s", (int)(k - b), c + b), .body = i, .end = close};
        VEC_PUSH(&ar, s->fn, f);
      }
    }
    i = close;
  }
  /* what main() reaches: every function whose name appears in a reached body */
  int m = -1;
  for (int k = 0; k < s->fn.n; k++)
    if (!strcmp(s->fn.v[k].name, "main")) m = k;
  if (m < 0) return s;
  int *stack = ar_alloc(&ar, sizeof(int) * (size_t)s->fn.n), sp = 0;
  s->fn.v[m].reached = true;
  stack[sp++] = m;
  while (sp) {
    const Func *f = &s->fn.v[stack[--sp]];
    size_t i = f->body, st, len;
    while (next_id(c, &i, f->end, &st, &len)) {
      int g = find_func(s, c, st, len);
      if (g >= 0 && !s->fn.v[g].reached) {
        s->fn.v[g].reached = true;
        stack[sp++] = g;
      }
    }
  }
  return s;
}

/* f's body calls name(...). */
static bool calls(const CSrc *s, const Func *f, const char *name) {
  size_t i = f->body, st, len;
  while (next_id(s->code, &i, f->end, &st, &len))
    if (id_is(s->code, st, len, name) && s->code[skip_space(s->code, i, f->end)] == '(') return true;
  return false;
}

/* f's body calls a function whose name starts with prefix. */
static bool calls_prefixed(const CSrc *s, const Func *f, const char *prefix) {
  size_t i = f->body, st, len, pl = strlen(prefix);
  while (next_id(s->code, &i, f->end, &st, &len))
    if (len > pl && !strncmp(s->code + st, prefix, pl) && s->code[skip_space(s->code, i, f->end)] == '(') return true;
  return false;
}

/* f's body calls UT(kernel)(...), test_cuda_kernels.c's backend under test. */
static bool calls_ut(const CSrc *s, const Func *f, const char *kernel) {
  const char *c = s->code;
  size_t i = f->body, st, len;
  while (next_id(c, &i, f->end, &st, &len)) {
    if (!id_is(c, st, len, "UT")) continue;
    size_t p = skip_space(c, i, f->end), k0, kl;
    if (c[p] != '(') continue;
    size_t q = p + 1;
    if (!next_id(c, &q, f->end, &k0, &kl) || skip_space(c, p + 1, f->end) != k0) continue;
    if (id_is(c, k0, kl, kernel) && c[skip_space(c, q, f->end)] == ')') return true;
  }
  return false;
}

/* Every function named by a designated initializer `.field = NAME` in a body
 * that main() reaches, in *out (arena); returns how many. */
static int designated(const CSrc *s, const char *field, const Func ***out) {
  const char *c = s->code;
  VEC(const Func *) found = {0};
  for (int k = 0; k < s->fn.n; k++) {
    const Func *f = &s->fn.v[k];
    if (!f->reached) continue;
    size_t i = f->body, st, len;
    while (next_id(c, &i, f->end, &st, &len)) {
      if (!id_is(c, st, len, field)) continue;
      size_t b = st;
      while (b > f->body && isspace((unsigned char)c[b - 1])) b--;
      size_t eq = skip_space(c, i, f->end), v0, vl;
      if (c[b - 1] != '.' || c[eq] != '=' || c[eq + 1] == '=') continue;
      size_t q = eq + 1;
      if (!next_id(c, &q, f->end, &v0, &vl) || skip_space(c, eq + 1, f->end) != v0) continue;
      int g = find_func(s, c, v0, vl);
      if (g >= 0) VEC_PUSH(&ar, found, &s->fn.v[g]);
    }
  }
  *out = found.v;
  return found.n;
}

/* The header declares name(...). */
/* An entry X(type, name, (parameters)) of the kernel list. */
static bool declares(const CSrc *h, const char *name) {
  size_t i = 0, st, len;
  while (next_id(h->code, &i, h->n, &st, &len))
    if (id_is(h->code, st, len, name) && h->code[skip_space(h->code, i, h->n)] == ',') return true;
  return false;
}

/* ---- YAML (tests/errors, reference models): lines, `key: value` ---- */

typedef struct {
  const char *rel; /* as printed */
  char **line;     /* 1-based, comments cut */
  int nlines;
} Yaml;

static Yaml *yaml_of(const char *rel, char *text) {
  Yaml *y = ar_alloc(&ar, sizeof *y);
  y->rel = rel;
  int cap = 1;
  for (const char *p = text; *p; p++) cap += *p == '\n';
  y->line = ar_alloc(&ar, sizeof(char *) * (size_t)(cap + 1));
  char *p = text;
  while (*p) {
    char *e = strchr(p, '\n');
    if (e) *e = 0;
    char *line = ar_strdup(&ar, p);
    for (char *h = line; *h; h++)
      if (*h == '#' && (h == line || h[-1] == ' ' || h[-1] == '\t')) {
        *h = 0; /* a YAML comment */
        break;
      }
    y->line[++y->nlines] = line;
    if (!e) break;
    p = e + 1;
  }
  return y;
}

/* The identifier after `key:` when the line has key at h, else NULL. */
static const char *value_at(const char *line, const char *h, const char *key) {
  size_t kl = strlen(key);
  if ((h > line && is_id(h[-1])) || strncmp(h, key, kl) || h[kl] != ':') return NULL;
  const char *v = h + kl + 1;
  while (*v == ' ' || *v == '\t') v++;
  size_t vl = 0;
  while (is_id(v[vl])) vl++;
  return vl ? ar_printf(&ar, "%.*s", (int)vl, v) : NULL;
}

/* The value of the first `key: value` on the line (an identifier), or NULL. */
static const char *line_value(const char *line, const char *key) {
  for (const char *h = strstr(line, key); h; h = strstr(h + 1, key)) {
    const char *v = value_at(line, h, key);
    if (v) return v;
  }
  return NULL;
}

/* Some line has `key: value`. */
static bool yaml_has(const Yaml *y, const char *key, const char *value) {
  for (int l = 1; l <= y->nlines; l++)
    for (const char *h = strstr(y->line[l], key); h; h = strstr(h + 1, key)) {
      const char *v = value_at(y->line[l], h, key);
      if (v && !strcmp(v, value)) return true;
    }
  return false;
}

static int indent_of(const char *line) {
  int k = 0;
  while (line[k] == ' ') k++;
  return line[k] ? k : -1; /* -1: blank */
}

/* The op of the layer that line l belongs to: the `op:` on that line (a flow
 * mapping, as tests/errors writes layers), else the first in the block-style
 * list items around it, innermost first; NULL when none. */
static const char *yaml_op_at(const Yaml *y, int l) {
  if (l < 1 || l > y->nlines) return NULL;
  const char *op = line_value(y->line[l], "op");
  if (op) return op;
  int limit = 1 << 30;
  for (int j = l; j >= 1; j--) {
    int ind = indent_of(y->line[j]);
    if (ind < 0 || ind >= limit || y->line[j][ind] != '-') continue;
    for (int k = j; k <= y->nlines; k++) {
      int ik = indent_of(y->line[k]);
      if (k > j && ik >= 0 && ik <= ind) break;
      if ((op = line_value(y->line[k], "op"))) return op;
    }
    limit = ind;
  }
  return NULL;
}

/* ---- what the tree holds ---- */

typedef struct {
  Yaml *y;             /* the file, for composite layers and the optimizer */
  bool kind[OP_COUNT]; /* the ops of its graph, as the planner loads it */
} RefModel;

typedef struct {
  CSrc *grad, *cuda, *kernels;
  char *torch;  /* plan_torch.py, comments and docstrings blanked */
  char *readme; /* the "### Ops" section */
  VEC(Yaml *) errors;
  VEC(RefModel) refmodels;
  VEC(const char *) notes;
} Tree;

/* plan_torch.py with comments and triple-quoted strings blanked; other
 * strings kept, since the dispatch compares op names with them. */
static char *python_code(char *t) {
  size_t n = strlen(t), i = 0;
  while (i < n) {
    if ((t[i] == '"' || t[i] == '\'') && t[i + 1] == t[i] && t[i + 2] == t[i]) {
      char q = t[i];
      size_t k = i + 3;
      while (k < n && !(t[k] == q && t[k + 1] == q && t[k + 2] == q)) k++;
      size_t end = k < n ? k + 3 : n;
      for (size_t m = i; m < end; m++)
        if (t[m] != '\n') t[m] = ' ';
      i = end;
    } else if (t[i] == '"' || t[i] == '\'') {
      char q = t[i++];
      while (i < n && t[i] != q && t[i] != '\n') i += t[i] == '\\' ? 2 : 1;
      if (i < n && t[i] == q) i++;
    } else if (t[i] == '#') {
      while (i < n && t[i] != '\n') t[i++] = ' ';
    } else {
      i++;
    }
  }
  return t;
}

/* plan_torch.py compares something with "name" (== "name" or == 'name'). */
static bool torch_compares(const Tree *t, const char *name) {
  const char *forms[2] = {ar_printf(&ar, "\"%s\"", name), ar_printf(&ar, "'%s'", name)};
  for (int f = 0; f < 2; f++)
    for (const char *h = strstr(t->torch, forms[f]); h; h = strstr(h + 1, forms[f])) {
      const char *b = h;
      while (b > t->torch && (b[-1] == ' ' || b[-1] == '\t')) b--;
      if (b - t->torch >= 2 && b[-1] == '=' && b[-2] == '=') return true;
    }
  return false;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in dir (relative to the source) ending in ext, sorted. */
static int list_dir(const char *rel, const char *ext, const char ***out) {
  const char *path = ar_printf(&ar, "%s/%s", srcdir, rel);
  DIR *d = opendir(path);
  if (!d) die("cannot list", path);
  VEC(const char *) names = {0};
  size_t el = strlen(ext);
  for (struct dirent *e; (e = readdir(d));) {
    size_t nl = strlen(e->d_name);
    if (nl > el && !strcmp(e->d_name + nl - el, ext)) VEC_PUSH(&ar, names, ar_strdup(&ar, e->d_name));
  }
  closedir(d);
  if (names.n) qsort(names.v, (size_t)names.n, sizeof(char *), cmp_str);
  *out = names.v;
  return names.n;
}

/* s with ${MEMPLAN_SOURCE_DIR} and ${MEMPLAN_TEST_DIR} replaced; NULL when
 * another variable is left. */
static const char *cmake_path(const char *s) {
  static const char *const var[2] = {"${MEMPLAN_SOURCE_DIR}", "${MEMPLAN_TEST_DIR}"};
  const char *val[2] = {srcdir, ar_printf(&ar, "%s/tests", srcdir)};
  char *out = ar_strdup(&ar, "");
  while (*s) {
    int v = -1;
    for (int k = 0; k < 2; k++)
      if (!strncmp(s, var[k], strlen(var[k]))) v = k;
    if (v >= 0) {
      out = ar_printf(&ar, "%s%s", out, val[v]);
      s += strlen(var[v]);
    } else if (s[0] == '$' && s[1] == '{') {
      return NULL;
    } else {
      out = ar_printf(&ar, "%s%c", out, *s++);
    }
  }
  return out;
}

typedef struct {
  const char *file;
  const char *arg[16];
  int nargs;
} Call;
typedef VEC(Call) Calls;

/* The calls of cmd(...) in a CMake file, arguments split at white space. */
static void cmake_calls(const char *rel, char *text, const char *cmd, Calls *out) {
  for (char *p = text; *p; p++) /* comments */
    if (*p == '#')
      while (*p && *p != '\n') *p++ = ' ';
  size_t cl = strlen(cmd);
  for (const char *h = strstr(text, cmd); h; h = strstr(h + 1, cmd)) {
    if ((h > text && is_id(h[-1])) || is_id(h[cl])) continue;
    const char *p = h + cl;
    while (isspace((unsigned char)*p)) p++;
    if (*p != '(') continue; /* function(cmd ...) defines it */
    Call c = {.file = rel};
    p++;
    for (;;) {
      while (isspace((unsigned char)*p)) p++;
      if (!*p || *p == ')') break;
      const char *a = p;
      while (*p && !isspace((unsigned char)*p) && *p != ')') p++;
      if (c.nargs < 16) c.arg[c.nargs++] = ar_printf(&ar, "%.*s", (int)(p - a), a);
    }
    VEC_PUSH(&ar, *out, c);
  }
}

/* The model's graph as the planner loads it, or NULL (diag_last() says why). */
static const Graph *try_load(const char *path, const char *text) {
  static jmp_buf jb;
  if (setjmp(jb)) {
    diag_catch(NULL);
    return NULL;
  }
  diag_catch(&jb);
  Graph *g = load_model_text(&ar, path, text, strlen(text), NULL, 0);
  diag_catch(NULL);
  return g;
}

/* The models that the reference tests run. */
static void find_reference_models(Tree *t) {
  const char **files;
  int nf = list_dir("tests", ".cmake", &files);
  Calls builds = {0}, refs = {0};
  for (int f = 0; f < nf; f++) {
    const char *rel = ar_printf(&ar, "tests/%s", files[f]);
    char *text = read_src(rel, NULL);
    cmake_calls(rel, text, "memplan_e2e_build", &builds);
    cmake_calls(rel, text, "memplan_reference", &refs);
  }
  for (int r = 0; r < refs.n; r++) {
    const Call *c = &refs.v[r];
    bool negative = false;
    for (int a = 2; a < c->nargs; a++)
      negative |= !strcmp(c->arg[a], "--perturb-lr") || !strcmp(c->arg[a], "--dropout-seed");
    if (negative || c->nargs < 2) continue;
    const char *yaml = NULL;
    for (int b = 0; b < builds.n; b++)
      if (builds.v[b].nargs >= 2 && !strcmp(builds.v[b].arg[0], c->arg[1])) yaml = builds.v[b].arg[1];
    const char *path = yaml ? cmake_path(yaml) : NULL;
    char *text = path ? read_path(path, NULL) : NULL;
    if (!text) {
      VEC_PUSH(&ar, t->notes,
               ar_printf(&ar, "%s: cannot find the model of memplan_reference(%s %s): %s", c->file, c->arg[0],
                         c->arg[1], yaml ? yaml : "no memplan_e2e_build of that fixture"));
      continue;
    }
    const char *base = strrchr(path, '/');
    RefModel m = {.y = yaml_of(ar_printf(&ar, "%s (%s)", base ? base + 1 : path, c->arg[0]), ar_strdup(&ar, text))};
    const Graph *g = try_load(path, text);
    if (!g) {
      VEC_PUSH(&ar, t->notes, ar_printf(&ar, "%s: the planner rejects it: %s", path, diag_last()));
      continue;
    }
    for (int i = 0; i < g->nops; i++) m.kind[g->ops[i].kind] = true;
    VEC_PUSH(&ar, t->refmodels, m);
  }
}

static void read_tree(Tree *t) {
  t->grad = read_c("tests/gradcheck.c");
  t->cuda = read_c("tests/gpu/test_cuda_kernels.c");
  t->kernels = ar_alloc(&ar, sizeof *t->kernels); /* #define lines: comments blanked only */
  t->kernels->rel = "runtime/memplan_kernels.h";
  t->kernels->code = read_src(t->kernels->rel, &t->kernels->n);
  blank_comments_and_literals(t->kernels->code, t->kernels->n);
  t->torch = python_code(read_src("tests/reference/plan_torch.py", NULL));
  char *readme = read_src("docs/model-format.md", NULL), *s = strstr(readme, "\n## Ops\n");
  if (!s) die("no \"## Ops\" section in", "docs/model-format.md");
  s += strlen("\n## Ops\n");
  char *e = strstr(s, "\n#");
  if (e) e[1] = 0;
  t->readme = s;
  const char **files;
  int nf = list_dir("tests/errors", ".yaml", &files);
  for (int f = 0; f < nf; f++) {
    const char *rel = ar_printf(&ar, "tests/errors/%s", files[f]);
    VEC_PUSH(&ar, t->errors, yaml_of(rel, read_src(rel, NULL)));
  }
  find_reference_models(t);
}

/* ---- the ops and their items ---- */

typedef struct {
  const char *name;
  const char *key[MAX_ATTR];
  int nkeys;
  bool yaml;      /* written as a layer (it has a shape rule) */
  bool composite; /* lowers to other ops; no kernels */
  bool cast;      /* OP_CAST: conversion kernels per 2-byte dtype */
  bool comm;      /* a collective (op_is_comm): no kernels */
  int kind;       /* its OpKind; -1 for a pretend op */
} OpRec;

static OpRec op_rec(OpKind k) {
  const OpInfo *oi = op_info(k);
  OpRec o = {.name = oi->name,
             .yaml = shape_rules[k] != NULL,
             .composite = oi->composite,
             .cast = k == OP_CAST,
             .comm = op_is_comm(k),
             .kind = k};
  for (int i = 0; i < MAX_ATTR && oi->attrs[i].key; i++) o.key[o.nkeys++] = oi->attrs[i].key;
  return o;
}

/* The op's kernel stems (rt_<stem> on the CPU, rt_cuda_<stem> in CUDA). */
static int kernels(const OpRec *o, const char **k) {
  int n = 0;
  if (o->composite || o->comm) return 0;
  if (o->yaml) {
    k[n++] = ar_printf(&ar, "%s_forward", o->name);
    k[n++] = ar_printf(&ar, "%s_backward", o->name);
  } else if (o->cast) {
    for (int d = 0; d < DT_COUNT && n + 2 <= MAX_KERNELS; d++) {
      if (dtype_size((DType)d) != 2) continue;
      k[n++] = ar_printf(&ar, "f32_to_%s", dtype_name((DType)d));
      k[n++] = ar_printf(&ar, "%s_to_f32", dtype_name((DType)d));
    }
  } else {
    k[n++] = ar_printf(&ar, "%s_update", o->name);
  }
  return n;
}

enum { GRAD, REF, CUDA, README, ERRORS, NITEMS };
static const char *const item_label[NITEMS] = {"gradient check", "PyTorch reference", "CUDA comparison", "op table row",
                                               "error test"};

typedef struct {
  bool applies;
  const char *found;   /* where, when present */
  const char *missing; /* what is missing and where to add it; NULL: present */
} Item;

/* ", not declared in HEADER: rt_x, rt_y" for the stems the header lacks. */
static const char *undeclared(const CSrc *h, const char **k, int nk) {
  const char *s = "";
  for (int i = 0; i < nk; i++)
    if (!declares(h, k[i])) s = ar_printf(&ar, "%s%s%s", s, *s ? ", " : "", k[i]);
  return *s ? ar_printf(&ar, " (%s declares no %s yet)", h->rel, s) : "";
}

static Item item_grad(const Tree *t, const OpRec *o, const char **k, int nk) {
  Item it = {.applies = !o->composite && !o->cast && !o->comm};
  if (!it.applies) return it;
  const CSrc *g = t->grad;
  if (!o->yaml) { /* an update: hand-computed steps */
    for (int f = 0; f < g->fn.n; f++)
      if (g->fn.v[f].reached && calls(g, &g->fn.v[f], ar_printf(&ar, "rt_%s", k[0]))) it.found = g->fn.v[f].name;
    if (!it.found)
      it.missing = ar_printf(&ar,
                             "no function of tests/gradcheck.c that main() reaches calls rt_%s; check it against "
                             "hand-computed steps beside values_optimizers()%s",
                             k[0], undeclared(t->kernels, k, nk));
    return it;
  }
  const Func **fwd, **bwd;
  int nfwd = designated(g, "fwd", &fwd), nbwd = designated(g, "bwd", &bwd);
  const char *rf = ar_printf(&ar, "rt_%s", k[0]), *rb = ar_printf(&ar, "rt_%s", k[1]);
  const Func *ff = NULL, *fb = NULL;
  for (int i = 0; i < nfwd && !ff; i++)
    if (calls(g, fwd[i], rf)) ff = fwd[i];
  for (int i = 0; i < nbwd && !fb; i++)
    if (calls(g, bwd[i], rb)) fb = bwd[i];
  if (ff && fb) {
    it.found = ar_printf(&ar, "%s/%s", ff->name, fb->name);
    return it;
  }
  const char *lack = ar_printf(&ar, "%s%s%s", ff ? "" : ar_printf(&ar, "no Case's .fwd calls %s", rf),
                               !ff && !fb ? " and " : "", fb ? "" : ar_printf(&ar, "no Case's .bwd calls %s", rb));
  it.missing = ar_printf(&ar,
                         "tests/gradcheck.c runs no finite-difference check of it (%s); add run_case(&(Case){...}) "
                         "to gradchecks() with a double reference .ref, .fwd and .bwd%s",
                         lack, undeclared(t->kernels, k, nk));
  return it;
}

static Item item_ref(const Tree *t, const OpRec *o) {
  Item it = {.applies = !o->cast && !o->comm};
  if (!it.applies) return it;
  const char *key = o->yaml ? "op" : "type";
  const char *model = NULL;
  for (int m = 0; m < t->refmodels.n && !model; m++) {
    const RefModel *r = &t->refmodels.v[m];
    bool has = o->kind >= 0 && !o->composite && o->yaml ? r->kind[o->kind] : yaml_has(r->y, key, o->name);
    if (has) model = r->y->rel;
  }
  bool torch = o->composite || torch_compares(t, o->name);
  if (model && torch) {
    it.found = model;
    return it;
  }
  const char *a = "", *b = "";
  if (!torch)
    a = ar_printf(&ar, "tests/reference/plan_torch.py never compares a name with \"%s\": add its torch version to %s",
                  o->name, o->yaml ? "forward() (elif k == ...)" : "make_optimizer() (if o[\"type\"] == ...)");
  if (!model)
    b = ar_printf(&ar,
                  "no model that a reference test runs %s `%s: %s`: add one (memplan_e2e_build and "
                  "memplan_reference in tests/e2e.cmake)",
                  o->yaml && !o->composite ? "holds a layer" : "has", key, o->name);
  it.missing = ar_printf(&ar, "%s%s%s", a, *a && *b ? "; " : "", b);
  return it;
}

static Item item_cuda(const Tree *t, const OpRec *o, const char **k, int nk) {
  Item it = {.applies = !o->composite && !o->comm};
  if (!it.applies) return it;
  const CSrc *c = t->cuda;
  const char *lack = "", *where = "";
  for (int i = 0; i < nk; i++) {
    const char *in = NULL;
    for (int f = 0; f < c->fn.n && !in; f++) {
      const Func *fn = &c->fn.v[f];
      if (fn->reached && calls_ut(c, fn, k[i]) && calls_prefixed(c, fn, "ref_")) in = fn->name;
    }
    if (!in) lack = ar_printf(&ar, "%s%sUT(%s)", lack, *lack ? ", " : "", k[i]);
    else if (!strstr(where, in)) where = ar_printf(&ar, "%s%s%s", where, *where ? "/" : "", in);
  }
  if (!*lack) {
    it.found = where;
    return it;
  }
  it.missing = ar_printf(&ar,
                         "tests/gpu/test_cuda_kernels.c compares no %s with a ref_ reference (tests/gpu/ref.c) in a "
                         "case main() runs; add case_%s() and RUN(\"%s\", case_%s(...)) in main()%s",
                         lack, o->name, o->name, o->name, undeclared(t->kernels, k, nk));
  return it;
}

static Item item_readme(const Tree *t, const OpRec *o) {
  Item it = {.applies = o->yaml};
  if (!it.applies) return it;
  const char *tick = ar_printf(&ar, "`%s`", o->name);
  for (const char *l = t->readme; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (*l != '|') continue;
    const char *e = strchr(l + 1, '|'), *h = strstr(l + 1, tick);
    if (e && h && h < e) {
      it.found = "docs/model-format.md";
      return it;
    }
  }
  it.missing = ar_printf(&ar,
                         "docs/model-format.md's \"## Ops\" table has no row naming %s; add | %s | inputs | keys | "
                         "output | parameters |",
                         tick, tick);
  return it;
}

/* The message names key: 'key', or "key = " (a value shown). */
static bool names_key(const char *msg, const char *key) {
  if (strstr(msg, ar_printf(&ar, "'%s'", key))) return true;
  const char *eq = ar_printf(&ar, "%s = ", key);
  for (const char *h = strstr(msg, eq); h; h = strstr(h + 1, eq))
    if (h == msg || !is_id(h[-1])) return true;
  return false;
}

static Item item_errors(const Tree *t, const OpRec *o) {
  Item it = {.applies = o->yaml && o->nkeys > 0};
  if (!it.applies) return it;
  for (int f = 0; f < t->errors.n && !it.found; f++) {
    const Yaml *y = t->errors.v[f];
    const char *text = read_src(y->rel, NULL); /* the comments hold the expectations */
    for (const char *h = strstr(text, "# expect: "); h && !it.found; h = strstr(h + 1, "# expect: ")) {
      const char *x = h + strlen("# expect: "), *err = strstr(x, ": error: "), *nl = strchr(x, '\n');
      if (!err || (nl && err > nl)) continue;
      int line = 0, col = 0;
      const char *c2 = err;
      while (c2 > x && c2[-1] != ':') c2--; /* "FILE:LINE:COL" */
      const char *c1 = c2 > x ? c2 - 1 : x;
      while (c1 > x && c1[-1] != ':') c1--;
      if (sscanf(c1, "%d:%d", &line, &col) != 2) continue;
      const char *op = yaml_op_at(y, line);
      if (!op || strcmp(op, o->name)) continue;
      const char *m0 = err + strlen(": error: ");
      const char *msg = ar_printf(&ar, "%.*s", (int)(nl ? (size_t)(nl - m0) : strlen(m0)), m0);
      if (!strncmp(msg, "layer '", 7) && strstr(msg, "': ")) msg = strstr(msg, "': ") + 3; /* not the layer's name */
      for (int i = 0; i < o->nkeys && !it.found; i++)
        if (names_key(msg, o->key[i])) it.found = ar_printf(&ar, "%s ('%s')", strrchr(y->rel, '/') + 1, o->key[i]);
    }
  }
  if (it.found) return it;
  const char *keys = "";
  for (int i = 0; i < o->nkeys; i++) keys = ar_printf(&ar, "%s%s'%s'", keys, i ? ", " : "", o->key[i]);
  it.missing = ar_printf(&ar,
                         "no tests/errors/*.yaml expects an error about its keys (%s) in a layer `op: %s`; add "
                         "tests/errors/%s_%s.yaml, first line `# expect: FILE:LINE:COL: error: <the exact "
                         "message>` (tests/planner.cmake runs every file there)",
                         keys, o->name, o->name, o->key[0]);
  return it;
}

/* Checks one op and prints its line, and its gaps; returns the gaps. */
static int check_op(const Tree *t, const OpRec *o) {
  const char *k[MAX_KERNELS];
  int nk = kernels(o, k);
  Item it[NITEMS] = {item_grad(t, o, k, nk), item_ref(t, o), item_cuda(t, o, k, nk), item_readme(t, o),
                     item_errors(t, o)};
  int applies = 0, gaps = 0;
  for (int i = 0; i < NITEMS; i++) {
    applies += it[i].applies;
    gaps += it[i].applies && it[i].missing;
  }
  printf("%-4s %-22s", gaps ? "FAIL" : "ok", o->name);
  for (int i = 0; i < NITEMS; i++)
    printf(" %d:%s", i + 1, !it[i].applies ? "n/a" : it[i].missing ? "MISSING" : it[i].found);
  printf("\n");
  if (gaps) {
    printf("     op '%s' lacks %d of %d:\n", o->name, gaps, applies);
    for (int i = 0; i < NITEMS; i++)
      if (it[i].applies && it[i].missing) printf("       %d. %s: %s\n", i + 1, item_label[i], it[i].missing);
  }
  return gaps;
}

int main(int argc, char **argv) {
  VEC(OpRec) pretend = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--pretend-op") && i + 1 < argc) {
      char *spec = ar_strdup(&ar, argv[++i]), *colon = strchr(spec, ':');
      if (!colon || colon == spec || !colon[1]) {
        fprintf(stderr, "test_op_coverage: --pretend-op wants NAME:KEY, got '%s'\n", argv[i]);
        return 2;
      }
      *colon = 0;
      OpRec o = {.name = spec, .key = {colon + 1}, .nkeys = 1, .yaml = true, .kind = -1};
      VEC_PUSH(&ar, pretend, o);
    } else if (!srcdir && argv[i][0] != '-') {
      srcdir = argv[i];
    } else {
      fprintf(stderr, "usage: test_op_coverage SOURCE_DIR [--pretend-op NAME:KEY]...\n");
      return 2;
    }
  }
  if (!srcdir) {
    fprintf(stderr, "usage: test_op_coverage SOURCE_DIR [--pretend-op NAME:KEY]...\n");
    return 2;
  }
  Tree t = {0};
  read_tree(&t);
  for (int i = 0; i < t.notes.n; i++) printf("note: %s\n", t.notes.v[i]);
  printf(
      "items: 1 gradient check (tests/gradcheck.c), 2 PyTorch reference (plan_torch.py, a reference test's "
      "model), 3 CUDA comparison (tests/gpu/test_cuda_kernels.c), 4 op table row (docs/model-format.md), 5 error "
      "test (tests/errors)\n");
  int failing = 0, nops = 0;
  for (int k = 0; k < OP_COUNT; k++) {
    OpRec o = op_rec((OpKind)k);
    failing += check_op(&t, &o) > 0;
    nops++;
  }
  for (int i = 0; i < pretend.n; i++) {
    failing += check_op(&t, &pretend.v[i]) > 0;
    nops++;
  }
  if (failing) printf("op coverage: %d of %d ops lack items (FAIL above says what and where)\n", failing, nops);
  else printf("op coverage: all %d ops have every item that applies to them\n", nops);
  ar_free(&ar);
  return failing ? 1 : 0;
}
