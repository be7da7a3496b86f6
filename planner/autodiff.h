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
} Instr;

typedef struct {
  STensor *t; /* graph tensors keep their ids; gradients and states follow */
  int nt;
  Instr *train;
  int ntrain;
  Instr *eval;
  int neval;
  int *grad;   /* per step tensor: its gradient's id, or -1 */
  bool *saved; /* per step tensor: a forward tensor that backward reads */
  int loss;
  bool fused;  /* updates run as soon as their gradient is complete */
} Step;

/* Builds the step. fuse_updates = false puts every update after the whole
 * backward pass (needed for global-norm clipping or accumulation). */
Step *ad_build(Arena *ar, const Graph *g, bool fuse_updates);

/* --dump=step */
void ad_dump(const Step *s, FILE *out);

#endif
