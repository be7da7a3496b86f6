/* graph.h: the model graph IR the loader builds (forward ops only), by
 * integer ids: tensors and ops in arrays. Later passes read it and never
 * mutate it; each returns a new table indexed by tensor or op id. */
#ifndef MEMPLAN_GRAPH_H
#define MEMPLAN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"

#define MAX_RANK 8 /* NCHW activations and OIHW weights, with room for a ViT's patch reshapes */

typedef enum {
  DT_F32,  /* 4 bytes */
  DT_I32,  /* 4 bytes, token ids and class targets */
  DT_BF16, /* 2 bytes, storage only: saved activations under a bf16 policy */
  DT_F16,  /* 2 bytes, storage only, with loss scaling */
  DT_U8,   /* 1 byte, storage only: codes of 8-bit optimizer state (--opt-state 8bit) */
  DT_I8,   /* 1 byte, storage only: int8 frozen weights (--base-weights int8) */
  DT_NF4,  /* 4 bits, storage only: NF4 codes of frozen weights, two a byte (dtype_bytes) */
  DT_COUNT
} DType;

typedef struct {
  int rank;
  int64_t d[MAX_RANK];       /* values */
  const char *sym[MAX_RANK]; /* symbolic text of each dim ("B", "4*C"); never NULL once built */
} Shape;

typedef enum {
  INIT_NONE,   /* not a parameter */
  INIT_NORMAL, /* N(0, std^2) */
  INIT_ZEROS,
  INIT_ONES,
  INIT_UNIFORM /* U(-bound, bound), PyTorch's nn.Linear default: bound = 1/sqrt(fan_in) */
} InitKind;

typedef struct {
  InitKind kind;
  double scale; /* std for NORMAL, bound for UNIFORM */
} Init;

typedef enum {
  OP_LINEAR,
  OP_MATMUL,
  OP_ADD,
  OP_MUL,
  OP_SCALE_CHANNELS, /* [N, C, ...] times one value per (n, c): squeeze-excitation's gate */
  OP_LAYER_SCALE,    /* [N, C, ...] times a learned weight [C]: ConvNeXt's layer scale */
  OP_RELU,
  OP_RELU6,
  OP_SIGMOID,
  OP_HARDSWISH, /* MobileNetV3's activations */
  OP_HARDSIGMOID,
  OP_GELU,
  OP_SILU,
  OP_LAYERNORM,
  OP_RMSNORM,
  OP_SOFTMAX,
  OP_ATTENTION, /* attention core: qkv -> out; causal_self_attention lowers to linear, attention, linear */
  OP_EMBEDDING,
  OP_POS_EMBEDDING,
  OP_ROPE, /* rotary position embedding of the q and k parts of a packed qkv */
  OP_CROSS_ENTROPY,
  OP_MSE,
  /* linear + cross_entropy fused, a chunk of rows at a time: the logits never stored whole */
  OP_LINEAR_CROSS_ENTROPY,
  OP_CONV2D, /* 2-D convolution, NCHW activations and OIHW weights */
  /* batch statistics per channel over N (and H, W); running statistics are state */
  OP_BATCHNORM2D,
  /* shape ops (a ViT's patches, class token and its read-out) */
  OP_FLATTEN,     /* moves no data: in place when its input dies there */
  OP_RESHAPE,     /* likewise */
  OP_TRANSPOSE,   /* two axes swapped */
  OP_CONCAT,      /* 2..6 inputs along one axis */
  OP_CLASS_TOKEN, /* [B, N, C] -> [B, N+1, C], a learned token first */
  OP_SELECT,      /* one index of an axis, the axis dropped */
  OP_MAXPOOL2D,   /* pooling over [N, C, H, W] */
  OP_AVGPOOL2D,
  OP_ADAPTIVE_AVGPOOL2D, /* torch's adaptive windows: to any output size */
  OP_GLOBAL_AVGPOOL,
  OP_DROPOUT,          /* random: a counter-based mask from its mode_arg key */
  OP_STOCHASTIC_DEPTH, /* random: whole rows (or the batch) zeroed, from its mode_arg key */
  OP_SCALE,            /* x times a constant (LoRA's alpha / rank) */
  OP_WINDOW_ATTENTION, /* Swin's shifted-window attention core with its relative position bias */
  OP_PAD,              /* zeros after one axis's end, or its end cut off (F.pad) */
  OP_CROSS_ATTENTION,  /* attention of queries q to a context's packed kv (SD's text conditioning) */
  /* diffusion (docs/diffusion.md) */
  OP_GROUPNORM,          /* normalization over channel groups */
  OP_ADD_CHANNELS,       /* x [N, C, ...] plus e [N, C] broadcast: the timestep embedding's add */
  OP_UPSAMPLE,           /* nearest, by an integer factor */
  OP_TIMESTEP_EMBEDDING, /* sinusoidal embedding of timesteps [B] */
  OP_DDPM_NOISE,         /* random: x_t, eps and t from x0 and its mode_arg key */
  OP_CONV_TRANSPOSE2D,
  OP_ADAMW, /* optimizer updates: only in the step, never in the YAML graph */
  OP_SGD,
  OP_CAST,                  /* storage precision change, inserted by the precision pass */
  OP_CAUSAL_SELF_ATTENTION, /* composite: its shape rule adds linear, attention, linear; never in a Graph */
  /* collectives of a plan for N ranks (planner/comm.c): only in the step, never in the YAML graph */
  OP_ALLREDUCE,      /* a gradient summed over the ranks, in place */
  OP_REDUCE_SCATTER, /* a gradient summed over the ranks, each rank keeping its 1/N shard */
  OP_ALL_GATHER,     /* a parameter's shards, updated one per rank, gathered on every rank, in place */
  OP_COUNT
} OpKind;

