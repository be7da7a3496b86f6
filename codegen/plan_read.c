/* plan_read.c: plan.json (json.c's format) back into a Plan, for `memplan
 * show` and anything else that starts from a written plan. Two steps: the
 * project's one strict JSON reader (runtime/memplan_json.c: RFC 8259, depth
 * and size limits, hashed duplicate keys; every value keeps its byte offset,
 * path:line:col in a message) into a tree in the arena, then a mapping that
 * checks every field's type and range before the Plan holds it, so that
 * verify_plan and the renderers only ever see indices and sizes they can use. Whether the packing itself is sound is
 * verify_plan's business, not this file's. */
#include "plan_read.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_json.h"
#include "ops.h"

/* Nesting and size limits: a plan nests 4 deep; GPT-2 124M's is about 1 MB. */
#define PLAN_MAX_FILE_BYTES ((size_t)1 << 30)
#define PLAN_MAX_VALUE ((int64_t)1 << 62)

static struct { const char *path, *text; } src; /* the file being read, for loc() */

/* path:line:col of a byte offset (a scan: only ever on the way to an error). */
static Loc loc_at(int64_t off) {
  int line = 1, col = 1;
  for (int64_t k = 0; k < off; k++)
    if (src.text[k] == '\n') line++, col = 1;
    else col++;
  return (Loc){src.path, line, col};
}
#define LOC(v) loc_at((v)->off)

/* Parses text into a tree in the arena (the reader's own allocations freed
 * before any diag_error, which may longjmp). */
static const MjVal *parse_json(Arena *ar, const char *path, const char *text, size_t len, int max_depth,
                               int64_t max_values) {
  src.path = path, src.text = text;
  MjDoc d;
  MjError e;
  MjLimits lim = {max_depth, (int64_t)PLAN_MAX_FILE_BYTES, max_values};
  if (mj_parse(&d, text, len, &lim, &e)) diag_error(loc_at(e.off), "%s", e.msg);
  size_t nv = (size_t)(d.root - d.vals) + 1;
  MjVal *v = ar_alloc(ar, sizeof(MjVal) * nv);
  char *pool = ar_alloc(ar, len + 1);
  memcpy(v, d.vals, sizeof(MjVal) * nv);
  memcpy(pool, d.pool, len + 1);
  for (size_t k = 0; k < nv; k++) { /* the same tree, its pointers moved to the copies */
    if (v[k].key) v[k].key = pool + (v[k].key - d.pool);
    if (v[k].kind == MJ_STR) v[k].u.s = pool + (v[k].u.s - d.pool);
    if (v[k].kind == MJ_ARR || v[k].kind == MJ_OBJ) v[k].u.items = v + (v[k].u.items - d.vals);
  }
  mj_free(&d);
  return &v[nv - 1];
}

/* ------------------------------------------------------------------------
 * The mapping: typed, range-checked field access. */

static const MjVal *find(const MjVal *obj, const char *key) { return mj_get(obj, key); }

static const MjVal *want(const MjVal *v, MjKind kind, const char *what) {
  if (v->kind != kind) diag_error(LOC(v), "%s must be %s, not %s", what, mj_kind_name[kind], mj_kind_name[v->kind]);
  return v;
}

static const MjVal *get(const MjVal *obj, const char *key, MjKind kind) {
  const MjVal *v = find(obj, key);
  if (!v) diag_error(LOC(obj), "missing key \"%s\" in this object", key);
  char what[96];
  snprintf(what, sizeof what, "\"%s\"", key);
  return want(v, kind, what);
}

static int64_t as_int(const MjVal *v, const char *what, int64_t lo, int64_t hi) {
  want(v, MJ_NUM, what);
  if (!v->is_int || v->u.i < lo || v->u.i > hi)
    diag_error(LOC(v), "%s must be an integer in [%lld, %lld]", what, (long long)lo, (long long)hi);
  return v->u.i;
}

static int64_t get_int(const MjVal *obj, const char *key, int64_t lo, int64_t hi) {
  char what[96];
  snprintf(what, sizeof what, "\"%s\"", key);
  return as_int(get(obj, key, MJ_NUM), what, lo, hi);
}

static double get_num(const MjVal *obj, const char *key) {
  const MjVal *v = get(obj, key, MJ_NUM);
  if (!isfinite(mj_num(v))) diag_error(LOC(v), "\"%s\" must be a finite number", key);
  return mj_num(v);
}

