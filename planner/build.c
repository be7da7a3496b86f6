/* build.c: the graph builder (see build.h). */
#include "build.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

/* Limits: every size and FLOP count of a plan stays inside 64 bits. */
#define MAX_TENSORS 400000
/* The graph's tensors together: with gradients, optimizer states and
 * alignment, every sum of buffer sizes a plan makes stays far below 2^63. */
#define MAX_TOTAL_BYTES (INT64_C(1) << 50) /* 1 PiB */
/* Forward and backward FLOPs of all layers: step totals stay below 2^63. */
#define MAX_STEP_FLOPS (INT64_C(1) << 60)

struct GraphBuilder {
  Arena *ar;
  const ShapeRule *rules; /* per OpKind */
  VEC(Tensor) t;
  VEC(Op) ops;
  int64_t total_bytes; /* of all tensors so far */
  LoraSpec *lora;      /* NULL: no adapters */
  bool in_adapter;     /* building one: its own linears get none */
  bool *hit;           /* LoRA: per target, whether it matches a linear's name, then a block's (lora_hits) */
  /* build_parts: the next linear's row blocks ("h0.attn.q", its rows), for LoRA on each */
  int nparts;
  const char *part[MAX_LIN_PARTS];
  int64_t part_rows[MAX_LIN_PARTS];
};

struct BuildCtx {
  GraphBuilder *gb;
  const char *layer;  /* the layer's name, for errors */
  const char *opname; /* the op's name: the layer's, or "h0.attn.qkv" for a composite's parts */
  Loc loc;            /* the layer's */
  Op op;
  const int *in; /* tensor ids of the inputs */
  int nin;
};

GraphBuilder *gb_new(Arena *ar, const ShapeRule *rules) {
  GraphBuilder *gb = ar_alloc(ar, sizeof(GraphBuilder));
  gb->ar = ar;
  gb->rules = rules;
  return gb;
}

int gb_tensor(GraphBuilder *gb, Tensor t) {
  int64_t bytes = dtype_size(t.dtype);
  for (int i = 0; i < t.shape.rank; i++) bytes = ck_mul_or_die(t.loc, "a tensor's size in bytes", bytes, t.shape.d[i]);
  if (gb->t.n >= MAX_TENSORS) diag_error(t.loc, "too many tensors (limit %d)", MAX_TENSORS);
  if (bytes > MAX_TOTAL_BYTES - gb->total_bytes)
    diag_error(t.loc, "the model's tensors take more than 1 PiB (%lld bytes) with '%s' (%lld bytes); use smaller dims",
               (long long)MAX_TOTAL_BYTES, t.name, (long long)bytes);
  gb->total_bytes += bytes;
  VEC_PUSH(gb->ar, gb->t, t);
  return gb->t.n - 1;
}

/* Tensor pointers stay readable after later gb_tensor calls: the arena
 * never frees the old copy of a grown array, and entries never change. */
const Tensor *gb_get(const GraphBuilder *gb, int t) { return &gb->t.v[t]; }
int gb_ntensors(const GraphBuilder *gb) { return gb->t.n; }

/* Op-local scratch (OpInfo.scratch) counts against the size limits like a
 * tensor: the larger of its forward's and its backward's (the op table's
 * sizes saturate at INT64_MAX instead of overflowing). */
static void check_scratch(GraphBuilder *gb, const BuildCtx *c) {
  const OpInfo *oi = op_info(c->op.kind);
  Graph view = {.t = gb->t.v, .nt = gb->t.n};
  int64_t d[MAX_KDIM], f, b;
  int nd;
  oi->dims(&view, &c->op, d, &nd);
  f = oi->scratch(d, false), b = oi->scratch(d, true);
  int64_t bytes = f > b ? f : b;
  if (bytes > MAX_TOTAL_BYTES - gb->total_bytes)
    diag_error(c->loc,
               "layer '%s': the model's tensors and its scratch (%lld bytes) take more than 1 PiB (%lld bytes); use "
               "smaller dims",
               c->layer, (long long)bytes, (long long)MAX_TOTAL_BYTES);
  gb->total_bytes += bytes;
}

