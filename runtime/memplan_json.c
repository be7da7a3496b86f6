/* memplan_json.c: the file-header reader (memplan_json.h). Recursive descent
 * with the recursion bounded by MjLimits.max_depth; an error longjmps out of
 * the parse, which frees what it held. A container's items are collected on
 * a stack and moved, when it closes, into one contiguous run of the value
 * array: items[i] is random access, and the whole tree is two allocations. */
#include "memplan_json.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mj_kind_name[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};

typedef struct {
  const char *s, *p, *end;
  const MjLimits *lim;
  MjError *e;
  jmp_buf fail;
  MjVal *out, *stk; /* finished runs of items; items of the open containers */
  size_t nout, cout, nstk, cstk;
  char *pool;
  size_t npool;
  int32_t *hash; /* duplicate keys: open addressing over one object's items */
  size_t chash;
} P;

__attribute__((format(printf, 3, 4))) _Noreturn static void fail_at(P *p, const char *at, const char *fmt, ...) {
  p->e->off = at - p->s;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->e->msg, sizeof p->e->msg, fmt, ap);
  va_end(ap);
  longjmp(p->fail, 1);
}

/* "expected X": at the end of the text, says so (a cut header). */
_Noreturn static void expected(P *p, const char *what) {
  if (p->p >= p->end) fail_at(p, p->p, "the text ends where %s was expected (truncated?)", what);
  fail_at(p, p->p, "expected %s", what);
}

static void *grow(P *p, void *v, size_t *cap, size_t need, size_t each) {
  if (need <= *cap) return v;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *g = realloc(v, c * each);
  if (!g) fail_at(p, p->p, "out of memory");
  *cap = c;
  return g;
}

static void ws(P *p) {
  while (p->p < p->end && (*p->p == ' ' || *p->p == '\t' || *p->p == '\n' || *p->p == '\r')) p->p++;
}

static unsigned hex4(P *p) {
  unsigned u = 0;
  for (int k = 0; k < 4; k++, p->p++) {
    char c = p->p < p->end ? *p->p : 0;
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) expected(p, "four hex digits after \\u");
    u = u * 16 + (unsigned)d;
  }
  return u;
}

