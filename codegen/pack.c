/* pack.c: `memplan pack`, the offset assigner on MiniMalloc's CSV format.
 *
 *   memplan pack FILE.csv [--capacity N] [--time-limit SECONDS] [-o OUT.csv]
 *
 * Reads rows id,lower,upper,size (columns in any order; an offset column is
 * ignored), packs them, checks the packing with verify_packing, prints a
 * summary and, with -o, writes the rows with an offset column
 * (text_write_atomic, so OUT.csv is never half-written).
 * Exit (cli.h): 0 done (or fits), 1 bad input, I/O, or not shown to fit the
 * capacity (proven not to, or unknown at the time limit), 2 usage, 3 a
 * packing that fails verification. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "assign.h"
#include "cli.h"
#include "emit.h"
#include "verify.h"

typedef struct {
  char **id; /* as written */
  int64_t *lo, *hi, *size;
  int n, cap;
} Rows;

typedef struct {
  const char *path;
  int line;
} Where;

/* Bad input: die_at reports it and exits, or, while pack_main reads its
 * input, jumps back there so that pack_main returns 1 (fuzzers, tests). */
static jmp_buf *input_error;

static void die_at(Where w, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die_at(Where w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (w.line > 0) fprintf(stderr, "%s:%d: error: ", w.path, w.line);
  else fprintf(stderr, "%s: error: ", w.path);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (input_error) longjmp(*input_error, 1);
  exit(EXIT_USER);
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n);
  if (!p) {
    fprintf(stderr, "memplan: error: out of memory\n");
    exit(EXIT_USER);
  }
  return p;
}

static void rows_push(Rows *r, char *id, int64_t lo, int64_t hi, int64_t size) {
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 256;
    r->id = xrealloc(r->id, sizeof(char *) * (size_t)r->cap);
    r->lo = xrealloc(r->lo, sizeof(int64_t) * (size_t)r->cap);
    r->hi = xrealloc(r->hi, sizeof(int64_t) * (size_t)r->cap);
    r->size = xrealloc(r->size, sizeof(int64_t) * (size_t)r->cap);
  }
  r->id[r->n] = id, r->lo[r->n] = lo, r->hi[r->n] = hi, r->size[r->n] = size;
  r->n++;
}

/* Splits a line in place at commas; strips a trailing CR. Returns fields. */
static int split(char *line, char **f, int max) {
  size_t len = strlen(line);
  while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
  int n = 0;
  for (char *p = line;; p++) {
    if (n < max) f[n] = p;
    n++;
    p = strchr(p, ',');
    if (!p) break;
    *p = 0;
  }
  return n;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
  return s;
}

static int64_t parse_int(Where w, const char *col, const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno) die_at(w, "column '%s': '%s' is not an integer", col, s);
  return (int64_t)v;
}

enum { C_ID, C_LOWER, C_UPPER, C_SIZE, N_COLS, MAX_FIELDS = 64 };
static const char *COLS[N_COLS] = {"id", "lower", "upper", "size"};

/* Maps required columns to positions from the header line. */
static int read_header(Where w, char *line, int *pos) {
  char *f[MAX_FIELDS];
  int nf = split(line, f, MAX_FIELDS);
  if (nf > MAX_FIELDS) die_at(w, "too many columns (at most %d)", MAX_FIELDS);
  for (int c = 0; c < N_COLS; c++) pos[c] = -1;
  for (int i = 0; i < nf; i++)
    for (int c = 0; c < N_COLS; c++)
      if (!strcmp(trim(f[i]), COLS[c])) {
        if (pos[c] >= 0) die_at(w, "column '%s' appears twice", COLS[c]);
        pos[c] = i;
      }
  for (int c = 0; c < N_COLS; c++)
    if (pos[c] < 0) die_at(w, "missing column '%s' (need id, lower, upper, size)", COLS[c]);
  return nf;
}

static void read_row(Where w, char *line, const int *pos, int nf, Rows *r) {
  char *f[MAX_FIELDS];
  int n = split(line, f, MAX_FIELDS);
  if (n != nf) die_at(w, "%d fields, the header has %d", n, nf);
  char *id = trim(f[pos[C_ID]]);
  if (!*id) die_at(w, "empty id");
  int64_t lo = parse_int(w, "lower", trim(f[pos[C_LOWER]]));
  int64_t hi = parse_int(w, "upper", trim(f[pos[C_UPPER]]));
  int64_t size = parse_int(w, "size", trim(f[pos[C_SIZE]]));
  if (hi <= lo) die_at(w, "upper (%" PRId64 ") must be greater than lower (%" PRId64 ")", hi, lo);
  if (size < 0) die_at(w, "size %" PRId64 " is negative", size);
  if (r->n == 0x7fffffff - 1) die_at(w, "too many rows");
  char *copy = strdup(id);
  if (!copy) die_at(w, "out of memory");
  rows_push(r, copy, lo, hi, size);
}

typedef struct {
  const char *id;
  int row;
} IdRow;

