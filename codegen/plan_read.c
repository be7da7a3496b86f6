/* plan_read.c: plan.json (json.c's format) back into a Plan, for `memplan
 * show` and anything else that starts from a written plan. Two steps: a
 * strict JSON parser (RFC 8259; every value keeps its line:col) into a small
 * tree, then a mapping that checks every field's type and range before the
 * Plan holds it, so that verify_plan and the renderers only ever see indices
 * and sizes they can use. Whether the packing itself is sound is
 * verify_plan's business, not this file's. */
#include "plan_read.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Nesting and size limits: a plan nests 4 deep; GPT-2 124M's is about 1 MB. */
enum { JSON_MAX_DEPTH = 32 };
#define PLAN_MAX_FILE_BYTES ((size_t)1 << 30)
#define PLAN_MAX_VALUE ((int64_t)1 << 62)

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JKind;

typedef struct JVal JVal;
struct JVal {
  JKind kind;
  Loc loc;
  bool b;
  double num;
  bool is_int; /* an integer literal that fits int64 */
  int64_t i;
  const char *s;     /* J_STR */
  JVal *items;       /* J_ARR, J_OBJ (values) */
  const char **keys; /* J_OBJ */
  int n;
};

static const char *const JKIND_NAME[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};

/* ------------------------------------------------------------------------
 * The parser. */

typedef struct {
  Arena *ar;
  const char *path, *s, *end, *p;
  int line;
  const char *line_start;
} Parser;

static Loc here(const Parser *P) { return (Loc){P->path, P->line, (int)(P->p - P->line_start) + 1}; }

static void skip_ws(Parser *P) {
  while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r')) {
    if (*P->p == '\n') {
      P->line++;
      P->line_start = P->p + 1;
    }
    P->p++;
  }
}

_Noreturn static void expected(Parser *P, const char *what) {
  if (P->p >= P->end) diag_error(here(P), "the file ends where %s was expected (truncated?)", what);
  diag_error(here(P), "expected %s", what);
}

static void parse_value(Parser *P, JVal *v, int depth);

static unsigned hex4(Parser *P) {
  unsigned u = 0;
  for (int k = 0; k < 4; k++, P->p++) {
    char c = P->p < P->end ? *P->p : 0;
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) expected(P, "four hex digits after \\u");
    u = u * 16 + (unsigned)d;
  }
  return u;
}

