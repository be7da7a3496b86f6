/* memplan_trainer.h: what a generated trainer.c hands to the shared trainer
 * program (memplan_trainer.c, trainer_*.c): the arena's size, tables of its parameters,
 * inputs and ops, and the two plan-specific functions, step() and eval().
 * trainer.c is the plan; the program is everything a plan does not
 * change: options, data, initialization, safetensors, logging, profiling.
 * Running state (batchnorm's statistics) is saved and loaded with the
 * parameters under its plan.json name ("bn1.running_mean", as PyTorch's
 * state_dict) and initialized from its table entry, never from the seed.
 *
 * Data formats (also in --help):
 * - --text FILE: the file's bytes are the tokens (a byte-level model, V >= 256).
 * - --data FILE: an llm.c token shard: a header of 256 little-endian int32
 *   (magic 20240520, version 1, token count n, the rest unused), then n
 *   little-endian uint16 tokens, the file exactly 1024 + 2n bytes; or magic
 *   20240801, version 7 and n uint32 tokens, 1024 + 4n bytes (llm.c's Llama 3
 *   files, memplan_bpe.h).
 * - Batches of a token model are windows, as llm.c's loader: with W = B*T
 *   (times the micro-batches) the data holds N = (n - 1) / W windows (a pass,
 *   or epoch), window k being tokens [k*W, k*W + W]; inputs are its first W
 *   tokens, targets the W tokens one position later. With micro-batches of b
 *   rows, micro-batch j reads the rows j*b .. (j+1)*b - 1 of that window.
 *   Training visits the windows of epoch e (0, 1, ...) in the order of a
 *   permutation P_e, one window a step: step s of the run reads window
 *   P_e[i] with e = (s-1) / N, i = (s-1) mod N. Shuffling (the default; off
 *   with --no-shuffle, where P_e is the identity: windows in order, as llm.c
 *   without shuffling) draws P_e as llm.c's loader shuffles its batches each
 *   epoch, reproducibly from --seed: P_e starts as 0..N-1, key =
 *   key3(4, seed, e) (key3(t, a, b) = mix64(mix64(mix64(t) ^ a) ^ b), mix64:
 *   tr_op_key's), then for i = N-1 down to 1: j = mix64(key + i) mod (i+1)
 *   and P_e[i], P_e[j] swap (Fisher-Yates; tests/reference/plan_torch.py's
 *   Batches does the same). Evaluation reads windows in order, from the
 *   start of --val (or the training data), never shuffled.
 * - --npy DIR: every input from a NumPy .npy file named after it (the YAML's
 *   input name): DIR/train/<input>.npy for training, DIR/test/<input>.npy for
 *   evaluation. Format versions 1.0, 2.0 and 3.0, fortran_order False; axis 0
 *   is the sample and the other axes must equal the input's per-sample shape
 *   (its shape without the batch axis). f32 inputs need descr '<f4', i32
 *   inputs '<i4' or '<i8', every value in range (class labels 0..K-1, token
 *   ids 0..V-1); f32 values must be finite. The inputs of one split have the
 *   same number of samples S. Batches are windows of samples, as the token
 *   loader's: with W = B * micro-batches an epoch is N = S / W steps (S >= W),
 *   step i of epoch e reading samples P_e[i*W] .. P_e[i*W + W - 1] of a
 *   permutation P_e of the S samples (the same Fisher-Yates over 0..S-1, or
 *   with --no-shuffle the identity: consecutive samples, the last S mod W of
 *   a pass skipped); micro-batch j reads rows j*b .. (j+1)*b - 1 of that
 *   window. Evaluation reads every test
 *   sample exactly once: batch k holds samples k*B .. k*B + B - 1, and a last
 *   partial batch is padded with samples 0, 1, ... (wrapping), whose rows are
 *   not counted (--eval-batches N stops after N batches).
 * - Otherwise models with f32 inputs train on a synthetic data set ("blobs",
 *   see tr_blob_value in memplan_trainer.c): sample s has class y(s), and
 *   every feature is a fixed class centre plus uniform noise, all from
 *   integer hashes, so Python reproduces it bit for bit. Its samples are
 *   all distinct (sample s is read at step s / B): nothing to shuffle, so
 *   shuffling does not apply.
 *
 * Checkpoints (--save FILE, --save-every N, --resume FILE) are safetensors
 * files: a little-endian u64 N, N bytes of JSON (padded with spaces to a
 * multiple of 8), then the tensors' bytes, row-major, little-endian. They
 * hold every parameter (F32; a frozen weight stored by --base-weights in its
 * storage: BF16 or I8 with the weight's shape, NF4 as U8 [ceil(numel/2)], two
 * codes a byte, the even element in the high nibble, each int8 or NF4 weight
 * followed by its F32 "<param>.absmax": per row or per 64 elements,
 * memplan_kernels.h; --load also takes a F32 or BF16 weight for it and
 * quantizes it), every running-state buffer (F32), then every
 * optimizer-state buffer ("<param>.adam_m" and "<param>.adam_v", SGD's
 * "<param>.momentum": plan.json's names) as its raw bytes in its own dtype (the
 * safetensors dtype is plan.json's in upper case: F32, BF16, ...). The
 * "__metadata__" object (strings only, as safetensors requires) holds the
 * run's state at the end of step "step":
 *   format "pt"; model: the plan's model; plan: its fingerprint (16 hex
 *   digits, FNV-1a 64 over "training" and every saved tensor's name, dtype
 *   and shape; codegen/emitc.c); training: the plan's optimizer and its
 *   constants, micro-batches, loss scaling and training inputs in words;
 *   step; optimizer_step (the updates applied: the step's t of AdamW's bias
 *   correction and of the dropout keys, behind step by the steps loss
 *   scaling skipped); steps, lr, schedule, warmup, final_fraction (the lr
 *   schedule's arguments); seed; shuffle (0 or 1); data_epoch, data_index
 *   (the next training window: the data_index-th of epoch data_epoch, both
 *   0-based), data_windows (N, a check that the data is the same);
 *   loss_scale, loss_scale_clean (clean steps since the scale last grew),
 *   loss_scale_skipped; threads (the thread count of the run: the same count
 *   continues bit for bit, another one only approximately).
 * The trainer's random numbers are counter-based (splitmix64 hashes of the
 * seed with the parameter index, the step and micro-batch and layer of a
 * dropout key, the epoch of a permutation), so the seed and the positions
 * above are its whole RNG state. Doubles are written with 17 significant
 * digits and read back exactly.
 * --resume FILE restores all of it, and every option not given on the
 * command line (--steps, --lr, --schedule, --warmup, --final-fraction,
 * --seed, --shuffle) takes the checkpoint's value, so that a run of 2 steps
 * saved and resumed for 2 more equals 4 uninterrupted steps bit for bit
 * (losses and final checkpoint). A checkpoint of another plan (another
 * fingerprint) is an error that says what differs. --load FILE reads only
 * the parameters and running state of a checkpoint (or of any safetensors
 * file with those names) and starts a new run. Both stream: the header is
 * read, then each tensor with pread straight into its arena offset (a
 * device's through one staging buffer of at most 64 MiB), never the whole
 * file into memory. Saves write a temp file, fsync it, rename it over the
 * name and fsync the directory. --save-every N writes PATH-stepNNNNNN.
 * safetensors after every N-th step (PATH: --save's name without
 * ".safetensors", or "checkpoint") and keeps the --keep K (default 3) with
 * the highest steps up to the current one; --save writes the final state.
 *
 * Accuracy: a classification model (eval_logits_offset >= 0: the eval plan
 * ends with cross_entropy on f32 logits [..., K] whose targets are class
 * labels) reports, at each evaluation, the fraction of counted rows whose
 * logits' argmax (the first maximum, as torch.argmax) is the label. Its eval
 * loss is then the mean cross-entropy over exactly the counted rows: the
 * plan's loss for a full batch, and for a padded one log-sum-exp minus the
 * label's logit of each counted row, in double, from the same logits. For
 * other models a padded batch's loss is weighted by its counted rows. */
