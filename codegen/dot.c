/* dot.c: the plan graph (plan.dot, plan.svg), built with cgraph and laid
 * out and rendered with gvc.
 *
 * Nodes are the training step's ops in schedule order; an edge is a buffer
 * one op writes and a later op reads, labelled with the tensor's name, shape,
 * dtype and bytes. Forward ops run down the left, their backward ops up the
 * right beside them (backward edges are laid out reversed, drawn with
 * dir=back, so the rank of a backward op is that of its forward op), and the
 * optimizer updates a backward op enables sit in one node to its right.
 * Tensors saved for backward are bold purple edges; tensors made by recompute
 * ops are dashed. Each repeat block ("h3.*") is a cluster; a collapsed block
 * shows one node per phase and summarized edges, which keeps GPT-2's ~400 ops
 * to a page.
 *
 * Names the tests rely on: op nodes "opN" (N = schedule position), collapsed
 * block nodes "blk:<block>:<phase>", update groups "updN" / "blk:<block>:update",
 * batch inputs "inN" (N = buffer id), clusters "cluster_<block>", "legend". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include "emit.h"
#include "ops.h"

/* Above this many forward, backward and recompute ops, blocks start
 * collapsed: beyond it the expanded picture is a wall of nodes. */
#define DOT_EXPAND_MAX_OPS 40

/* Above this many nodes dot's layout takes minutes (a chain of 2000
 * collapsed blocks: 3 s; 4000: 19 s; 8000: 3 min): the rendering is then a
 * note, and plan.dot still holds the whole graph. */
#define DOT_LAYOUT_MAX_NODES 2500
/* ... or edges: long ones make dot's crossing minimization slow long before
 * the nodes do (sd-unet, flat: 1679 nodes, 3061 edges, its skip connections
 * spanning the network; over 10 minutes). The bundled models with blocks
 * have at most 678 (smollm2-135m). */
#define DOT_LAYOUT_MAX_EDGES 2000

/* Above this many ops in the training step the graph is not built at all:
 * cgraph writes DOT in time nodes x clusters, and grouping the ops here is
 * quadratic in places (a 20000-op step took 44 s and 1.7 GB; 200000 ran out
 * of memory). plan.dot and plan.svg are then a note. */
#define DOT_MAX_OPS 10000

typedef enum { DN_OP, DN_BLOCK, DN_UPDATE, DN_INPUT } DNodeKind;

typedef struct {
  DNodeKind kind;
  Phase phase;
  const char *block; /* the cluster it sits in, NULL for none */
  int first, last;   /* first and last member op (for DN_INPUT: the buffer id) */
  int nops;
  int depth;  /* layout key: forward position of the layer it belongs to */
  int anchor; /* DN_UPDATE: the node whose gradients it consumes, -1 */
  int64_t flops;
  Agnode_t *n;
} DNode;

typedef struct {
  int u, v; /* node ids */
  int buf;
  const char *name; /* the tensor living in buf when it was read */
  bool saved, recomputed;
  int seq; /* order of discovery: the first of duplicates wins */
} DEdge;

typedef struct {
  const Plan *p;
  const DotOptions *o;
  Arena ar;
  VEC(DNode) node;
  VEC(DEdge) edge;
  int *node_of;  /* per training op */
  int *depth_of; /* per training op */
  const char **blocks;
  int nblocks;
  bool deep;
  Agraph_t *g;
} Dot;

static void set(void *obj, const char *k, const char *v) { agsafeset(obj, (char *)k, (char *)v, ""); }

/* ---- object ids in creation order ----
 * cgraph's default id discipline uses the address of the interned name as a
 * named object's id, and writes subgraphs in id order: plan.dot's cluster
 * order (and so dot's layout) then depended on the heap, and `memplan show`
 * drew the same plan differently from `compile`. Here a named object's id is
 * 2 * (its name's index in creation order), anonymous ones take odd ids, as
 * the default does. One table per graph. The names are cgraph reference
 * strings (agstrdup): agwrite reads a header in front of every name it
 * prints to see whether it is HTML, and a plain copy made it read the bytes
 * before the copy, so plan.dot began "digraph <plan>" now and then. */
typedef struct {
  Agdisc_t disc; /* first: the callbacks find the table from it */
  Arena *ar;
  StrMap index; /* name -> its index in creation order */
  VEC(const char *) name;
  IDTYPE anon;
} IdTable;

static void *id_open(Agraph_t *g, Agdisc_t *disc) {
  (void)g;
  return disc; /* the IdTable */
}

static long id_map(void *state, int objtype, char *str, IDTYPE *id, int createflag) {
  (void)objtype;
  IdTable *t = state;
  if (!str) {
    *id = t->anon += 2;
    return 1;
  }
  int i;
  if (!strmap_get(&t->index, str, &i)) {
    if (!createflag) return 0;
    const char *copy = agstrdup(NULL, str);
    *strmap_slot(t->ar, &t->index, copy) = i = t->name.n;
    VEC_PUSH(t->ar, t->name, copy);
  }
  *id = 2 * (IDTYPE)i;
  return 1;
}

static long id_alloc(void *state, int objtype, IDTYPE request) {
  (void)state, (void)objtype, (void)request;
  return 0; /* no ids chosen by the caller */
}