typedef enum {
  TK_INPUT, /* fed by the trainer each step */
  TK_PARAM, /* a weight: trainable, or frozen (Tensor.frozen) */
  TK_ACT,   /* computed: layer outputs and saved statistics */
  TK_STATE  /* persistent, not trained: batchnorm's running statistics, updated by its forward in training */
} TensorKind;

typedef struct {
  const char *name;
  TensorKind kind;
  DType dtype;
  Shape shape;
  Loc loc;      /* where it was declared or where its layer was written */
  int producer; /* forward op id, -1 for inputs and params */
  Init init;    /* params and state */
  /* params: frozen (YAML trainable: false, freeze: patterns, --freeze): no
   * gradient, no optimizer state, no update; loaded and saved as a weight */
  bool frozen;
  /* LoRA (build.h, LoraSpec): an adapter's parameters (lora_A, lora_B) and
   * the output of the add that joins it to its linear */
  bool adapter;
} Tensor;

#define MAX_OP_IN 6  /* forward input slots: data inputs and parameters */
#define MAX_OP_OUT 4 /* forward output slots: the output and saved statistics */
#define MAX_ATTR 12  /* attributes an op declares (ops.h, OpInfo.attrs) */
#define MAX_KDIM 16  /* an op's kernel size arguments (PlanOp.dim): convolutions take about a dozen */

/* A list attribute's items (ATTR_DIMS, reshape's shape): each item's value,
 * text (the symbol of the dim it sizes) and location, in arena arrays. */
typedef struct {
  int n;
  const int64_t *v;
  const char *const *sym;
  const Loc *loc;
} AttrList;

/* One attribute of a layer, as the loader parsed it against the op's
 * declaration (ops.h, AttrSpec): the value, the text written (an int's
 * expression "4*C" becomes the symbol of the dims it sizes), and where. */
typedef struct {
  int64_t i;            /* int and bool values */
  double f;             /* float values */
  const char *s;        /* the YAML text as written; NULL when the default applies */
  Loc loc;              /* where it was written; the layer's mapping when defaulted */
  const AttrList *list; /* lists: the items; NULL when absent */
} Attr;

