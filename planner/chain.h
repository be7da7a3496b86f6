/* chain.h: the training step seen as a chain of stages for checkpointing.
 * A stage boundary is a point of the forward order where exactly one
 * activation crosses (the residual stream between transformer half-blocks,
 * each layer of an MLP). Per stage, options say what forward keeps for
 * backward; the checkpointing planner (ckpt.c) chooses among them. */
#ifndef MEMPLAN_CHAIN_H
#define MEMPLAN_CHAIN_H

#include "autodiff.h"
#include "cost.h"

typedef enum {
  KEEP_ALL,       /* keep every tensor backward reads */
  KEEP_SELECTIVE, /* keep matrix-product and attention outputs; recompute cheap ops in backward */
  KEEP_COUNT
} KeepOption;

/* The DP (ckpt.c) takes up to this many options per stage, as Rockmate
 * does; the chains chain_build cuts offer KEEP_COUNT of them. */
enum { STAGE_MAX_OPTIONS = 4 };

typedef struct {
  double b;           /* seconds: backward of the stage plus what it recomputes */
  int64_t keep_bytes; /* kept for backward, the stage output included */
  double recompute;   /* seconds of recomputation inside backward */
  int64_t recompute_flops;
} StageOption;

typedef struct {
  int first, last;    /* forward ops of the stage: indices [first, last) of the Step's forward list */
  int in, out;        /* graph tensors crossing in (-1 for the first stage) and out */
  int64_t x_in;       /* bytes of the input checkpoint */
  int64_t work;       /* working memory while the stage runs (fresh gradients, transient outputs) */
  double f;           /* seconds of forward */
  int64_t f_flops;
  int nopt;           /* options that differ: 1 .. KEEP_COUNT from chain_build */
  StageOption opt[STAGE_MAX_OPTIONS];
} Stage;

typedef struct {
  Stage *s;
  int n;
  const Graph *g;     /* what the chain was cut from */
  const Step *plain;
} Chain;

/* Cuts the forward list of a plain step (ad_build with no checkpointing)
 * into stages. A graph with no cut is one stage: nothing to recompute.
 * half (may be NULL): graph tensors whose saved copy is stored in 2 bytes. */
Chain *chain_build(Arena *ar, const Graph *g, const Step *plain, const CostModel *cm, const bool *half);

/* Does option k of stage s keep graph tensor t (produced in the stage)? */
bool chain_keeps(const Graph *g, const Step *plain, const Stage *s, KeepOption k, int t);
/* The same as an Actions.keeps callback, with the Chain as its context. */
bool chain_keeps_cb(const void *chain, int s, int k, int t);
/* Per stage its first forward-list index, and the end at [n]: Actions.stage_first. */
int *chain_stage_first(Arena *ar, const Chain *c);

#endif