static int id_cmp(const void *a, const void *b) {
  const IdRow *x = a, *y = b;
  int c = strcmp(x->id, y->id);
  return c ? c : (x->row > y->row) - (x->row < y->row);
}

/* Duplicate ids: sort (id, row), compare neighbours; names the later line. */
static void check_duplicates(const char *path, const Rows *r, const int *line_of) {
  IdRow *ix = malloc(sizeof(IdRow) * (size_t)(r->n ? r->n : 1));
  if (!ix) die_at((Where){path, 0}, "out of memory");
  for (int i = 0; i < r->n; i++) ix[i] = (IdRow){r->id[i], i};
  qsort(ix, (size_t)r->n, sizeof(IdRow), id_cmp);
  int dup = 1;
  while (dup < r->n && strcmp(ix[dup - 1].id, ix[dup].id)) dup++;
  IdRow a = dup < r->n ? ix[dup - 1] : (IdRow){0}, b = dup < r->n ? ix[dup] : (IdRow){0};
  free(ix);
  if (dup < r->n) die_at((Where){path, line_of[b.row]}, "duplicate id '%s' (first on line %d)", b.id, line_of[a.row]);
}

/* The assigner works in int64: every offset stays below the sum of sizes. */
/* Every height the packer computes stays below the sum of the sizes; half
 * of 64 bits leaves room for alignment and for adding one more size. */
static void check_totals(const char *path, const Rows *r, const int *line_of) {
  int64_t sum = 0, len;
  for (int i = 0; i < r->n; i++)
    if (__builtin_add_overflow(sum, r->size[i], &sum) || sum > INT64_MAX / 2 ||
        __builtin_sub_overflow(r->hi[i], r->lo[i], &len))
      die_at((Where){path, line_of[i]}, "sizes or lifetimes too large to pack in 64 bits (sizes must sum below 2^62)");
}

/* What read_csv holds, owned by the caller so that it can be freed after
 * an input error. */
typedef struct {
  FILE *f;
  char *line;
  int *line_of;
} Reader;

static void read_csv(const char *path, Rows *r, Reader *rd) {
  const char *why;
  FILE *f = rd->f = mp_open_input(path, &why);
  if (!f) die_at((Where){path, 0}, "cannot open: %s", why);
  size_t cap = 0;
  int pos[N_COLS], nf = 0, lineno = 0, lcap = 0;
  while (getline(&rd->line, &cap, f) >= 0) {
    char *line = rd->line;
    Where w = {path, ++lineno};
    if (lineno == 1) {
      nf = read_header(w, line, pos);
      continue;
    }
    if (strspn(line, " \t\r\n") == strlen(line)) continue; /* blank line */
    read_row(w, line, pos, nf, r);
    if (r->n > lcap) {
      lcap = 2 * r->n;
      rd->line_of = xrealloc(rd->line_of, sizeof(int) * (size_t)lcap);
    }
    rd->line_of[r->n - 1] = lineno;
  }
  if (ferror(f)) die_at((Where){path, lineno}, "read error: %s", strerror(errno));
  if (lineno == 0) die_at((Where){path, 1}, "empty file (need a header id,lower,upper,size)");
  if (!rd->line_of) rd->line_of = xrealloc(NULL, sizeof(int));
  check_duplicates(path, r, rd->line_of);
  check_totals(path, r, rd->line_of);
}

/* read_csv with input errors returned (-1, already reported) instead of
 * exiting; the caller frees r and rd either way. */
static int read_input(const char *path, Rows *r, Reader *rd) {
  jmp_buf jb;
  if (setjmp(jb)) {
    input_error = NULL;
    return -1;
  }
  input_error = &jb;
  read_csv(path, r, rd);
  input_error = NULL;
  return 0;
}

/* Writes the rows with offsets (text_write_atomic: temp file, fsync,
 * rename). */
static int write_csv(const char *out, const Rows *r, const int64_t *off) {
  Text t = {0};
  text_printf(&t, "id,lower,upper,size,offset\n");
  for (int i = 0; i < r->n; i++)
    text_printf(&t, "%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n", r->id[i], r->lo[i], r->hi[i], r->size[i],
                off[i]);
  int rc = text_write_atomic(&t, out);
  text_free(&t);
  return rc;
}

const char pack_help[] =
    "usage: memplan pack FILE.csv [OPTIONS]\n"
    "  Packs buffers with lifetimes [lower, upper) and sizes into one arena\n"
    "  (MiniMalloc's CSV: id,lower,upper,size) and prints the height.\n"
    "      --capacity N      decide whether the buffers fit in N bytes (exit 1 when they are not\n"
    "                        shown to fit: proven not to, or unknown at the time limit)\n"
    "      --time-limit S    seconds the exact search may take (default 10)\n"
    "  -o, --output OUT.csv  write the rows with an offset column\n"
    "  -h, --help            this help\n";

typedef struct {
  const char *in, *out;
  int64_t capacity; /* -1: minimize */
  double time_limit;
} Opts;