static void put_utf8(char *out, size_t *n, unsigned cp) {
  if (cp < 0x80) out[(*n)++] = (char)cp;
  else if (cp < 0x800) {
    out[(*n)++] = (char)(0xC0 | cp >> 6);
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out[(*n)++] = (char)(0xE0 | cp >> 12);
    out[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    out[(*n)++] = (char)(0xF0 | cp >> 18);
    out[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  }
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
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

/* At the opening quote. Escapes decoded; \u0000 and raw control characters
 * are refused (names are C strings). The decoded text is never longer than
 * the literal, so one allocation of the literal's length is enough. */
static const char *parse_string(Parser *P) {
  Loc start = here(P);
  P->p++;
  const char *q = P->p;
  while (q < P->end && *q != '"') q += *q == '\\' ? 2 : 1;
  if (q >= P->end) diag_error(start, "string never closed (truncated?)");
  char *out = ar_alloc(P->ar, (size_t)(q - P->p) + 1);
  size_t n = 0;
  while (*P->p != '"') {
    unsigned char c = (unsigned char)*P->p;
    if (c < 0x20) diag_error(here(P), "control character 0x%02x in a string (write it as \\u%04x)", c, c);
    if (c != '\\') {
      int k = utf8_len((const unsigned char *)P->p, P->end - P->p);
      if (!k) diag_error(here(P), "a string holds bytes that are not UTF-8");
      memcpy(out + n, P->p, (size_t)k), n += (size_t)k, P->p += k;
      continue;
    }
    P->p++;
    char e = *P->p++;
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      out[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
      continue;
    }
    if (e != 'u') {
      P->p -= 2;
      diag_error(here(P), "unknown escape '\\%c' in a string", e ? e : '0');
    }
    unsigned cp = hex4(P);
    if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
      if (P->end - P->p < 6 || P->p[0] != '\\' || P->p[1] != 'u') expected(P, "a low surrogate \\uDC00..\\uDFFF");
      P->p += 2;
      unsigned lo = hex4(P);
      if (lo < 0xDC00 || lo > 0xDFFF) {
        P->p -= 4;
        expected(P, "a low surrogate \\uDC00..\\uDFFF");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      P->p -= 4, diag_error(here(P), "lone low surrogate \\u%04x in a string", cp);
    }
    if (cp == 0) {
      P->p -= 4;
      diag_error(here(P), "\\u0000 in a string (names cannot hold NUL)");
    }
    put_utf8(out, &n, cp);
  }
  P->p++;
  out[n] = 0;
  return out;
}

/* JSON's number grammar, checked by hand (strtod accepts more: hex, inf). */
static void parse_number(Parser *P, JVal *v) {
  const char *a = P->p, *q = P->p;
  bool frac = false;
  if (q < P->end && *q == '-') q++;
  if (q < P->end && *q == '0') q++;
  else if (q < P->end && *q >= '1' && *q <= '9')
    while (q < P->end && *q >= '0' && *q <= '9') q++;
  else expected(P, "a value");
  if (q < P->end && *q == '.') {
    frac = true, q++;
    if (q >= P->end || *q < '0' || *q > '9') {
      P->p = q;
      expected(P, "a digit after '.'");
    }
    while (q < P->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < P->end && (*q == 'e' || *q == 'E')) {
    frac = true, q++;
    if (q < P->end && (*q == '+' || *q == '-')) q++;
    if (q >= P->end || *q < '0' || *q > '9') {
      P->p = q;
      expected(P, "a digit in the exponent");
    }
    while (q < P->end && *q >= '0' && *q <= '9') q++;
  }
  char buf[64];
  if (q - a >= (long)sizeof buf) diag_error(here(P), "number too long");
  memcpy(buf, a, (size_t)(q - a));
  buf[q - a] = 0;
  v->kind = J_NUM;
  v->num = strtod(buf, NULL);
  if (!frac) {
    errno = 0;
    v->i = strtoll(buf, NULL, 10);
    v->is_int = errno == 0;
  }
  P->p = q;
}

static void parse_literal(Parser *P, JVal *v, const char *word, JKind kind, bool b) {
  size_t n = strlen(word);
  if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n)) expected(P, "a value");
  v->kind = kind, v->b = b;
  P->p += n;
}

/* An array or object: items (and keys) collected, then copied to the arena. */
static void parse_container(Parser *P, JVal *v, int depth, bool object) {
  if (depth >= JSON_MAX_DEPTH) diag_error(here(P), "nested deeper than %d levels", JSON_MAX_DEPTH);
  char close = object ? '}' : ']';
  v->kind = object ? J_OBJ : J_ARR;
  P->p++;
  VEC(JVal) items = {0};
  VEC(const char *) keys = {0};
  skip_ws(P);
  if (P->p < P->end && *P->p == close) {
    P->p++;
    return;
  }
  for (;;) {
    skip_ws(P);
    if (object) {
      if (P->p >= P->end || *P->p != '"') expected(P, "a key in quotes");
      Loc kl = here(P);
      const char *k = parse_string(P);
      for (int i = 0; i < keys.n; i++)
        if (!strcmp(keys.v[i], k)) diag_error(kl, "key \"%s\" appears twice in this object", k);
      VEC_PUSH(P->ar, keys, k);
      skip_ws(P);
      if (P->p >= P->end || *P->p != ':') expected(P, "':' after the key");
      P->p++;
    }
    JVal x = {0};
    parse_value(P, &x, depth + 1);
    VEC_PUSH(P->ar, items, x);
    skip_ws(P);
    if (P->p < P->end && *P->p == ',') {
      P->p++;
      continue;
    }
    if (P->p < P->end && *P->p == close) {
      P->p++;
      break;
    }
    expected(P, object ? "',' or '}'" : "',' or ']'");
  }
  v->items = items.v, v->keys = keys.v, v->n = items.n;
}

static void parse_value(Parser *P, JVal *v, int depth) {
  skip_ws(P);
  v->loc = here(P);
  char c = P->p < P->end ? *P->p : 0;
  switch (c) {
  case '{': parse_container(P, v, depth, true); break;
  case '[': parse_container(P, v, depth, false); break;
  case '"': v->kind = J_STR, v->s = parse_string(P); break;
  case 't': parse_literal(P, v, "true", J_BOOL, true); break;
  case 'f': parse_literal(P, v, "false", J_BOOL, false); break;
  case 'n': parse_literal(P, v, "null", J_NULL, false); break;
  default: parse_number(P, v);
  }
}

/* ------------------------------------------------------------------------
 * The mapping: typed, range-checked field access. */

static const JVal *find(const JVal *obj, const char *key) {
  for (int i = 0; i < obj->n; i++)
    if (!strcmp(obj->keys[i], key)) return &obj->items[i];
  return NULL;
}

static const JVal *want(const JVal *v, JKind kind, const char *what) {
  if (v->kind != kind) diag_error(v->loc, "%s must be %s, not %s", what, JKIND_NAME[kind], JKIND_NAME[v->kind]);
  return v;
}

static const JVal *get(const JVal *obj, const char *key, JKind kind) {
  const JVal *v = find(obj, key);
  if (!v) diag_error(obj->loc, "missing key \"%s\" in this object", key);
  char what[96];
  snprintf(what, sizeof what, "\"%s\"", key);
  return want(v, kind, what);
}

static int64_t as_int(const JVal *v, const char *what, int64_t lo, int64_t hi) {
  want(v, J_NUM, what);
  if (!v->is_int || v->i < lo || v->i > hi)
    diag_error(v->loc, "%s must be an integer in [%lld, %lld]", what, (long long)lo, (long long)hi);
  return v->i;
}

static int64_t get_int(const JVal *obj, const char *key, int64_t lo, int64_t hi) {
  char what[96];
  snprintf(what, sizeof what, "\"%s\"", key);
  return as_int(get(obj, key, J_NUM), what, lo, hi);
}

static double get_num(const JVal *obj, const char *key) {
  const JVal *v = get(obj, key, J_NUM);
  if (!isfinite(v->num)) diag_error(v->loc, "\"%s\" must be a finite number", key);
  return v->num;
}

/* A string naming one of n choices, by index. */
static int get_enum(const JVal *obj, const char *key, const char *const *names, int n) {
  const JVal *v = get(obj, key, J_STR);
  for (int i = 0; i < n; i++)
    if (names[i] && !strcmp(v->s, names[i])) return i;
  diag_error(v->loc, "\"%s\": unknown value \"%s\"", key, v->s);
}

static const char *const SCHED_NAMES[] = {"train", "eval", "both"};
static const char *const INIT_NAMES[] = {"none", "normal", "zeros", "ones", "uniform"};

static void read_header(Arena *ar, const JVal *root, Plan *p) {
  p->model = get(root, "model", J_STR)->s;
  p->source = get(root, "source", J_STR)->s;
  const JVal *dims = get(root, "dims", J_OBJ), *set = get(root, "set", J_OBJ);
  p->ndims = dims->n;
  p->dims = ar_alloc(ar, sizeof(Dim) * (size_t)(dims->n + 1));
  for (int i = 0; i < dims->n; i++) {
    char what[96];
    snprintf(what, sizeof what, "dim \"%.80s\"", dims->keys[i]);
    p->dims[i] = (Dim){dims->keys[i], as_int(&dims->items[i], what, 1, PLAN_MAX_VALUE), {0}, false};
    p->dims[i].overridden = find(set, dims->keys[i]) != NULL;
  }
  const JVal *o = get(root, "optimizer", J_OBJ);
  static const char *const OPT_NAMES[] = {"adamw", "sgd"};
  p->opt.kind = (OptKind)get_enum(o, "type", OPT_NAMES, 2);
  p->opt.lr = get_num(o, "lr");
  p->opt.weight_decay = get_num(o, "weight_decay");
  if (p->opt.kind == OPT_ADAMW) {
    const JVal *betas = get(o, "betas", J_ARR);
    if (betas->n != 2) diag_error(betas->loc, "\"betas\" must hold two numbers");
    p->opt.beta1 = want(&betas->items[0], J_NUM, "a beta")->num;
    p->opt.beta2 = want(&betas->items[1], J_NUM, "a beta")->num;
    p->opt.eps = get_num(o, "eps");
  } else {
    p->opt.momentum = get_num(o, "momentum");
    p->opt.nesterov = get(o, "nesterov", J_BOOL)->b;
  }
  /* the lr schedule: a plan written before schedules has none, and trains at a constant lr */
  static const char *const SCHEDS[] = {"constant", "cosine", "linear"};
  p->opt.schedule = find(o, "schedule") ? (SchedKind)get_enum(o, "schedule", SCHEDS, SCHED_COUNT) : SCHED_CONSTANT;
  p->opt.warmup = find(o, "warmup") ? get_int(o, "warmup", 0, MAX_WARMUP) : 0;
  p->opt.final_fraction = find(o, "final_fraction") ? get_num(o, "final_fraction") : 0.0;
  if (!(p->opt.final_fraction >= 0 && p->opt.final_fraction <= 1))
    diag_error(get(o, "final_fraction", J_NUM)->loc, "\"final_fraction\" must be in [0, 1]");
  /* gradient clipping: absent in plans without it; its price, "noclip", with it */
  p->opt.clip_grad_norm = find(o, "clip_grad_norm") ? get_num(o, "clip_grad_norm") : 0.0;
  if (!(p->opt.clip_grad_norm >= 0))
    diag_error(get(o, "clip_grad_norm", J_NUM)->loc, "\"clip_grad_norm\" must be a number >= 0 (0: no clipping)");
  const JVal *nc = find(root, "noclip");
  if (nc) {
    want(nc, J_OBJ, "\"noclip\"");
    p->noclip_fits = get(nc, "fits", J_BOOL)->b;
    p->noclip_arena = get_int(nc, "arena_bytes", 0, PLAN_MAX_VALUE);
    p->noclip_lower_bound = get_int(nc, "lower_bound_bytes", 0, PLAN_MAX_VALUE);
    p->noclip_extra_flops = get_int(nc, "extra_flops", 0, INT64_MAX);
    p->noclip_accumulation = (int)get_int(nc, "accumulation_steps", 1, INT32_MAX);
  }
  p->budget_bytes = get_int(root, "budget_bytes", 0, PLAN_MAX_VALUE);
  p->align = get_int(root, "align", 1, (int64_t)1 << 30);
  static const char *const PRECISIONS[] = {"fp32", "bf16", "fp16"};
  p->precision = PRECISIONS[get_enum(root, "precision", PRECISIONS, 3)];
  p->loss_scaling = get(root, "loss_scaling", J_BOOL)->b;
  static const char *const MASKS[] = {"stored", "regenerated"};
  p->dropout_masks = find(root, "dropout_masks") ? MASKS[get_enum(root, "dropout_masks", MASKS, 2)] : NULL;
  /* written since the fused loss was added; older plans never fused it */
  p->loss_chunk = find(root, "loss_chunk") ? get_int(root, "loss_chunk", 0, PLAN_MAX_VALUE) : 0;
  static const char *const OPT_STATES[] = {"fp32", "bf16", "8bit"}; /* planner/optstate.h; older plans: fp32 */
  p->opt_state = find(root, "opt_state") ? OPT_STATES[get_enum(root, "opt_state", OPT_STATES, 3)] : "fp32";
  static const char *const BASE[] = {"fp32", "bf16", "int8", "nf4"}; /* planner/basew.h; absent: fp32 */
  p->base_weights = find(root, "base_weights") ? BASE[get_enum(root, "base_weights", BASE, 4)] : "fp32";
  /* written since the stages were added; older plans had neither */
  p->guard_bytes = find(root, "guard_bytes") ? get_int(root, "guard_bytes", 0, (int64_t)1 << 20) : 0;
}

static void read_totals(Arena *ar, const JVal *root, Plan *p) {
  const JVal *t = get(root, "totals", J_OBJ);
  p->arena_bytes = get_int(t, "arena_bytes", 0, PLAN_MAX_VALUE);
  p->lower_bound_bytes = get_int(t, "lower_bound_bytes", 0, PLAN_MAX_VALUE);
  p->persistent_bytes = get_int(t, "persistent_bytes", 0, PLAN_MAX_VALUE);
  p->train_peak_bytes = get_int(t, "train_peak_bytes", 0, PLAN_MAX_VALUE);
  p->eval_peak_bytes = get_int(t, "eval_peak_bytes", 0, PLAN_MAX_VALUE);
  p->unfused_lower_bound = get_int(t, "unfused_lower_bound_bytes", 0, PLAN_MAX_VALUE);
  p->param_count = get_int(t, "param_count", 0, PLAN_MAX_VALUE);
  p->frozen_count = find(t, "frozen_param_count") ? get_int(t, "frozen_param_count", 0, p->param_count) : 0;
  p->step_flops = get_int(t, "step_flops", 0, INT64_MAX);
  p->extra_flops = get_int(t, "extra_flops", 0, INT64_MAX);
  p->micro_batch = (int)get_int(t, "micro_batch", 0, INT32_MAX);
  p->accumulation_steps = (int)get_int(t, "accumulation_steps", 0, INT32_MAX);
  p->peak_position = (int)get_int(t, "peak_position", 0, INT32_MAX);
  p->assign_method = get(t, "assign_method", J_STR)->s;
  p->assign_optimal = get(t, "assign_optimal", J_BOOL)->b;
  const JVal *roles = get(t, "peak_by_role", J_OBJ);
  for (int r = 0; r < ROLE_COUNT; r++) /* "state" is optional: plans written before it have none */
    p->peak_by_role[r] = r == ROLE_STATE && !find(roles, plan_role_name((Role)r))
                             ? 0
                             : get_int(roles, plan_role_name((Role)r), 0, PLAN_MAX_VALUE);
  const JVal *st = find(root, "stages");
  if (!st) return;
  want(st, J_ARR, "\"stages\"");
  p->nstages = st->n;
  p->stages = st->n ? ar_alloc(ar, sizeof(PlanStage) * (size_t)st->n) : NULL;
  for (int i = 0; i < st->n; i++) {
    const JVal *s = want(&st->items[i], J_OBJ, "a stage");
    static const char *const CHOICES[] = {"K", "S", "R"};
    PlanStage *ps = &p->stages[i];
    ps->first_layer = get(s, "first_layer", J_STR)->s;
    ps->last_layer = get(s, "last_layer", J_STR)->s;
    ps->choice = *CHOICES[get_enum(s, "choice", CHOICES, 3)];
    ps->half = find(s, "half") && get(s, "half", J_BOOL)->b;
    ps->runs = (int)get_int(s, "runs", 0, INT32_MAX);
    ps->kept_bytes = get_int(s, "kept_bytes", 0, PLAN_MAX_VALUE);
  }
}

/* Optional: plans written before the levers were recorded have none. */
static void read_levers(Arena *ar, const JVal *root, Plan *p) {
  const JVal *lv = find(root, "levers");
  if (!lv) return;
  want(lv, J_ARR, "\"levers\"");
  /* auto where nothing fit (a plan that fit names what auto chose) */
  static const char *const PRECISIONS[] = {"fp32", "bf16", "fp16", "auto"};
  p->nlevers = lv->n;
  p->levers = ar_alloc(ar, sizeof(PlanLever) * (size_t)(lv->n + 1));
  for (int i = 0; i < lv->n; i++) {
    const JVal *v = want(&lv->items[i], J_OBJ, "a lever");
    PlanLever *l = &p->levers[i];
    l->precision = PRECISIONS[get_enum(v, "precision", PRECISIONS, 4)];
    l->micro_batch = (int)get_int(v, "micro_batch", 0, INT32_MAX);
    l->accumulation_steps = (int)get_int(v, "accumulation_steps", 0, INT32_MAX);
    l->keep_arena = get_int(v, "keep_arena_bytes", 0, PLAN_MAX_VALUE);
    l->arena = get_int(v, "arena_bytes", 0, PLAN_MAX_VALUE);
    l->extra_flops = get_int(v, "extra_flops", 0, INT64_MAX);
    l->step_flops = get_int(v, "step_flops", 0, INT64_MAX);
    l->fits = get(v, "fits", J_BOOL)->b;
    l->chosen = get(v, "chosen", J_BOOL)->b;
    static const char *const MASKS[] = {"stored", "regenerated"};
    l->dropout_masks = find(v, "dropout_masks") ? MASKS[get_enum(v, "dropout_masks", MASKS, 2)] : NULL;
    static const char *const LOWERED[] = {"bf16", "8bit"}; /* optional: fp32 moments, or plans before the lever */
    l->opt_state = find(v, "opt_state") ? LOWERED[get_enum(v, "opt_state", LOWERED, 2)] : NULL;
    l->loss_chunk = find(v, "loss_chunk") ? get_int(v, "loss_chunk", -1, PLAN_MAX_VALUE) : 0; /* -1: fused, unplanned */
    /* optional: plans written before the levers were chosen together have no bounds or estimates */
    l->est_seconds = find(v, "est_seconds") ? get_num(v, "est_seconds") : 0;
    l->time_bound = find(v, "time_bound_seconds") ? get_num(v, "time_bound_seconds") : 0;
    l->memory_bound = find(v, "memory_bound_bytes") ? get_int(v, "memory_bound_bytes", 0, PLAN_MAX_VALUE) : 0;
    static const char *const PRUNED[] = {"memory", "time"};
    l->pruned = find(v, "pruned") ? PRUNED[get_enum(v, "pruned", PRUNED, 2)] : NULL;
  }
}

static void read_buffer(const JVal *v, int id, PlanBuffer *b) {
  want(v, J_OBJ, "a buffer");
  if (get_int(v, "id", 0, INT32_MAX) != id)
    diag_error(get(v, "id", J_NUM)->loc, "buffer ids must run 0, 1, 2, ... (expected %d)", id);
  b->id = id;
  b->name = get(v, "name", J_STR)->s;
  const char *roles[ROLE_COUNT], *dtypes[DT_COUNT];
  for (int r = 0; r < ROLE_COUNT; r++) roles[r] = plan_role_name((Role)r);
  for (int d = 0; d < DT_COUNT; d++) dtypes[d] = dtype_name((DType)d);
  b->role = (Role)get_enum(v, "role", roles, ROLE_COUNT);
  b->dtype = (DType)get_enum(v, "dtype", dtypes, DT_COUNT);
  const JVal *shape = get(v, "shape", J_ARR), *sym = get(v, "shape_sym", J_ARR);
  if (shape->n > MAX_RANK) diag_error(shape->loc, "rank %d: at most %d dims", shape->n, MAX_RANK);
  if (sym->n != shape->n) diag_error(sym->loc, "\"shape_sym\" has %d entries, \"shape\" %d", sym->n, shape->n);
  b->shape.rank = shape->n;
  int64_t numel = 1;
  for (int d = 0; d < shape->n; d++) {
    b->shape.d[d] = as_int(&shape->items[d], "a dim", 0, PLAN_MAX_VALUE);
    b->shape.sym[d] = want(&sym->items[d], J_STR, "a symbolic dim")->s;
    if (!ck_mul(numel, b->shape.d[d], &numel) || numel > PLAN_MAX_VALUE)
      diag_error(shape->loc, "shape too large (more than 2^62 elements)");
  }
  b->bytes = get_int(v, "bytes", 0, PLAN_MAX_VALUE);
  b->offset = get_int(v, "offset", 0, PLAN_MAX_VALUE);
  b->sched = (SchedSet)get_enum(v, "schedule", SCHED_NAMES, 3);
  const JVal *live = get(v, "live", J_ARR);
  if (live->n != 2) diag_error(live->loc, "\"live\" must be [first, last]");
  b->first = (int)as_int(&live->items[0], "a live range's first position", 0, INT32_MAX);
  b->last = (int)as_int(&live->items[1], "a live range's last position", 0, INT32_MAX);
  const JVal *al = find(v, "in_place");
  b->aliases = al ? want(al, J_STR, "\"in_place\"")->s : "";
  b->tensor = -1;
  if (b->role == ROLE_PARAM || b->role == ROLE_STATE) {
    const JVal *init = get(v, "init", J_OBJ);
    b->init.kind = (InitKind)get_enum(init, "kind", INIT_NAMES, 5);
    b->init.scale = get_num(init, "scale");
  }
  if (b->role == ROLE_PARAM) b->decay = get(v, "weight_decay", J_BOOL)->b;
  if (b->role == ROLE_PARAM && find(v, "frozen")) b->frozen = get(v, "frozen", J_BOOL)->b;
}

/* Ops: kernels by name, buffer ids checked against the buffer table. */
static void read_ops(Arena *ar, const JVal *root, const char *key, const Plan *p, PlanOp **out, int *nout) {
  const JVal *a = get(root, key, J_ARR);
  PlanOp *ops = ar_alloc(ar, sizeof(PlanOp) * (size_t)(a->n + 1));
  const char *kinds[OP_COUNT], *phases[PHASE_COUNT];
  for (int k = 0; k < OP_COUNT; k++) kinds[k] = op_info((OpKind)k)->name;
  for (int k = 0; k < PHASE_COUNT; k++) phases[k] = plan_phase_name((Phase)k);
  for (int i = 0; i < a->n; i++) {
    const JVal *v = want(&a->items[i], J_OBJ, "an op");
    PlanOp *o = &ops[i];
    o->id = (int)get_int(v, "id", i, i);
    o->op = (OpKind)get_enum(v, "op", kinds, OP_COUNT);
    o->phase = (Phase)get_enum(v, "phase", phases, PHASE_COUNT);
    o->layer = get(v, "layer", J_STR)->s;
    const JVal *in = get(v, "inputs", J_ARR), *outs = get(v, "outputs", J_ARR), *acc = get(v, "accumulate", J_ARR);
    const JVal *dims = get(v, "dims", J_ARR);
    if (in->n > PLAN_MAX_IO) diag_error(in->loc, "at most %d inputs", PLAN_MAX_IO);
    if (outs->n > PLAN_MAX_IO) diag_error(outs->loc, "at most %d outputs", PLAN_MAX_IO);
    if (acc->n != outs->n) diag_error(acc->loc, "\"accumulate\" needs one entry per output (%d)", outs->n);
    if (dims->n > MAX_KDIM) diag_error(dims->loc, "at most %d dims", MAX_KDIM);
    o->nin = in->n, o->nout = outs->n, o->ndim = dims->n;
    for (int k = 0; k < in->n; k++) o->in[k] = (int)as_int(&in->items[k], "an input buffer id", -1, p->nbuf - 1);
    for (int k = 0; k < outs->n; k++) {
      o->out[k] = (int)as_int(&outs->items[k], "an output buffer id", -1, p->nbuf - 1);
      o->acc[k] = want(&acc->items[k], J_BOOL, "an accumulate flag")->b;
    }
    for (int k = 0; k < dims->n; k++) o->dim[k] = as_int(&dims->items[k], "a kernel dim", 0, PLAN_MAX_VALUE);
    const JVal *fl = find(v, "floats");
    if (fl && want(fl, J_ARR, "\"floats\"")->n > MAX_ATTR) diag_error(fl->loc, "at most %d floats", MAX_ATTR);
    for (int k = 0; fl && k < fl->n; k++) {
      const JVal *x = want(&fl->items[k], J_NUM, "a float argument");
      if (!isfinite(x->num)) diag_error(x->loc, "a float argument must be finite");
      o->farg[o->nfarg++] = x->num;
    }
    const JVal *sc = find(v, "scratch");
    o->scratch = sc ? (int)as_int(sc, "a scratch buffer id", 0, p->nbuf - 1) : -1;
    o->flops = get_int(v, "flops", 0, INT64_MAX);
  }
  *out = ops, *nout = a->n;
}

/* Cross-field checks the renderers rely on and verify_plan does not make. */
static void check_refs(const JVal *root, const Plan *p) {
  const JVal *t = get(root, "totals", J_OBJ);
  if (p->nsched && p->peak_position >= p->nsched)
    diag_error(get(t, "peak_position", J_NUM)->loc, "peak position %d is past the schedule's %d ops", p->peak_position,
               p->nsched);
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    int n = pb->sched == SCHED_EVAL ? p->neval : p->nsched;
    if (pb->sched != SCHED_BOTH && (pb->first >= pb->last || pb->last > n))
      diag_error(find(&get(root, "buffers", J_ARR)->items[b], "live")->loc,
                 "buffer %s: live range [%d, %d) is not within its schedule's %d ops", pb->name, pb->first, pb->last,
                 n);
  }
}

/* "data_parallel" (json.c): absent for one process. */
static void read_data_parallel(const JVal *root, Plan *p) {
  const JVal *d = find(root, "data_parallel");
  p->ranks = 1;
  if (!d) return;
  want(d, J_OBJ, "\"data_parallel\"");
  p->data_parallel = true;
  p->ranks = (int)get_int(d, "ranks", 1, 65536);
  p->zero = (int)get_int(d, "zero", 0, 2);
  p->zero_auto = get(d, "zero_auto", J_BOOL)->b;
  p->nbuckets = (int)get_int(d, "buckets", 0, INT32_MAX);
  p->bucket_bytes = get_int(d, "bucket_bytes", 0, PLAN_MAX_VALUE);
  p->comm_bytes = get_int(d, "comm_bytes", 0, PLAN_MAX_VALUE);
  p->comm_wire_bytes = get_int(d, "comm_wire_bytes", 0, PLAN_MAX_VALUE);
  const JVal *za = find(d, "zero_arena_bytes");
  if (za && want(za, J_ARR, "\"zero_arena_bytes\"")->n != 3) diag_error(za->loc, "three arenas: ZeRO 0, 1, 2");
  for (int k = 0; za && k < 3; k++) p->zero_arena[k] = as_int(&za->items[k], "an arena", 0, PLAN_MAX_VALUE);
}

Plan *plan_read(Arena *ar, const char *path, const char *text, size_t len) {
  Parser P = {ar, path, text, text + len, text, 1, text};
  if (len > PLAN_MAX_FILE_BYTES) diag_error((Loc){path, 0, 0}, "larger than 1 GiB: not a plan memplan wrote");
  diag_register_source(path, text, len);
  JVal root = {0};
  skip_ws(&P);
  if (P.p >= P.end) diag_error(here(&P), "empty file: expected a plan.json that memplan compile wrote");
  parse_value(&P, &root, 0);
  skip_ws(&P);
  if (P.p < P.end) diag_error(here(&P), "text after the end of the JSON value");
  if (root.kind != J_OBJ || !find(&root, "memplan_plan"))
    diag_error(root.loc, "not a memplan plan (no \"memplan_plan\" key): give the plan.json that memplan compile wrote");
  const JVal *ver = get(&root, "memplan_plan", J_NUM);
  if (ver->is_int && ver->i > PLAN_FORMAT_VERSION)
    diag_error(ver->loc, "plan format %lld is newer than this memplan reads (%d): use a newer memplan",
               (long long)ver->i, PLAN_FORMAT_VERSION);
  Plan *p = ar_alloc(ar, sizeof(Plan));
  p->version = (int)as_int(ver, "\"memplan_plan\"", 1, PLAN_FORMAT_VERSION);
  read_header(ar, &root, p);
  read_totals(ar, &root, p);
  read_levers(ar, &root, p);
  read_data_parallel(&root, p);
  const JVal *bufs = get(&root, "buffers", J_ARR);
  p->nbuf = bufs->n;
  p->buf = ar_alloc(ar, sizeof(PlanBuffer) * (size_t)(bufs->n + 1));
  for (int b = 0; b < bufs->n; b++) read_buffer(&bufs->items[b], b, &p->buf[b]);
  p->loss_buf = (int)get_int(&root, "loss_buffer", 0, p->nbuf - 1);
  p->eval_loss_buf = (int)get_int(&root, "eval_loss_buffer", 0, p->nbuf - 1);
  read_ops(ar, &root, "schedule", p, &p->sched, &p->nsched);
  read_ops(ar, &root, "eval_schedule", p, &p->eval, &p->neval);
  p->batch = (int64_t)p->micro_batch * (p->accumulation_steps > 0 ? p->accumulation_steps : 1);
  check_refs(&root, p);
  return p;
}

StTensor *st_read_header(Arena *ar, const char *path, const char *json, size_t len, int *n) {
  Parser P = {ar, path, json, json + len, json, 1, json};
  JVal root = {0};
  skip_ws(&P);
  if (P.p >= P.end) diag_error(here(&P), "empty safetensors header");
  parse_value(&P, &root, 0);
  skip_ws(&P);
  if (P.p < P.end) diag_error(here(&P), "text after the end of the safetensors header's JSON");
  want(&root, J_OBJ, "a safetensors header");
  StTensor *t = ar_alloc(ar, sizeof(StTensor) * (size_t)(root.n + 1));
  int k = 0;
  for (int i = 0; i < root.n; i++) {
    const char *name = root.keys[i];
    if (!strcmp(name, "__metadata__")) continue;
    const JVal *v = &root.items[i];
    char what[600];
    snprintf(what, sizeof what, "tensor '%.500s'", name);
    want(v, J_OBJ, what);
    StTensor *s = &t[k++];
    s->name = name;
    s->dtype = get(v, "dtype", J_STR)->s;
    const JVal *sh = get(v, "shape", J_ARR), *off = get(v, "data_offsets", J_ARR);
    if (sh->n > ST_MAX_RANK) diag_error(sh->loc, "%s: rank %d is over %d", what, sh->n, ST_MAX_RANK);
    s->rank = sh->n;
    for (int d = 0; d < sh->n; d++) s->shape[d] = as_int(&sh->items[d], "a dim", 0, PLAN_MAX_VALUE);
    if (off->n != 2) diag_error(off->loc, "%s: \"data_offsets\" must hold two numbers", what);
    s->begin = as_int(&off->items[0], "an offset", 0, PLAN_MAX_VALUE);
    s->end = as_int(&off->items[1], "an offset", s->begin, PLAN_MAX_VALUE);
  }
  *n = k;
  return t;
}