static void id_free(void *state, int objtype, IDTYPE id) { (void)state, (void)objtype, (void)id; }

static char *id_print(void *state, int objtype, IDTYPE id) {
  (void)objtype;
  const IdTable *t = state;
  return id % 2 == 0 && id / 2 < (IDTYPE)t->name.n ? (char *)t->name.v[id / 2] : NULL;
}

static void id_close(void *state) {
  IdTable *t = state;
  for (int i = 0; i < t->name.n; i++) agstrfree(NULL, (char *)t->name.v[i]);
}

static void id_register(void *state, int objtype, void *obj) { (void)state, (void)objtype, (void)obj; }

static Agiddisc_t id_disc = {id_open, id_map, id_alloc, id_free, id_print, id_close, id_register};

static void id_table_init(IdTable *t, Arena *ar) { *t = (IdTable){{&AgMemDisc, &id_disc, &AgIoDisc}, ar, {0}, {0}, 1}; }

static const char *op_kind_name(OpKind k) { return k == OP_ADAMW ? "AdamW" : k == OP_SGD ? "SGD" : op_info(k)->name; }

/* The repeat block of an op: the prefix of its layer name up to the first
 * '.', when it ends in a digit ("h3" of "h3.attn.qkv"); NULL otherwise. An
 * update's layer is a parameter ("fc1.weight"): its layer is the part
 * before the last '.'. */
static const char *block_of(Arena *ar, const PlanOp *o) {
  const char *layer = o->layer, *last = strrchr(layer, '.');
  if (o->phase == PHASE_UPDATE) layer = last ? ar_printf(ar, "%.*s", (int)(last - layer), layer) : "";
  const char *dot = strchr(layer, '.');
  if (!dot || dot == layer || dot[-1] < '0' || dot[-1] > '9') return NULL;
  return ar_printf(ar, "%.*s", (int)(dot - layer), layer);
}

static int block_index(const Dot *d, const char *b) {
  for (int i = 0; b && i < d->nblocks; i++)
    if (!strcmp(d->blocks[i], b)) return i;
  return -1;
}

bool dot_block_exists(const Plan *p, const char *block) {
  Arena ar = {0};
  bool found = false;
  for (int i = 0; i < p->nsched && !found; i++) {
    const char *b = block_of(&ar, &p->sched[i]);
    found = b && !strcmp(b, block);
  }
  ar_free(&ar);
  return found;
}

static bool block_open(const Dot *d, const char *b) {
  return !b || d->o->expand || !d->deep || (d->o->block && !strcmp(d->o->block, b));
}

static int add_node(Dot *d, DNodeKind kind, Phase ph, const char *block, int op, int depth) {
  DNode n = {.kind = kind, .phase = ph, .block = block, .first = op, .last = op, .depth = depth, .anchor = -1};
  VEC_PUSH(&d->ar, d->node, n);
  return d->node.n - 1;
}

static void add_member(Dot *d, int node, int op) {
  DNode *n = &d->node.v[node];
  if (op > n->last) n->last = op;
  if (d->depth_of[op] < n->depth) n->depth = d->depth_of[op];
  n->nops++;
  n->flops += d->p->sched[op].flops;
}

/* Layout depth of each op: 3f for forward op f; its recompute 3f+1 and its
 * backward 3f+2 (same layer and kind), which puts them just below and beside
 * it; updates take their group's. Edges from deeper to shallower nodes are
 * the backward flow, laid out reversed. */
static void fill_depth(Dot *d) {
  const Plan *p = d->p;
  for (int i = 0; i < p->nsched; i++) {
    const PlanOp *o = &p->sched[i];
    d->depth_of[i] = o->phase == PHASE_UPDATE ? 3 * p->nsched + 3 : 3 * i;
    if (o->phase == PHASE_FORWARD || o->phase == PHASE_UPDATE) continue;
    for (int f = 0; f < p->nsched; f++)
      if (p->sched[f].phase == PHASE_FORWARD && p->sched[f].op == o->op && !strcmp(p->sched[f].layer, o->layer)) {
        d->depth_of[i] = 3 * f + (o->phase == PHASE_RECOMPUTE ? 1 : 2);
        break;
      }
  }
}

/* The last op before `op` that wrote buffer b, -1. */
static int writer_before(const Plan *p, int b, int op) {
  for (int i = op - 1; i >= 0; i--)
    for (int k = 0; k < p->sched[i].nout; k++)
      if (p->sched[i].out[k] == b) return i;
  return -1;
}

/* A collapsed block's node for one phase, made on first use. */
static int block_node(Dot *d, const char *block, Phase ph, int op) {
  for (int i = 0; i < d->node.n; i++) {
    const DNode *n = &d->node.v[i];
    if (n->kind == DN_BLOCK && n->phase == ph && !strcmp(n->block, block)) return i;
  }
  return add_node(d, DN_BLOCK, ph, block, op, d->depth_of[op]);
}

/* Updates join one node per backward node that completes their gradient:
 * GPT-2's 148 updates become one small node beside each backward op (or one
 * per collapsed block). */
