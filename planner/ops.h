/* ops.h: the op table. Each op is one entry (ops.c, designated
 * initializers) that says everything the compiler knows about it: its YAML
 * name and attributes (types, defaults), its kernels' size arguments and
 * FLOPs, its cost class
 * and workspace, which forward tensors its backward reads, whether the
 * selective checkpointing option recomputes it, which backward inputs may be
 * stored in bf16/fp16, which outputs may overwrite an input, and what the
 * trainer feeds a graph input it reads. The passes read these fields and
 * never switch on the op kind for policy. Its shape rule, which creates its
 * parameters and outputs, is above the builder: rules.h. README "Adding an
 * op" is the recipe.
 *
 * Kernels: rt_<name>_forward(outs..., ins..., dims..., floats...) and
 * rt_<name>_backward(outs..., ins..., dims..., floats..., [scale for losses],
 * acc per out), declared once in runtime/memplan_kernels.h. "floats" are the
 * op's float attributes, in declaration order. An op with .scratch takes its
 * scratch pointer between its inputs and its dims, forward and backward.
 *
 * Slot layouts (the order of PlanOp.in/out, and of the kernel arguments):
 *   op             forward in       forward out         backward in                backward out     dims
 *   linear         x W b            out                 dout x W                   dx dW db         M K N
 *   matmul         a b              out                 dout a b                   da db            Bt M K N
 *   add            a b              out                 dout                       da db            n
 *   mul            a b              out                 dout a b                   da db            n
 *   scale_channels x s              out                 dout x s                   dx ds            NC S
 *   layer_scale    x w              out                 dout x w                   dx dw            N C S
 *   relu           x                out                 dout out                   dx               n
 *   relu6          x                out                 dout out                   dx               n
 *   sigmoid        x                out                 dout out                   dx               n
 *   hardswish      x                out                 dout x                     dx               n
 *   hardsigmoid    x                out                 dout x                     dx               n
 *   gelu           x                out                 dout x                     dx               n approximate
 *   silu           x                out                 dout x                     dx               n
 *   layernorm      x w b            out mean rstd       dout x w mean rstd         dx dw db         N C (eps)
 *   rmsnorm        x w              out rstd            dout x w rstd              dx dw            N C (eps)
 *   softmax        x                out                 dout out                   dx               N C
 *   attention      qkv              out lse             dout qkv out lse           dqkv             B T C NH KVH causal
 *   cross_attention q kv            out lse             dout q kv out lse          dq dkv           B Tq Tk C NH
 *   embedding      tokens W         out                 dout tokens                dW               N C V
 *   pos_embedding  W                out                 dout                       dW               B T C Wrows
 *   rope           qkv              out                 dout                       dqkv             B T H KV hd (theta)
 *   window_attention qkv table      out lse             dout qkv table out lse     dqkv dtable      B H W C NH ws shift
 *   cross_entropy  logits targets   loss lse            logits targets lse         dlogits          N V
 *   mse            pred target      loss                pred target                dpred            n
 *   linear_cross_entropy x W b targets  loss dx dW db  dx dW db (stats)        dx dW db         N V K R
 *   conv2d         x W b            out                 dout x W                   dx dW db         (below)
 *   batchnorm2d    x w b rm rv      out mean rstd       dout x w mean rstd         dx dw db         N C S (eps mom)
 *   flatten        x                out                 dout                       dx               n
 *   reshape        x                out                 dout                       dx               n
 *   transpose      x                out                 dout                       dx               A P M Q Z
 *   concat         a0 .. a5         out                 dout                       da0 .. da5       O I n0 .. n5
 *   class_token    x W              out                 dout                       dx dW            B N C
 *   select         x                out                 dout                       dx               O N I index
 *   pad            x                out                 dout                       dx               O N I Nout
 *   maxpool2d      x                out                 dout x                     dx               N C H W Ho Wo k s p
 *   avgpool2d      x                out                 dout                       dx               N C H W Ho Wo k s p
 *   adaptive_avgpool2d x            out                 dout                       dx               N C H W Ho Wo
 *   global_avgpool x                out                 dout                       dx               NC HW
 *   dropout        x                out mask            dout mask                  dx               n (p) [mode key]
 *   stoch._depth   x                out                 dout                       dx               N S batch (p) [..]
 *   (stoch._depth: stochastic_depth; [..]: [mode key] as dropout)
 *   scale          x                out                 dout                       dx               n (factor)
 *   groupnorm      x w b            out mean rstd       dout x w mean rstd         dx dw db         N C S G (eps)
 *   add_channels   x e              out                 dout                       dx de            NC S
 *   upsample       x                out                 dout                       dx               NC H W scale
 *   timestep_emb.  t                out                 dout t                     dt (unused)      B D flip (2 floats)
 *   convtransp2d   x W b            out                 dout x W                   dx dW db         (below)
 *   ddpm_noise     x0               xt eps t            dout t                     dx0              B S T (b0 b1) [..]
 *   adamw          g                p m v               (update)                                    n
 *   sgd            g                p buf               (update)                                    n
 * Loss backward kernels take no dout: the seed is a scale argument. conv2d's
 * dims: N C H W O Ho Wo kh kw sh sw ph pw dilation groups (kernel, stride and
 * padding, height then width); conv_transpose2d's (convtransp2d):
 * N C H W O Ho Wo k stride padding.
 * batchnorm2d's rm and rv (running mean and variance) are state
 * (build_state): its training forward updates them through those input
 * slots; S = H W (1 for [N, C]); floats eps, momentum. */
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