#ifndef MEMPLAN_TRAINER_H
#define MEMPLAN_TRAINER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { TR_INIT_NONE, TR_INIT_NORMAL, TR_INIT_ZEROS, TR_INIT_ONES, TR_INIT_UNIFORM };
enum { TR_ADAMW, TR_SGD };
enum { TR_F32, TR_I32 };
/* A parameter's storage (--base-weights, planner/basew.h): fp32, or a frozen
 * weight as bf16, int8 or NF4 codes with its absmax in another parameter of
 * the table (TR_STORE_ABSMAX: filled when its weight is quantized). */
enum { TR_STORE_F32, TR_STORE_BF16, TR_STORE_I8, TR_STORE_NF4, TR_STORE_ABSMAX };
/* Learning-rate schedules (llm.c's, with its warmup iterations and final
 * fraction), over the run's S = --steps steps t = 1..S, from the base rate lr
 * (the YAML's, or --lr), W = warmup steps and the floor f = final_fraction:
 *   t <= W:   lr(t) = lr * t / W                      (linear warmup)
 *   t >  W:   p = (t - W - 1) / (S - W - 1)          (p = 1 when S = W + 1)
 *     constant: lr(t) = lr
 *     cosine:   lr(t) = lr * (f + (1 - f) * 0.5 * (1 + cos(pi * p)))
 *     linear:   lr(t) = lr * (f + (1 - f) * (1 - p))
 * so the first step after the warmup trains at lr and the last step at f * lr
 * (the last wins when it is the only step after the warmup).
 * This is llm.c's formula in 1-based steps, except that llm.c's decay divides
 * by S - W and so never quite reaches the floor. PyTorch: LambdaLR with
 * lr_lambda(k) = lr(k + 1) / lr, stepped after every optimizer step
 * (tests/reference/plan_torch.py). Every step gets its lr(t), also one that
 * loss scaling skips. */