void gb_set_lora(GraphBuilder *gb, LoraSpec *l) {
  gb->lora = l;
  gb->hit = l ? ar_alloc(gb->ar, 2 * sizeof(bool) * (size_t)l->ntargets) : NULL;
}

void build_parts(BuildCtx *c, int n, const char *const *names, const int64_t *rows) {
  MP_ASSERT(n <= MAX_LIN_PARTS);
  c->gb->nparts = n;
  for (int i = 0; i < n; i++)
    c->gb->part[i] = ar_printf(c->gb->ar, "%s.%s", c->layer, names[i]), c->gb->part_rows[i] = rows[i];
}

/* Which targets match the linear (or row block) `name`, in hit[]: the whole
 * name or a tail from a '.', as PEFT's target_modules; those in skip[] (if
 * any) do not count. Marks the targets that match. */
static bool lora_hits(GraphBuilder *gb, const char *name, bool *hit, const bool *skip) {
  bool any = false;
  for (int i = 0; i < gb->lora->ntargets; i++) {
    hit[i] = false;
    for (const char *p = name; p && !hit[i] && !(skip && skip[i]); p = strchr(p, '.') ? strchr(p, '.') + 1 : NULL)
      hit[i] = !fnmatch(gb->lora->targets[i], p, 0);
    any |= hit[i];
    gb->lora->matched[i] |= hit[i];
  }
  return any;
}

static int add_op(GraphBuilder *gb, OpKind k, const char *layer, const char *opname, Loc loc, const int *in, int nin,
                  const Attr *attr);

static int adapter_param(GraphBuilder *gb, const char *name, int64_t d0, const char *s0, int64_t d1, const char *s1,
                         Init init, Loc loc) {
  Tensor t = {.name = name, .kind = TK_PARAM, .dtype = DT_F32, .loc = loc, .producer = -1, .init = init};
  t.shape = (Shape){.rank = 2, .d = {d0, d1}, .sym = {s0, s1}};
  t.adapter = true;
  return gb_tensor(gb, t);
}

/* One adapter "<name>.lora_A" [r, K], "<name>.lora_B" [N, r] on x: B(A(dropout(x))), not yet scaled. */
static int lora_branch(GraphBuilder *gb, int x, const char *name, int64_t K, const char *Ks, int64_t N, const char *Ns,
                       const char *layer, Loc loc) {
  const LoraSpec *L = gb->lora;
  int64_t r = L->rank;
  if (r > N || r > K)
    diag_error(L->rank_loc, "lora rank %lld is larger than layer '%s' (in %lld, out %lld); use a rank of at most %lld",
               (long long)r, name, (long long)K, (long long)N, (long long)(N < K ? N : K));
  const char *rs = ar_printf(gb->ar, "%lld", (long long)r);
  const char *A = ar_printf(gb->ar, "%s.lora_A", name), *B = ar_printf(gb->ar, "%s.lora_B", name);
  adapter_param(gb, A, r, rs, K, Ks, (Init){INIT_UNIFORM, 1.0 / sqrt((double)K)}, loc);
  adapter_param(gb, B, N, Ns, r, rs, (Init){INIT_ZEROS, 0}, loc);
  Attr a[MAX_ATTR];
  int t = x;
  if (L->dropout > 0) {
    op_attr_defaults(OP_DROPOUT, a, loc);
    a[op_attr_index(OP_DROPOUT, "p")].f = L->dropout;
    t = add_op(gb, OP_DROPOUT, layer, ar_printf(gb->ar, "%s.lora_dropout", name), loc, &t, 1, a);
  }
  op_attr_defaults(OP_LINEAR, a, loc);
  a[op_attr_index(OP_LINEAR, "bias")].i = 0;
  a[op_attr_index(OP_LINEAR, "out")] = (Attr){.i = r, .s = rs, .loc = loc};
  a[op_attr_index(OP_LINEAR, "weight")].s = A;
  t = add_op(gb, OP_LINEAR, layer, ar_printf(gb->ar, "%s.lora_a", name), loc, &t, 1, a);
  a[op_attr_index(OP_LINEAR, "out")] = (Attr){.i = N, .s = Ns, .loc = loc};
  a[op_attr_index(OP_LINEAR, "weight")].s = B;
  return add_op(gb, OP_LINEAR, layer, ar_printf(gb->ar, "%s.lora_b", name), loc, &t, 1, a);
}