static int update_node(Dot *d, int op, const char *block) {
  if (!block_open(d, block)) return block_node(d, block, PHASE_UPDATE, op);
  const PlanOp *o = &d->p->sched[op];
  int w = o->nin > 0 && o->in[0] >= 0 ? writer_before(d->p, o->in[0], op) : -1;
  int anchor = w >= 0 ? d->node_of[w] : -1;
  for (int i = 0; anchor >= 0 && i < d->node.n; i++)
    if (d->node.v[i].kind == DN_UPDATE && d->node.v[i].anchor == anchor) return i;
  int n = add_node(d, DN_UPDATE, PHASE_UPDATE, anchor >= 0 ? d->node.v[anchor].block : block, op,
                   anchor >= 0 ? d->node.v[anchor].depth : d->depth_of[op]);
  d->node.v[n].anchor = anchor;
  return n;
}

static void fill_nodes(Dot *d) {
  const Plan *p = d->p;
  for (int i = 0; i < p->nsched; i++) {
    const PlanOp *o = &p->sched[i];
    const char *b = block_of(&d->ar, o);
    int bi = block_index(d, b);
    if (b && bi < 0) {
      d->blocks =
          ar_grow(&d->ar, d->blocks, sizeof(char *) * (size_t)d->nblocks, sizeof(char *) * (size_t)(d->nblocks + 1));
      d->blocks[d->nblocks++] = b;
    } else if (b) {
      b = d->blocks[bi];
    }
    int n;
    if (o->phase == PHASE_UPDATE) n = update_node(d, i, b);
    else if (block_open(d, b)) n = add_node(d, DN_OP, o->phase, b, i, d->depth_of[i]);
    else n = block_node(d, b, o->phase, i);
    d->node_of[i] = n;
    add_member(d, n, i);
  }
  for (int i = 0; i < d->node.n; i++) /* a collapsed block's updates follow its backward */
    if (d->node.v[i].kind == DN_BLOCK && d->node.v[i].phase == PHASE_UPDATE)
      for (int j = 0; j < d->node.n; j++)
        if (d->node.v[j].kind == DN_BLOCK && d->node.v[j].phase == PHASE_BACKWARD &&
            !strcmp(d->node.v[j].block, d->node.v[i].block))
          d->node.v[i].depth = d->node.v[j].depth;
}

/* The tensor in buffer b after its k-th overwrite (in-place ops put new
 * tensors in a buffer; Plan aliases lists them in order). */
static const char *tensor_name(Dot *d, int b, int k) {
  const PlanBuffer *pb = &d->p->buf[b];
  const char *s = pb->aliases;
  for (int i = 1; i < k && *s; i++) {
    const char *sp = strchr(s, ' ');
    s = sp ? sp + 1 : s + strlen(s);
  }
  if (k == 0 || !*s) return pb->name;
  const char *sp = strchr(s, ' ');
  return sp ? ar_printf(&d->ar, "%.*s", (int)(sp - s), s) : s;
}

static int input_node(Dot *d, int b) {
  for (int i = 0; i < d->node.n; i++)
    if (d->node.v[i].kind == DN_INPUT && d->node.v[i].first == b) return i;
  return add_node(d, DN_INPUT, PHASE_FORWARD, NULL, b, -1);
}

static void add_edge(Dot *d, int w, int j, int b, const char *name) {
  const Plan *p = d->p;
  int u = w >= 0 ? d->node_of[w] : input_node(d, b), v = d->node_of[j];
  if (u == v) return;
  Phase pw = w >= 0 ? p->sched[w].phase : PHASE_FORWARD;
  DEdge e = {.u = u,
             .v = v,
             .buf = b,
             .name = name,
             .recomputed = pw == PHASE_RECOMPUTE,
             .saved = w >= 0 && pw == PHASE_FORWARD && p->sched[j].phase == PHASE_BACKWARD,
             .seq = d->edge.n};
  VEC_PUSH(&d->ar, d->edge, e); /* duplicates go after sorting (make_edges) */
}

/* Producer -> consumer for every buffer an op reads (an accumulating output
 * is read too); parameters, running state and optimizer state have no
 * producer in the step and are named in the op's tooltip instead. */
static void fill_edges(Dot *d) {
  const Plan *p = d->p;
  int *lastw = ar_alloc(&d->ar, sizeof(int) * (size_t)(p->nbuf + 1));
  int *writes = ar_alloc(&d->ar, sizeof(int) * (size_t)(p->nbuf + 1));
  const char **cur = ar_alloc(&d->ar, sizeof(char *) * (size_t)(p->nbuf + 1));
  for (int b = 0; b < p->nbuf; b++) {
    lastw[b] = -1;
    cur[b] = p->buf[b].name;
  }
  for (int j = 0; j < p->nsched; j++) {
    const PlanOp *o = &p->sched[j];
    for (int k = 0; k < o->nin; k++) {
      int b = o->in[k];
      if (b >= 0 && (lastw[b] >= 0 || p->buf[b].role == ROLE_INPUT)) add_edge(d, lastw[b], j, b, cur[b]);
    }
    for (int k = 0; k < o->nout; k++) {
      int b = o->out[k];
      if (b < 0) continue;
      if (o->acc[k] && lastw[b] >= 0) add_edge(d, lastw[b], j, b, cur[b]);
      if (!o->acc[k] && o->phase != PHASE_UPDATE) cur[b] = tensor_name(d, b, writes[b]++);
      lastw[b] = j;
    }
  }
}

/* ---- labels ---- */

