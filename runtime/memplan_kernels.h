/* memplan_kernels.h: every kernel a generated trainer calls, declared once
 * with its contract. A backend header expands these lists with its prefix:
 * memplan_rt.h (rt_, cpu_*.c), cuda/memplan_rt_cuda.h (rt_cuda_, cuda_*.cu)
 * and tests/gpu/ref.h (ref_, the double-precision references of the tests).
 *
 * Adding a kernel is one X(return type, name, (parameters)) entry in a list
 * below, with its contract as a comment, plus its definitions: rt_<name> in
 * the family's cpu_*.c, rt_cuda_<name> in its cuda/cuda_*.cu and, for MEMPLAN_KERNELS,
 * ref_<name> in tests/gpu/ref.c. No other header changes; the compiler checks
 * each definition against the declaration made from the entry. Kernels that
 * only one backend has, or whose contract differs between backends (loss
 * scaling's unscale_check), are declared in that backend's header.
 *
 * Generated calls (codegen/emitc.c, call()) pass, in this order:
 *   <prefix><op>_forward(outs..., ins..., [scratch], dims..., floats...)
 *   <prefix><op>_backward(outs..., ins..., [scratch], dims..., floats...,
 *                         [float scale for losses], one int acc per out)
 * and the updates and casts as declared. floats are the op's float
 * attributes (layernorm's and rmsnorm's eps), in the order its planner/ops.c
 * entry declares them. An op whose entry sets mode_arg takes (int mode,
 * uint64_t key) right after its floats, forward and backward alike: mode is
 * one of RT_MODE_* below, key a counter-based random key (memplan_trainer.h,
 * tr_op_key) that is the same for the op's forward, recompute and backward
 * within one micro-batch of one step, and 0 in eval.
 *
 * Conventions, shared by every kernel:
 * - All tensors are dense, row-major, fp32 unless noted; token ids are int32.
 * - Kernels never allocate heap memory. Scratch is either a workspace buffer
 *   the plan owns or bounded stack space (at most 64 KiB per call and thread).
 * - Op-local scratch: an op whose planner/ops.c entry sets .scratch takes
 *   `float *scratch` right after its inputs, forward and backward alike. It is
 *   a buffer of the plan (role temp) of the bytes the entry asked for from the
 *   op's dims, live during this one call: its contents are garbage on entry
 *   and dead on return, and no other live buffer overlaps it. NULL when the
 *   entry asked for 0 bytes for these dims.
 * - Backward kernels write each gradient output either as a fresh value
 *   (acc = 0: "=", the first writer of that gradient in the schedule) or add
 *   into it (acc = 1: "+="). No gradient buffer is ever memset by the caller.
 *   A gradient pointer may be NULL: that gradient is not needed.
 * - "alias-safe (a, b)" means the caller may pass the same pointer for a and b
 *   (in-place execution planned by liveness); every other pair is disjoint.
 * - Optimizer state (AdamW m, v; SGD buf) must be zeroed once by the trainer
 *   before the first step; hyperparameters are double (as PyTorch's Python
 *   floats are).
 * - Matrix sizes must fit in int (the CBLAS interface); kernels abort with
 *   file:line otherwise.
 * - The loss gradient is not a buffer: loss backward kernels take `scale`
 *   (1.0, or the loss scale under fp16 loss scaling).
 */
#ifndef MEMPLAN_KERNELS_H
#define MEMPLAN_KERNELS_H

#include <math.h>
#include <stdint.h>

/* The mode argument of ops with state or randomness (see above). */
enum { RT_MODE_TRAIN = 0, RT_MODE_RECOMPUTE = 1, RT_MODE_EVAL = 2 };

