/* cost.c: the roofline constants and per-op estimates.
 *
 * CPU: OpenBLAS sgemm measured at about 350 GFLOP/s on the 2-core machines
 * this project builds on; other kernels are memory-bound C+OpenMP loops at
 * about 10 GB/s and 20 GFLOP/s. CUDA: an H100/H200-class GPU in fp32 without
 * TF32 (about 50 TFLOP/s), 3 TB/s of HBM bandwidth. Only ratios between ops
 * matter to the checkpointing planner: it compares recomputation against
 * itself, never against a wall clock. op_overhead is what an op run costs
 * besides its roofline: an OpenMP parallel region's fork and join on the CPU,
 * a kernel launch on the GPU, about 5 us each; only the levers' step-time
 * estimate (levers.c) reads it, where more micro-batches run more ops. */
#include "cost.h"

#include "ops.h"

static const CostModel models[BACKEND_COUNT] = {
    [BACKEND_CPU] = {"cpu", 350e9, 20e9, 10e9, 5e-6},
    [BACKEND_CUDA] = {"cuda", 50e12, 5e12, 3e12, 5e-6},
};

const CostModel *cost_model(Backend b) { return &models[b]; }

/* Bytes an op moves: its inputs and outputs once (twice for backward, which
 * reads the forward tensors and writes their gradients). */
static int64_t op_bytes(const Graph *g, const Op *o, bool backward) {
  int64_t b = 0;
  for (int k = 0; k < o->nin; k++)
    if (o->in[k] >= 0) b += shape_numel(&g->t[o->in[k]].shape) * dtype_size(g->t[o->in[k]].dtype);
  for (int k = 0; k < o->nout; k++) b += shape_numel(&g->t[o->out[k]].shape) * dtype_size(g->t[o->out[k]].dtype);
  return backward ? 2 * b : b;
}

double cost_op(const CostModel *m, const Graph *g, const Op *o, bool backward) {
  double f = (double)op_info(o->kind)->flops(g, o, backward);
  double t_compute = f / (op_info(o->kind)->gemm ? m->matmul_flops : m->other_flops);
  double t_memory = (double)op_bytes(g, o, backward) / m->bandwidth;
  return t_compute > t_memory ? t_compute : t_memory;
}
