/* precision.h: storage precision of saved activations. Under a bf16 or
 * fp16 policy, a tensor that forward saves for backward is stored in half
 * precision when every backward op that reads it is a matrix product,
 * attention or an activation function (autocast's split: norms, softmax,
 * losses and their statistics stay fp32, as do weights, gradients and
 * optimizer state). Compute stays fp32: a cast writes the half copy after
 * the tensor's last forward use, and casts read it back into short-lived
 * fp32 tensors right before each backward use. */
#ifndef MEMPLAN_PRECISION_H
#define MEMPLAN_PRECISION_H

#include "autodiff.h"

typedef enum { PREC_FP32, PREC_BF16, PREC_FP16, PREC_AUTO } Precision;

const char *prec_name(Precision p); /* "fp32", "bf16", "fp16", "auto" */
DType prec_dtype(Precision p);      /* storage dtype of lowered tensors */

/* Per graph tensor: may its saved copy be lowered? From a plain step. */
bool *prec_candidates(Arena *ar, const Graph *g, const Step *plain);

/* A new step with the saved copies of the `lower` graph tensors stored as dt
 * (the step s itself is not changed). */
Step *prec_lower(Arena *ar, const Step *s, const bool *lower, DType dt);

#endif