/* Forward and backward of every op, and the optimizer updates. */
#define MEMPLAN_KERNELS(X)                                                                                             \
  /* linear: out[M,N] = x[M,K] @ W[N,K]^T + b[N] (b may be NULL). PyTorch layout. */                                   \
  X(void, linear_forward,                                                                                              \
    (float *out, const float *x, const float *W, const float *b, int64_t M, int64_t K, int64_t N))                     \
  /* dx[M,K] (+)= dout @ W; dW[N,K] (+)= dout^T @ x; db[N] (+)= colsum(dout). */                                       \
  X(void, linear_backward,                                                                                             \
    (float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, int64_t M, int64_t K,         \
     int64_t N, int acc_dx, int acc_dW, int acc_db))                                                                   \
                                                                                                                       \
  /* matmul (batched): out[Bt,M,N] = a[Bt,M,K] @ b[Bt,K,N]. */                                                         \
  X(void, matmul_forward, (float *out, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N))   \
  /* da (+)= dout @ b^T; db (+)= a^T @ dout (per batch). */                                                            \
  X(void, matmul_backward,                                                                                             \
    (float *da, float *db, const float *dout, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K,        \
     int64_t N, int acc_da, int acc_db))                                                                               \
                                                                                                                       \
  /* add: out[n] = a + b. alias-safe (out, a), (out, b). */                                                            \
  X(void, add_forward, (float *out, const float *a, const float *b, int64_t n))                                        \
  /* da (+)= dout; db (+)= dout. alias-safe (da, dout) when acc_da = 0, likewise db. */                                \
  X(void, add_backward, (float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db))                  \
                                                                                                                       \
  /* mul (element-wise, SwiGLU's gate * up): out[n] = a * b. alias-safe (out, a), (out, b). */                         \
  X(void, mul_forward, (float *out, const float *a, const float *b, int64_t n))                                        \
  /* da (+)= dout * b; db (+)= dout * a, one pass that reads dout, a and b at an element                               \
   * before writing da there, then db. alias-safe (da, dout) when acc_da = 0, likewise                                 \
   * db; da and db may be one buffer with acc_db = 1 (mul(x, x): it receives 2 x dout). */                             \
  X(void, mul_backward,                                                                                                \
    (float *da, float *db, const float *dout, const float *a, const float *b, int64_t n, int acc_da, int acc_db))      \
                                                                                                                       \
  /* scale_channels (squeeze-excitation's gate): out[p, i] = x[p, i] * s[p] over NC planes p of S elements.            \
   * alias-safe (out, x). */                                                                                           \
  X(void, scale_channels_forward, (float *out, const float *x, const float *s, int64_t NC, int64_t S))                 \
  /* dx (+)= dout * s[p]; ds[p] (+)= sum_i dout[p, i] x[p, i], a plane's ds before its dx. alias-safe (dx, dout) when  \
   * acc_dx = 0. */                                                                                                    \
  X(void, scale_channels_backward,                                                                                     \
    (float *dx, float *ds, const float *dout, const float *x, const float *s, int64_t NC, int64_t S, int acc_dx,       \
     int acc_ds))                                                                                                      \
                                                                                                                       \
  /* layer_scale (ConvNeXt's): out[n, c, i] = x[n, c, i] * w[c] over N samples of C planes of S elements.              \
   * alias-safe (out, x). */                                                                                           \
  X(void, layer_scale_forward, (float *out, const float *x, const float *w, int64_t N, int64_t C, int64_t S))          \
  /* dx (+)= dout * w[c]; dw[c] (+)= sum_n,i dout[n, c, i] x[n, c, i], a channel's dw before its dx. alias-safe        \
   * (dx, dout) when acc_dx = 0. */                                                                                    \
  X(void, layer_scale_backward,                                                                                        \
    (float *dx, float *dw, const float *dout, const float *x, const float *w, int64_t N, int64_t C, int64_t S,         \
     int acc_dx, int acc_dw))                                                                                          \
                                                                                                                       \
  /* relu: out = max(x, 0). alias-safe (out, x). */                                                                    \
  X(void, relu_forward, (float *out, const float *x, int64_t n))                                                       \
  /* dx (+)= dout * (out > 0); uses the output. alias-safe (dx, dout). */                                              \
  X(void, relu_backward, (float *dx, const float *dout, const float *out, int64_t n, int acc))                         \
  /* relu6 (MobileNet's): out = min(max(x, 0), 6). alias-safe (out, x). */                                             \
  X(void, relu6_forward, (float *out, const float *x, int64_t n))                                                      \
  /* dx (+)= dout * (0 < out < 6), torch's hardtanh gradient (none at the kinks); uses the output.                     \
   * alias-safe (dx, dout). */                                                                                         \
  X(void, relu6_backward, (float *dx, const float *dout, const float *out, int64_t n, int acc))                        \
  /* sigmoid (gates): out = 1 / (1 + exp(-x)). alias-safe (out, x). */                                                 \
  X(void, sigmoid_forward, (float *out, const float *x, int64_t n))                                                    \
  /* dx (+)= dout * out (1 - out); uses the output. alias-safe (dx, dout). */                                          \
  X(void, sigmoid_backward, (float *dx, const float *dout, const float *out, int64_t n, int acc))                      \
  /* hardswish (MobileNetV3's): out = x relu6(x + 3) / 6. alias-safe (out, x). */                                      \
  X(void, hardswish_forward, (float *out, const float *x, int64_t n))                                                  \
  /* dx (+)= dout * (0 if x < -3, x / 3 + 0.5 if x <= 3, else 1), torch's gradient; uses the input.                    \
   * alias-safe (dx, dout). */                                                                                         \
  X(void, hardswish_backward, (float *dx, const float *dout, const float *x, int64_t n, int acc))                      \
  /* hardsigmoid: out = relu6(x + 3) / 6. alias-safe (out, x). */                                                      \
  X(void, hardsigmoid_forward, (float *out, const float *x, int64_t n))                                                \
  /* dx (+)= dout / 6 where -3 < x < 3 (torch's: none at the kinks); uses the input. alias-safe (dx, dout). */         \
  X(void, hardsigmoid_backward, (float *dx, const float *dout, const float *x, int64_t n, int acc))                    \
                                                                                                                       \
  /* gelu: approximate = 1, the tanh approximation (GPT-2):                                                            \
   * 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))); approximate = 0, exact (PyTorch's default):                       \
   * 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x). alias-safe (out, x). */                                                   \
  X(void, gelu_forward, (float *out, const float *x, int64_t n, int approximate))                                      \
  /* dx (+)= dout * gelu'(x); exact: gelu'(x) = Phi(x) + x phi(x). alias-safe (dx, dout). */                           \
  X(void, gelu_backward, (float *dx, const float *dout, const float *x, int64_t n, int approximate, int acc))          \
                                                                                                                       \
  /* scale (LoRA's alpha / rank): out = factor x. alias-safe (out, x). */                                              \
  X(void, scale_forward, (float *out, const float *x, int64_t n, double factor))                                       \
  /* dx (+)= factor dout. alias-safe (dx, dout). */                                                                    \
  X(void, scale_backward, (float *dx, const float *dout, int64_t n, double factor, int acc))                           \
                                                                                                                       \
  /* silu (swish, Llama's feed-forward gate): out = x sigmoid(x). alias-safe (out, x). */                              \
  X(void, silu_forward, (float *out, const float *x, int64_t n))                                                       \
  /* dx (+)= dout * s (1 + x (1 - s)), s = sigmoid(x). alias-safe (dx, dout). */                                       \
  X(void, silu_backward, (float *dx, const float *dout, const float *x, int64_t n, int acc))                           \
                                                                                                                       \
  /* layernorm over the last dim C of N rows: out = (x - mean) * rstd * w + b with                                     \
   * rstd = 1 / sqrt(var + eps) (biased variance); saves mean[N] and rstd[N] for                                       \
   * backward. mean and rstd may be NULL (eval: nothing saved); b may be NULL                                          \
   * (bias: false, nothing added). */                                                                                  \
  X(void, layernorm_forward,                                                                                           \
    (float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, int64_t N, int64_t C,       \
     float eps))                                                                                                       \
  /* dx (+)= rstd (w dout - mean(w dout) - xhat mean(w dout xhat)); dw (+)= sum_rows dout xhat;                        \
   * db (+)= sum_rows dout. dx, dw and db may each be NULL (not computed; db is NULL                                   \
   * for bias: false). eps is not read: rstd is saved. */                                                              \
  X(void, layernorm_backward,                                                                                          \
    (float *dx, float *dw, float *db, const float *dout, const float *x, const float *w, const float *mean,            \
     const float *rstd, int64_t N, int64_t C, float eps, int acc_dx, int acc_dw, int acc_db))                          \
                                                                                                                       \
  /* rmsnorm over the last dim C of N rows: out = x * rstd * w with                                                    \
   * rstd = 1 / sqrt(mean(x^2) + eps); saves rstd[N] (may be NULL in eval). */                                         \
  X(void, rmsnorm_forward, (float *out, float *rstd, const float *x, const float *w, int64_t N, int64_t C, float eps)) \
  /* dx (+)= rstd (w dout - x rstd^2 mean(w dout x)); dw (+)= sum_rows dout x rstd.                                    \
   * eps is not read: rstd is saved. */                                                                                \
  X(void, rmsnorm_backward,                                                                                            \
    (float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd, int64_t N, int64_t C, \
     float eps, int acc_dx, int acc_dw))                                                                               \
                                                                                                                       \
  /* softmax over the last dim C of N rows (max subtracted). alias-safe (out, x). */                                   \
  X(void, softmax_forward, (float *out, const float *x, int64_t N, int64_t C))                                         \
  /* dx (+)= out * (dout - sum(dout * out)). alias-safe (dx, dout). */                                                 \
  X(void, softmax_backward, (float *dx, const float *dout, const float *out, int64_t N, int64_t C, int acc))           \
                                                                                                                       \
  /* self-attention core, the part between the qkv and output projections:                                             \
   * qkv[B,T,C+2*C/NH*KVH] holds q (NH heads), k and v (KVH heads each) of                                             \
   * size hs = C/NH side by side per position; query head h reads kv head                                              \
   * h / (NH/KVH) (grouped-query attention; KVH = NH: GPT-2's multi-head).                                             \
   * out[B,T,C] has heads concatenated. Scores are scaled by 1/sqrt(hs) and,                                           \
   * with causal != 0, masked causally (row t sees keys 0..t; else all T).                                             \
   * Like FlashAttention, only the row statistics are saved: lse[B,NH,T]                                               \
   * receives the log-sum-exp of each row of scaled scores (lse may be NULL                                            \
   * in eval); backward recomputes the probabilities from q, k and lse                                                 \
   * instead of keeping a [B,NH,T,T] tensor. C % NH == 0, NH % KVH == 0;                                               \
   * T <= 16384 on the CPU (stack scratch; the CUDA limit is on hs instead,                                            \
   * see memplan_rt_cuda.h). */                                                                                        \
  X(void, attention_forward,                                                                                           \
    (float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH,               \
     int64_t causal))                                                                                                  \
  /* dqkv (+)= gradient through attention (dk, dv of a kv head sum over the                                            \
   * query heads that read it); needs the forward output `out` (for                                                    \
   * D_i = dot(dout_i, out_i), as FlashAttention's backward does). */                                                  \
  X(void, attention_backward,                                                                                          \
    (float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse, int64_t B, int64_t T,       \
     int64_t C, int64_t NH, int64_t KVH, int64_t causal, int acc))                                                     \
                                                                                                                       \
  /* Swin's shifted-window attention core, torchvision's shifted_window_attention                                      \
   * between its qkv and proj linears: qkv[B,H,W,3C] is channel-last, q | k | v with                                   \
   * heads of hs = C/NH contiguous in each. The map is rolled by -shift on H and W and                                 \
   * cut in ws x ws windows (H % ws == W % ws == 0; rt_window_pos below); within a window                              \
   * query j's score of key k is q.k/sqrt(hs) + table[rt_window_rel(j, k, ws), h]                                      \
   * (table[(2ws-1)^2, NH]: the relative position bias) - 100 when shift > 0 and the                                   \
   * two lie in different regions of the roll (torchvision's mask). out[B,H,W,C] is                                    \
   * written at each token's own position (the roll undone); lse[B,NH,H,W] as                                          \
   * attention's (NULL in eval). ws*ws <= 1024. */                                                                     \
  X(void, window_attention_forward,                                                                                    \
    (float *out, float *lse, const float *qkv, const float *table, int64_t B, int64_t H, int64_t W, int64_t C,         \
     int64_t NH, int64_t ws, int64_t shift))                                                                           \
  /* dqkv (+)= gradient through it, dtable (+)= the scores' gradients summed by table row. */                          \
  X(void, window_attention_backward,                                                                                   \
    (float *dqkv, float *dtable, const float *dout, const float *qkv, const float *table, const float *out,            \
     const float *lse, int64_t B, int64_t H, int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift, int acc,     \
     int acc_table))                                                                                                   \
  /* cross-attention (not causal): query rows q[B,Tq,C] attend to the keys and                                         \
   * values of a context, kv[B,Tk,2C] holding k (C) and v (C) side by side per                                         \
   * position; NH heads of size hs = C/NH, scores scaled by 1/sqrt(hs).                                                \
   * out[B,Tq,C]; lse[B,NH,Tq] the rows' log-sum-exp (may be NULL in eval), as                                         \
   * attention's. Tk <= 16384 on the CPU (stack scratch). */                                                           \
  X(void, cross_attention_forward,                                                                                     \
    (float *out, float *lse, const float *q, const float *kv, int64_t B, int64_t Tq, int64_t Tk, int64_t C,            \
     int64_t NH))                                                                                                      \
  /* dq (+)= and dkv (+)= the gradients through cross_attention (either may be                                         \
   * NULL: not needed), from the forward's out and lse as attention's. */                                              \
  X(void, cross_attention_backward,                                                                                    \
    (float *dq, float *dkv, const float *dout, const float *q, const float *kv, const float *out, const float *lse,    \
     int64_t B, int64_t Tq, int64_t Tk, int64_t C, int64_t NH, int acc_dq, int acc_dkv))                               \
                                                                                                                       \
  /* embedding: out[N,C] = W[tokens[i], :] with W[V,C]. Token ids are checked by                                       \
   * the data loader, not here. */                                                                                     \
  X(void, embedding_forward, (float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V))     \
  /* dW (+)= scatter-add of dout rows at tokens. With acc = 0, dW is zeroed first. */                                  \
  X(void, embedding_backward,                                                                                          \
    (float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V, int acc))                   \
                                                                                                                       \
  /* position embedding: out[B,T,C] = W[t, :] for every b (W has at least T rows). */                                  \
  X(void, position_embedding_forward, (float *out, const float *W, int64_t B, int64_t T, int64_t C))                   \
  /* dW[t,:] (+)= sum_b dout[b,t,:] for t < T; rows >= T are untouched when acc = 1                                    \
   * and zeroed when acc = 0. Wrows is the number of rows of W. */                                                     \
  X(void, position_embedding_backward,                                                                                 \
    (float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows, int acc))                           \
                                                                                                                       \
  /* rope, rotary position embedding (Hugging Face Llama's rotate_half): x[B,T,(H+2KV)*hd]                             \
   * holds per position q (H heads of hd), k (KV heads), v (KV heads). At position                                     \
   * t in [0, T), each q and k head's pairs (i, i + hd/2), i < hd/2, are rotated by                                    \
   * a = t f_i (f_i: rt_rope_freq below, theta^(-2i/hd) or with Llama 3's scaling when                                 \
   * factor > 0): out_i = x_i cos a - x_{i+hd/2} sin a,                                                                \
   * out_{i+hd/2} = x_{i+hd/2} cos a + x_i sin a, with a, cos a and sin a computed in                                  \
   * double and rounded to float (nothing is stored). v is copied. hd even.                                            \
   * alias-safe (out, x). */                                                                                           \
  X(void, rope_forward,                                                                                                \
    (float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta, float factor,   \
     float low, float high, float orig))                                                                               \
  /* dx (+)= dout rotated by -a on q and k, dout on v. alias-safe (dx, dout) when acc = 0. */                          \
  X(void, rope_backward,                                                                                               \
    (float *dx, const float *dout, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta, float factor, \
     float low, float high, float orig, int acc))                                                                      \
                                                                                                                       \
  /* cross-entropy, mean over N rows: loss[0] = mean(lse_i - logits[i, targets_i]);                                    \
   * saves lse[N] (log-sum-exp per row, may be NULL in eval). */                                                       \
  X(void, cross_entropy_forward,                                                                                       \
    (float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N, int64_t V))                      \
  /* dlogits (+)= scale * (softmax(logits) - onehot(targets)) / N.                                                     \
   * alias-safe (dlogits, logits) when acc = 0. */                                                                     \
  X(void, cross_entropy_backward,                                                                                      \
    (float *dlogits, const float *logits, const int32_t *targets, const float *lse, int64_t N, int64_t V, float scale, \
     int acc))                                                                                                         \
                                                                                                                       \
  /* mse, mean over n elements: loss[0] = mean((pred - target)^2). */                                                  \
  X(void, mse_forward, (float *loss, const float *pred, const float *target, int64_t n))                               \
  /* dpred (+)= scale * 2 (pred - target) / n. */                                                                      \
  X(void, mse_backward, (float *dpred, const float *pred, const float *target, int64_t n, float scale, int acc))       \
                                                                                                                       \
  /* linear_cross_entropy: loss[0] = mean over N rows of lse_i - z[i, targets_i], z = x[N,K] @ W[V,K]^T + b[V]         \
   * (b may be NULL), R rows at a time: a chunk's logits live only in scratch (R*V + N floats: the chunk's             \
   * logits, then the rows' loss terms). Training (dx, dW, db not NULL: the loss's statistics) also writes,            \
   * chunk by chunk, the gradients of the unscaled loss: with g = (softmax(z) - onehot(targets)) / N,                  \
   * dx = g @ W [N,K], dW = g^T @ x [V,K], db = colsum(g) [V] (only when b; db then has V floats). Eval passes         \
   * NULL for all three and computes the loss only. loss NULL (planner/headgrad.h's deferred recompute, dx and db      \
   * NULL too): dW alone, bit for bit what a training forward writes there. */                                         \
  X(void, linear_cross_entropy_forward,                                                                                \
    (float *loss, float *dx, float *dW, float *db, const float *x, const float *W, const float *b,                     \
     const int32_t *targets, float *scratch, int64_t N, int64_t V, int64_t K, int64_t R))                              \
  /* The loss's gradients from forward's statistics: dx (+)= scale * sdx; dW (+)= scale * sdW; db (+)= scale *         \
   * sdb (V floats; NULL without a bias). Each output may be NULL. alias-safe (dx, sdx) when acc_dx = 0,               \
   * likewise dW, db. scratch is NULL (no backward scratch). */                                                        \
  X(void, linear_cross_entropy_backward,                                                                               \
    (float *dx, float *dW, float *db, const float *sdx, const float *sdW, const float *sdb, float *scratch, int64_t N, \
     int64_t V, int64_t K, int64_t R, float scale, int acc_dx, int acc_dW, int acc_db))                                \
                                                                                                                       \
  /* conv2d (nn.Conv2d): x[N,C,H,W], W[O,C/G,kh,kw], b[O] (may be NULL) -> out[N,O,Ho,Wo]; stride sh, sw,              \
   * zero padding ph, pw (height, width), dilation d, G groups (G divides C and O; G = C is depthwise).                \
   * scratch: the plan's op-local buffer of C*kh*kw*Ho*Wo floats (one sample's im2col matrix), NULL for                \
   * a 1x1 kernel at stride 1 without padding, which reads x directly. */                                              \
  X(void, conv2d_forward,                                                                                              \
    (float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N, int64_t C, int64_t H,      \
     int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,        \
     int64_t pw, int64_t d, int64_t G))                                                                                \
  /* dx (+)= col2im(W^T dout); dW (+)= dout im2col(x)^T; db (+)= sum over N, Ho, Wo of dout.                           \
   * Each gradient may be NULL. scratch as forward (im2col of x, then the columns of dx). */                           \
  X(void, conv2d_backward,                                                                                             \
    (float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, float *scratch, int64_t N,    \
     int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh,          \
     int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G, int acc_dx, int acc_dW, int acc_db))                    \
                                                                                                                       \
  /* batchnorm2d over x[N,C,S] (S = H*W; 1 for [N,C]), statistics per channel c over                                   \
   * its M = N*S values: out = (x - m) * r * w[c] + b[c] with r = 1 / sqrt(v + eps).                                   \
   * mode RT_MODE_TRAIN: m, v the batch mean and biased variance; saves mean[C] = m and                                \
   * rstd[C] = r; running_mean = (1 - momentum) running_mean + momentum m and                                          \
   * running_var = (1 - momentum) running_var + momentum v M / (M - 1) (unbiased, as                                   \
   * torch). RT_MODE_RECOMPUTE: the same out, mean and rstd, running statistics untouched                              \
   * (read-only). RT_MODE_EVAL: m, v are the running statistics (read-only); mean and                                  \
   * rstd may be NULL. key is not read. M > 1. */                                                                      \
  X(void, batchnorm2d_forward,                                                                                         \
    (float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, float *running_mean,        \
     float *running_var, int64_t N, int64_t C, int64_t S, float eps, float momentum, int mode, uint64_t key))          \
  /* Batch-statistics gradient, per channel, xhat = (x - mean) rstd:                                                   \
   * dx (+)= w rstd (dout - mean(dout) - xhat mean(dout xhat)); dw (+)= sum dout xhat;                                 \
   * db (+)= sum dout (sums and means over the channel's M values). dx, dw, db may each                                \
   * be NULL. eps, momentum, mode and key are not read. */                                                             \
  X(void, batchnorm2d_backward,                                                                                        \
    (float *dx, float *dw, float *db, const float *dout, const float *x, const float *w, const float *mean,            \
     const float *rstd, int64_t N, int64_t C, int64_t S, float eps, float momentum, int mode, uint64_t key,            \
     int acc_dx, int acc_dw, int acc_db))                                                                              \
                                                                                                                       \
  /* flatten and reshape: out[n] = x, the same row-major elements under a new                                          \
   * shape; nothing to do when out == x (planned in place). alias-safe (out, x). */                                    \
  X(void, flatten_forward, (float *out, const float *x, int64_t n))                                                    \
  /* dx (+)= dout. alias-safe (dx, dout) when acc = 0 (then nothing to do). */                                         \
  X(void, flatten_backward, (float *dx, const float *dout, int64_t n, int acc))                                        \
  X(void, reshape_forward, (float *out, const float *x, int64_t n))                                                    \
  X(void, reshape_backward, (float *dx, const float *dout, int64_t n, int acc))                                        \
                                                                                                                       \
  /* transpose: x as [A, P, M, Q, Z] (P and Q the swapped axes) to out[A, Q, M, P, Z]:                                 \
   * out[a, q, m, p, z] = x[a, p, m, q, z]. */                                                                         \
  X(void, transpose_forward, (float *out, const float *x, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z))      \
  /* dx[a, p, m, q, z] (+)= dout[a, q, m, p, z]. */                                                                    \
  X(void, transpose_backward,                                                                                          \
    (float *dx, const float *dout, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z, int acc))                    \
                                                                                                                       \
  /* concat along an axis: input k as [O, n_k, In], out[O, n_0 + .. + n_5, In]; inputs                                 \
   * with n_k = 0 are absent (NULL). */                                                                                \
  X(void, concat_forward,                                                                                              \
    (float *out, const float *a0, const float *a1, const float *a2, const float *a3, const float *a4, const float *a5, \
     int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4, int64_t n5))                   \
  /* da_k (+)= dout[:, n_0 + .. + n_(k-1) + (0 .. n_k), :], in the order k = 0 .. 5, so                                \
   * gradients may be one buffer (concat of a tensor with itself: acc = 1 after the first). */                         \
  X(void, concat_backward,                                                                                             \
    (float *da0, float *da1, float *da2, float *da3, float *da4, float *da5, const float *dout, int64_t O, int64_t In, \
     int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4, int64_t n5, int acc0, int acc1, int acc2, int acc3,   \
     int acc4, int acc5))                                                                                              \
                                                                                                                       \
  /* class token (ViT): out[B, N+1, C] with out[b, 0, :] = W[C] and out[b, 1 + n, :] = x[b, n, :]. */                  \
  X(void, class_token_forward, (float *out, const float *x, const float *W, int64_t B, int64_t N, int64_t C))          \
  /* dx[b, n, :] (+)= dout[b, 1 + n, :]; dW (+)= sum_b dout[b, 0, :] (in batch order). */                              \
  X(void, class_token_backward,                                                                                        \
    (float *dx, float *dW, const float *dout, int64_t B, int64_t N, int64_t C, int acc_dx, int acc_dW))                \
                                                                                                                       \
  /* select: x as [O, N, In], out[O, In] = x[:, index, :] (0 <= index < N). */                                         \
  X(void, select_forward, (float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t index))               \
  /* dx[:, index, :] (+)= dout; the other rows of dx are 0 (acc = 0) or left as they are. */                           \
  X(void, select_backward, (float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t index, int acc))   \
                                                                                                                       \
  /* pad: x as [O, N, In], out[O, Nout, In] = x's rows n < N and zeros after (Nout > N: F.pad's padding at             \
   * the end of an axis), or its first Nout rows (Nout < N: a crop). */                                                \
  X(void, pad_forward, (float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t Nout))                   \
  /* dx (+)= dout's rows n < N, zeros after (a crop's gradient: the cut rows). */                                      \
  X(void, pad_backward, (float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t Nout, int acc))       \
                                                                                                                       \
  /* maxpool2d over each of the N*C planes of x[N,C,H,W]: out[N,C,Ho,Wo] is the maximum of the                         \
   * k x k window at (ho s - p, wo s - p); padding is -inf (never chosen). As torch: the first                         \
   * maximum in row-major window order wins, a NaN propagates. Ho = (H + 2p - k) / s + 1 (rounded up with              \
   * ceil_mode, the last window starting inside the input or its left padding), p <= k/2. */                           \
  X(void, maxpool2d_forward,                                                                                           \
    (float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t k,        \
     int64_t s, int64_t p))                                                                                            \
  /* dx (+)= dout routed to each window's maximum, found again in x (the same rule: no saved                           \
   * indices); overlapping windows add in row-major output order. */                                                   \
  X(void, maxpool2d_backward,                                                                                          \
    (float *dx, const float *dout, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, \
     int64_t k, int64_t s, int64_t p, int acc))                                                                        \
  /* avgpool2d: out = the window's sum (double) / (k k): zero padding counted, torch's default                         \
   * count_include_pad = True (a window never passes the padding when ceil_mode is false). */                          \
  X(void, avgpool2d_forward,                                                                                           \
    (float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t k,        \
     int64_t s, int64_t p))                                                                                            \
  /* dx (+)= sum over the windows holding an element of dout / (k k), in row-major output order. */                    \
  X(void, avgpool2d_backward,                                                                                          \
    (float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t k,      \
     int64_t s, int64_t p, int acc))                                                                                   \
  /* adaptive_avgpool2d (torch's AdaptiveAvgPool2d): out[N,C,Ho,Wo] is the mean (summed in double) of the window       \
   * rows floor(ho H / Ho) .. ceil((ho + 1) H / Ho) - 1 by columns likewise of W, of uneven sizes where Ho does        \
   * not divide H. */                                                                                                  \
  X(void, adaptive_avgpool2d_forward,                                                                                  \
    (float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo))                  \
  /* dx (+)= sum over the windows holding an element of dout / (its window's size), in row-major output order. */      \
  X(void, adaptive_avgpool2d_backward,                                                                                 \
    (float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int acc))       \
  /* global average pooling: out[NC] = mean of each plane x[NC, HW] (summed in double). */                             \
  X(void, global_avgpool_forward, (float *out, const float *x, int64_t NC, int64_t HW))                                \
  /* dx[NC, HW] (+)= dout[NC] / HW. */                                                                                 \
  X(void, global_avgpool_backward, (float *dx, const float *dout, int64_t NC, int64_t HW, int acc))                    \
                                                                                                                       \
  /* dropout: element i is kept when (mix64(key ^ i) >> 40) >= ceil(p 2^24), mix64 being                               \
   * splitmix64's output function (memplan_trainer.h), so P(keep) = 1 - p to 2^-24 and a                               \
   * recompute or Python replays the mask from the key alone; out = x * m with m = 1/(1-p)                             \
   * (computed in double, rounded to float) when kept and 0 when not, as torch's x * noise.                            \
   * mask[(n + 31) / 32] (i32 words) receives bit i % 32 of word i / 32 = kept; NULL: not                              \
   * stored. RT_MODE_EVAL: out = x, mask untouched. alias-safe (out, x). */                                            \
  X(void, dropout_forward, (float *out, int32_t *mask, const float *x, int64_t n, float p, int mode, uint64_t key))    \
  /* dx (+)= dout * m, the mask read from `mask`, or regenerated from key when mask is NULL                            \
   * (the plan chose not to store it). alias-safe (dx, dout) when acc = 0. */                                          \
  X(void, dropout_backward,                                                                                            \
    (float *dx, const float *dout, const int32_t *mask, int64_t n, float p, int mode, uint64_t key, int acc))          \
  /* stochastic_depth (torchvision's): out = x * keep(r) / (1 - p) over N rows r of S elements, keep(r) dropout's      \
   * test of mix64(key ^ r) (batch = 1: row 0's draw for every row); eval: out = x. Nothing stored: backward           \
   * redraws. alias-safe (out, x). */                                                                                  \
  X(void, stochastic_depth_forward,                                                                                    \
    (float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p, int mode, uint64_t key))                \
  /* dx (+)= dout * keep(r) / (1 - p), the forward's draws from the same key. alias-safe (dx, dout). */                \
  X(void, stochastic_depth_backward,                                                                                   \
    (float *dx, const float *dout, int64_t N, int64_t S, int64_t batch, float p, int mode, uint64_t key, int acc))     \
                                                                                                                       \
  /* groupnorm (torch's GroupNorm) over x[N,C,S] (S positions per channel): each of the G groups of C/G channels       \
   * of a sample is normalized over its (C/G) S values, out = (x - mean) rstd w[c] + b[c] with                         \
   * rstd = 1 / sqrt(var + eps) (biased, summed in double); mean[N,G], rstd[N,G] saved (NULL in eval); w and b NULL    \
   * without affine (w = 1, b = 0). */                                                                                 \
  X(void, groupnorm_forward,                                                                                           \
    (float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, int64_t N, int64_t C,       \
     int64_t S, int64_t G, float eps))                                                                                 \
  /* dx (+)= rstd (w dout - mean_g(w dout) - xhat mean_g(w dout xhat)); dw[c] (+)= sum dout xhat;                      \
   * db[c] (+)= sum dout (over N and S). Any gradient may be NULL; eps is not read. */                                 \
  X(void, groupnorm_backward,                                                                                          \
    (float *dx, float *dw, float *db, const float *dout, const float *x, const float *w, const float *mean,            \
     const float *rstd, int64_t N, int64_t C, int64_t S, int64_t G, float eps, int acc_dx, int acc_dw, int acc_db))    \
  /* add_channels: out[NC,S] = x + e[NC] broadcast over S. alias-safe (out, x). */                                     \
  X(void, add_channels_forward, (float *out, const float *x, const float *e, int64_t NC, int64_t S))                   \
  /* dx (+)= dout; de[NC] (+)= sum over S of dout (in double). alias-safe (dx, dout) when acc_dx = 0. */               \
  X(void, add_channels_backward,                                                                                       \
    (float *dx, float *de, const float *dout, int64_t NC, int64_t S, int acc_dx, int acc_de))                          \
  /* upsample (nearest, torch's interpolate scale_factor s): out[NC, sH, sW] at (i, j) = x[i / s, j / s]. */           \
  X(void, upsample_forward, (float *out, const float *x, int64_t NC, int64_t H, int64_t W, int64_t s))                 \
  /* dx (+)= the sum of dout over each s x s block. */                                                                 \
  X(void, upsample_backward, (float *dx, const float *dout, int64_t NC, int64_t H, int64_t W, int64_t s, int acc))     \
  /* timestep_embedding (diffusers' get_timestep_embedding, scale 1): h = D / 2 frequencies                            \
   * f_i = exp(-ln(max_period) i / (h - shift)) and a = t[b] f_i (in double); out[B,D] = [sin a, cos a]                \
   * ([cos a, sin a] with flip), a zero last column for an odd D. */                                                   \
  X(void, timestep_embedding_forward,                                                                                  \
    (float *out, const float *t, int64_t B, int64_t D, int64_t flip, float shift, float max_period))                   \
  /* dt (+)= sum_i dout . d out / d t (the planner sends no gradient to timesteps: for completeness). */               \
  X(void, timestep_embedding_backward,                                                                                 \
    (float *dt, const float *dout, const float *t, int64_t B, int64_t D, int64_t flip, float shift, float max_period,  \
     int acc))                                                                                                         \
  /* conv_transpose2d (torch's ConvTranspose2d, groups 1): x[N,C,H,W], W[C,O,k,k], b[O] (may be NULL):                 \
   * out[n,o,y,z] = b[o] + sum x[n,c,h,w] W[c,o,i,j] over y = h s - p + i, z = w s - p + j: conv2d's dx of x           \
   * (the conv2d [N,O,Ho,Wo] -> [N,C,H,W] by W), so fp32 products as conv2d's. scratch: O k k H W floats, NULL when    \
   * k = s = 1 and p = 0. Ho, Wo as the shape rule's (output_padding included). */                                     \
  X(void, conv_transpose2d_forward,                                                                                    \
    (float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N, int64_t C, int64_t H,      \
     int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p))                                  \
  /* dx (+)= the convolution of dout by W (stride s: that conv2d's forward); dW (+)= sum x dout; db (+)= sum dout      \
   * (in double). Each may be NULL; the same scratch as forward. */                                                    \
  X(void, conv_transpose2d_backward,                                                                                   \
    (float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, float *scratch, int64_t N,    \
     int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p, int acc_dx, \
     int acc_dW, int acc_db))                                                                                          \
  /* ddpm_noise (docs/diffusion.md): per sample b of S elements t[b] = (mix64(mix64(key ^ 0x74696d65) ^ b) >> 11) mod  \
   * T (as float), eps[b,i] = Box-Muller of u(2q), u(2q+1) with q = (b S + i) / 2, u(j) = ((mix64(key ^ j) >> 11)      \
   * + 0.5) 2^-53: sqrt(-2 ln u(2q)) times cos (even element) or sin (odd) of 2 pi u(2q+1); then                       \
   * xt = sqrt(abar) x0 + sqrt(1 - abar) eps, abar = prod_{i <= t} (1 - beta_i), beta linear from beta_start to        \
   * beta_end over T (all in double, rounded once). The same in every mode (eval draws from key 0). */                 \
  X(void, ddpm_noise_forward,                                                                                          \
    (float *xt, float *eps, float *t, const float *x0, int64_t B, int64_t S, int64_t T, float beta_start,              \
     float beta_end, int mode, uint64_t key))                                                                          \
  /* dx0 (+)= sqrt(abar_t) dout (the gradient of xt; eps and t are constants). */                                      \
  X(void, ddpm_noise_backward,                                                                                         \
    (float *dx0, const float *dout, const float *t, int64_t B, int64_t S, int64_t T, float beta_start, float beta_end, \
     int mode, uint64_t key, int acc))                                                                                 \
                                                                                                                       \
  /* AdamW (PyTorch semantics, decoupled decay): p -= lr*wd*p; m = b1 m + (1-b1) g;                                    \
   * v = b2 v + (1-b2) g^2; p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps).                                         \
   * t is the 1-based step count. */                                                                                   \
  X(void, adamw_update,                                                                                                \
    (float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1, double beta2, double eps,       \
     double wd, int64_t t))                                                                                            \
  /* AdamW with bf16 moments: m and v hold raw bf16 patterns; each element is widened,                                 \
   * updated with adamw_update's float operations (p from the fp32 m and v), and m, v are                              \
   * stored back rounded to nearest even. */                                                                           \
  X(void, adamw_update_bf16,                                                                                           \
    (float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, double lr, double beta1, double beta2, double eps, \
     double wd, int64_t t))                                                                                            \
  /* AdamW with 8-bit block-wise moments (bitsandbytes' scheme): block b holds elements                                \
   * [b RT_QBLOCK, (b+1) RT_QBLOCK) of m and v as codes of rt_qmap (m signed, v unsigned)                              \
   * times one scale each, m_scale[b] and v_scale[b] (the block's absmax), so element i is                             \
   * rt_qmap(1, m[i]) m_scale[i / RT_QBLOCK]. Per block: decode, adamw_update's float                                  \
   * operations (p from the fp32 m and v), new scales = max |m|, max v of the block, encode                            \
   * each value / scale to its nearest code (ties to the lower code; a block of zeros: scale                           \
   * 0, the code of 0; a positive v never encodes to 0: code 1, so m / sqrt(v) stays bounded).                         \
   * Zeroed state (codes and scales 0) decodes to 0. */                                                                \
  X(void, adamw_update_8bit,                                                                                           \
    (float *p, const float *g, uint8_t *m, uint8_t *v, float *m_scale, float *v_scale, int64_t n, double lr,           \
     double beta1, double beta2, double eps, double wd, int64_t t))                                                    \
  /* SGD (PyTorch semantics): g' = g + wd p; buf = momentum buf + g' (buf starts at                                    \
   * 0, so the first step gives buf = g'); p -= lr * (nesterov ? g' + momentum buf : buf).                             \
   * buf may be NULL when momentum = 0. */                                                                             \
  X(void, sgd_update,                                                                                                  \
    (float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd, int nesterov))