/* LoRA on the linear `lin` just built (build.h, LoraSpec), whose row blocks
 * are parts[0..nparts) (build_parts; none: one block): one adapter over the
 * whole linear when a target matches its name, else one per block a target
 * matches, their outputs concatenated (every block must be matched then).
 * Returns the adapted output, which the layer's readers get instead of the
 * linear's, or the linear's own when no target matches. */
static int lora_adapter(GraphBuilder *gb, const Op *lin, const char *layer, Loc loc, int nparts,
                        const char *const *parts, const int64_t *rows) {
  const LoraSpec *L = gb->lora;
  const Tensor *w = gb_get(gb, lin->in[1]);
  int64_t N = w->shape.d[0], K = w->shape.d[1];
  const char *name = lin->name, *Ks = w->shape.sym[1];
  bool *wh = gb->hit, *ph = gb->hit + L->ntargets, whole = lora_hits(gb, name, wh, NULL);
  int first = -1, missing = -1, target = -1; /* the first block matched and the first not, by which target */
  for (int p = 0; p < nparts; p++) {         /* a target matching the whole linear ("attn.*") adapts it whole */
    bool any = lora_hits(gb, parts[p], ph, wh);
    for (int i = 0; i < L->ntargets && target < 0; i++)
      if (ph[i]) target = i;
    if (any && first < 0) first = p;
    if (!any && missing < 0) missing = p;
  }
  if (first >= 0 && whole)
    diag_error(L->tloc[target],
               "lora target '%s' adapts '%s', a row block of '%s', which another target adapts whole; target "
               "either the packed linear or its blocks",
               L->targets[target], parts[first], name);
  if (first >= 0 && missing >= 0)
    diag_error(L->tloc[target],
               "lora target '%s' adapts '%s' but no target adapts '%s': '%s' packs them in one linear, and "
               "memplan adapts its blocks all together (target each of them) or the whole linear (target it)",
               L->targets[target], parts[first], parts[missing], name);
  if (!whole && first < 0) return lin->out[0];
  gb->in_adapter = true;
  int t, br[MAX_LIN_PARTS];
  if (whole) t = lora_branch(gb, lin->in[0], name, K, Ks, N, w->shape.sym[0], layer, loc);
  else {
    for (int p = 0; p < nparts; p++)
      br[p] = lora_branch(gb, lin->in[0], parts[p], K, Ks, rows[p], ar_printf(gb->ar, "%lld", (long long)rows[p]),
                          layer, loc);
    Attr a[MAX_ATTR];
    op_attr_defaults(OP_CONCAT, a, loc);
    a[op_attr_index(OP_CONCAT, "axis")].i = -1;
    t = add_op(gb, OP_CONCAT, layer, ar_printf(gb->ar, "%s.lora_concat", name), loc, br, nparts, a);
  }
  Attr a[MAX_ATTR];
  op_attr_defaults(OP_SCALE, a, loc);
  a[op_attr_index(OP_SCALE, "factor")].f = L->alpha / (double)L->rank;
  t = add_op(gb, OP_SCALE, layer, ar_printf(gb->ar, "%s.lora_scale", name), loc, &t, 1, a);
  op_attr_defaults(OP_ADD, a, loc);
  int in[2] = {lin->out[0], t};
  t = add_op(gb, OP_ADD, layer, ar_printf(gb->ar, "%s.lora", name), loc, in, 2, a);
  gb->t.v[t].adapter = true;
  gb->in_adapter = false;
  return t;
}

