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
 * does; chain_build offers each KeepOption, in fp32 and, when it chooses
 * precision (--precision auto), with half-precision storage too. */
enum { STAGE_MAX_OPTIONS = 2 * KEEP_COUNT };

typedef struct {
  KeepOption keep;    /* what forward keeps */
  bool half;          /* kept tensors that may be lowered are stored in half precision */
  double b;           /* seconds: backward of the stage plus what it recomputes (and, when the
                         chain chooses precision, the casts of its half copies) */
  int64_t keep_bytes; /* kept for backward, the stage output included */
  double recompute;   /* seconds of recomputation inside backward */
  int64_t recompute_flops;
} StageOption;

typedef struct {
  int first, last; /* forward ops of the stage: indices [first, last) of the Step's forward list */
  int in, out;     /* graph tensors crossing in (-1 for the first stage) and out */
  int64_t x_in;    /* bytes of the input checkpoint */
  int64_t work;    /* working memory while the stage runs (fresh gradients, transient outputs) */
  double f;        /* seconds of forward */
  int64_t f_flops;
  /* backward reads the stage's output and nothing else the stage makes (a
   * conv + relu block): with that output still held as the next stage's
   * checkpoint, option 0 needs no forward (ckpt.h's held variant). A stage
   * whose backward reads none of it (a linear layer) gains nothing: keeping
   * it holds the same output. Only stages with a matrix product: rerunning
   * a cheap one (a relu alone) costs about its call, which the DP's roofline
   * times leave out (ResNet-50 at 2G held its relus for a plan 0.2% slower
   * by the levers' estimate). */
  bool out_only;
  int nopt; /* options none of which is as fast with as little memory as another */
  StageOption opt[STAGE_MAX_OPTIONS];
} Stage;

typedef struct {
  Stage *s;
  int n;
  const Graph *g; /* what the chain was cut from */
  const Step *plain;
  bool choose_half; /* options differ in storage precision (auto) */
} Chain;

/* Cuts the forward list of a plain step (ad_build with no checkpointing)
 * into stages. A graph with no cut is one stage: nothing to recompute.
 * half (may be NULL): graph tensors whose saved copy may be stored in 2
 * bytes. choose false: every option stores them so (a fixed bf16 or fp16
 * policy); true: each keep option comes in fp32 and in half, the half one
 * paying its casts' time, and the DP chooses per stage (auto). */
Chain *chain_build(Arena *ar, const Graph *g, const Step *plain, const CostModel *cm, const bool *half, bool choose);

/* The index of stage s's option keeping k with half storage h, or of the
 * option that replaced it (an identical fp32 keep-all is always option 0). */
int chain_option(const Stage *s, KeepOption k, bool h);
/* The option of stage s that keeps the least memory. */
int chain_lightest(const Stage *s);

/* Does keep option k of stage s keep graph tensor t (produced in the stage)? */
bool chain_keeps(const Graph *g, const Step *plain, const Stage *s, KeepOption k, int t);
/* The same as an Actions.keeps callback (k an option index), with the Chain as its context. */
bool chain_keeps_cb(const void *chain, int s, int k, int t);
/* Per stage its first forward-list index, and the end at [n]: Actions.stage_first. */
int *chain_stage_first(Arena *ar, const Chain *c);

#endif