/* A name inside a Graphviz label: backslashes are escapes there (\\N, \\n). */
static const char *esc(Dot *d, const char *s) {
  if (!strchr(s, '\\')) return s;
  char *r = ar_alloc(&d->ar, 2 * strlen(s) + 1), *q = r;
  for (; *s; s++) {
    if (*s == '\\') *q++ = '\\';
    *q++ = *s;
  }
  return r;
}

static const char *sym_shape(Dot *d, const PlanBuffer *b) {
  return b->shape.rank ? shape_sym_str(&d->ar, &b->shape) : "scalar";
}

static const char *tensor_line(Dot *d, const DEdge *e) {
  const PlanBuffer *b = &d->p->buf[e->buf];
  char s[32];
  return ar_printf(&d->ar, "%s\\n%s %s, %s", esc(d, e->name), sym_shape(d, b), dtype_name(b->dtype),
                   mp_fmt_bytes(s, sizeof s, b->bytes));
}

static const char *tensor_tip(Dot *d, const DEdge *e) {
  const PlanBuffer *b = &d->p->buf[e->buf];
  return ar_printf(&d->ar, "%s: %s = %s %s, %lld bytes, buffer %d live [%d, %d)", e->name, sym_shape(d, b),
                   shape_val_str(&d->ar, &b->shape), dtype_name(b->dtype), (long long)b->bytes, b->id, b->first,
                   b->last);
}

static const char *range(Dot *d, const DNode *n) {
  return n->first == n->last ? ar_printf(&d->ar, "op %d", n->first) : ar_printf(&d->ar, "ops %d-%d", n->first, n->last);
}

static const char *gflops(Dot *d, int64_t f) {
  return f >= 1000000000 ? ar_printf(&d->ar, "%.1f GFLOP", (double)f / 1e9)
                         : ar_printf(&d->ar, "%.1f MFLOP", (double)f / 1e6);
}

/* Parameters an update group updates, relative to its anchor's layer. */
static const char *update_params(Dot *d, int node) {
  const Plan *p = d->p;
  const DNode *n = &d->node.v[node];
  const char *base = n->anchor >= 0 ? p->sched[d->node.v[n->anchor].first].layer : "";
  size_t bl = strlen(base);
  const char *s = "";
  for (int i = n->first; i <= n->last; i++) {
    if (d->node_of[i] != node) continue;
    bool seen = false; /* a data-parallel plan's collectives name the parameters their update names */
    for (int j = n->first; j < i && !seen; j++)
      seen = d->node_of[j] == node && !strcmp(p->sched[j].layer, p->sched[i].layer);
    if (seen) continue;
    const char *l = p->sched[i].layer;
    if (bl && !strncmp(l, base, bl) && l[bl] == '.') l += bl + 1;
    s = *s ? ar_printf(&d->ar, "%s, %s", s, l) : l;
  }
  return s;
}

/* Bytes of the gradients a node's updates read. */
static const char *grad_bytes(Dot *d, int node) {
  char s[32];
  int64_t sum = 0;
  for (int i = d->node.v[node].first; i <= d->node.v[node].last; i++) {
    const PlanOp *o = &d->p->sched[i];
    if (d->node_of[i] != node || o->nin < 1 || o->in[0] < 0 || d->p->buf[o->in[0]].role != ROLE_GRAD) continue;
    bool seen = false; /* a gradient and its collective: counted once */
    for (int j = d->node.v[node].first; j < i && !seen; j++)
      seen = d->node_of[j] == node && d->p->sched[j].nin > 0 && d->p->sched[j].in[0] == o->in[0];
    if (!seen) sum += d->p->buf[o->in[0]].bytes;
  }
  return ar_printf(&d->ar, "%s", mp_fmt_bytes(s, sizeof s, sum));
}

/* The kinds of a node's ops in order, "reduce_scatter + AdamW + all_gather"
 * in a data-parallel plan; the one kind otherwise. */
static const char *node_kinds(Dot *d, int node) {
  const DNode *n = &d->node.v[node];
  const char *s = "";
  bool seen[OP_COUNT] = {0};
  for (int i = n->first; i <= n->last; i++) {
    OpKind k = d->p->sched[i].op;
    if (d->node_of[i] != node || seen[k]) continue;
    seen[k] = true;
    s = *s ? ar_printf(&d->ar, "%s + %s", s, op_kind_name(k)) : op_kind_name(k);
  }
  return *s ? s : op_kind_name(d->p->sched[n->first].op);
}