static int add_op(GraphBuilder *gb, OpKind k, const char *layer, const char *opname, Loc loc, const int *in, int nin,
                  const Attr *attr) {
  const OpInfo *oi = op_info(k);
  BuildCtx c = {.gb = gb, .layer = layer, .opname = opname, .loc = loc, .in = in, .nin = nin};
  c.op = (Op){.kind = k, .name = opname, .loc = loc, .nin = oi->nin, .nout = oi->nout};
  for (int i = 0; i < MAX_OP_IN; i++) c.op.in[i] = -1;
  for (int i = 0; i < MAX_OP_OUT; i++) c.op.out[i] = -1;
  memcpy(c.op.attr, attr, sizeof c.op.attr);
  int before = gb->ops.n, nparts = 0;
  const char *parts[MAX_LIN_PARTS];
  int64_t rows[MAX_LIN_PARTS];
  if (k == OP_LINEAR) { /* build_parts' blocks are this linear's */
    nparts = gb->nparts, gb->nparts = 0;
    memcpy(parts, gb->part, sizeof parts), memcpy(rows, gb->part_rows, sizeof rows);
  }
  MP_ASSERT(gb->rules[k]); /* the loader names only ops with a rule */
  gb->rules[k](&c);
  if (oi->composite) { /* its parts are in: the last one's output is the layer's */
    MP_ASSERT(gb->ops.n > before);
    return gb->ops.v[gb->ops.n - 1].out[0];
  }
  if (oi->scratch) check_scratch(gb, &c);
  VEC_PUSH(gb->ar, gb->ops, c.op);
  if (k != OP_LINEAR || !gb->lora || gb->in_adapter) return c.op.out[0];
  return lora_adapter(gb, &c.op, layer, loc, nparts, parts, rows);
}

int gb_layer(GraphBuilder *gb, OpKind k, const char *name, Loc loc, const int *in, int nin, const Attr *attr) {
  return add_op(gb, k, name, name, loc, in, nin, attr);
}

int build_sub(BuildCtx *c, OpKind k, const char *suffix, const int *in, int nin, const Attr *attr) {
  return add_op(c->gb, k, c->layer, ar_printf(c->gb->ar, "%s.%s", c->layer, suffix), c->loc, in, nin, attr);
}

/* ---- the shape rules' side ---- */

const Attr *build_attr(BuildCtx *c, const char *key) {
  int i = op_attr_index(c->op.kind, key);
  MP_ASSERT(i >= 0); /* a shape rule reads only the keys its entry declares */
  return &c->op.attr[i];
}

void build_error(BuildCtx *c, const char *key, const char *fmt, ...) {
  const Attr *a = key ? build_attr(c, key) : NULL;
  va_list ap;
  va_start(ap, fmt);
  char msg[600];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(a && a->s ? a->loc : c->loc, "layer '%s': %s", c->layer, msg);
}

const Tensor *build_input(BuildCtx *c, int k) { return gb_get(c->gb, c->in[k]); }
int build_input_id(BuildCtx *c, int k) { return c->in[k]; }
int build_ninputs(BuildCtx *c) { return c->nin; }
Arena *build_scratch(BuildCtx *c) { return c->gb->ar; }

Shape build_shape(BuildCtx *c, int rank, const int64_t *d, const char *const *sym) {
  Shape s = {.rank = rank};
  for (int i = 0; i < rank; i++) {
    s.d[i] = d[i];
    s.sym[i] = sym && sym[i] ? sym[i] : ar_printf(c->gb->ar, "%lld", (long long)d[i]);
  }
  return s;
}

