/* basew.h: storage format of frozen weights (--base-weights), a lowering of
 * the step like optstate.h's of AdamW's moments. A frozen parameter's buffer
 * holds its weights in the format; right before every instruction that reads
 * it (forward, recompute, backward, eval) a cast dequantizes it into a
 * short-lived fp32 copy (role activation, "<param>@f32"), which liveness,
 * assignment and verification plan like any other tensor. Compute stays fp32.
 * - fp32: unchanged (the default);
 * - bf16: the weights as bf16, rounded to nearest even;
 * - int8: per-row absmax: codes round(127 x / absmax) as i8, and one f32
 *   absmax per row (the last dim's elements) in "<param>.absmax";
 * - nf4: QLoRA's NormalFloat: 4-bit codes (two a byte, the even element in
 *   the high nibble) of the nearest of 16 values (runtime/memplan_kernels.h,
 *   RT_NF4) to x / absmax, with one f32 absmax per BW_NF4_BLOCK elements in
 *   "<param>.absmax" (bitsandbytes' block of 64; no double quantization).
 * The absmax tensors are frozen parameters of their own (role param, f32), so
 * plan.json, checkpoints and the report see them.
 *
 * Trainable weights (--param-precision, ParamPrec): bf16 stores every
 * trainable parameter of at least BW_PARAM_MIN elements as bf16, read through
 * the same casts; its update (AdamW or SGD, fp32 math) runs on an fp32 copy
 * "<param>@f32" cast from it right before, and a cast back into the bf16
 * parameter right after stores it with stochastic rounding (the only cast
 * that writes a parameter: runtime f32_to_bf16_sr). Gradients stay fp32.
 * Smaller parameters (norms, biases) stay fp32, as --opt-state's 8bit. */
#ifndef MEMPLAN_BASEW_H
#define MEMPLAN_BASEW_H

#include "autodiff.h"

typedef enum { BW_FP32, BW_BF16, BW_INT8, BW_NF4, BW_AUTO, BW_COUNT } BaseFmt;

#define BW_NF4_BLOCK 64 /* elements per absmax under nf4: runtime/memplan_kernels.h's RT_NF4_BLOCK */

const char *basew_name(BaseFmt f); /* "fp32", "bf16", "int8", "nf4", "auto" */

typedef enum { PP_FP32, PP_BF16, PP_AUTO, PP_COUNT } ParamPrec;

#define BW_PARAM_MIN 4096 /* smaller trainable parameters stay fp32 under --param-precision bf16 */

const char *paramprec_name(ParamPrec p); /* "fp32", "bf16", "auto" */

/* Does g have a trainable parameter that --param-precision bf16 would store? */
bool paramprec_any(const Graph *g);

/* Does g have a frozen parameter (one the format would store)? */
bool basew_any(const Graph *g);

/* A new step whose frozen weights are stored in format f and trainable ones
 * in pp (neither auto); s itself is not changed. Both fp32: s. */
Step *basew_lower(Arena *ar, const Graph *g, const Step *s, BaseFmt f, ParamPrec pp);

#endif
