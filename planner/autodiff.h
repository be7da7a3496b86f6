/* autodiff.h: Graph -> Step, the training step as one instruction list
 * (forward, loss, backward, optimizer updates) plus the forward-only eval
 * list. The forward tensors backward reads are explicit data (saved[]). */
#ifndef MEMPLAN_AUTODIFF_H
#define MEMPLAN_AUTODIFF_H

#include <stdio.h>

#include "graph.h"
#include "plan.h"

typedef struct {
  const char *name;
  Role role;
  DType dtype;
  Shape shape;
  int of;    /* the graph tensor it belongs to (itself, the one it is the gradient or optimizer state of) */
  Init init; /* params */
} STensor;

typedef struct {
  OpKind kind;
  Phase phase;
  int op;           /* forward op id in the graph; for updates, the param's tensor id */
  const char *name; /* layer name, or the parameter's name for updates */
  int nin, nout;
  int in[PLAN_MAX_IO], out[PLAN_MAX_IO]; /* step tensor ids in slot order, -1 = NULL */
  bool acc[PLAN_MAX_IO];
  int scratch; /* a ROLE_TEMP step tensor, used at this instruction only (OpInfo.scratch); -1 = none */
  int bucket;  /* collectives (planner/comm.c): the gradient bucket, from 0 in issue order */
} Instr;

/* Checkpointing actions over the stages of a chain (chain.h), in the order
 * the step runs them; produced by ckpt.c. */
typedef enum {
  ACT_FORWARD, /* run a stage forward, keeping nothing for its backward */
  ACT_KEEP,    /* run a stage forward, keeping what its option says */
  ACT_BACKWARD /* recompute what the option dropped, then the stage's backward */
} ActKind;

typedef struct {
  ActKind kind;
  int stage;
  int option; /* KeepOption, for ACT_KEEP */
} Action;

typedef struct {
  const Action *a;
  int n;
  const int *stage_first; /* per stage: its first forward-list index; [nstages] = the end */
  int nstages;
  /* does option k of stage s keep graph tensor t for backward? */
  bool (*keeps)(const void *ctx, int s, int k, int t);
  const void *ctx;
  bool unnamed; /* a trial build (remat.c's searches): the tensors the step makes take their source's name, none
                   formatted (a step whose peak alone is read; every figure is the same) */
} Actions;

typedef struct {
  STensor *t; /* graph tensors keep their ids; gradients, states and recomputed copies follow */
  int nt;
  Instr *train;
  int ntrain;
  Instr *eval;
  int neval;
  int *grad;   /* per graph tensor: its gradient's step tensor id, or -1 */
  bool *saved; /* per step tensor: an activation that backward reads */
  int loss;
  bool fused;       /* updates run as soon as their gradient is complete */
  int accumulation; /* micro-batches per step (>= 1): train[] before the updates runs that often */
  int64_t recompute_flops;
  int ranks, zero, nbuckets; /* data parallelism (planner/comm.c): 1, 0, 0 for one process */
  bool data_parallel;        /* comm_step made it (collectives, also over one rank) */
  bool *per_pass;            /* per step tensor (NULL: none): a gradient written afresh in every micro-batch pass,
                                ZeRO-2 reduce-scattering it into its accumulating shard at the end of each */
} Step;

/* Builds the step. fuse_updates = false puts every update after the whole
 * backward pass (needed for global-norm clipping or accumulation). acts =
 * NULL runs forward once, keeping everything backward reads; otherwise the
 * actions say which stages run forward when, and what they keep. */
Step *ad_build(Arena *ar, const Graph *g, bool fuse_updates, const Actions *acts);

/* A new step in which the ops whose entry sets regen_stats (dropout) keep
 * no statistics: their forward and recompute runs write none (NULL) and
 * their backward reads none (NULL), regenerating them from the op's key.
 * s itself is not changed. */
Step *ad_regen_stats(Arena *ar, const Step *s);
/* Does the graph hold an op whose statistics a plan may regenerate? */
bool ad_has_regen(const Graph *g);

/* --dump=step */
void ad_dump(const Step *s, FILE *out);

#endif