static const char *node_label(Dot *d, int i) {
  const Plan *p = d->p;
  const DNode *n = &d->node.v[i];
  const PlanOp *o = &p->sched[n->first];
  static const char *const verb[PHASE_COUNT] = {"forward", "backward", "update", "recompute"};
  switch (n->kind) {
  case DN_OP: {
    const char *s =
        ar_printf(&d->ar, "%s\\n%s%s%s, op %d", esc(d, o->layer), op_kind_name(o->op),
                  n->phase == PHASE_FORWARD ? "" : " ", n->phase == PHASE_FORWARD ? "" : verb[n->phase], n->first);
    if (o->scratch >= 0) { /* op-local scratch: live in this op only, so no edge shows it */
      char b[32];
      s = ar_printf(&d->ar, "%s\\nscratch %s", s, mp_fmt_bytes(b, sizeof b, p->buf[o->scratch].bytes));
    }
    return s;
  }
  case DN_BLOCK:
    if (n->phase == PHASE_UPDATE)
      return ar_printf(&d->ar, "%s %s\\n%d %s, %s\\n%s of gradients", esc(d, n->block), node_kinds(d, i), n->nops,
                       p->data_parallel ? "ops" : "parameters", range(d, n), grad_bytes(d, i));
    return ar_printf(&d->ar, "%s %s\\n%d ops, %s\\n%s", esc(d, n->block), verb[n->phase], n->nops, range(d, n),
                     gflops(d, n->flops));
  case DN_UPDATE:
    return ar_printf(&d->ar, "%s %s\\n%s of gradients, %s", node_kinds(d, i), esc(d, update_params(d, i)),
                     grad_bytes(d, i), range(d, n));
  case DN_INPUT: {
    const PlanBuffer *b = &p->buf[n->first];
    return ar_printf(&d->ar, "%s\\nbatch input", esc(d, b->name));
  }
  }
  return "";
}

/* The tooltip of an op node: what it reads and writes, parameters included. */
static const char *op_tip(Dot *d, int op) {
  const Plan *p = d->p;
  const PlanOp *o = &p->sched[op];
  const char *s = ar_printf(&d->ar, "op %d: %s %s %s, %s; reads", op, plan_phase_name(o->phase), op_kind_name(o->op),
                            o->layer, gflops(d, o->flops));
  for (int k = 0; k < o->nin; k++)
    if (o->in[k] >= 0) s = ar_printf(&d->ar, "%s %s", s, p->buf[o->in[k]].name);
  /* running state (batchnorm's statistics): no edge, it has no producer in
   * the step; a training forward updates it, a recompute only reads it */
  for (int k = 0; k < o->nin; k++)
    if (o->in[k] >= 0 && p->buf[o->in[k]].role == ROLE_STATE)
      s = ar_printf(&d->ar, "%s; %s state %s", s, o->phase == PHASE_FORWARD ? "updates" : "reads",
                    p->buf[o->in[k]].name);
  s = ar_printf(&d->ar, "%s; writes", s);
  for (int k = 0; k < o->nout; k++)
    if (o->out[k] >= 0) s = ar_printf(&d->ar, "%s %s%s", s, o->acc[k] ? "+=" : "", p->buf[o->out[k]].name);
  if (o->scratch >= 0) s = ar_printf(&d->ar, "%s; scratch %s", s, p->buf[o->scratch].name);
  return s;
}

/* ---- the graph ---- */

static const char *node_id(Dot *d, int i) {
  const DNode *n = &d->node.v[i];
  switch (n->kind) {
  case DN_OP: return ar_printf(&d->ar, "op%d", n->first);
  case DN_BLOCK: return ar_printf(&d->ar, "blk:%s:%s", n->block, plan_phase_name(n->phase));
  case DN_UPDATE: return ar_printf(&d->ar, "upd%d", n->first);
  case DN_INPUT: return ar_printf(&d->ar, "in%d", n->first);
  }
  return "";
}

static void style_node(Dot *d, int i) {
  static const char *const fill[PHASE_COUNT] = {"#dbe7f5", "#f8d9d6", "#fde3c3", "#dff0d8"};
  static const char *const line[PHASE_COUNT] = {"#4e79a7", "#c0392b", "#d9730d", "#3f8f3a"};
  static const char *const style[PHASE_COUNT] = {"rounded,filled", "filled", "filled", "rounded,filled,dashed"};
  const DNode *n = &d->node.v[i];
  Agnode_t *an = n->n;
  set(an, "label", node_label(d, i));
  if (n->kind == DN_INPUT) {
    set(an, "shape", "cylinder"), set(an, "style", "filled"), set(an, "fillcolor", "#eeeeee");
    set(an, "tooltip", ar_printf(&d->ar, "batch input %s, filled by the trainer each step", d->p->buf[n->first].name));
    return;
  }
  set(an, "shape", n->kind == DN_BLOCK ? "box3d" : n->phase == PHASE_UPDATE ? "cds" : "box");
  set(an, "style", n->kind == DN_BLOCK && n->phase != PHASE_RECOMPUTE ? "filled" : style[n->phase]);
  set(an, "fillcolor", fill[n->phase]);
  set(an, "color", line[n->phase]);
  set(an, "tooltip", n->kind == DN_OP ? op_tip(d, n->first) : node_label(d, i));
  if (n->phase == PHASE_UPDATE) set(an, "fontsize", "9");
  /* a group per phase keeps each chain (the residual stream forward, its
   * gradient backward) straight instead of a staircase of blocks */
  set(an, "group", plan_phase_name(n->phase));
  if (d->p->peak_position >= n->first && d->p->peak_position <= n->last &&
      d->node_of[d->p->peak_position] == i) { /* where the step needs the most memory */
    char s[32];
    set(an, "penwidth", "3");
    set(an, "label",
        ar_printf(&d->ar, "%s\\nmemory peak: %s", node_label(d, i),
                  mp_fmt_bytes(s, sizeof s, d->p->lower_bound_bytes)));
  }
}