/* A shared parameter: the attribute holds its full name, "LAYER.weight". */
static int shared_param(BuildCtx *c, const Attr *a, const Shape *shape) {
  const char *dot = strrchr(a->s, '.');
  for (int t = 0; t < c->gb->t.n; t++) {
    const Tensor *p = gb_get(c->gb, t);
    if (p->kind != TK_PARAM || strcmp(p->name, a->s)) continue;
    bool eq = p->shape.rank == shape->rank;
    for (int i = 0; eq && i < shape->rank; i++) eq = p->shape.d[i] == shape->d[i];
    if (!eq) {
      Arena *ar = c->gb->ar;
      diag_error(a->loc, "shape mismatch: shared parameter '%s' is %s %s, this layer needs %s %s", a->s,
                 shape_sym_str(ar, &p->shape), shape_val_str(ar, &p->shape), shape_sym_str(ar, shape),
                 shape_val_str(ar, shape));
    }
    return t;
  }
  diag_error(a->loc, "layer '%.*s' has no parameter '%s'", (int)(dot - a->s), a->s, dot + 1);
}

/* A tensor of the layer that lives through the step (a parameter or running state), "LAYER.suffix". */
static void persistent(BuildCtx *c, int slot, const char *suffix, TensorKind kind, Shape shape, Init init) {
  Tensor t = {.name = ar_printf(c->gb->ar, "%s.%s", c->opname, suffix),
              .kind = kind,
              .dtype = DT_F32,
              .shape = shape,
              .loc = c->loc,
              .producer = -1,
              .init = init};
  c->op.in[slot] = gb_tensor(c->gb, t);
}

void build_param(BuildCtx *c, int slot, const char *suffix, const char *share_key, Shape shape, Init init) {
  const Attr *share = share_key ? build_attr(c, share_key) : NULL;
  if (share && share->s) c->op.in[slot] = shared_param(c, share, &shape);
  else persistent(c, slot, suffix, TK_PARAM, shape, init);
}

void build_state(BuildCtx *c, int slot, const char *suffix, Shape shape, Init init) {
  MP_ASSERT(op_info(c->op.kind)->mode_arg); /* only a mode-aware kernel knows not to update it twice */
  persistent(c, slot, suffix, TK_STATE, shape, init);
}

void build_data(BuildCtx *c, int slot, int k) { c->op.in[slot] = c->in[k]; }

void build_output(BuildCtx *c, int slot, const char *suffix, Shape shape, DType dt) {
  Tensor t = {.name = suffix ? ar_printf(c->gb->ar, "%s.%s", c->opname, suffix) : c->opname,
              .kind = TK_ACT,
              .dtype = dt,
              .shape = shape,
              .loc = c->loc,
              .producer = c->gb->ops.n};
  c->op.out[slot] = gb_tensor(c->gb, t);
}

/* ---- finishing ---- */

/* gpt2: every weight N(0, 0.02), biases zero, norms one; a projection whose
 * output feeds a residual join gets 0.02 / sqrt(number of such projections),
 * which is GPT-2's 0.02 / sqrt(2 L). pytorch: the op table's defaults. */