enum { TR_SCHED_CONSTANT, TR_SCHED_COSINE, TR_SCHED_LINEAR };
double tr_schedule_lr(int schedule, double lr, int64_t warmup, double final_fraction, int64_t t, int64_t steps);

/* What the trainer writes into an input buffer before each step. */
typedef enum {
  TR_IN_TOKENS,   /* i32 [rows, cols]: token ids of a window */
  TR_IN_NEXT,     /* i32 [rows, cols]: the same window shifted by one (targets) */
  TR_IN_LABELS,   /* i32 [rows]: the class of each synthetic sample */
  TR_IN_FEATURES, /* f32 [rows, cols]: synthetic features of each sample */
  TR_IN_VALUES    /* f32 [rows, cols]: synthetic regression targets */
} TrInputKind;

/* A parameter, or a running-state buffer (batchnorm's statistics: TrModel.states,
 * initialized, saved and loaded like a parameter, never trained). */
typedef struct {
  const char *name; /* the plan's name ("h0.fc.weight"), also the safetensors key */
  int64_t offset;   /* bytes into the arena */
  int rank;
  int64_t shape[6];
  int64_t numel;
  int init;      /* TR_INIT_* */
  double scale;  /* std (normal) or bound (uniform) */
  int64_t bytes; /* in the arena: 4 x numel, less for a quantized frozen weight */
  int store;     /* TR_STORE_* */
  int absmax;    /* TR_STORE_I8 and _NF4: the table index of its absmax (f32 per row or per 64); else -1 */
} TrParam;

typedef struct {
  const char *name;
  int64_t offset;
  int dtype; /* TR_F32, TR_I32 */
  TrInputKind kind;
  int64_t rows, cols; /* rows = samples (B); cols = per-sample elements */
  int rank;           /* the buffer's shape: shape[0] = rows (rank >= 1); */
  int64_t shape[8];   /* --npy files must match shape[1..rank) */
} TrInput;