/* A string naming one of n choices, by index. */
static int get_enum(const MjVal *obj, const char *key, const char *const *names, int n) {
  const MjVal *v = get(obj, key, MJ_STR);
  for (int i = 0; i < n; i++)
    if (names[i] && !strcmp(v->u.s, names[i])) return i;
  diag_error(LOC(v), "\"%s\": unknown value \"%s\"", key, v->u.s);
}

static const char *const SCHED_NAMES[] = {"train", "eval", "both"};
static const char *const INIT_NAMES[] = {"none", "normal", "zeros", "ones", "uniform"};

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void read_header(Arena *ar, const MjVal *root, Plan *p) {
  p->model = get(root, "model", MJ_STR)->u.s;
  p->source = get(root, "source", MJ_STR)->u.s;
  p->tokenizer = find(root, "tokenizer") ? get(root, "tokenizer", MJ_STR)->u.s : NULL; /* optional */
  const MjVal *dims = get(root, "dims", MJ_OBJ), *set = get(root, "set", MJ_OBJ);
  p->ndims = dims->n;
  /* set's keys sorted: dims x set lookups in n log n (both may be large in a hostile file) */
  const char **keys = ar_alloc(ar, sizeof *keys * (size_t)(set->n + 1));
  for (int i = 0; i < set->n; i++) keys[i] = set->u.items[i].key;
  qsort(keys, (size_t)set->n, sizeof *keys, cmp_key);
  p->dims = ar_alloc(ar, sizeof(Dim) * (size_t)(dims->n + 1));
  for (int i = 0; i < dims->n; i++) {
    char what[96];
    snprintf(what, sizeof what, "dim \"%.80s\"", dims->u.items[i].key);
    p->dims[i] = (Dim){dims->u.items[i].key, as_int(&dims->u.items[i], what, 1, PLAN_MAX_VALUE), {0}, false};
    p->dims[i].overridden = bsearch(&dims->u.items[i].key, keys, (size_t)set->n, sizeof *keys, cmp_key) != NULL;
  }
  const MjVal *o = get(root, "optimizer", MJ_OBJ);
  static const char *const OPT_NAMES[] = {"adamw", "sgd"};
  p->opt.kind = (OptKind)get_enum(o, "type", OPT_NAMES, 2);
  p->opt.lr = get_num(o, "lr");
  p->opt.weight_decay = get_num(o, "weight_decay");
  if (p->opt.kind == OPT_ADAMW) {
    const MjVal *betas = get(o, "betas", MJ_ARR);
    if (betas->n != 2) diag_error(LOC(betas), "\"betas\" must hold two numbers");
    p->opt.beta1 = mj_num(want(&betas->u.items[0], MJ_NUM, "a beta"));
    p->opt.beta2 = mj_num(want(&betas->u.items[1], MJ_NUM, "a beta"));
    p->opt.eps = get_num(o, "eps");
  } else {
    p->opt.momentum = get_num(o, "momentum");
    p->opt.nesterov = get(o, "nesterov", MJ_BOOL)->b;
  }
  /* the lr schedule: a plan written before schedules has none, and trains at a constant lr */
  static const char *const SCHEDS[] = {"constant", "cosine", "linear"};
  p->opt.schedule = find(o, "schedule") ? (SchedKind)get_enum(o, "schedule", SCHEDS, SCHED_COUNT) : SCHED_CONSTANT;
  p->opt.warmup = find(o, "warmup") ? get_int(o, "warmup", 0, MAX_WARMUP) : 0;
  p->opt.final_fraction = find(o, "final_fraction") ? get_num(o, "final_fraction") : 0.0;
  if (!(p->opt.final_fraction >= 0 && p->opt.final_fraction <= 1))
    diag_error(LOC(get(o, "final_fraction", MJ_NUM)), "\"final_fraction\" must be in [0, 1]");
  /* gradient clipping: absent in plans without it; its price, "noclip", with it */
  p->opt.clip_grad_norm = find(o, "clip_grad_norm") ? get_num(o, "clip_grad_norm") : 0.0;
  if (!(p->opt.clip_grad_norm >= 0))
    diag_error(LOC(get(o, "clip_grad_norm", MJ_NUM)), "\"clip_grad_norm\" must be a number >= 0 (0: no clipping)");
  const MjVal *nc = find(root, "noclip");
  if (nc) {
    want(nc, MJ_OBJ, "\"noclip\"");
    p->noclip_fits = get(nc, "fits", MJ_BOOL)->b;
    p->noclip_arena = get_int(nc, "arena_bytes", 0, PLAN_MAX_VALUE);
    p->noclip_lower_bound = get_int(nc, "lower_bound_bytes", 0, PLAN_MAX_VALUE);
    p->noclip_extra_flops = get_int(nc, "extra_flops", 0, INT64_MAX);
    p->noclip_accumulation = (int)get_int(nc, "accumulation_steps", 1, INT32_MAX);
  }
  const MjVal *gen = find(root, "generation"); /* --gen-context's KV caches; absent: none */
  if (gen) {
    want(gen, MJ_OBJ, "\"generation\"");
    p->gen_context = get_int(gen, "context", 1, 16384);
    p->kv_cache_offset = get_int(gen, "kv_cache_offset", 0, PLAN_MAX_VALUE);
    p->kv_cache_bytes = get_int(gen, "kv_cache_bytes", 0, PLAN_MAX_VALUE);
  }
  p->budget_bytes = get_int(root, "budget_bytes", 0, PLAN_MAX_VALUE);
  p->align = get_int(root, "align", 1, (int64_t)1 << 30);
  static const char *const PRECISIONS[] = {"fp32", "bf16", "fp16"};
  p->precision = PRECISIONS[get_enum(root, "precision", PRECISIONS, 3)];
  p->loss_scaling = get(root, "loss_scaling", MJ_BOOL)->b;
  static const char *const MASKS[] = {"stored", "regenerated"};
  p->dropout_masks = find(root, "dropout_masks") ? MASKS[get_enum(root, "dropout_masks", MASKS, 2)] : NULL;
  const MjVal *lora = find(root, "lora"); /* LoRA adapters; absent: none */
  if (lora) {
    want(lora, MJ_OBJ, "\"lora\"");
    p->lora_rank = get_int(lora, "rank", 1, INT32_MAX);
    p->lora_alpha = get_num(lora, "alpha");
    p->lora_dropout = find(lora, "dropout") ? get_num(lora, "dropout") : 0; /* an exporter's plan may leave it out */
  }
  /* written since the fused loss was added; older plans never fused it */
  p->loss_chunk = find(root, "loss_chunk") ? get_int(root, "loss_chunk", 0, PLAN_MAX_VALUE) : 0;
  static const char *const OPT_STATES[] = {"fp32", "bf16", "8bit"}; /* planner/optstate.h; older plans: fp32 */
  p->opt_state = find(root, "opt_state") ? OPT_STATES[get_enum(root, "opt_state", OPT_STATES, 3)] : "fp32";
  static const char *const BASE[] = {"fp32", "bf16", "int8", "nf4"}; /* planner/basew.h; absent: fp32 */
  p->base_weights = find(root, "base_weights") ? BASE[get_enum(root, "base_weights", BASE, 4)] : "fp32";
  static const char *const PARAMS[] = {"fp32", "bf16"}; /* --param-precision; absent: fp32 */
  p->param_precision = find(root, "param_precision") ? PARAMS[get_enum(root, "param_precision", PARAMS, 2)] : "fp32";
  static const char *const HEADS[] = {"kept", "deferred"}; /* --head-grad; absent: kept */
  p->head_grad = find(root, "head_grad") ? HEADS[get_enum(root, "head_grad", HEADS, 2)] : "kept";
  /* written since the stages were added; older plans had neither */
  p->guard_bytes = find(root, "guard_bytes") ? get_int(root, "guard_bytes", 0, (int64_t)1 << 20) : 0;
}

