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

/* A new step for one of `ranks` ranks (>= 1) at sharding zero (0, 1, 2); s
 * is not changed. The gradients, in the order backward completes them, are
 * grouped into buckets of at least bucket_bytes (the last may hold fewer).
 * A bucket's collectives: zero 0, an allreduce of each gradient in place;
 * zero 1, a reduce_scatter in place (the rank's shard at its own offset);
 * zero 2, a reduce_scatter into "<param>.grad_shard", one shard, where the
 * full gradient dies. Then its updates (zero >= 1: of the rank's shard, the
 * optimizer state one shard long) and (zero >= 1) an all_gather of each
 * parameter.
 *
 * Where: with fused updates, all of it right after the bucket's last
 * gradient is complete, overlapping the rest of backward (its gradients
 * live until then). With updates after backward (micro-batches), zero 0 and
 * 1 reduce once, after the last micro-batch (as DDP's no_sync); zero 2
 * reduce-scatters in every micro-batch pass, right after the bucket
 * completes (phase backward, acc: into the shard, += after the first pass),
 * so that only the shards persist across passes (Step.per_pass marks the
 * full gradients), and updates and all_gathers follow the last pass. */
Step *comm_step(Arena *ar, const Step *s, int ranks, int zero, int64_t bucket_bytes);

/* The bytes a collective of n bytes sends from each rank, ring algorithms:
 * allreduce 2 (N-1)/N n, reduce-scatter and all-gather (N-1)/N n. */
int64_t comm_wire_bytes(OpKind k, int64_t bytes, int ranks);

#endif
