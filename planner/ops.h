/* ops.h: the op table. One entry per op: YAML keys, shape rule and the
 * parameters it creates (build), FLOPs, the kernel's slot layout for forward
 * and backward, which forward tensors backward needs, and which outputs may be
 * computed in place. Adding an op = one entry here + kernels + a gradcheck.
 *
 * Slot layouts (the order of PlanOp.in/out, and of the kernel arguments in
 * runtime/memplan_rt.h):
 *   op             forward in       forward out         backward in                backward out     dims
 *   linear         x W b            out                 dout x W                   dx dW db         M K N
 *   matmul         a b              out                 dout a b                   da db            Bt M K N
 *   add            a b              out                 dout                       da db            n
 *   relu           x                out                 dout out                   dx               n
 *   gelu           x                out                 dout x                     dx               n
 *   layernorm      x w b            out mean rstd       dout x w mean rstd         dx dw db         N C
 *   softmax        x                out                 dout out                   dx               N C
 *   attention      qkv              out lse             dout qkv out lse           dqkv             B T C NH
 *   embedding      tokens W         out                 dout tokens                dW               N C V
 *   pos_embedding  W                out                 dout                       dW               B T C Wrows
 *   cross_entropy  logits targets   loss lse            logits targets lse         dlogits          N V
 *   mse            pred target      loss                pred target                dpred            n
 *   adamw          g                p m v               (update)                                    n
 *   sgd            g                p buf               (update)                                    n
 * Loss backward kernels take no dout: the seed is a scale argument. */
#ifndef MEMPLAN_OPS_H
#define MEMPLAN_OPS_H

#include "graph.h"

/* References from a backward slot to forward tensors. */
enum { REF_NONE = 0, REF_DOUT = 1 };
#define REF_IN(k) (0x10 + (k))  /* forward input slot k */
#define REF_OUT(k) (0x20 + (k)) /* forward output slot k */
#define REF_GIN(k) (0x30 + (k)) /* gradient of forward input slot k */
#define REF_KIND(r) ((r)&0xf0)
#define REF_SLOT(r) ((r)&0x0f)

/* The loader's side of building one layer; implemented in load.c. */
typedef struct BuildCtx BuildCtx;
int64_t build_int(BuildCtx *c, const char *key, bool required, int64_t dflt);
bool build_bool(BuildCtx *c, const char *key, bool dflt);
const Tensor *build_input(BuildCtx *c, int slot); /* the layer's k-th YAML input */
int build_ninputs(BuildCtx *c);
/* Creates (or, with a `key:` naming an existing parameter, shares) a parameter
 * "<layer>.<suffix>" and puts it in forward input slot `slot`. */
void build_param(BuildCtx *c, int slot, const char *suffix, const char *share_key, Shape shape, Init init);
void build_data(BuildCtx *c, int slot, int yaml_input); /* YAML input k to slot */
void build_output(BuildCtx *c, int slot, const char *suffix, Shape shape, DType dt);
void build_attr(BuildCtx *c, int k, int64_t v);
_Noreturn void build_error(BuildCtx *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Shape build_shape(BuildCtx *c, int rank, const int64_t *d, const char *const *sym);

typedef struct {
  const char *name;           /* YAML op name; NULL for ops not written in YAML */
  const char *const *keys;    /* op-specific YAML keys, NULL-terminated */
  int min_inputs, max_inputs; /* YAML inputs (default: the previous layer) */
  int nin, nout;              /* forward slots */
  int nstats;                 /* trailing forward outputs only backward reads (NULL in eval) */
  void (*build)(BuildCtx *c);
  void (*dims)(const Graph *g, const Op *op, int64_t *dim, int *ndim);
  int64_t (*flops)(const Graph *g, const Op *op, bool backward);
  int nbin, nbout;         /* backward slots */
  int bin[6], bout[4];     /* REF_* per backward slot */
  bool grad_to[MAX_OP_IN]; /* forward input slots that can receive a gradient */
  int inplace_fwd[2];      /* forward in slots out[0] may overwrite, -1 = none */
  int inplace_bwd[2][2];   /* {bout slot, bin slot} pairs alias-safe when acc = 0, -1 = none */
  bool is_loss;
} OpInfo;

const OpInfo *op_info(OpKind k);
/* The op whose YAML name is s, or -1. */
int op_lookup(const char *s);
/* The closest YAML op name to s, for "did you mean". */
const char *op_suggest(const char *s);

#endif