/* 8-bit optimizer state (adamw_update_8bit): the dynamic quantization map
 * of bitsandbytes (Dettmers et al., 8-bit Optimizers via Block-wise
 * Quantization, 2022), values in [-1, 1] increasing with the code. Its
 * magnitudes come in 7 decades 10^(d-7)..10^(d-6), d = 0..6, each cut into
 * 2^d (signed) or 2^(d+1) (unsigned) equal steps of [0.1, 1] x 10^(d-6),
 * whose midpoints are the values: dense near 0 (relative error about 1/2^(d+1)
 * of a decade), so small moments keep a few significant bits.
 * - signed (m): codes 0..126 the negatives, -M[126-c]; 127 is 0;
 *   128..254 the positives M[c-128]; 255 is 1 (so -1 encodes to -M[126]).
 * - unsigned (v): code 0 is 0; 1..254 the magnitudes U[c-1]; 255 is 1.
 * Computed in double and rounded to float, so every backend's table is the
 * same; bitsandbytes' unsigned map also has one extra value (0.55), left
 * out here. RT_QBLOCK: elements per scale (bitsandbytes' optimizers use 256
 * or 2048; 256 bounds an outlier's reach to 256 neighbours for 4/256 bytes
 * of scale per element, and is one CUDA thread block). */
