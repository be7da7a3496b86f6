/* comm.h: data parallelism over N ranks as a pass over the step: the
 * gradients' collectives, in buckets, and ZeRO sharding of the optimizer
 * state (zero >= 1) and of the gradients (zero 2). Plan.ranks says what the
 * plan promises the trainer (plan.h). */
#ifndef MEMPLAN_COMM_H
#define MEMPLAN_COMM_H

#include "autodiff.h"

/* PyTorch DDP's default bucket_cap_mb: a bucket's collectives are issued
 * once its gradients reach this many bytes (or backward ends). */
#define COMM_BUCKET_BYTES ((int64_t)25 << 20)

/* Elements of each rank's shard of a tensor of n elements: ceil(n / ranks)
 * (the last ranks' shards may be shorter, or empty). */
int64_t comm_shard(int64_t n, int ranks);

/* A new step for one of `ranks` ranks (> 1) at sharding zero (0, 1, 2); s
 * is not changed. Its updates, in the order the step completes their
 * gradients, are grouped into buckets of at least bucket_bytes of
 * gradients (the last one may hold fewer); a bucket runs, where its last
 * update ran: every gradient's collective (zero 0: allreduce in place;
 * zero 1: reduce_scatter in place, the rank's shard at its own offset;
 * zero 2: reduce_scatter into "<param>.grad_shard" of one shard, the full
 * gradient dying there), then the updates (zero >= 1: of the rank's shard,
 * the optimizer state one shard long), then (zero >= 1) every parameter's
 * all_gather. With fused updates a bucket's gradients live until their
 * bucket runs, which is what overlapping communication with backward costs. */
Step *comm_step(Arena *ar, const Step *s, int ranks, int zero, int64_t bucket_bytes);

/* The bytes a collective of n bytes sends from each rank, ring algorithms:
 * allreduce 2 (N-1)/N n, reduce-scatter and all-gather (N-1)/N n. */
int64_t comm_wire_bytes(OpKind k, int64_t bytes, int ranks);

#endif
