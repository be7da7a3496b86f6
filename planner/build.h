/* build.h: building a Graph from layers, independent of where they come
 * from. The loader (load.c) parses a layer's inputs and attributes and calls
 * gb_layer; the op's shape rule (rules.c) runs through the BuildCtx API below
 * to check its inputs and add its parameters and outputs. The builder owns
 * the tensor and op tables, the size limits, parameter sharing and the
 * init schemes; it knows nothing of YAML. */
#ifndef MEMPLAN_BUILD_H
#define MEMPLAN_BUILD_H

#include "graph.h"

typedef struct GraphBuilder GraphBuilder;
typedef struct BuildCtx BuildCtx;
/* An op's shape rule (rules.h): checks the inputs, creates parameters and outputs. */
typedef void (*ShapeRule)(BuildCtx *c);

/* rules[k]: op k's shape rule (rules.h's shape_rules; the builder is below
 * the rules and calls them through this table only). */
GraphBuilder *gb_new(Arena *ar, const ShapeRule *rules);
/* Adds a tensor (a graph input); checks the size limits. Returns its id. */
int gb_tensor(GraphBuilder *gb, Tensor t);
const Tensor *gb_get(const GraphBuilder *gb, int t);
int gb_ntensors(const GraphBuilder *gb); /* tensors so far: the next one's id */
/* Runs the shape rule of op k for one layer: `in` are the tensor ids of its
 * inputs, `attr` its attributes in the op's declaration order. Errors name
 * the layer (or the attribute) at its location. Returns the output tensor. */
int gb_layer(GraphBuilder *gb, OpKind k, const char *name, Loc loc, const int *in, int nin, const Attr *attr);
/* LoRA: low-rank adapters on the linear layers whose names match a target
 * (a glob over the layer's full name, "h*.attn.qkv", or over a tail of it
 * after a '.', as PEFT's target_modules: "gate", "attn.proj"). Each matched linear L (x -> y, weight [out, in])
 * gets parameters L.lora_A [rank, in] (PEFT's Kaiming-uniform, a = sqrt 5:
 * U(+-1/sqrt(in))) and L.lora_B [out, rank] (zeros), both adapters, and
 * ordinary ops: y + scale(linear(linear(dropout(x), A), B), alpha / rank).
 * A packed linear's row blocks (build_parts: causal_self_attention's
 * "h0.attn.q", ".k", ".v" of "h0.attn.qkv") are targets of their own: each
 * gets its adapter P.lora_A [rank, in], P.lora_B [rows, rank] (PEFT's on
 * separate q_proj, k_proj, v_proj), the branches concatenated before the
 * scale; all blocks or none, and not with the whole linear's adapter. */
typedef struct {
  int64_t rank;
  double alpha, dropout;
  const char *const *targets;
  int ntargets;
  bool *matched;   /* per target: set when it matched a linear */
  const Loc *tloc; /* per target: where it was given */
  Loc rank_loc;    /* for "rank larger than a layer's dims" */
} LoraSpec;
/* Adapters for the linears built from now on (l outlives the builder). */
void gb_set_lora(GraphBuilder *gb, LoraSpec *l);

/* The finished graph: finds the loss (an error at `layers` when there is
 * none or two), applies the init scheme and checks the step's FLOPs. */
Graph *gb_finish(GraphBuilder *gb, const char *model, const char *path, Dim *dims, int ndims, Optimizer opt,
                 bool gpt2_init, Loc layers);

/* The graph g with its classifier and loss fused: where the loss is a
 * cross_entropy of a linear's output that nothing else reads, a copy of g
 * in which one linear_cross_entropy op (ops.c), named after the loss layer,
 * replaces the two, `chunk` rows at a time (0 or more than the rows: all),
 * and the logits and the loss's lse are gone. NULL when g has no such pair.
 * g itself is not changed (the budget pass plans either graph). */
const Graph *gb_fuse_loss(Arena *ar, const Graph *g, int64_t chunk);

/* ---- the shape rules' side (rules.c) ---- */

const Tensor *build_input(BuildCtx *c, int k); /* the layer's k-th input */
int build_input_id(BuildCtx *c, int k);        /* its tensor id */
int build_ninputs(BuildCtx *c);
const Attr *build_attr(BuildCtx *c, const char *key); /* must be declared by the op */
/* Creates parameter "<op>.<suffix>" in forward input slot `slot`; when the
 * attribute share_key (ATTR_PARAM) was given, shares that parameter instead,
 * whose shape must equal `shape`. */
void build_param(BuildCtx *c, int slot, const char *suffix, const char *share_key, Shape shape, Init init);
/* Creates state buffer "<op>.<suffix>" (TK_STATE: persistent, never given a
 * gradient or optimizer state, saved and loaded with the parameters) in
 * forward input slot `slot`. Only kernels of ops with mode_arg write it, in
 * RT_MODE_TRAIN (batchnorm's running statistics). */
void build_state(BuildCtx *c, int slot, const char *suffix, Shape shape, Init init);
void build_data(BuildCtx *c, int slot, int k); /* input k to forward slot `slot` */
void build_output(BuildCtx *c, int slot, const char *suffix, Shape shape, DType dt);
/* The next linear this composite builds is n projections side by side:
 * rows[i] output rows each, named "<layer>.<names[i]>" for LoRA's targets. */
#define MAX_LIN_PARTS 3
void build_parts(BuildCtx *c, int n, const char *const *names, const int64_t *rows);
/* Composite ops: adds op k named "<layer>.<suffix>" reading tensors `in`
 * with attributes `attr` (declaration order of k); returns its output. */
int build_sub(BuildCtx *c, OpKind k, const char *suffix, const int *in, int nin, const Attr *attr);
/* An error at the attribute `key` (or the layer, for NULL), naming the layer. */
_Noreturn void build_error(BuildCtx *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A shape; a NULL symbol (or NULL sym) is the value written as a number. */
Shape build_shape(BuildCtx *c, int rank, const int64_t *d, const char *const *sym);
/* Scratch for the shape strings of an error message. */
Arena *build_scratch(BuildCtx *c);

#endif
