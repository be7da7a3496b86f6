/* cost.h: a roofline cost model per backend: an op takes
 * max(flops / peak_flops, bytes / bandwidth) seconds. Its constants live in
 * one place (cost.c) and are documented there. */
#ifndef MEMPLAN_COST_H
#define MEMPLAN_COST_H

#include "graph.h"

typedef enum { BACKEND_CPU, BACKEND_CUDA, BACKEND_COUNT } Backend;

typedef struct {
  const char *name;
  double matmul_flops; /* FLOP/s of matrix products (linear, matmul, attention) */
  double other_flops;  /* FLOP/s of element-wise and row-wise kernels */
  double bandwidth;    /* bytes/s of memory traffic */
  double op_overhead;  /* seconds every op run costs besides its roofline (a call, a parallel region, a launch) */
} CostModel;

const CostModel *cost_model(Backend b);
/* Estimated seconds of one forward (or backward) run of op o of g. */
double cost_op(const CostModel *m, const Graph *g, const Op *o, bool backward);

#endif
