/* optstate.h: storage format of the optimizer state (--opt-state), a
 * lowering of the step's AdamW updates like precision.h's of saved
 * activations. The update math stays fp32 in every format; only what
 * persists between steps changes:
 * - fp32: m and v as floats (the default; plans and results unchanged);
 * - bf16: m and v as bf16, rounded to nearest even on store;
 * - 8bit: bitsandbytes' block-wise dynamic quantization: m and v as u8 codes
 *   (signed map for m, unsigned for v; runtime/memplan_kernels.h, rt_qmap)
 *   plus one f32 scale per OPT_QBLOCK elements, "<param>.adam_m.scale" and
 *   "<param>.adam_v.scale". Parameters under OPT_8BIT_MIN elements (biases,
 *   norm weights) keep fp32 moments, as bitsandbytes does: their scales
 *   would save little and they are the most sensitive.
 * SGD's momentum stays fp32 under every format (the option is for AdamW).
 * Every tensor keeps role optimizer_state, so packing, plan.json, the
 * report, the verifier and the trainer see its real dtype and bytes. */
#ifndef MEMPLAN_OPTSTATE_H
#define MEMPLAN_OPTSTATE_H

#include "autodiff.h"

typedef enum { OPTS_FP32, OPTS_BF16, OPTS_8BIT, OPTS_AUTO, OPTS_COUNT } OptPrec;

#define OPT_QBLOCK 256    /* elements per scale: runtime/memplan_kernels.h's RT_QBLOCK */
#define OPT_8BIT_MIN 4096 /* smaller parameters keep fp32 moments under 8bit */

const char *optprec_name(OptPrec p); /* "fp32", "bf16", "8bit", "auto" */

/* A new step whose AdamW updates keep their moments in format p (not
 * auto); s itself is not changed. fp32, or an SGD step: s. */
Step *opt_state_lower(Arena *ar, Step *s, OptPrec p);

/* The optimizer state's bytes (unaligned) in format p for graph g: what
 * the format costs the arena's persistent part, for the levers. */
int64_t opt_state_bytes(const Graph *g, OptPrec p);

#endif