static void apply_gpt2_init(GraphBuilder *gb) {
  int nres = 0;
  bool *res = ar_alloc(gb->ar, sizeof(bool) * (size_t)gb->ops.n);
  for (int i = 0; i < gb->ops.n; i++) {
    Op *o = &gb->ops.v[i];
    if (!op_info(o->kind)->residual_join || gb->t.v[o->out[0]].adapter) continue; /* LoRA's join: none */
    for (int k = 0; k < o->nin; k++) {
      int p = o->in[k] >= 0 ? gb->t.v[o->in[k]].producer : -1;
      if (p >= 0 && gb->t.v[gb->ops.v[p].out[0]].adapter) /* an adapted linear: the linear itself */
        p = gb->t.v[gb->ops.v[p].in[0]].producer;
      if (p >= 0 && op_info(gb->ops.v[p].kind)->gpt2_projection && !res[p]) {
        res[p] = true;
        nres++;
      }
    }
  }
  for (int i = 0; i < gb->ops.n; i++) {
    Op *o = &gb->ops.v[i];
    for (int k = 0; k < o->nin; k++) {
      if (o->in[k] < 0) continue;
      Tensor *t = &gb->t.v[o->in[k]];
      if (t->kind != TK_PARAM || t->init.kind == INIT_ONES || t->adapter) continue; /* adapters: PEFT's */
      if (t->init.kind == INIT_UNIFORM && t->shape.rank == 1) t->init = (Init){INIT_ZEROS, 0};
      else if (t->init.kind == INIT_UNIFORM || t->init.kind == INIT_NORMAL)
        t->init = (Init){INIT_NORMAL, res[i] && nres ? 0.02 / sqrt((double)nres) : 0.02};
    }
  }
}

static int find_loss(const GraphBuilder *gb, Loc layers) {
  int loss = -1;
  for (int i = 0; i < gb->ops.n; i++) {
    const Op *o = &gb->ops.v[i];
    if (!op_info(o->kind)->is_loss) continue;
    if (loss >= 0)
      diag_error(o->loc, "a second loss layer '%s' (the first is '%s'); a model has one loss", o->name,
                 gb->t.v[loss].name);
    loss = o->out[0];
  }
  if (loss < 0) diag_error(layers, "no loss layer: end the model with a cross_entropy or mse layer");
  return loss;
}

/* Forward plus backward FLOPs of every layer, summed over the model, stay
 * below MAX_STEP_FLOPS (the op table saturates instead of overflowing). */
static void check_flops(const Graph *g) {
  int64_t total = 0, fb;
  for (int i = 0; i < g->nops; i++) {
    const Op *o = &g->ops[i];
    const OpInfo *oi = op_info(o->kind);
    if (!ck_add(oi->flops(g, o, false), oi->flops(g, o, true), &fb) || !ck_add(total, fb, &total) ||
        total > MAX_STEP_FLOPS)
      diag_error(o->loc, "layer '%s': a training step would take more than 2^60 FLOPs; use smaller dims", o->name);
  }
}

GraphMemo *graph_memo_new(Arena *ar) {
  GraphMemo *m = ar_alloc(ar, sizeof(GraphMemo));
  m->ar = ar;
  return m;
}

Graph *gb_finish(GraphBuilder *gb, const char *model, const char *path, Dim *dims, int ndims, Optimizer opt,
                 bool gpt2_init, Loc layers) {
  if (gpt2_init) apply_gpt2_init(gb);
  Graph *g = ar_alloc(gb->ar, sizeof(Graph));
  *g = (Graph){
      model, path, dims, ndims, gb->t.v, gb->t.n, gb->ops.v, gb->ops.n, opt, 0, NULL, 0, 0, 0, graph_memo_new(gb->ar)};
  g->loss = find_loss(gb, layers);
  check_flops(g);
  return g;
}

/* ---- the fused loss (build.h) ---- */

/* The loss op when it is a cross_entropy of a linear's output read by
 * nothing else; sets *lin to the linear. -1 otherwise. */
static int fusable_loss(const Graph *g, int *lin) {
  int ce = -1;
  for (int i = 0; i < g->nops; i++)
    if (g->ops[i].kind == OP_CROSS_ENTROPY && g->ops[i].out[0] == g->loss) ce = i;
  if (ce < 0) return -1;
  int logits = g->ops[ce].in[0];
  *lin = g->t[logits].producer;
  if (*lin < 0 || g->ops[*lin].kind != OP_LINEAR || g->ops[ce].in[1] == logits) return -1;
  for (int i = 0; i < g->nops; i++)
    for (int k = 0; i != ce && k < g->ops[i].nin; k++)
      if (g->ops[i].in[k] == logits) return -1;
  return ce;
}