typedef struct {
  const char *layer; /* YAML layer, or the parameter an update updates */
  const char *kind;  /* "linear", "adamw", ... */
  const char *phase; /* "forward", "backward", "update", "recompute" */
} TrOp;

/* An optimizer-state buffer (AdamW's m and v, SGD's momentum): checkpoints
 * hold its raw bytes in its own dtype, no conversion. */
typedef struct {
  const char *name;  /* plan.json's name ("h0.fc.weight.m"), also the safetensors key */
  int64_t offset;    /* bytes into the arena */
  int64_t bytes;     /* numel x the dtype's size */
  const char *dtype; /* plan.json's dtype name ("f32", "bf16", ...); safetensors: upper case */
  int rank;
  int64_t shape[6];
} TrOptState;

/* One op of generation's decode (memplan compile --gen-context, planner/
 * decode.h; runtime/cpu_generate.c runs them): an eval op run on n rows at
 * positions pos..pos+n-1, in the first n rows of its eval buffers. */
enum {
  TR_DEC_EMBEDDING, /* in: tokens, W */
  TR_DEC_POSITION,  /* in: W; row r is W's row pos + r */
  TR_DEC_ADD,
  TR_DEC_MUL,
  TR_DEC_GELU, /* d[0]: approximate */
  TR_DEC_SILU,
  TR_DEC_LAYERNORM, /* in: x, w, b; f[0]: eps */
  TR_DEC_RMSNORM,   /* in: x, w; f[0]: eps */
  TR_DEC_LINEAR,    /* in: x, W, b; d[0]: K (in), cols: N (out) */
  TR_DEC_LOGITS,    /* the same, for the last row only (its logits left in row 0) */
  TR_DEC_ROPE,      /* in place of qkv rows; d: heads, kv_heads, head_dim; f: theta and Llama 3's scaling */
  TR_DEC_ATTENTION  /* qkv rows: K and V into the cache at `cache`, then causal attention over it; d as rope */
};
typedef struct {
  int kind;
  int64_t out, in[3]; /* arena offsets; -1: none */
  int64_t cols;       /* the output's floats per row */
  int64_t d[3];
  float f[5];
  int64_t cache; /* attention: K [context, kv_heads * head_dim] f32 at cache, V after it */
} TrDecodeOp;

typedef struct TrModel TrModel;

/* A device backend (the CUDA trainer's: memplan_trainer_cuda.cu); NULL for
 * the CPU trainer, which runs the plan in the host arena. With a device the
 * plan runs in a device arena, and the host arena is a shadow used only for
 * I/O: the program fills inputs and parameters there and the hooks move
 * those regions (and the loss scalar) across. */
typedef struct {
  const char *name; /* "CUDA" */
  /* Picks the device, checks that the arena fits its free memory (a clear
   * error naming both numbers otherwise), allocates the arena once, zeroed,
   * and returns it (the pointer step() and eval() receive). */
  unsigned char *(*open)(const TrModel *m, int cuda_graph);
  void (*upload)(unsigned char *dev, const unsigned char *host, int64_t offset, int64_t bytes);
  void (*download)(unsigned char *host, const unsigned char *dev, int64_t offset, int64_t bytes);
  /* One micro-batch of training, m->step on the device (or a CUDA graph of
   * it, captured on the first call and replayed after). */
  void (*step)(const TrModel *m, unsigned char *dev, double lr, int64_t t, int mb, float scale);
  void (*sync)(void);
  /* Planned vs measured device memory (memory_allocated and
   * max_memory_allocated in PyTorch's terms); `when` names the moment. */
  void (*report)(const TrModel *m, const char *when);
  void (*close)(unsigned char *dev);
  /* Checkpoints: bytes between any host buffer (a bounded staging buffer)
   * and the device arena at offset, so that loading and saving never copy
   * the whole file or the whole state into host memory. */
  void (*upload_from)(unsigned char *dev, int64_t offset, const void *src, int64_t bytes);
  void (*download_to)(void *dst, const unsigned char *dev, int64_t offset, int64_t bytes);
} TrDevice;