static Agraph_t *cluster(Dot *d, const char *block) {
  char *name = ar_printf(&d->ar, "cluster_%s", block);
  Agraph_t *c = agsubg(d->g, name, 0);
  if (c) return c;
  c = agsubg(d->g, name, 1);
  bool open = block_open(d, block);
  set(c, "label", open ? esc(d, block) : ar_printf(&d->ar, "%s (collapsed)", esc(d, block)));
  set(c, "style", "rounded,filled");
  set(c, "fillcolor", open ? "#f6f6f6" : "#efefef");
  set(c, "color", "#b0b0b0");
  set(c, "fontname", "Helvetica-Bold");
  return c;
}

static void make_nodes(Dot *d) {
  for (int i = 0; i < d->node.n; i++) {
    DNode *n = &d->node.v[i];
    Agraph_t *sg = n->block ? cluster(d, n->block) : d->g;
    n->n = agnode(sg, (char *)node_id(d, i), 1);
    style_node(d, i);
  }
}

static int edge_cmp(const void *a, const void *b) {
  const DEdge *x = a, *y = b;
  return x->u != y->u ? x->u - y->u : x->v != y->v ? x->v - y->v : x->buf != y->buf ? x->buf - y->buf : x->seq - y->seq;
}

static bool same_block(const DNode *u, const DNode *v) {
  return u->block == v->block || (u->block && v->block && !strcmp(u->block, v->block));
}

/* Up to three tensors of one shape and dtype (a norm's mean and rstd) share
 * a line; other pairs get a line each; more become a count. */
static const char *edge_label(Dot *d, const DEdge *e, int n, int64_t bytes) {
  char s[32];
  if (n == 1) return tensor_line(d, &e[0]);
  const PlanBuffer *b0 = &d->p->buf[e[0].buf];
  const char *shape = sym_shape(d, b0), *names = esc(d, e[0].name);
  bool same = n <= 3;
  for (int i = 1; i < n && same; i++) {
    const PlanBuffer *b = &d->p->buf[e[i].buf];
    same = b->dtype == b0->dtype && b->bytes == b0->bytes && !strcmp(sym_shape(d, b), shape);
    names = ar_printf(&d->ar, "%s, %s", names, esc(d, e[i].name));
  }
  if (same)
    return ar_printf(&d->ar, "%s\\n%s %s, %d x %s", names, shape, dtype_name(b0->dtype), n,
                     mp_fmt_bytes(s, sizeof s, b0->bytes));
  if (n == 2) return ar_printf(&d->ar, "%s\\n%s", tensor_line(d, &e[0]), tensor_line(d, &e[1]));
  return ar_printf(&d->ar, "%d tensors, %s", n, mp_fmt_bytes(s, sizeof s, bytes));
}

/* One drawn edge per pair of nodes: its tensors (all of them in the
 * tooltip; up to two in the label, else a count and total bytes). */
static void draw_edge(Dot *d, const DEdge *e, int n) {
  int64_t bytes = 0;
  bool saved = false, recomputed = true;
  const char *tip = "";
  for (int i = 0; i < n; i++) {
    bytes += d->p->buf[e[i].buf].bytes;
    saved = saved || e[i].saved;
    recomputed = recomputed && e[i].recomputed;
    tip = ar_printf(&d->ar, "%s%s%s", tip, i ? "; " : "", tensor_tip(d, &e[i]));
  }
  const char *label = edge_label(d, e, n, bytes);
  if (saved) label = ar_printf(&d->ar, "saved: %s", label);
  const DNode *u = &d->node.v[e->u], *v = &d->node.v[e->v];
  bool back = u->depth > v->depth; /* backward data flow: lay it out downwards, draw the arrow up */
  Agedge_t *ae = agedge(d->g, back ? v->n : u->n, back ? u->n : v->n, NULL, 1);
  if (back) set(ae, "dir", "back");
  if (v->phase == PHASE_UPDATE && u->depth == v->depth) {
    /* beside its backward op; unlabelled, since Graphviz 2.43's dot corrupts
     * memory on labelled flat edges in clusters (the update node names the
     * parameters, the tooltip the gradients) */
    set(ae, "minlen", "0");
  } else {
    set(ae, "label", label);
  }
  if (!same_block(u, v)) /* the next block starts below this one's backward ops, not beside them */
    set(ae, "minlen", "2");
  set(ae, "tooltip", tip);
  set(ae, "labeltooltip", tip);
  if (saved) {
    set(ae, "color", "#8e44ad");
    set(ae, "fontcolor", "#6c3483");
    set(ae, "penwidth", "2.2");
  } else if (v->phase == PHASE_UPDATE) {
    set(ae, "color", "#d9730d");
    set(ae, "fontcolor", "#a0520a");
  }
  if (recomputed) {
    set(ae, "style", "dashed");
    set(ae, "color", "#3f8f3a");
  }
}

static void make_edges(Dot *d) {
  qsort(d->edge.v, (size_t)d->edge.n, sizeof(DEdge), edge_cmp);
  int n = 0; /* one edge per (u, v, buffer): the first found */
  for (int i = 0; i < d->edge.n; i++) {
    const DEdge *e = &d->edge.v[i], *last = n ? &d->edge.v[n - 1] : NULL;
    if (!last || e->u != last->u || e->v != last->v || e->buf != last->buf) d->edge.v[n++] = *e;
  }
  d->edge.n = n;
  for (int i = 0, j; i < d->edge.n; i = j) {
    for (j = i; j < d->edge.n && d->edge.v[j].u == d->edge.v[i].u && d->edge.v[j].v == d->edge.v[i].v; j++) {
    }
    draw_edge(d, &d->edge.v[i], j - i);
  }
}