static Tensor stat_tensor(Arena *ar, const Op *ce, const char *suffix, Shape shape, int producer) {
  return (Tensor){.name = ar_printf(ar, "%s.%s", ce->name, suffix),
                  .kind = TK_ACT,
                  .dtype = DT_F32,
                  .shape = shape,
                  .loc = ce->loc,
                  .producer = producer};
}

const Graph *gb_fuse_loss(Arena *ar, const Graph *g, int64_t chunk) {
  int lin, ce = fusable_loss(g, &lin);
  if (ce < 0) return NULL;
  const Op *L = &g->ops[lin], *E = &g->ops[ce];
  int drop_logits = E->in[0], drop_lse = E->out[1];
  int *map = ar_alloc(ar, sizeof(int) * (size_t)g->nt), *omap = ar_alloc(ar, sizeof(int) * (size_t)g->nops);
  Tensor *t = ar_alloc(ar, sizeof(Tensor) * (size_t)(g->nt + 3));
  Op *ops = ar_alloc(ar, sizeof(Op) * (size_t)g->nops);
  int nt = 0, nops = 0;
  for (int i = 0; i < g->nops; i++) omap[i] = i == lin ? -1 : nops++;
  for (int i = 0; i < g->nt; i++) {
    map[i] = i == drop_logits || i == drop_lse ? -1 : nt;
    if (map[i] < 0) continue;
    t[nt] = g->t[i];
    if (t[nt].producer >= 0) t[nt].producer = omap[t[nt].producer];
    nt++;
  }
  for (int i = 0; i < g->nops; i++) {
    if (i == lin) continue;
    Op o = g->ops[i];
    for (int k = 0; k < MAX_OP_IN; k++) o.in[k] = o.in[k] >= 0 ? map[o.in[k]] : -1;
    for (int k = 0; k < MAX_OP_OUT; k++) o.out[k] = o.out[k] >= 0 ? map[o.out[k]] : -1;
    if (i == ce) {
      o = (Op){.kind = OP_LINEAR_CROSS_ENTROPY, .name = E->name, .loc = E->loc, .nin = 4, .nout = 4};
      op_attr_defaults(o.kind, o.attr, E->loc);
      for (int a = 0; a < 3; a++) o.attr[a] = L->attr[a]; /* out, bias, weight: linear's order */
      int64_t rows = shape_numel(&g->t[drop_lse].shape);
      int64_t r = chunk > 0 && chunk < rows ? chunk : rows;
      o.attr[3] = (Attr){.i = r, .f = (double)r, .s = ar_printf(ar, "%lld", (long long)r), .loc = E->loc};
      o.in[0] = map[L->in[0]];
      o.in[1] = map[L->in[1]];
      o.in[2] = L->in[2] >= 0 ? map[L->in[2]] : -1;
      o.in[3] = map[E->in[1]];
      o.out[0] = map[E->out[0]];
      const Tensor *x = &g->t[L->in[0]], *w = &g->t[L->in[1]];
      o.out[1] = nt;
      t[nt++] = stat_tensor(ar, E, "dx", x->shape, omap[i]);
      o.out[2] = nt;
      t[nt++] = stat_tensor(ar, E, "dweight", w->shape, omap[i]);
      Shape bs = L->in[2] >= 0 ? g->t[L->in[2]].shape : (Shape){.rank = 1, .d = {1}, .sym = {"1"}};
      o.out[3] = nt;
      t[nt++] = stat_tensor(ar, E, "dbias", bs, omap[i]);
    }
    ops[omap[i]] = o;
  }
  Graph *f = ar_alloc(ar, sizeof(Graph));
  *f = *g;
  f->t = t, f->nt = nt, f->ops = ops, f->nops = nops, f->loss = map[g->loss];
  f->memo = NULL; /* g's steps are not f's; and f's arena may be one whose blocks go on in another (ar_adopt) */
  return f;
}