struct TrModel {
  const char *model;
  int64_t arena_bytes;
  const TrParam *params;
  int nparams;
  const TrParam *states; /* running state (role "state"): saved after the params */
  int nstates;
  const TrInput *train_in, *eval_in; /* each schedule has its own input buffers */
  int ntrain_in, neval_in;
  const TrOp *ops; /* the training schedule, for --profile */
  int nops;
  int64_t loss_offset, eval_loss_offset; /* the scalar losses (f32) */
  /* A classification model's or a language model's (V classes, for --generate)
   * eval logits (f32, [rows, eval_logits_classes],
   * rows = the eval labels' rows * cols), intact when eval() returns: the
   * plan's last eval op reads them; -1 for other models. */
  int64_t eval_logits_offset, eval_logits_classes;
  int64_t workspace_offset, workspace_bytes; /* the plan's library workspace (a device uses it) */
  int opt;                                   /* TR_ADAMW, TR_SGD */
  double lr;                                 /* the YAML's learning rate (--lr overrides) */
  int schedule;                              /* TR_SCHED_*: the YAML's optimizer.schedule (--schedule overrides) */
  int64_t warmup;                            /* warmup steps (--warmup overrides) */
  double final_fraction;                     /* the decay's floor, x lr (--final-fraction overrides) */
  int64_t vocab;                             /* token ids must be < vocab (0: no tokens) */
  int64_t classes;                           /* synthetic labels are < classes */
  int64_t samples_per_step;                  /* tokens (token models) or samples per step */
  int64_t param_count, step_flops;
  int accumulation; /* micro-batches per step; inputs hold one micro-batch */
  int loss_scaling; /* fp16: dynamic loss scaling (GradScaler's semantics) */
  /* Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_): the
   * YAML's optimizer.clip_grad_norm (--clip overrides); 0: the plan does not
   * clip, and its updates may free gradients inside backward. */
  double clip_grad_norm;
  /* One micro-batch of the training step: forward, backward, and the
   * updates when they are fused; scale multiplies the loss gradient. */
  void (*step)(unsigned char *arena, double lr, int64_t t, int mb, float scale);
  /* The updates that wait for every gradient (empty when fused). */
  void (*update)(unsigned char *arena, double lr, int64_t t);
  /* Loss scaling: multiplies every gradient by inv_scale; 0 if any was not finite. */
  int (*unscale)(unsigned char *arena, float inv_scale);
  /* Gradient clipping: the sum of squares of every gradient, in double (0
   * when the plan does not clip). */
  double (*grad_sqnorm)(unsigned char *arena);
  /* Forward only, the eval plan: nothing saved. */
  void (*eval)(unsigned char *arena);
  /* CPU: sets the kernels' thread count (rt_set_threads); NULL on a device. */
  void (*set_threads)(int n);
  /* CPU: the BLAS kernel check (rt_blas_select), which may restart the
   * program; NULL on a device. */
  const char *(*blas)(char **argv, int select);
  const TrDevice *device; /* NULL: the plan runs on the host */
  /* Data parallelism (memplan compile --ranks N): the plan is each of `ranks`
   * ranks' (0 or 1: one process), zero its sharding (plan.h). Every rank
   * trains on its own rows of the step's window (rank r: rows r*B..(r+1)*B-1
   * of N*B; so N ranks x B rows train as 1 rank x N*B), the loss gradient
   * scaled by 1/N so that the collectives' sums are means; rank 0 logs and
   * saves. */
  int ranks, zero;
  /* Checkpoints (format above): the optimizer state, and the plan's training
   * identity (codegen/emitc.c's training_text): its text and fingerprint. */
  const TrOptState *opt_states;
  int nopt_states;
  uint64_t fingerprint;
  const char *training;
  /* --text's tokenizer: a GPT-2 BPE vocabulary folder (encoder.json,
   * vocab.bpe; the YAML's tokenizer:, memplan_bpe.c); NULL: bytes are tokens. */
  const char *tokenizer;
  /* Generation from a KV cache (memplan compile --gen-context N): the eval
   * schedule as decode ops; gen_context positions; the caches at
   * kv_cache_offset (kv_cache_bytes, inside arena_bytes). ndecode 0: no
   * cache, --generate recomputes each window (llm.c's loop). decode_run
   * (cpu_generate.c's tr_decode, or tr_cuda_decode on the device) runs them on the eval
   * tokens' first n entries at positions pos.., leaving the last row's
   * logits at eval_logits_offset. */
  const TrDecodeOp *decode;
  int ndecode;
  int64_t gen_context, kv_cache_offset, kv_cache_bytes;
  void (*decode_run)(const TrModel *m, unsigned char *arena, int64_t n, int64_t pos);
};