#define RT_QBLOCK 256
#ifdef __CUDACC__
#define RT_QMAP_FN static inline __host__ __device__
#else
#define RT_QMAP_FN static inline
#endif

/* rope's frequency of pair i of a head of hd: theta^(-2i/hd); with factor > 0,
 * Llama 3's scaling as Hugging Face's _compute_llama3_parameters: with the
 * wavelength w = 2 pi / f, f / factor where w > orig / low, f where
 * w < orig / high, and between them (1 - s) f / factor + s f with
 * s = (orig / w - low) / (high - low). In double. */
RT_QMAP_FN double rt_rope_freq(double theta, int64_t i, int64_t hd, double factor, double low, double high,
                               double orig) {
  double f = pow(theta, -2.0 * (double)i / (double)hd);
  if (!(factor > 0)) return f;
  double w = 2.0 * 3.14159265358979323846 / f;
  if (w < orig / high) return f;
  if (w > orig / low) return f / factor;
  double s = (orig / w - low) / (high - low);
  return (1 - s) * f / factor + s * f;
}
/* window_attention's geometry: token j (0 <= j < ws*ws, row-major) of window w (row-major over the
 * (H/ws) x (W/ws) windows of the map rolled by -shift) sits at flat position h*W + w of the map as
 * given; *region is its region of the roll (torchvision's mask labels: 3 bands of each axis, the last
 * ws - shift before the last shift; 0 when shift = 0). */