/* The legend: one node with an HTML table; shapes and colors as drawn. */
static void legend(Dot *d) {
  Agnode_t *n = agnode(d->g, "legend", 1);
  const char *html =
      "<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\">"
      "<TR><TD COLSPAN=\"2\"><B>legend</B></TD></TR>"
      "<TR><TD BGCOLOR=\"#dbe7f5\" STYLE=\"rounded\">forward op</TD><TD ALIGN=\"LEFT\">rounded box, runs down</TD></TR>"
      "<TR><TD BGCOLOR=\"#f8d9d6\">backward op</TD><TD ALIGN=\"LEFT\">square box, runs up</TD></TR>"
      "<TR><TD BGCOLOR=\"#dff0d8\" STYLE=\"rounded,dashed\">recompute op</TD><TD ALIGN=\"LEFT\">dashed: replayed "
      "forward</TD></TR>"
      "<TR><TD BGCOLOR=\"#fde3c3\">optimizer update</TD><TD ALIGN=\"LEFT\">arrow box beside its backward op</TD></TR>"
      "<TR><TD BGCOLOR=\"#efefef\">collapsed block</TD><TD ALIGN=\"LEFT\">3-d box: all ops of one phase</TD></TR>"
      "<TR><TD><FONT COLOR=\"#555555\">&#8212;&#8212;&#9654;</FONT></TD><TD ALIGN=\"LEFT\">tensor: name, shape, "
      "dtype, bytes</TD></TR>"
      "<TR><TD><FONT COLOR=\"#8e44ad\"><B>&#9473;&#9473;&#9654;</B></FONT></TD><TD ALIGN=\"LEFT\">saved for "
      "backward</TD></TR>"
      "<TR><TD><FONT COLOR=\"#3f8f3a\">- - &#9654;</FONT></TD><TD ALIGN=\"LEFT\">recomputed tensor</TD></TR>"
      "<TR><TD><FONT COLOR=\"#d9730d\">&#8212;&#8212;&#9654;</FONT></TD><TD ALIGN=\"LEFT\">gradient to its "
      "update</TD></TR>"
      "</TABLE>";
  char *h = agstrdup_html(d->g, (char *)html);
  agsafeset(n, "label", h, "");
  agstrfree(d->g, h);
  set(n, "shape", "plain");
  set(n, "fontsize", "10");
}

static void title(Dot *d) {
  const Plan *p = d->p;
  int count[PHASE_COUNT] = {0};
  for (int i = 0; i < p->nsched; i++) count[p->sched[i].phase]++;
  char a[32], l[32];
  const char *t = ar_printf(&d->ar,
                            "%s: training step, %d ops (%d forward, %d backward, %d updates%s)\\n"
                            "arena %s, lower bound %s",
                            p->model, p->nsched, count[PHASE_FORWARD], count[PHASE_BACKWARD], count[PHASE_UPDATE],
                            count[PHASE_RECOMPUTE] ? ar_printf(&d->ar, ", %d recompute", count[PHASE_RECOMPUTE]) : "",
                            mp_fmt_bytes(a, sizeof a, p->arena_bytes), mp_fmt_bytes(l, sizeof l, p->lower_bound_bytes));
  bool any_closed = false;
  for (int i = 0; i < d->nblocks; i++) any_closed = any_closed || !block_open(d, d->blocks[i]);
  if (any_closed) t = ar_printf(&d->ar, "%s; blocks collapsed (--expand or --block NAME opens them)", t);
  if (p->data_parallel) { /* data parallelism: the collectives are among the updates, shards among the buffers */
    static const char *const z[] = {"gradients all-reduced", "ZeRO-1, optimizer state in 1/N shards",
                                    "ZeRO-2, optimizer state and gradients in 1/N shards"};
    char c[32];
    t = ar_printf(&d->ar, "%s\\nper rank of %d (%s): collectives in %d buckets, %s communicated per step", t, p->ranks,
                  z[p->zero], p->nbuckets, mp_fmt_bytes(c, sizeof c, p->comm_bytes));
  }
  set(d->g, "label", t);
}

static void graph_attrs(Dot *d) {
  set(d->g, "rankdir", "TB");
  set(d->g, "newrank", "true");
  set(d->g, "nodesep", "0.25");
  set(d->g, "ranksep", "0.3");
  set(d->g, "labelloc", "t");
  set(d->g, "forcelabels", "true");
  set(d->g, "fontname", "Helvetica");
  set(d->g, "fontsize", "16");
  agattr(d->g, AGNODE, "fontname", "Helvetica");
  agattr(d->g, AGNODE, "fontsize", "10");
  agattr(d->g, AGNODE, "margin", "0.08,0.03");
  agattr(d->g, AGEDGE, "fontname", "Helvetica");
  agattr(d->g, AGEDGE, "fontsize", "8");
  agattr(d->g, AGEDGE, "color", "#666666");
  agattr(d->g, AGEDGE, "fontcolor", "#444444");
  agattr(d->g, AGEDGE, "arrowsize", "0.6");
}

