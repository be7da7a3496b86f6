/* headgrad.h: where the fused classifier loss's weight gradient is made
 * (--head-grad), a rewrite of the step like optstate.h's and basew.h's.
 * The fused loss (ops.c's linear_cross_entropy) computes its weight's
 * gradient dW in the training forward, as a statistic kept for backward.
 * When that weight is tied (the classifier reads the embedding's table: GPT-2,
 * Llama 3.2), its gradient is complete only after the embedding's backward,
 * the step's last, so the V x K fp32 statistic (0.98 GiB for Llama-3.2-1B)
 * is live across the whole backward, at the training peak.
 * - kept: as described (the default; nothing recomputed);
 * - deferred: the forward writes no dW; right before the backward of the
 *   weight's other reader (the embedding's scatter-add), a recompute of the
 *   fused loss (phase recompute, loss and dx NULL) runs its chunks again from
 *   the classifier's input x (kept from forward: N x K floats) and the weight,
 *   and writes dW straight into the gradient, which then lives only from
 *   there to the update. The recompute is the forward's own kernel on the
 *   same inputs and chunks, and the embedding's backward accumulates onto it
 *   in the same order, so the gradient is bit for bit the kept one. It costs
 *   the chunks' logits again (charged as a recompute of the op).
 * Deferral applies to a step with fused updates in one process (the loss's
 * backward scale is then 1, which the forward kernel leaves out) whose
 * fused loss's weight has exactly one other reader, written after it in
 * backward; otherwise the step is unchanged. */
#ifndef MEMPLAN_HEADGRAD_H
#define MEMPLAN_HEADGRAD_H

#include "autodiff.h"

typedef enum { HG_KEPT, HG_DEFERRED, HG_AUTO, HG_COUNT } HeadGrad;

const char *headgrad_name(HeadGrad h); /* "kept", "deferred", "auto" */

/* A new step with the tied classifier's gradient deferred (above), or s
 * itself where deferral does not apply. s is not changed. */
Step *headgrad_defer(Arena *ar, const Graph *g, const Step *s);

/* Does g have a classifier + cross_entropy pair that fuses (gb_fuse_loss)
 * whose trainable weight another op reads (tied)? */
bool headgrad_tied(Arena *ar, const Graph *g);

/* Does deferral change the step (a tied fused loss, fused updates)? */
bool headgrad_applies(const Step *s);

/* Does s run the deferred recompute (s is headgrad_defer's, or lowered from it)? */
bool headgrad_deferred(const Step *s);

#endif