/* Data parallelism: this process's rank and the number of ranks (0 and 1
 * without MPI), set by tr_main before the first step. */
extern int tr_rank, tr_ranks;
/* Rank tr_rank's shard of a tensor of n elements: [lo, lo + len), shards of
 * ceil(n / ranks) elements (the last ones shorter, or empty). */
static inline int64_t tr_shard_lo(int64_t n) {
  int64_t lo = (int64_t)tr_rank * ((n + tr_ranks - 1) / tr_ranks);
  return lo < n ? lo : n;
}
static inline int64_t tr_shard_len(int64_t n) {
  int64_t hi = tr_shard_lo(n) + (n + tr_ranks - 1) / tr_ranks;
  return (hi < n ? hi : n) - tr_shard_lo(n);
}
/* The collectives of a plan for N ranks (f32, sums over the ranks), CPU
 * trainer (MPI; trainer_mpi): g summed in place; g summed, rank r's shard
 * [lo, lo + len) of the sum left at g + lo and, when shard is elsewhere,
 * written there (accumulate: added to it); every rank's shard of p copied
 * to every rank. */
void tr_allreduce(float *g, int64_t n);
void tr_reduce_scatter(float *g, float *shard, int64_t n, int accumulate);
void tr_all_gather(float *p, int64_t n);
/* Rank 0's bytes to every rank (MPI_Bcast; nothing without MPI): NCCL's id. */
void tr_bcast(void *p, int64_t bytes);
/* The same on the device (memplan_trainer_cuda.cu, NCCL). */
void tr_cuda_allreduce(float *g, int64_t n);
void tr_cuda_reduce_scatter(float *g, float *shard, int64_t n, int accumulate);
void tr_cuda_all_gather(float *p, int64_t n);

/* Generation's prefill (n rows from position 0) and decode (one row at
 * position pos) on the CPU (cpu_generate.c): TrModel.decode_run. */
void tr_decode(const TrModel *m, unsigned char *arena, int64_t n, int64_t pos);
/* The same on the device (cuda/cuda_generate.cu), in the device arena; trainer.cu's decode_run. */
void tr_cuda_decode(const TrModel *m, unsigned char *arena, int64_t n, int64_t pos);

/* The CUDA trainer's device (memplan_trainer_cuda.cu; trainer.cu only). */
extern const TrDevice tr_cuda_device;

/* The trainer program: parses argv, runs, returns the exit status. */
int tr_main(int argc, char **argv, const TrModel *m);

/* The random key of one op's kernels in one micro-batch mb of step t (ops
 * whose entry sets mode_arg, memplan_kernels.h): with mix64 splitmix64's
 * output function (x + 0x9e3779b97f4a7c15, then its two multiply-xorshifts),
 * key = mix64(mix64(mix64(seed) ^ t) ^ ((mb << 32) ^ layer)), seed the
 * trainer's --seed and layer the 64-bit FNV-1a hash of the layer's name
 * (codegen/emitc.c). Python reproduces it bit for bit. */
uint64_t tr_op_key(int64_t t, int mb, uint64_t layer);

/* --profile: step() calls tr_tick(i) after op i; it adds the time since the
 * previous tick to op i. */
extern int tr_profiling;
void tr_tick(int op);

#ifdef __cplusplus
}
#endif
#endif