static Opts parse_opts(int argc, char **argv) {
  static const struct option longs[] = {{"capacity", required_argument, 0, 'c'},
                                        {"time-limit", required_argument, 0, 't'},
                                        {"output", required_argument, 0, 'o'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  Opts o = {.capacity = -1, .time_limit = 10};
  optind = 1;
  opterr = 0;
  int c;
  char *end;
  while ((c = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
    if (c == 'h') {
      fputs(pack_help, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      exit(EXIT_OK);
    } else if (c == 'o') {
      o.out = optarg;
    } else if (c == 'c') {
      errno = 0;
      long long v = strtoll(optarg, &end, 10);
      if (!*optarg || *end || errno || v < 0)
        cli_usage_error("pack", "--capacity wants a byte count, got '%s'", optarg);
      o.capacity = v;
    } else if (c == 't') {
      o.time_limit = strtod(optarg, &end);
      if (!*optarg || *end || !(o.time_limit >= 0) || o.time_limit > 1e6)
        cli_usage_error("pack", "--time-limit wants seconds (e.g. 10), got '%s'", optarg);
    } else {
      cli_bad_option("pack", c, argv);
    }
  }
  if (optind >= argc) cli_usage_error("pack", "no input file given");
  if (optind < argc - 1)
    cli_usage_error("pack", "more than one input file ('%s' and '%s')", argv[optind], argv[optind + 1]);
  o.in = argv[optind];
  return o;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An internal error (EXIT_INTERNAL) if the assigner's packing fails the
 * independent check (which accepts zero-size rows: they hold no bytes). */
static bool verified(const Rows *r, const int64_t *off, int64_t cap) {
  const char *err = verify_packing(r->n, r->lo, r->hi, r->size, off, 1, cap);
  if (err)
    fprintf(stderr, "memplan pack: internal error: the packing fails verification: %s\n(this is a bug in memplan)\n",
            err);
  return !err;
}

static int run_capacity(const Opts *o, const Rows *r, const AsgItem *items, int64_t *off) {
  double t0 = now_s();
  int fit = assign_fit(items, r->n, 1, o->capacity, o->time_limit, off);
  double ms = 1e3 * (now_s() - t0);
  int64_t lb = assign_lower_bound(items, r->n, 1);
  printf("n %d\nlower bound %" PRId64 "\ncapacity %" PRId64 "\n", r->n, lb, o->capacity);
  if (fit == 1) {
    if (!verified(r, off, o->capacity)) return EXIT_INTERNAL;
    printf("fits: yes\ntime %.1f ms\n", ms);
    return o->out && write_csv(o->out, r, off) ? EXIT_USER : EXIT_OK;
  }
  printf("fits: %s\ntime %.1f ms\n", fit == 0 ? "no (proven)" : "unknown (time limit)", ms);
  fflush(stdout);
  if (fit == 0)
    fprintf(stderr, "memplan pack: error: %s does not fit the capacity of %" PRId64 " bytes (proven)\n", o->in,
            o->capacity);
  else
    fprintf(stderr,
            "memplan pack: error: %s: whether it fits %" PRId64
            " bytes is unknown after the time limit "
            "(--time-limit %g)\n",
            o->in, o->capacity, o->time_limit);
  return EXIT_USER;
}

static int run_minimize(const Opts *o, const Rows *r, const AsgItem *items, int64_t *off) {
  AsgResult res = assign_offsets(items, r->n, 1, o->time_limit, off);
  if (!verified(r, off, res.height)) return EXIT_INTERNAL;
  double gap = res.lower_bound ? 100.0 * (double)(res.height - res.lower_bound) / (double)res.lower_bound : 0;
  printf("n %d\nlower bound %" PRId64 "\nheight %" PRId64
         "\ngap %.2f %%\ntime %.1f ms\n"
         "optimal %s\nmethod %s\n",
         r->n, res.lower_bound, res.height, gap, 1e3 * res.seconds, res.optimal ? "yes" : "no", res.method);
  return o->out && write_csv(o->out, r, off) ? EXIT_USER : EXIT_OK;
}

int pack_main(int argc, char **argv) {
  Opts o = parse_opts(argc, argv);
  Rows r = {0};
  Reader rd = {0};
  int rc = EXIT_USER;
  AsgItem *items = NULL;
  int64_t *off = NULL;
  if (read_input(o.in, &r, &rd) == 0) {
    size_t n = r.n > 0 ? (size_t)r.n : 1;
    items = malloc(sizeof(AsgItem) * n);
    off = malloc(sizeof(int64_t) * n);
    if (!items || !off) die_at((Where){o.in, 0}, "out of memory");
    for (int i = 0; i < r.n; i++) items[i] = (AsgItem){r.lo[i], r.hi[i], r.size[i]};
    rc = o.capacity >= 0 ? run_capacity(&o, &r, items, off) : run_minimize(&o, &r, items, off);
  }
  if (rd.f) fclose(rd.f);
  for (int i = 0; i < r.n; i++) free(r.id[i]);
  free(r.id), free(r.lo), free(r.hi), free(r.size), free(items), free(off), free(rd.line), free(rd.line_of);
  return rc;
}