static void put_utf8(char *o, size_t *n, unsigned cp) {
  if (cp < 0x80) o[(*n)++] = (char)cp;
  else if (cp < 0x800) {
    o[(*n)++] = (char)(0xC0 | cp >> 6);
    o[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o[(*n)++] = (char)(0xE0 | cp >> 12);
    o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    o[(*n)++] = (char)(0xF0 | cp >> 18);
    o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[(*n)++] = (char)(0x80 | (cp & 0x3F));
  }
}

/* Length of the well-formed UTF-8 sequence at s (n bytes left), or 0: no
 * overlong forms, no surrogates, nothing past U+10FFFF. */
static int utf8_len(const unsigned char *s, ptrdiff_t n) {
  int len = s[0] < 0x80                   ? 1
            : s[0] >= 0xC2 && s[0] < 0xE0 ? 2
            : s[0] >= 0xE0 && s[0] < 0xF0 ? 3
            : s[0] >= 0xF0 && s[0] < 0xF5 ? 4
                                          : 0;
  if (len == 0 || len > n) return 0;
  for (int k = 1; k < len; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if (len == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
  if (len == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
  return len;
}

/* At the opening quote: the string decoded into the pool (never longer than
 * its literal, quotes included, so the pool of the text's size is enough). */
static const char *string(P *p, int32_t *len) {
  const char *start = p->p++;
  char *o = p->pool + p->npool;
  size_t n = 0;
  for (;;) {
    if (p->p >= p->end) fail_at(p, start, "a string that never ends (truncated?)");
    unsigned char c = (unsigned char)*p->p;
    if (c == '"') break;
    if (c < 0x20) fail_at(p, p->p, "control byte 0x%02x in a string (write it as \\u%04x)", c, c);
    if (c != '\\') {
      int k = utf8_len((const unsigned char *)p->p, p->end - p->p);
      if (!k) fail_at(p, p->p, "a string holds bytes that are not UTF-8");
      memcpy(o + n, p->p, (size_t)k), n += (size_t)k, p->p += k;
      continue;
    }
    p->p++;
    char e = p->p < p->end ? *p->p : 0;
    const char *simple = e ? strchr("\"\\/bfnrt", e) : NULL;
    if (p->p < p->end) p->p++;
    if (simple) {
      o[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
      continue;
    }
    if (e != 'u') {
      if (!e && p->p >= p->end) expected(p, "an escape after '\\'");
      fail_at(p, p->p - 2, "unknown escape '\\%c' in a string", e ? e : '0');
    }
    const char *esc = p->p - 2;
    unsigned cp = hex4(p);
    if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
      if (p->end - p->p < 6 || p->p[0] != '\\' || p->p[1] != 'u') expected(p, "a low surrogate \\uDC00..\\uDFFF");
      p->p += 2;
      unsigned lo = hex4(p);
      if (lo < 0xDC00 || lo > 0xDFFF) fail_at(p, p->p - 6, "expected a low surrogate \\uDC00..\\uDFFF");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) fail_at(p, esc, "lone low surrogate \\u%04x in a string", cp);
    if (cp == 0) fail_at(p, esc, "\\u0000 in a string (names and keys cannot hold NUL)");
    put_utf8(o, &n, cp);
  }
  p->p++;
  o[n] = 0;
  p->npool += n + 1;
  *len = (int32_t)n;
  return o;
}

/* JSON's number grammar, checked by hand within the buffer (strtod would
 * read past it, and accepts hex, inf, nan). */
static void number(P *p, MjVal *v) {
  const char *a = p->p, *q = p->p;
  int frac = 0;
  if (q < p->end && *q == '-') q++;
  if (q < p->end && *q == '0') q++;
  else if (q < p->end && *q >= '1' && *q <= '9')
    while (q < p->end && *q >= '0' && *q <= '9') q++;
  else {
    p->p = q;
    expected(p, q == a ? "a value" : "a digit after '-'");
  }
  if (q < p->end && *q == '.') {
    frac = 1, q++;
    if (q >= p->end || *q < '0' || *q > '9') p->p = q, expected(p, "a digit after '.'");
    while (q < p->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < p->end && (*q == 'e' || *q == 'E')) {
    frac = 1, q++;
    if (q < p->end && (*q == '+' || *q == '-')) q++;
    if (q >= p->end || *q < '0' || *q > '9') p->p = q, expected(p, "a digit in the exponent");
    while (q < p->end && *q >= '0' && *q <= '9') q++;
  }
  if (q - a > 63) fail_at(p, a, "a number of %lld characters (at most 63)", (long long)(q - a));
  char buf[64];
  memcpy(buf, a, (size_t)(q - a));
  buf[q - a] = 0;
  v->kind = MJ_NUM;
  if (!frac) { /* an integer: exact when it fits int64 */
    int neg = buf[0] == '-';
    uint64_t u = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int fits = 1;
    for (const char *c = buf + neg; *c && fits; c++) {
      unsigned d = (unsigned)(*c - '0');
      if (u > (lim - d) / 10) fits = 0;
      else u = u * 10 + d;
    }
    if (fits) {
      v->is_int = 1;
      v->u.i = neg ? (u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u) : (int64_t)u;
      p->p = q;
      return;
    }
  }
  v->u.num = strtod(buf, NULL);
  p->p = q;
}

static void literal(P *p, MjVal *v, const char *word, MjKind kind, int b) {
  size_t n = strlen(word);
  if ((size_t)(p->end - p->p) < n || memcmp(p->p, word, n)) expected(p, "a value");
  v->kind = (uint8_t)kind, v->b = (uint8_t)b;
  p->p += n;
}

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* The n items at it: every key once (linear: a hash table of 2n..4n slots). */
static void check_keys(P *p, const MjVal *it, size_t n) {
  if (n < 2) return;
  size_t c = 4;
  while (c < 2 * n) c *= 2;
  p->hash = grow(p, p->hash, &p->chash, c, sizeof *p->hash);
  memset(p->hash, 0xff, c * sizeof *p->hash);
  for (size_t k = 0; k < n; k++) {
    size_t h = (size_t)fnv(it[k].key) & (c - 1);
    while (p->hash[h] >= 0) {
      if (!strcmp(it[p->hash[h]].key, it[k].key))
        fail_at(p, p->s + it[k].koff, "key \"%.200s\" appears twice in one object", it[k].key);
      h = (h + 1) & (c - 1);
    }
    p->hash[h] = (int32_t)k;
  }
}

static void push(P *p, const MjVal *v) {
  if ((int64_t)(p->nout + p->nstk) >= p->lim->max_values)
    fail_at(p, p->p, "more than %lld values: over the limit of this reader", (long long)p->lim->max_values);
  p->stk = grow(p, p->stk, &p->cstk, p->nstk + 1, sizeof *p->stk);
  p->stk[p->nstk++] = *v;
}

static void value(P *p, MjVal *v, int depth);

static void container(P *p, MjVal *v, int depth, int object) {
  if (depth >= p->lim->max_depth)
    fail_at(p, p->p, "nested deeper than %d levels (arrays and objects inside each other)", p->lim->max_depth);
  char close = object ? '}' : ']';
  v->kind = object ? MJ_OBJ : MJ_ARR;
  p->p++;
  size_t base = p->nstk;
  ws(p);
  if (p->p < p->end && *p->p == close) p->p++;
  else
    for (;;) {
      ws(p);
      const char *key = NULL, *kat = p->p;
      if (object) {
        if (p->p >= p->end || *p->p != '"') expected(p, "a key in quotes");
        int32_t kn;
        key = string(p, &kn);
        ws(p);
        if (p->p >= p->end || *p->p != ':') expected(p, "':' after the key");
        p->p++;
      }
      MjVal x = {0};
      value(p, &x, depth + 1);
      x.key = key, x.koff = (uint32_t)(kat - p->s);
      push(p, &x);
      ws(p);
      if (p->p < p->end && *p->p == ',') {
        p->p++;
        continue;
      }
      if (p->p < p->end && *p->p == close) {
        p->p++;
        break;
      }
      expected(p, object ? "',' or '}'" : "',' or ']'");
    }
  size_t n = p->nstk - base;
  if (n > INT32_MAX) fail_at(p, p->p, "more than %d items in one container", INT32_MAX);
  p->out = grow(p, p->out, &p->cout, p->nout + n + 1, sizeof *p->out);
  if (n) { /* (an empty container may come before the stack exists) */
    if (object) check_keys(p, p->stk + base, n);
    memcpy(p->out + p->nout, p->stk + base, n * sizeof *p->out);
  }
  v->u.first = p->nout, v->n = (int32_t)n;
  p->nout += n, p->nstk = base;
}

static void value(P *p, MjVal *v, int depth) {
  ws(p);
  v->off = (uint32_t)(p->p - p->s);
  char c = p->p < p->end ? *p->p : 0;
  switch (c) {
  case '{': container(p, v, depth, 1); break;
  case '[': container(p, v, depth, 0); break;
  case '"': v->kind = MJ_STR, v->u.s = string(p, &v->n); break;
  case 't': literal(p, v, "true", MJ_BOOL, 1); break;
  case 'f': literal(p, v, "false", MJ_BOOL, 0); break;
  case 'n': literal(p, v, "null", MJ_NULL, 0); break;
  default: number(p, v);
  }
}

int mj_parse(MjDoc *d, const char *text, size_t len, const MjLimits *lim, MjError *e) {
  memset(d, 0, sizeof *d);
  P p = {.s = text, .p = text, .end = text + len, .lim = lim, .e = e};
  if ((int64_t)len > lim->max_bytes || len >= UINT32_MAX) {
    e->off = 0;
    snprintf(e->msg, sizeof e->msg, "%zu bytes of JSON, over the limit of %lld", len, (long long)lim->max_bytes);
    return -1;
  }
  if (setjmp(p.fail)) {
    free(p.out), free(p.stk), free(p.pool), free(p.hash);
    return -1;
  }
  p.pool = malloc(len + 1);
  if (!p.pool) fail_at(&p, p.p, "out of memory");
  ws(&p);
  if (p.p >= p.end) fail_at(&p, p.p, "no JSON value (empty)");
  MjVal root = {0};
  value(&p, &root, 0);
  ws(&p);
  if (p.p < p.end) fail_at(&p, p.p, "text after the end of the JSON value");
  p.out = grow(&p, p.out, &p.cout, p.nout + 1, sizeof *p.out);
  p.out[p.nout++] = root;
  for (size_t k = 0; k < p.nout; k++)
    if (p.out[k].kind == MJ_ARR || p.out[k].kind == MJ_OBJ) p.out[k].u.items = p.out + p.out[k].u.first;
  free(p.stk), free(p.hash);
  d->vals = p.out, d->pool = p.pool, d->root = &p.out[p.nout - 1];
  return 0;
}

void mj_free(MjDoc *d) {
  free(d->vals), free(d->pool);
  memset(d, 0, sizeof *d);
}

const MjVal *mj_get(const MjVal *obj, const char *key) {
  if (obj->kind != MJ_OBJ) return NULL;
  for (int i = 0; i < obj->n; i++)
    if (!strcmp(obj->u.items[i].key, key)) return &obj->u.items[i];
  return NULL;
}

double mj_num(const MjVal *v) { return v->is_int ? (double)v->u.i : v->u.num; }

/* ------------------------------------------------------------------------
 * safetensors */

int mj_st_dtype_size(const char *dt) {
  static const struct {
    const char *name;
    int size;
  } k[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
           {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(dt, k[i].name)) return k[i].size;
  return 0;
}

__attribute__((format(printf, 3, 4))) static int st_fail(MjError *e, int64_t off, const char *fmt, ...) {
  e->off = off;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return -1;
}

static int by_offset(const void *a, const void *b) {
  const MjStTensor *x = *(const MjStTensor *const *)a, *y = *(const MjStTensor *const *)b;
  return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : x->end != y->end ? (x->end < y->end ? -1 : 1) : 0;
}

/* One entry {dtype, shape, data_offsets} (other keys ignored, as the
 * safetensors library does). */
static int st_entry(MjStTensor *t, const MjVal *v, int64_t data_bytes, MjError *e) {
  const char *nm = v->key;
  t->name = nm, t->off = v->off;
  if (v->kind != MJ_OBJ)
    return st_fail(e, v->off, "tensor '%.200s' is %s, expected an object {\"dtype\", \"shape\", \"data_offsets\"}", nm,
                   mj_kind_name[v->kind]);
  const MjVal *dt = mj_get(v, "dtype"), *sh = mj_get(v, "shape"), *of = mj_get(v, "data_offsets");
  if (!dt || !sh || !of)
    return st_fail(e, v->off, "tensor '%.200s' has no %s%s%s%s%s (a safetensors entry needs all three)", nm,
                   dt ? "" : "\"dtype\"", !dt && (!sh || !of) ? ", " : "", sh ? "" : "\"shape\"",
                   !sh && !of ? ", " : "", of ? "" : "\"data_offsets\"");
  if (dt->kind != MJ_STR)
    return st_fail(e, dt->off, "tensor '%.200s': \"dtype\" is %s, expected a string", nm, mj_kind_name[dt->kind]);
  t->dtype = dt->u.s, t->dsize = mj_st_dtype_size(dt->u.s);
  if (!t->dsize)
    return st_fail(e, dt->off,
                   "tensor '%.200s': unknown dtype \"%.40s\" (safetensors' are BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, "
                   "U16, F16, BF16, I32, U32, F32, F64, I64, U64)",
                   nm, dt->u.s);
  if (sh->kind != MJ_ARR)
    return st_fail(e, sh->off, "tensor '%.200s': \"shape\" is %s, expected an array of integers", nm,
                   mj_kind_name[sh->kind]);
  if (sh->n > MJ_ST_MAX_RANK)
    return st_fail(e, sh->off, "tensor '%.200s': shape of rank %d, at most %d", nm, sh->n, MJ_ST_MAX_RANK);
  t->rank = sh->n, t->numel = 1;
  for (int d = 0; d < sh->n; d++) {
    const MjVal *x = &sh->u.items[d];
    if (x->kind != MJ_NUM || !x->is_int || x->u.i < 0)
      return st_fail(e, x->off, "tensor '%.200s': shape dimension %d is not an integer >= 0", nm, d);
    t->shape[d] = x->u.i;
    if (__builtin_mul_overflow(t->numel, x->u.i, &t->numel))
      return st_fail(e, sh->off, "tensor '%.200s': its shape has more than 2^63 elements", nm);
  }
  int64_t bytes;
  if (__builtin_mul_overflow(t->numel, (int64_t)t->dsize, &bytes))
    return st_fail(e, sh->off, "tensor '%.200s': its shape holds more than 2^63 bytes of %s", nm, t->dtype);
  if (of->kind != MJ_ARR || of->n != 2 || of->u.items[0].kind != MJ_NUM || of->u.items[1].kind != MJ_NUM ||
      !of->u.items[0].is_int || !of->u.items[1].is_int)
    return st_fail(e, of->off, "tensor '%.200s': \"data_offsets\" must be two integers [begin, end]", nm);
  t->begin = of->u.items[0].u.i, t->end = of->u.items[1].u.i;
  if (t->begin < 0 || t->end < 0)
    return st_fail(e, of->off, "tensor '%.200s': data_offsets [%lld, %lld] hold a negative offset", nm,
                   (long long)t->begin, (long long)t->end);
  if (t->end < t->begin)
    return st_fail(e, of->off, "tensor '%.200s': data_offsets [%lld, %lld] are reversed (begin after end)", nm,
                   (long long)t->begin, (long long)t->end);
  if (t->end - t->begin != bytes)
    return st_fail(e, of->off,
                   "tensor '%.200s': data_offsets [%lld, %lld] hold %lld bytes, but %s of %lld elements needs %lld", nm,
                   (long long)t->begin, (long long)t->end, (long long)(t->end - t->begin), t->dtype,
                   (long long)t->numel, (long long)bytes);
  if (t->end > data_bytes)
    return st_fail(e, of->off,
                   "tensor '%.200s': data_offsets [%lld, %lld] run past the %lld bytes of data after the header "
                   "(truncated?)",
                   nm, (long long)t->begin, (long long)t->end, (long long)data_bytes);
  return 0;
}

int mj_st_read(MjSt *st, const char *hdr, size_t len, int64_t data_bytes, MjError *e) {
  memset(st, 0, sizeof *st);
  /* a real entry is 8 values or more: 4 M values is a header of 500 k tensors
   * (GPT-2 has 150), in at most 160 MB */
  const MjLimits lim = {64, MJ_ST_MAX_HEADER, (int64_t)1 << 22};
  if (mj_parse(&st->doc, hdr, len, &lim, e)) return -1;
  const MjVal *root = st->doc.root;
  if (root->kind != MJ_OBJ)
    return st_fail(e, root->off, "the header is %s, expected an object of tensors", mj_kind_name[root->kind]);
  st->t = malloc(sizeof *st->t * (size_t)(root->n + 1));
  MjStTensor **ord = malloc(sizeof *ord * (size_t)(root->n + 1));
  if (!st->t || !ord) {
    free(ord);
    return st_fail(e, 0, "out of memory for %d tensors", root->n);
  }
  int rc = 0;
  for (int i = 0; i < root->n && !rc; i++) {
    const MjVal *v = &root->u.items[i];
    if (strcmp(v->key, "__metadata__")) {
      rc = st_entry(&st->t[st->n], v, data_bytes, e);
      ord[st->n] = &st->t[st->n];
      st->n++;
      continue;
    }
    st->meta = v;
    if (v->kind != MJ_OBJ)
      rc = st_fail(e, v->off, "\"__metadata__\" is %s, expected an object of strings", mj_kind_name[v->kind]);
    else if (v->n > MJ_ST_MAX_META)
      rc = st_fail(e, v->off, "\"__metadata__\" holds %d entries, at most %d", v->n, MJ_ST_MAX_META);
    for (int k = 0; !rc && k < v->n; k++)
      if (v->u.items[k].kind != MJ_STR)
        rc = st_fail(e, v->u.items[k].off,
                     "\"__metadata__\": '%.200s' is %s: metadata values must be strings (safetensors' "
                     "__metadata__ maps strings to strings)",
                     v->u.items[k].key, mj_kind_name[v->u.items[k].kind]);
  }
  /* the data section is exactly the tensors, back to back in some order */
  if (!rc) qsort(ord, (size_t)st->n, sizeof *ord, by_offset);
  int64_t at = 0;
  for (int k = 0; !rc && k < st->n; k++) {
    const MjStTensor *t = ord[k];
    if (t->begin < at)
      rc = st_fail(e, t->off, "tensors '%.150s' [%lld, %lld] and '%.150s' [%lld, %lld] overlap", ord[k - 1]->name,
                   (long long)ord[k - 1]->begin, (long long)ord[k - 1]->end, t->name, (long long)t->begin,
                   (long long)t->end);
    else if (t->begin > at)
      rc = st_fail(e, t->off,
                   "bytes [%lld, %lld) of the data belong to no tensor (the next, '%.200s', starts at %lld): the "
                   "tensors must cover the data without gaps",
                   (long long)at, (long long)t->begin, t->name, (long long)t->begin);
    at = t->end;
  }
  if (!rc && at != data_bytes)
    rc = st_fail(e, 0,
                 "the last %lld bytes of the data, after byte %lld, belong to no tensor: the tensors must cover the "
                 "data without gaps",
                 (long long)(data_bytes - at), (long long)at);
  free(ord);
  return rc;
}

void mj_st_free(MjSt *st) {
  mj_free(&st->doc);
  free(st->t);
  memset(st, 0, sizeof *st);
}

/* ------------------------------------------------------------------------
 * .npy: the header's Python dict literal, {'descr': '<f4', 'fortran_order':
 * False, 'shape': (S, 784), } with its keys in any order, then spaces and
 * a newline; nothing else (NumPy refuses anything after the dict). */

typedef struct {
  const char *s, *p, *end;
  MjError *e;
} Npy;

static int npy_fail(Npy *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int npy_fail(Npy *h, const char *fmt, ...) {
  h->e->off = h->p - h->s;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->e->msg, sizeof h->e->msg, fmt, ap);
  va_end(ap);
  return -1;
}

static void npy_ws(Npy *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static int npy_eat(Npy *h, char c) {
  npy_ws(h);
  if (h->p < h->end && *h->p == c) return h->p++, 1;
  return 0;
}

/* A quoted string without escapes ('<f4', 'shape'). */
static int npy_str(Npy *h, char *buf, size_t n) {
  npy_ws(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return npy_fail(h, "expected a quoted string");
  char q = *h->p++;
  size_t k = 0;
  for (; h->p < h->end && *h->p != q; h->p++) {
    if (*h->p == '\\' || k + 1 >= n) return npy_fail(h, "a string with escapes, or longer than %zu bytes", n - 1);
    buf[k++] = *h->p;
  }
  if (h->p >= h->end) return npy_fail(h, "a string that never ends");
  h->p++;
  buf[k] = 0;
  return 0;
}

/* A tuple of integers >= 0: "(8000, 784)", "(8000,)" or "()". */
static int npy_shape(Npy *h, MjNpy *o) {
  o->rank = 0;
  if (!npy_eat(h, '(')) return npy_fail(h, "shape is not a tuple");
  while (!npy_eat(h, ')')) {
    int neg = npy_eat(h, '-');
    if (h->p >= h->end || *h->p < '0' || *h->p > '9') return npy_fail(h, "shape holds something other than integers");
    int64_t v = 0;
    for (; h->p < h->end && *h->p >= '0' && *h->p <= '9'; h->p++) {
      if (v > ((int64_t)1 << 50)) return npy_fail(h, "a dimension of shape is over 2^50");
      v = 10 * v + (*h->p - '0');
    }
    if (h->p < h->end && *h->p == 'L') h->p++; /* Python 2's long */
    if (neg && v) return npy_fail(h, "negative dimension -%lld in shape", (long long)v);
    if (o->rank == MJ_NPY_MAX_RANK) return npy_fail(h, "shape has more than %d axes", MJ_NPY_MAX_RANK);
    o->shape[o->rank++] = v;
    if (npy_eat(h, ')')) break;
    if (!npy_eat(h, ',')) return npy_fail(h, "expected ',' or ')' in shape");
  }
  return 0;
}

int mj_npy_header(const char *text, size_t len, MjNpy *o, MjError *e) {
  Npy h = {text, text, text + len, e};
  memset(o, 0, sizeof *o);
  o->fortran = o->rank = -1;
  char key[32];
  if (!npy_eat(&h, '{')) return npy_fail(&h, "expected a dict, '{'");
  while (!npy_eat(&h, '}')) {
    if (npy_str(&h, key, sizeof key)) return -1;
    if (!npy_eat(&h, ':')) return npy_fail(&h, "expected ':' after a key");
    if (!strcmp(key, "descr")) {
      npy_ws(&h);
      if (h.p < h.end && *h.p == '[') return npy_fail(&h, "structured dtype (descr is a list)");
      if (npy_str(&h, o->descr, sizeof o->descr)) return -1;
    } else if (!strcmp(key, "fortran_order")) {
      npy_ws(&h);
      size_t left = (size_t)(h.end - h.p);
      if (left >= 4 && !strncmp(h.p, "True", 4)) h.p += 4, o->fortran = 1;
      else if (left >= 5 && !strncmp(h.p, "False", 5)) h.p += 5, o->fortran = 0;
      else return npy_fail(&h, "fortran_order is neither True nor False");
    } else if (!strcmp(key, "shape")) {
      if (npy_shape(&h, o)) return -1;
    } else return npy_fail(&h, "a key other than descr, fortran_order and shape");
    if (!npy_eat(&h, ',')) {
      if (!npy_eat(&h, '}')) return npy_fail(&h, "expected ',' or '}' after a value");
      break;
    }
  }
  if (!*o->descr || o->fortran < 0 || o->rank < 0)
    return npy_fail(&h, "it needs all of descr, fortran_order and shape");
  npy_ws(&h);
  if (h.p < h.end) return npy_fail(&h, "text after the header's dict (only spaces and a newline may follow it)");
  return 0;
}