#define SLOT(k) (1u << (k)) /* a set of slots, as a bit mask */
#define MAX_BIN 8           /* backward input slots */
#define MAX_BOUT MAX_OP_IN  /* backward output slots: one gradient per forward input at most */

typedef enum {
  ATTR_INT,   /* a dim expression ("4*C"), positive */
  ATTR_FLOAT, /* a number; passed to the kernels after the dims */
  ATTR_BOOL,
  ATTR_PARAM, /* another layer's parameter to share ("LAYER.weight") */
  ATTR_ENUM,  /* one word of choices; Attr.i is its index there */
  ATTR_INDEX, /* an axis or an index: an integer expression of any sign ("-1"); the
               * shape rule checks its range (negative counts from the end, as torch) */
  ATTR_DIMS,  /* a list of dim expressions ("[B, N*C, -1]"), each positive or -1
               * (at most one), at most MAX_RANK: Attr.list */
} AttrType;

typedef struct {
  const char *key; /* NULL ends the list */
  AttrType type;
  bool required;
  double dflt;   /* when not required: ints, indices, floats and bools (0/1); an int's 0
                  * means absent, the shape rule decides (attention's kv_heads: heads) */
  bool positive; /* floats: must be > 0 (ints always are, unless nonneg) */
  bool nonneg;   /* ints: 0 is allowed too (conv2d's padding) */
  /* enums: the words allowed, NULL-terminated; dflt is an index */
  const char *const *choices;
} AttrSpec;

/* What the trainer writes into a graph input read at a forward slot. */
typedef enum { FEED_NONE, FEED_TOKENS, FEED_LABELS, FEED_VALUES } Feed;