RT_QMAP_FN int64_t rt_window_pos(int64_t w, int64_t j, int64_t H, int64_t W, int64_t ws, int64_t shift, int *region) {
  int64_t r = w / (W / ws) * ws + j / ws, c = w % (W / ws) * ws + j % ws;
  *region = shift ? (int)((r < H - ws ? 0 : r < H - shift ? 1 : 2) * 3 + (c < W - ws ? 0 : c < W - shift ? 1 : 2)) : 0;
  return (r + shift) % H * W + (c + shift) % W;
}
/* The relative position bias's table row for query j and key k of a window (torchvision's
 * relative_position_index). */
RT_QMAP_FN int64_t rt_window_rel(int64_t j, int64_t k, int64_t ws) {
  return (j / ws - k / ws + ws - 1) * (2 * ws - 1) + (j % ws - k % ws + ws - 1);
}
RT_QMAP_FN float rt_qmap(int is_signed, int code) {
  const double decade[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  int neg = 0, k; /* k: index into the magnitudes, ascending */
  if (code == 255) return 1.0f;
  if (is_signed) {
    if (code == 127) return 0.0f;
    neg = code < 127;
    k = neg ? 126 - code : code - 128;
  } else {
    if (code == 0) return 0.0f;
    k = code - 1;
  }
  int shift = is_signed ? 0 : 1, d = 0; /* decade d holds 2^(d+shift) values from index 2^(d+shift) - 2^shift */
  while (k >= (2 << (d + shift)) - (1 << shift)) d++;
  int steps = 1 << (d + shift), j = k - (steps - (1 << shift));
  double x = decade[d] * (0.1 + 0.9 * (j + 0.5) / steps);
  return (float)(neg ? -x : x);
}
#undef RT_QMAP_FN

/* Storage precision (the plan's cast ops): half-precision copies of saved
 * activations are raw 16-bit patterns, bf16 or IEEE fp16. Conversions to
 * half round to nearest even; NaN stays NaN; fp16 overflow gives inf.
 * (tests/gpu/test_cuda_kernels.c checks them against its own rounding, so
 * ref.h has no references of these.) Not formatted: clang-format would read
 * `uint16_t *dst` as a product. */
// clang-format off
#define MEMPLAN_CASTS(X)                                             \
  X(void, f32_to_bf16, (uint16_t *dst, const float *src, int64_t n)) \
  X(void, bf16_to_f32, (float *dst, const uint16_t *src, int64_t n)) \
  X(void, f32_to_f16, (uint16_t *dst, const float *src, int64_t n))  \
  X(void, f16_to_f32, (float *dst, const uint16_t *src, int64_t n)) \
  X(void, i8_to_f32, (float *dst, const int8_t *src, const float *absmax, int64_t n, int64_t cols)) \
  X(void, nf4_to_f32, (float *dst, const uint8_t *src, const float *absmax, int64_t n)) \
  X(void, f32_to_bf16_sr, (uint16_t *dst, const float *src, int64_t n, uint64_t key))
// clang-format on

/* f32_to_bf16_sr: a bf16 parameter's update stored back (--param-precision,
 * planner/basew.h) with stochastic rounding: element i's fp32 bits u plus
 * r = mix64(key ^ i) & 0xffff (16 random bits; mix64 as dropout's), the sum's
 * high 16 bits: rounded away from zero with probability (u & 0xffff) / 2^16,
 * so the result's mean is x (unbiased). NaN stays a quiet NaN, inf stays inf.
 * key: tr_op_key(t, 0, the parameter's hash), so a run and its --resume draw
 * the same bits. */

/* Frozen weights' storage (--base-weights, planner/basew.h), dequantized by
 * the casts above: int8 is code * absmax[row] / 127 (a row: cols elements);
 * NF4 is RT_NF4[code] * absmax[i / RT_NF4_BLOCK], two codes a byte, the
 * even element in the high nibble (bitsandbytes' packing). RT_NF4 is
 * bitsandbytes' NormalFloat4 table (functional.py, get_4bit_type "nf4"),
 * the float32 values of its published literals; quantizing picks the
 * nearest code of x / absmax (memplan_trainer.c, tr_quantize), ties to the
 * lower. tests/nf4 checks both against its own float64 implementation. */
#define RT_NF4_BLOCK 64
#define RT_NF4_TABLE                                                                                                \
  {                                                                                                                 \
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,                \
        -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,             \
        0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, \
        1.0f                                                                                                        \
  }

#endif