typedef struct {
  OpKind kind;
  const char *name;  /* the layer's full name, "h3.fc" */
  Loc loc;           /* the layer's mapping in the YAML */
  int nin;           /* data inputs, in the op table's slot order; -1 = absent (a bias) */
  int in[MAX_OP_IN]; /* tensor ids, parameters included */
  int nout;
  int out[MAX_OP_OUT]; /* out[0] is the layer's output; the rest are saved statistics */
  Attr attr[MAX_ATTR]; /* in the order of the op's AttrSpec list */
} Op;

typedef struct {
  const char *name;
  int64_t value;
  Loc loc;
  bool overridden; /* set from the command line (--set) */
} Dim;

typedef enum { OPT_ADAMW, OPT_SGD } OptKind;

/* The learning rate over a run (memplan_trainer.h has the formula). */
#define MAX_WARMUP ((int64_t)1 << 40)
typedef enum { SCHED_CONSTANT, SCHED_COSINE, SCHED_LINEAR, SCHED_COUNT } SchedKind;

typedef struct {
  OptKind kind;
  double lr, beta1, beta2, eps, weight_decay; /* AdamW */
  double momentum;                            /* SGD */
  bool nesterov;
  SchedKind schedule;    /* YAML optimizer.schedule (default constant) */
  int64_t warmup;        /* linear warmup steps (default 0) */
  double final_fraction; /* decay floor, x lr, at the run's last step (default 0) */
  Loc loc;
  /* YAML optimizer.clip_grad_norm: gradients scaled so that their global L2
   * norm is at most this (torch.nn.utils.clip_grad_norm_); 0: no clipping.
   * Every gradient is then kept until the update phase (updates unfused). */
  double clip_grad_norm;
} Optimizer;

/* "constant", "cosine", "linear" */
const char *sched_name(SchedKind k);

/* What later passes make of a graph once and keep with it, in its arena
 * (so it goes with the graph): the step keeping every activation,
 * ad_build(g, fuse, NULL) at keep_step[fuse] (autodiff.c; the levers and
 * the budget pass build it for every configuration and format they try:
 * sd-unet at 8G, 60 times for 4 graphs). The graph itself never changes.
 * Only the loader's graphs have one (gb_finish, in the model source's
 * arena, which lives through the compilation): a graph made in a pass's
 * own arena (gb_fuse_loss) may outlive that Arena (its blocks adopted by
 * another, driver.c's levers_try), and a step built there later would be
 * lost. */
typedef struct {
  Arena *ar;
  const void *keep_step[2]; /* const Step * (autodiff.h); NULL: not built yet */
  int hits;                 /* steps reused (tests read it) */
} GraphMemo;

typedef struct {
  const char *model;
  const char *path;
  Dim *dims;
  int ndims;
  Tensor *t;
  int nt;
  Op *ops; /* in a topological order (the forward schedule) */
  int nops;
  Optimizer opt;
  int loss;              /* tensor id of the scalar loss */
  const char *tokenizer; /* the YAML's tokenizer: a GPT-2 BPE vocabulary folder (absolute); NULL: none */
  /* LoRA adapters (0: none): y = x W^T + alpha/rank dropout(x) A^T B^T */
  int64_t lora_rank;
  double lora_alpha, lora_dropout;
  GraphMemo *memo; /* NULL: nothing kept (gb_fuse_loss's graphs, a graph made by hand) */
} Graph;

/* A fresh memo in ar, the arena of the graph it goes with. */
GraphMemo *graph_memo_new(Arena *ar);

int64_t dtype_size(DType t);
const char *dtype_name(DType t);                   /* "f32", "i32" */
int64_t dtype_numel_bytes(DType t, int64_t numel); /* numel elements' bytes: NF4 packs two a byte */
int64_t shape_numel(const Shape *s);
/* "(B, T, 4*C)" into an arena string. */
char *shape_sym_str(Arena *ar, const Shape *s);
/* "[8, 1024, 768]" into an arena string. */
char *shape_val_str(Arena *ar, const Shape *s);

#endif