typedef struct {
  const char *name;         /* YAML name and kernel stem */
  AttrSpec attrs[MAX_ATTR]; /* the op's YAML keys besides name, op, input(s) */
  int min_inputs, max_inputs;
  int nin, nout; /* forward slots */
  int nstats;    /* trailing forward outputs only backward reads (NULL in eval) */
  /* A composite op (causal_self_attention): its shape rule (rules.c) adds
   * other ops instead, and it never appears in a Graph. */
  bool composite;
  /* Kernel size arguments, in the kernel's order; the forward kernel takes
   * the first fwd_ndim of them (0: all). */
  void (*dims)(const Graph *g, const Op *op, int64_t *dim, int *ndim);
  int fwd_ndim;
  int64_t (*flops)(const Graph *g, const Op *op, bool backward); /* saturates at INT64_MAX */
  bool gemm; /* its FLOPs run at the matrix-product rate of the cost model */
  /* Bytes of the CUDA library workspace its kernels use, from its dims: a
   * matrix product's split-K partial sums (capped, plan.c) or, with
   * workspace_floor, scratch the kernel cannot run without. */
  int64_t (*workspace)(const int64_t *dim);
  bool workspace_floor;
  /* Op-local scratch in the arena (role temp): the bytes its forward
   * (backward = false) or backward kernel needs, from its dims alone (the
   * thread count is unknown at plan time); 0: none for these dims. Each
   * schedule op that needs some gets its own buffer, live at its position
   * only, packed and verified like any other. The kernels of an op that sets
   * this take `float *scratch` right after their inputs (NULL when 0). */
  int64_t (*scratch)(const int64_t *dim, bool backward);
  bool cheap;        /* the selective checkpointing option recomputes it instead of keeping its outputs */
  unsigned half_bin; /* backward input slots that may read a bf16/fp16 copy (SLOT bits) */
  int nbin, nbout;   /* backward slots */
  int bin[MAX_BIN];  /* REF_* per backward input slot */
  /* per backward input slot: the backward output slots (SLOT bits) that read
   * it; 0: all. When none of them is wanted (a frozen weight's dW), the
   * input is passed as NULL and not kept for backward (linear's x) */
  unsigned bin_for[MAX_BIN];
  /* backward output slots (SLOT bits) that each cost an equal share of the
   * backward FLOPs (linear's dx and dW products); one not wanted is not run */
  unsigned bout_split;
  int bout[MAX_BOUT];             /* REF_GIN(k) per backward output slot */
  bool grad_to[MAX_OP_IN];        /* forward input slots that can receive a gradient */
  unsigned inplace_fwd;           /* forward input slots out[0] may overwrite, tried in order */
  unsigned inplace_bwd[MAX_BOUT]; /* backward input slots backward output k may overwrite when acc = 0 */
  bool is_loss;
  /* Its kernels (forward and backward) take (int mode, uint64_t key) after
   * the floats: mode RT_MODE_TRAIN, RT_MODE_RECOMPUTE (a checkpointed
   * forward replayed in backward: no side effects twice, such as running
   * statistics) or RT_MODE_EVAL (memplan_kernels.h); key is the trainer's
   * tr_op_key(t, mb, layer), equal for an op's forward, recompute and
   * backward in one micro-batch (dropout's mask), 0 in eval. */
  bool mode_arg;
  /* Its output depends on the whole batch (batchnorm's batch statistics):
   * micro-batches would change what it computes, so the budget's
   * micro-batch lever leaves a model with one alone (--micro-batch still
   * applies, with PyTorch's gradient-accumulation semantics). */
  bool batch_stats;
  /* Its statistics (the nstats outputs) are a pure function of its key and
   * shape, so a plan may leave them unstored: the forward kernel then gets
   * NULL for them and the backward kernel NULL, and regenerates them
   * (dropout's mask). The budget's levers decide (levers.c, fit.c). */
  bool regen_stats;
  Feed feed[MAX_OP_IN]; /* per forward slot, for graph inputs */
  /* GPT-2 initialization: a residual join (add) scales the weights of the
   * gpt2_projection ops (linear) that feed it by 1/sqrt(their number). */
  bool residual_join, gpt2_projection;
} OpInfo;

const OpInfo *op_info(OpKind k);
/* FLOPs of one run of graph op o: its forward, or its backward writing the
 * backward outputs `bout` (step tensor ids in slot order, -1: not wanted).
 * A forward run of the fused loss that writes dW alone (headgrad.h's
 * deferred recompute, bout its outputs) counts the logits again only: the
 * dW product is the one the training forward then skips. */
int64_t op_run_flops(const Graph *g, const Op *o, bool backward, const int *bout);
/* conv2d's width side: kernel_w, stride_w or padding_w as written, else the height side's kernel, stride or
 * padding (a square kernel) */
static inline int64_t conv2d_w(const Attr *w, const Attr *h) { return w->s ? w->i : h->i; }
/* A collective of a plan for N ranks (allreduce, reduce_scatter, all_gather). */
static inline bool op_is_comm(OpKind k) { return k == OP_ALLREDUCE || k == OP_REDUCE_SCATTER || k == OP_ALL_GATHER; }
/* The index of key in the op's attribute list, or -1. */
int op_attr_index(OpKind k, const char *key);
/* Every attribute of op k at its default (not given: s is NULL), at loc. */
void op_attr_defaults(OpKind k, Attr *a, Loc loc);
/* The op's float attributes, in declaration order: the kernels' float
 * arguments after the dims. Returns how many. */
int op_float_args(const Op *op, double *out);

#endif