static void render(GVC_t *gvc, Agraph_t *g, const char *format, Text *out) {
  char *data = NULL;
  unsigned int len = 0;
  if (gvRenderData(gvc, g, format, &data, &len) == 0 && data) text_append(out, data, len);
  MP_ASSERT(out->n > 0); /* the plugins ship with libgvc; their absence is an installation bug */
  gvFreeRenderData(data);
}

/* The graph as DOT, before layout: what a person edits or feeds to other
 * Graphviz tools. agwrite needs a FILE; a memory stream keeps it off disk. */
static void write_dot(Agraph_t *g, Text *out) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  MP_ASSERT(f);
  MP_ASSERT(agwrite(g, f) == 0);
  MP_ASSERT(fclose(f) == 0);
  text_printf(out, "%.*s", (int)len, buf);
  free(buf);
}

/* A one-node graph holding a message: what plan.dot and plan.svg say when
 * the plan graph is too big. Written as DOT and/or rendered (either NULL). */
static void note_graph(GVC_t *gvc, const char *message, const char *format, Text *dot_out, Text *render_out) {
  Agraph_t *g = agopen("plan", Agdirected, NULL);
  Agnode_t *n = agnode(g, "note", 1);
  set(n, "shape", "box");
  set(n, "fontname", "Helvetica");
  set(n, "label", message);
  if (dot_out) write_dot(g, dot_out);
  if (render_out) {
    MP_ASSERT(gvLayout(gvc, g, "dot") == 0);
    render(gvc, g, format, render_out);
    gvFreeLayout(gvc, g);
  }
  agclose(g);
}

void dot_plan(const Plan *p, const DotOptions *o, Text *dot_out, Text *render_out) {
  static const DotOptions none = {0};
  Dot d = {.p = p, .o = o ? o : &none};
  const char *format = d.o->format ? d.o->format : "svg";
  if (p->nsched > DOT_MAX_OPS) {
    GVC_t *gvc = gvContext();
    note_graph(gvc,
               ar_printf(&d.ar,
                         "%s: the training step has %d ops, more than the %d\\n"
                         "memplan draws as a graph; timeline.svg shows where memory goes.",
                         p->model, p->nsched, DOT_MAX_OPS),
               format, dot_out, render_out);
    gvFreeContext(gvc);
    ar_free(&d.ar);
    return;
  }
  int fwd = 0;
  for (int i = 0; i < p->nsched; i++) fwd += p->sched[i].phase != PHASE_UPDATE;
  d.deep = fwd > DOT_EXPAND_MAX_OPS;
  d.node_of = ar_alloc(&d.ar, sizeof(int) * (size_t)(p->nsched + 1));
  d.depth_of = ar_alloc(&d.ar, sizeof(int) * (size_t)(p->nsched + 1));
  fill_depth(&d);
  fill_nodes(&d);
  fill_edges(&d);
  agseterr(AGERR); /* Graphviz warnings are layout chatter, not the user's business */
  IdTable ids;
  id_table_init(&ids, &d.ar);
  d.g = agopen("plan", Agdirected, &ids.disc);
  graph_attrs(&d);
  title(&d);
  legend(&d);
  make_nodes(&d);
  make_edges(&d);
  GVC_t *gvc = gvContext();
  if (dot_out) write_dot(d.g, dot_out);
  if (render_out && (d.node.n > DOT_LAYOUT_MAX_NODES || d.edge.n > DOT_LAYOUT_MAX_EDGES)) {
    note_graph(gvc,
               ar_printf(&d.ar,
                         "%s: the plan graph has %d nodes and %d edges, more than the %d nodes\\n"
                         "or %d edges that memplan lays out (Graphviz's dot needs minutes beyond that).\\n"
                         "plan.dot holds the whole graph; timeline.svg shows where memory goes.",
                         p->model, d.node.n, d.edge.n, DOT_LAYOUT_MAX_NODES, DOT_LAYOUT_MAX_EDGES),
               format, NULL, render_out);
  } else if (render_out) {
    MP_ASSERT(gvLayout(gvc, d.g, "dot") == 0);
    render(gvc, d.g, format, render_out);
    gvFreeLayout(gvc, d.g);
  }
  agclose(d.g);
  gvFreeContext(gvc);
  ar_free(&d.ar);
}

/* LeakSanitizer (the sanitizer build): Graphviz 2.43 never frees its plugin
 * config (gvconfig), parts of parsed HTML labels, its text-size cache, or
 * some virtual edges dot's cluster ordering makes; dot_mincross drops a
 * subgraph it made with agsubg for some graphs (GPT-2 124M at --budget 3G);
 * fontconfig and pango keep their font tables for the life of the process.
 * None of it belongs to memplan or grows with it: the graph, layout, context
 * and rendered text memplan asks for are all freed in dot_plan. The
 * suppressions name libraries, so they need whole stacks: Graphviz is built
 * without frame pointers and the fast unwinder stops at its allocator
 * (agalloc), hence fast_unwind_on_malloc=0 below. Then a leak of memplan's
 * own graph (no Graphviz layout frames in its stack) is still reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:libgvc.so\nleak:libgvplugin_dot_layout.so\nleak:libgvplugin_core.so\nleak:libgvplugin_pango.so\n"
         "leak:libfontconfig.so\nleak:libpango\nleak:libglib\nleak:libgobject\nleak:libcairo\n";
}
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }
