/* plan.h: the Plan, the contract between the planner and codegen.
 *
 * Everything an emitter needs is here; emitters never look at the YAML or at
 * the planner's intermediate tables. plan.json serializes exactly this.
 *
 * Invariants (checked by verify_plan on every compile):
 * - every buffer's offset is a multiple of `align`, offset + bytes <= arena_bytes;
 * - within one schedule, buffers whose [first, last) ranges overlap are
 *   address-disjoint; persistent buffers (params, state, optimizer state,
 *   the workspace) live over
 *   the whole of both schedules and sit below `persistent_bytes`;
 * - every op's input and output buffers are live at its position;
 * - an op's scratch buffer has role temp and is live at its position only.
 */
#ifndef MEMPLAN_PLAN_H
#define MEMPLAN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "graph.h"

#define PLAN_FORMAT_VERSION 1

typedef enum {
  ROLE_PARAM,      /* trainable weights (fp32 master copy) */
  ROLE_GRAD,       /* gradients of parameters */
  ROLE_OPT_STATE,  /* optimizer state: AdamW m and v, SGD momentum */
  ROLE_ACTIVATION, /* forward outputs, saved statistics, gradients of activations */
  ROLE_INPUT,      /* batch inputs the trainer fills before each step (tokens, targets) */
  ROLE_TEMP,       /* op-local scratch (OpInfo.scratch): one buffer per schedule op that asks for it,
                      live at that op's position only ([id, id + 1)); PlanOp.scratch names it */
  ROLE_WORKSPACE,  /* library workspace (cuBLAS, cuBLASLt): one persistent buffer, "workspace",
                      sized by plan_build (plan.c); the CPU trainer ignores it */
  ROLE_STATE,      /* non-trainable persistent state (batchnorm's running statistics): no gradient or
                      optimizer state; initialized (init), saved and loaded with the params, written
                      only by the training forward of its op (RT_MODE_TRAIN) */
  ROLE_COUNT
} Role;

typedef enum {
  PHASE_FORWARD,
  PHASE_BACKWARD,
  PHASE_UPDATE,    /* optimizer update of one parameter */
  PHASE_RECOMPUTE, /* forward op replayed in backward (checkpointing) */
  PHASE_COUNT
} Phase;

typedef enum { SCHED_TRAIN, SCHED_EVAL, SCHED_BOTH } SchedSet;

typedef struct {
  int id;
  const char *name; /* e.g. "h0.fc", "h0.fc.weight", "h0.fc.weight.grad" */
  Role role;
  DType dtype;
  Shape shape;         /* values and the symbolic text of each dim */
  int64_t bytes;       /* exact bytes (numel * dtype size) */
  int64_t offset;      /* in the arena, multiple of Plan.align */
  SchedSet sched;      /* which schedule(s) the buffer belongs to */
  int first, last;     /* live over schedule positions [first, last) */
  int tensor;          /* the first (defining) tensor; in-place tensors share */
  const char *aliases; /* names of tensors computed in place here, "" if none */
  Init init;           /* params and state: how the trainer initializes it */
  bool decay;          /* params only: weight decay applies (rank >= 2, trainable) */
  /* params only: frozen (no gradient, optimizer state or update; loaded and
   * saved like any weight). Its dtype is its storage: f32 for now, a lower
   * storage format of frozen weights would change only dtype (plan.json
   * "frozen": true, "dtype") */
  bool frozen;
} PlanBuffer;

#define PLAN_MAX_IO 8 /* kernel slots: MAX_BIN backward inputs at most */

typedef struct {
  int id; /* position in its schedule */
  OpKind op;
  Phase phase;
  const char *layer; /* YAML layer name ("h0.fc"), or the parameter for updates */
  Loc loc;           /* where the layer was written (for reports only) */
  int nin, nout;
  int in[PLAN_MAX_IO]; /* buffer ids in the kernel's slot order; -1 = NULL */
  int out[PLAN_MAX_IO];
  bool acc[PLAN_MAX_IO]; /* backward outputs: accumulate (+=) instead of write */
  int64_t dim[MAX_KDIM]; /* kernel size arguments, in the kernel's order (ops.h) */
  int ndim;
  double farg[MAX_ATTR]; /* the op's float attributes (eps), passed after the dims */
  int scratch;           /* its op-local scratch buffer (role temp, live at this position only), -1 = none;
                            passed after the inputs to kernels of ops with OpInfo.scratch (NULL when -1) */
  int nfarg;
  int64_t flops;
} PlanOp;

/* A checkpointing stage as the planner decided it (report and diagrams). */
typedef struct {
  const char *first_layer, *last_layer;
  char choice;        /* 'K' keep all, 'S' selective (cheap ops recomputed), 'R' forward rerun from a checkpoint */
  bool half;          /* --precision auto chose half-precision storage for what it keeps */
  int runs;           /* forward runs of the stage */
  int64_t kept_bytes; /* what its kept run holds for backward */
} PlanStage;

/* One configuration the budget's levers considered (planner/levers.c),
 * in the order enumerated: for the report's explanation and plan.json. */
typedef struct {
  const char *precision; /* "fp32", "bf16", "fp16" ("auto" where nothing was planned) */
  int micro_batch, accumulation_steps;
  int64_t keep_arena;              /* the arena when every activation is kept (0: not planned) */
  int64_t arena;                   /* the plan that fit, or the least arena recomputation reached */
  int64_t extra_flops, step_flops; /* of the plan that fit (0 when none did) */
  bool fits, chosen;
  const char *dropout_masks; /* "stored", "regenerated" (the plan that fit, or the one policy tried); NULL: no
                              * dropout, or both tried and neither fit */
  const char *opt_state;     /* AdamW's moments in this configuration: "bf16", "8bit"; NULL: fp32 */
  int64_t loss_chunk;        /* the fused loss' rows per chunk (the plan's, or the last tried); 0: unfused; -1:
                              * fused, not planned */
  double est_seconds;        /* the plan's estimated step time (levers.c), 0 when none fit */
  double time_bound;         /* seconds no plan of this configuration's estimate goes below */
  int64_t memory_bound;      /* bytes no plan of this configuration's arena goes below */
  const char *pruned;        /* NULL: planned; "memory": memory_bound exceeds the budget; "time": time_bound is no
                              * less than a plan already found (0 and NULL in plans written before the bounds) */
} PlanLever;

typedef struct Plan {
  int version;
  const char *model;
  const char *source;    /* the YAML path, for the report only */
  const char *tokenizer; /* GPT-2 BPE vocabulary folder for the trainer's --text (absolute); NULL: bytes */
  Dim *dims;             /* final dim values (after --set) */
  int ndims;
  Optimizer opt;
  int64_t budget_bytes; /* 0: no budget given */
  int64_t align;
  /* buffers, indexed by id */
  PlanBuffer *buf;
  int nbuf;
  /* the training step and the forward-only eval step, in order */
  PlanOp *sched;
  int nsched;
  PlanOp *eval;
  int neval;
  int loss_buf; /* buffer holding the scalar loss (train and eval) */
  int eval_loss_buf;
  /* totals */
  int64_t arena_bytes;              /* what the trainer allocates */
  int64_t persistent_bytes;         /* params + state + optimizer state + workspace, at the arena's bottom */
  int64_t lower_bound_bytes;        /* max over time of live bytes (aligned), both schedules */
  int64_t train_peak_bytes;         /* height of the training packing */
  int64_t eval_peak_bytes;          /* height of the eval packing */
  int64_t unfused_lower_bound;      /* lower bound if every update ran after backward */
  int64_t peak_by_role[ROLE_COUNT]; /* live bytes by role at the training peak */
  int peak_position;                /* training schedule position of that peak */
  int64_t param_count;              /* parameter scalars, frozen ones included (shared weights once) */
  int64_t frozen_count;             /* of which frozen (PlanBuffer.frozen) */
  /* LoRA (Graph.lora_*): adapters "L.lora_A" [rank, in] and "L.lora_B"
   * [out, rank] on linear L, y = x W^T + alpha/rank dropout(x) A^T B^T
   * (merged: W + alpha/rank B A); rank 0: none */
  int64_t lora_rank;
  double lora_alpha, lora_dropout;
  int64_t step_flops, extra_flops; /* extra: recomputation */
  PlanStage *stages;               /* checkpointing stages; NULL when nothing is recomputed */
  int nstages;
  bool whole_graph;  /* the stages are the forward ops of a whole-graph schedule (planner/remat.c), not a chain's */
  PlanLever *levers; /* what the budget pass tried, in order (NULL: not recorded) */
  int nlevers;
  /* micro-batching: the schedule's forward, recompute and backward ops run
   * accumulation_steps times per step, each on micro_batch rows of the
   * batch, before the updates; outputs of role grad then accumulate in every
   * pass after the first, and loss backward is scaled by 1/accumulation_steps */
  int micro_batch, accumulation_steps;
  int64_t batch;         /* the effective batch (micro_batch * accumulation_steps) */
  const char *batch_dim; /* the dim sizing it (the inputs' leading dim), whose value in dims is micro_batch; NULL:
                          * none, or a plan read back from plan.json */
  /* precision: saved activations listed as buffers of dtype bf16 or f16
   * (cast ops write and read them); with fp16 the trainer scales the loss,
   * and updates run after backward only when every gradient is finite */
  const char *precision; /* "fp32", "bf16", "fp16" */
  int64_t guard_bytes;   /* --guard: canary bytes after every buffer (0: none); the
                            packing reserves bytes + guard_bytes for each */
  bool loss_scaling;
  /* dropout: "stored" (the forward writes each op's mask, 1 bit per element,
   * and backward reads it) or "regenerated" (neither: backward hashes the
   * op's key again); NULL when the model has no dropout */
  const char *dropout_masks;
  /* the fused classifier loss (linear_cross_entropy, gb_fuse_loss): rows
   * per chunk of its logits; 0: the loss is not fused */
  int64_t loss_chunk;
  /* AdamW's moments (--opt-state, planner/optstate.h): "fp32", "bf16" or
   * "8bit" (u8 codes and f32 scale buffers); the buffers of role
   * optimizer_state carry the dtypes. opt_state_tried: what auto compared,
   * for the report (NULL: the user chose) */
  const char *opt_state;
  const char *opt_state_tried;
  /* frozen weights' storage (--base-weights, planner/basew.h): "fp32",
   * "bf16", "int8" or "nf4"; base_weights_tried: what auto compared (NULL:
   * the user chose, or nothing is frozen) */
  const char *base_weights;
  const char *base_weights_tried;
  /* trainable weights' storage (--param-precision, planner/basew.h): "fp32"
   * or "bf16"; param_precision_tried: what auto compared (NULL: not asked) */
  const char *param_precision;
  const char *param_precision_tried;
  /* the fused loss's tied weight gradient (--head-grad, planner/headgrad.h):
   * "kept" or "deferred"; head_grad_tried: what auto compared (NULL: not asked) */
  const char *head_grad;
  const char *head_grad_tried;
  const char *assign_method;
  bool assign_optimal;
  /* gradient clipping (opt.clip_grad_norm > 0) keeps every gradient until
   * the update phase. Its price, for the report: what the same request
   * (budget, levers) plans without clipping, updates fused into backward.
   * All 0 without clipping. */
  bool noclip_fits;           /* a plan without clipping fits the budget */
  int64_t noclip_arena;       /* its arena; when none fits, the least arena one reached */
  int64_t noclip_lower_bound; /* its lower bound (0 when none fits) */
  int64_t noclip_extra_flops; /* its recomputation */
  int noclip_accumulation;    /* its micro-batches per step (1: none) */
  double compile_seconds;
  /* data parallelism (planner/comm.c): this is the plan of each of `ranks`
   * ranks, each on its own micro_batch rows (the step's batch is ranks x
   * batch rows); 1: no collectives, the single-process plan. zero is the
   * sharding: 0 gradients all-reduced; 1 (ZeRO-1) gradients reduce-scattered,
   * each rank updating its 1/ranks shard of every parameter with its shard
   * of the optimizer state, parameters all-gathered; 2 (ZeRO-2) as 1, and a
   * rank keeps only its shard of each gradient after the reduce-scatter.
   * Collectives are ops of phase update (PlanOp.dim: numel, ranks, bucket);
   * an update of a sharded plan has dim numel, ranks: it updates elements
   * [r*s, min(numel, (r+1)*s)) of its parameter on rank r, s = ceil(numel /
   * ranks), and its optimizer state holds s elements. */
  bool data_parallel; /* planned with --ranks N (N > 1) or --zero: collectives even at one rank */
  int ranks, zero;
  bool zero_auto;          /* --zero auto: the least sharding that fits */
  int64_t zero_arena[3];   /* auto: the arena at each level it tried, 0: not tried */
  int nbuckets;            /* gradient buckets (each one set of collectives) */
  int64_t bucket_bytes;    /* a bucket closes once its gradients reach this many bytes */
  int64_t comm_bytes;      /* bytes of the tensors the step's collectives carry */
  int64_t comm_wire_bytes; /* bytes each rank sends per step (ring algorithms) */
  /* generation (--gen-context N, planner/decode.h): N positions of K and V
   * for each attention op of the eval schedule, in eval order, each
   * decode_layer_bytes, from kv_cache_offset (above arena_bytes) on; the
   * trainer allocates plan_alloc_bytes. 0: no cache (llm.c's recompute) */
  int64_t gen_context, kv_cache_offset, kv_cache_bytes;
} Plan;

const char *plan_role_name(Role r);   /* "param", "grad", "optimizer_state", ... */
const char *plan_phase_name(Phase p); /* "forward", "backward", "update", "recompute" */
/* A saved activation stored in half precision (--precision): bf16/fp16 moments
 * (--opt-state) and frozen weights (--base-weights) are their own levers. */
bool plan_buf_half_saved(const PlanBuffer *b);

#endif