static void read_totals(Arena *ar, const MjVal *root, Plan *p) {
  const MjVal *t = get(root, "totals", MJ_OBJ);
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
  p->assign_method = get(t, "assign_method", MJ_STR)->u.s;
  p->assign_optimal = get(t, "assign_optimal", MJ_BOOL)->b;
  const MjVal *roles = get(t, "peak_by_role", MJ_OBJ);
  for (int r = 0; r < ROLE_COUNT; r++) /* "state" is optional: plans written before it have none */
    p->peak_by_role[r] = r == ROLE_STATE && !find(roles, plan_role_name((Role)r))
                             ? 0
                             : get_int(roles, plan_role_name((Role)r), 0, PLAN_MAX_VALUE);
  const MjVal *st = find(root, "stages");
  if (!st) return;
  p->whole_graph = find(root, "stages_whole_graph") && get(root, "stages_whole_graph", MJ_BOOL)->b; /* optional */
  want(st, MJ_ARR, "\"stages\"");
  p->nstages = st->n;
  p->stages = st->n ? ar_alloc(ar, sizeof(PlanStage) * (size_t)st->n) : NULL;
  for (int i = 0; i < st->n; i++) {
    const MjVal *s = want(&st->u.items[i], MJ_OBJ, "a stage");
    static const char *const CHOICES[] = {"K", "S", "R"};
    PlanStage *ps = &p->stages[i];
    ps->first_layer = get(s, "first_layer", MJ_STR)->u.s;
    ps->last_layer = get(s, "last_layer", MJ_STR)->u.s;
    ps->choice = *CHOICES[get_enum(s, "choice", CHOICES, 3)];
    ps->half = find(s, "half") && get(s, "half", MJ_BOOL)->b;
    ps->runs = (int)get_int(s, "runs", 0, INT32_MAX);
    ps->kept_bytes = get_int(s, "kept_bytes", 0, PLAN_MAX_VALUE);
  }
}

/* Optional: plans written before the levers were recorded have none. */
static void read_levers(Arena *ar, const MjVal *root, Plan *p) {
  const MjVal *lv = find(root, "levers");
  if (!lv) return;
  want(lv, MJ_ARR, "\"levers\"");
  /* auto where nothing fit (a plan that fit names what auto chose) */
  static const char *const PRECISIONS[] = {"fp32", "bf16", "fp16", "auto"};
  p->nlevers = lv->n;
  p->levers = ar_alloc(ar, sizeof(PlanLever) * (size_t)(lv->n + 1));
  for (int i = 0; i < lv->n; i++) {
    const MjVal *v = want(&lv->u.items[i], MJ_OBJ, "a lever");
    PlanLever *l = &p->levers[i];
    l->precision = PRECISIONS[get_enum(v, "precision", PRECISIONS, 4)];
    l->micro_batch = (int)get_int(v, "micro_batch", 0, INT32_MAX);
    l->accumulation_steps = (int)get_int(v, "accumulation_steps", 0, INT32_MAX);
    l->keep_arena = get_int(v, "keep_arena_bytes", 0, PLAN_MAX_VALUE);
    l->arena = get_int(v, "arena_bytes", 0, PLAN_MAX_VALUE);
    l->extra_flops = get_int(v, "extra_flops", 0, INT64_MAX);
    l->step_flops = get_int(v, "step_flops", 0, INT64_MAX);
    l->fits = get(v, "fits", MJ_BOOL)->b;
    l->chosen = get(v, "chosen", MJ_BOOL)->b;
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

static void read_buffer(const MjVal *v, int id, PlanBuffer *b) {
  want(v, MJ_OBJ, "a buffer");
  if (get_int(v, "id", 0, INT32_MAX) != id)
    diag_error(LOC(get(v, "id", MJ_NUM)), "buffer ids must run 0, 1, 2, ... (expected %d)", id);
  b->id = id;
  b->name = get(v, "name", MJ_STR)->u.s;
  const char *roles[ROLE_COUNT], *dtypes[DT_COUNT];
  for (int r = 0; r < ROLE_COUNT; r++) roles[r] = plan_role_name((Role)r);
  for (int d = 0; d < DT_COUNT; d++) dtypes[d] = dtype_name((DType)d);
  b->role = (Role)get_enum(v, "role", roles, ROLE_COUNT);
  b->dtype = (DType)get_enum(v, "dtype", dtypes, DT_COUNT);
  const MjVal *shape = get(v, "shape", MJ_ARR), *sym = get(v, "shape_sym", MJ_ARR);
  if (shape->n > MAX_RANK) diag_error(LOC(shape), "rank %d: at most %d dims", shape->n, MAX_RANK);
  if (sym->n != shape->n) diag_error(LOC(sym), "\"shape_sym\" has %d entries, \"shape\" %d", sym->n, shape->n);
  b->shape.rank = shape->n;
  int64_t numel = 1;
  for (int d = 0; d < shape->n; d++) {
    b->shape.d[d] = as_int(&shape->u.items[d], "a dim", 0, PLAN_MAX_VALUE);
    b->shape.sym[d] = want(&sym->u.items[d], MJ_STR, "a symbolic dim")->u.s;
    if (!ck_mul(numel, b->shape.d[d], &numel) || numel > PLAN_MAX_VALUE)
      diag_error(LOC(shape), "shape too large (more than 2^62 elements)");
  }
  b->bytes = get_int(v, "bytes", 0, PLAN_MAX_VALUE);
  b->offset = get_int(v, "offset", 0, PLAN_MAX_VALUE);
  b->sched = (SchedSet)get_enum(v, "schedule", SCHED_NAMES, 3);
  const MjVal *live = get(v, "live", MJ_ARR);
  if (live->n != 2) diag_error(LOC(live), "\"live\" must be [first, last]");
  b->first = (int)as_int(&live->u.items[0], "a live range's first position", 0, INT32_MAX);
  b->last = (int)as_int(&live->u.items[1], "a live range's last position", 0, INT32_MAX);
  const MjVal *al = find(v, "in_place");
  b->aliases = al ? want(al, MJ_STR, "\"in_place\"")->u.s : "";
  b->tensor = -1;
  if (b->role == ROLE_PARAM || b->role == ROLE_STATE) {
    const MjVal *init = get(v, "init", MJ_OBJ);
    b->init.kind = (InitKind)get_enum(init, "kind", INIT_NAMES, 5);
    b->init.scale = get_num(init, "scale");
  }
  if (b->role == ROLE_PARAM) b->decay = get(v, "weight_decay", MJ_BOOL)->b;
  if (b->role == ROLE_PARAM && find(v, "frozen")) b->frozen = get(v, "frozen", MJ_BOOL)->b;
}

/* Ops: kernels by name, buffer ids checked against the buffer table. */
static void read_ops(Arena *ar, const MjVal *root, const char *key, const Plan *p, PlanOp **out, int *nout) {
  const MjVal *a = get(root, key, MJ_ARR);
  PlanOp *ops = ar_alloc(ar, sizeof(PlanOp) * (size_t)(a->n + 1));
  const char *kinds[OP_COUNT], *phases[PHASE_COUNT];
  for (int k = 0; k < OP_COUNT; k++) kinds[k] = op_info((OpKind)k)->name;
  for (int k = 0; k < PHASE_COUNT; k++) phases[k] = plan_phase_name((Phase)k);
  for (int i = 0; i < a->n; i++) {
    const MjVal *v = want(&a->u.items[i], MJ_OBJ, "an op");
    PlanOp *o = &ops[i];
    o->id = (int)get_int(v, "id", i, i);
    o->op = (OpKind)get_enum(v, "op", kinds, OP_COUNT);
    o->phase = (Phase)get_enum(v, "phase", phases, PHASE_COUNT);
    o->layer = get(v, "layer", MJ_STR)->u.s;
    const MjVal *in = get(v, "inputs", MJ_ARR), *outs = get(v, "outputs", MJ_ARR), *acc = get(v, "accumulate", MJ_ARR);
    const MjVal *dims = get(v, "dims", MJ_ARR);
    if (in->n > PLAN_MAX_IO) diag_error(LOC(in), "at most %d inputs", PLAN_MAX_IO);
    if (outs->n > PLAN_MAX_IO) diag_error(LOC(outs), "at most %d outputs", PLAN_MAX_IO);
    if (acc->n != outs->n) diag_error(LOC(acc), "\"accumulate\" needs one entry per output (%d)", outs->n);
    if (dims->n > MAX_KDIM) diag_error(LOC(dims), "at most %d dims", MAX_KDIM);
    o->nin = in->n, o->nout = outs->n, o->ndim = dims->n;
    for (int k = 0; k < in->n; k++) o->in[k] = (int)as_int(&in->u.items[k], "an input buffer id", -1, p->nbuf - 1);
    for (int k = 0; k < outs->n; k++) {
      o->out[k] = (int)as_int(&outs->u.items[k], "an output buffer id", -1, p->nbuf - 1);
      o->acc[k] = want(&acc->u.items[k], MJ_BOOL, "an accumulate flag")->b;
    }
    for (int k = 0; k < dims->n; k++) o->dim[k] = as_int(&dims->u.items[k], "a kernel dim", 0, PLAN_MAX_VALUE);
    const MjVal *fl = find(v, "floats");
    if (fl && want(fl, MJ_ARR, "\"floats\"")->n > MAX_ATTR) diag_error(LOC(fl), "at most %d floats", MAX_ATTR);
    for (int k = 0; fl && k < fl->n; k++) {
      const MjVal *x = want(&fl->u.items[k], MJ_NUM, "a float argument");
      if (!isfinite(mj_num(x))) diag_error(LOC(x), "a float argument must be finite");
      o->farg[o->nfarg++] = mj_num(x);
    }
    const MjVal *sc = find(v, "scratch");
    o->scratch = sc ? (int)as_int(sc, "a scratch buffer id", 0, p->nbuf - 1) : -1;
    o->flops = get_int(v, "flops", 0, INT64_MAX);
  }
  *out = ops, *nout = a->n;
}

/* Cross-field checks the renderers rely on and verify_plan does not make. */
static void check_refs(const MjVal *root, const Plan *p) {
  const MjVal *t = get(root, "totals", MJ_OBJ);
  if (p->nsched && p->peak_position >= p->nsched)
    diag_error(LOC(get(t, "peak_position", MJ_NUM)), "peak position %d is past the schedule's %d ops", p->peak_position,
               p->nsched);
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    int n = pb->sched == SCHED_EVAL ? p->neval : p->nsched;
    if (pb->sched != SCHED_BOTH && (pb->first >= pb->last || pb->last > n))
      diag_error(LOC(find(&get(root, "buffers", MJ_ARR)->u.items[b], "live")),
                 "buffer %s: live range [%d, %d) is not within its schedule's %d ops", pb->name, pb->first, pb->last,
                 n);
  }
}

/* "data_parallel" (json.c): absent for one process. */
static void read_data_parallel(const MjVal *root, Plan *p) {
  const MjVal *d = find(root, "data_parallel");
  p->ranks = 1;
  if (!d) return;
  want(d, MJ_OBJ, "\"data_parallel\"");
  p->data_parallel = true;
  p->ranks = (int)get_int(d, "ranks", 1, 65536);
  p->zero = (int)get_int(d, "zero", 0, 2);
  p->zero_auto = get(d, "zero_auto", MJ_BOOL)->b;
  p->nbuckets = (int)get_int(d, "buckets", 0, INT32_MAX);
  p->bucket_bytes = get_int(d, "bucket_bytes", 0, PLAN_MAX_VALUE);
  p->comm_bytes = get_int(d, "comm_bytes", 0, PLAN_MAX_VALUE);
  p->comm_wire_bytes = get_int(d, "comm_wire_bytes", 0, PLAN_MAX_VALUE);
  const MjVal *za = find(d, "zero_arena_bytes");
  if (za && want(za, MJ_ARR, "\"zero_arena_bytes\"")->n != 3) diag_error(LOC(za), "three arenas: ZeRO 0, 1, 2");
  for (int k = 0; za && k < 3; k++) p->zero_arena[k] = as_int(&za->u.items[k], "an arena", 0, PLAN_MAX_VALUE);
}

Plan *plan_read(Arena *ar, const char *path, const char *text, size_t len) {
  if (len > PLAN_MAX_FILE_BYTES) diag_error((Loc){path, 0, 0}, "larger than 1 GiB: not a plan memplan wrote");
  diag_register_source(path, text, len);
  src.path = path, src.text = text;
  size_t k = 0;
  while (k < len && strchr(" \t\r\n", text[k])) k++;
  if (k == len) diag_error(loc_at((int64_t)k), "empty file: expected a plan.json that memplan compile wrote");
  const MjVal *root = parse_json(ar, path, text, len, 32, (int64_t)len / 2 + 2);
  if (root->kind != MJ_OBJ || !find(root, "memplan_plan"))
    diag_error(LOC(root),
               "not a memplan plan (no \"memplan_plan\" key): give the plan.json that memplan compile wrote");
  const MjVal *ver = get(root, "memplan_plan", MJ_NUM);
  if (ver->is_int && ver->u.i > PLAN_FORMAT_VERSION)
    diag_error(LOC(ver), "plan format %lld is newer than this memplan reads (%d): use a newer memplan",
               (long long)ver->u.i, PLAN_FORMAT_VERSION);
  Plan *p = ar_alloc(ar, sizeof(Plan));
  p->version = (int)as_int(ver, "\"memplan_plan\"", 1, PLAN_FORMAT_VERSION);
  read_header(ar, root, p);
  read_totals(ar, root, p);
  read_levers(ar, root, p);
  read_data_parallel(root, p);
  const MjVal *bufs = get(root, "buffers", MJ_ARR);
  p->nbuf = bufs->n;
  p->buf = ar_alloc(ar, sizeof(PlanBuffer) * (size_t)(bufs->n + 1));
  for (int b = 0; b < bufs->n; b++) read_buffer(&bufs->u.items[b], b, &p->buf[b]);
  p->loss_buf = (int)get_int(root, "loss_buffer", 0, p->nbuf - 1);
  p->eval_loss_buf = (int)get_int(root, "eval_loss_buffer", 0, p->nbuf - 1);
  read_ops(ar, root, "schedule", p, &p->sched, &p->nsched);
  read_ops(ar, root, "eval_schedule", p, &p->eval, &p->neval);
  p->batch = (int64_t)p->micro_batch * (p->accumulation_steps > 0 ? p->accumulation_steps : 1);
  check_refs(root, p);
  return p;
}

StTensor *st_read_header(Arena *ar, const char *path, const char *json, size_t len, int64_t data_bytes, int *n) {
  MjSt st;
  MjError e;
  if (mj_st_read(&st, json, len, data_bytes, &e)) {
    mj_st_free(&st);
    diag_error((Loc){path, 0, 0}, "malformed safetensors header at byte %lld: %s", (long long)e.off + 8, e.msg);
  }
  StTensor *t = ar_alloc(ar, sizeof(StTensor) * (size_t)(st.n + 1));
  for (int i = 0; i < st.n; i++) {
    const MjStTensor *x = &st.t[i];
    StTensor *s = &t[i];
    s->name = ar_strdup(ar, x->name);
    s->dtype = ar_strdup(ar, x->dtype);
    s->rank = x->rank;
    memcpy(s->shape, x->shape, sizeof s->shape);
    s->begin = x->begin, s->end = x->end;
  }
  *n = st.n;
  mj_st_free(&st);
  return t;
}

/* config.json and the like, flattened: every scalar with its path of keys
 * ("rope_scaling/factor", "weight_map/model.norm.weight"), in document order. */
typedef struct {
  Arena *ar;
  JsonField *f;
  int n, cap;
  int64_t off; /* loc_at's scan, carried forward: values come in document order */
  int line, col;
} Flat;

static Loc flat_loc(Flat *F, int64_t off) {
  for (; F->off < off; F->off++)
    if (src.text[F->off] == '\n') F->line++, F->col = 1;
    else F->col++;
  return (Loc){src.path, F->line, F->col};
}

static void flatten(Flat *F, const MjVal *v, const char *key) {
  if (v->kind == MJ_ARR || v->kind == MJ_OBJ) {
    for (int i = 0; i < v->n; i++) {
      const MjVal *x = &v->u.items[i];
      const char *k = v->kind == MJ_OBJ ? x->key : ar_printf(F->ar, "%d", i);
      flatten(F, x, *key ? ar_printf(F->ar, "%s/%s", key, k) : k);
    }
    return;
  }
  if (F->n == F->cap) {
    F->f = ar_grow(F->ar, F->f, sizeof(JsonField) * (size_t)F->cap, sizeof(JsonField) * (size_t)(F->cap * 2));
    F->cap *= 2;
  }
  JsonField *j = &F->f[F->n++];
  *j = (JsonField){.key = key, .loc = flat_loc(F, v->off)};
  if (v->kind == MJ_BOOL) j->kind = JF_BOOL, j->b = v->b;
  else if (v->kind == MJ_NUM) j->kind = JF_NUM, j->num = mj_num(v);
  else if (v->kind == MJ_STR) j->kind = JF_STR, j->s = v->u.s;
  else j->kind = JF_NULL;
}

JsonField *json_read_fields(Arena *ar, const char *path, const char *text, size_t len, int *n) {
  diag_register_source(path, text, len);
  size_t k = 0;
  while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r')) k++;
  src.path = path, src.text = text;
  if (k == len) diag_error(loc_at((int64_t)k), "empty file: expected a JSON object");
  const MjVal *root = parse_json(ar, path, text, len, 64, (int64_t)1 << 24);
  if (root->kind != MJ_OBJ)
    diag_error(LOC(root), "the document must be a JSON object, not %s", mj_kind_name[root->kind]);
  Flat F = {ar, ar_alloc(ar, sizeof(JsonField) * 16), 0, 16, 0, 1, 1};
  flatten(&F, root, "");
  *n = F.n;
  return F.f;
}
