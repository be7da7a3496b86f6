/* memplan_trainer_cuda.cu: the device backend of the trainer program
 * (TrDevice in memplan_trainer.h) for the CUDA trainer. memplan_trainer.c
 * runs the program; trainer.cu is the plan (step() and eval() as rt_cuda_*
 * calls on the device arena); this file owns the device:
 * - open: checks that the arena fits the device's free memory (cudaMemGetInfo)
 *   and says so clearly when it does not, then makes the trainer's one device
 *   allocation (the arena, zeroed) and hands the plan's workspace buffer to
 *   cuBLAS and cuBLASLt (rt_cuda_init);
 * - upload/download: the I/O regions (parameters, inputs, the loss scalar)
 *   between the host shadow and the device arena; upload_from/download_to:
 *   checkpoint tensors (weights, running and optimizer state) between a
 *   bounded host staging buffer and the device arena;
 * - step: the plan's step() directly, or captured once into a CUDA graph and
 *   replayed (--cuda-graph);
 * - report: planned vs measured memory, in the terms of PyTorch's
 *   torch.cuda.memory_allocated / max_memory_allocated (bytes in tensors: here
 *   the arena, the only allocation) and of the device (cudaMemGetInfo: what
 *   this process holds, CUDA context and libraries included).
 * - collectives (plans for N ranks, trainer_cuda_mpi: MEMPLAN_NCCL): NCCL on
 *   the runtime's stream, bootstrapped through MPI as llm.c does (rank 0's
 *   ncclGetUniqueId broadcast by tr_bcast, then ncclCommInitRank), one GPU
 *   per rank (rank r on device r mod the devices); with one rank the calls
 *   are made all the same. Without NCCL (trainer_cuda) they act for one rank.
 * Every CUDA call is checked; a failure names file:line and the reason. */
#include <cuda_runtime.h>
#ifdef MEMPLAN_NCCL
#include <nccl.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_rt_cuda.h"
#include "memplan_trainer.h"

#define TR_CUDA_CHECK(call)                                                                                         \
  do {                                                                                                              \
    cudaError_t err_ = (call);                                                                                      \
    if (err_ != cudaSuccess) {                                                                                      \
      fflush(stdout);                                                                                               \
      fprintf(stderr, "%s:%d: trainer: CUDA error: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      exit(1);                                                                                                      \
    }                                                                                                               \
  } while (0)

static struct {
  int graph, captured, direct;
  char name[256];
  size_t total;
  size_t used_before; /* device bytes in use before the arena (context, other processes) */
  size_t used_setup;  /* after setup (first eval, cuBLAS handles) */
  size_t used_max;    /* the most seen at any step's end */
} dev;

static const char *gib(char *b, size_t n, double bytes) {
  if (bytes >= (double)(1 << 30)) snprintf(b, n, "%.2f GiB", bytes / (double)(1 << 30));
  else snprintf(b, n, "%.1f MiB", bytes / (double)(1 << 20));
  return b;
}

static size_t used_now(void) {
  size_t fr = 0, tot = 0;
  TR_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  return tot - fr;
}

// ----------------------------------------------------------------------------
// collectives (memplan_trainer.h): NCCL in trainer_cuda_mpi

#ifdef MEMPLAN_NCCL
static ncclComm_t nccl;

#define TR_NCCL_CHECK(call)                                                                                         \
  do {                                                                                                              \
    ncclResult_t r_ = (call);                                                                                       \
    if (r_ != ncclSuccess) {                                                                                        \
      fflush(stdout);                                                                                               \
      fprintf(stderr, "%s:%d: trainer: rank %d: NCCL error: %s: %s (did another rank stop?)\n", __FILE__, __LINE__, \
              tr_rank, #call, ncclGetErrorString(r_));                                                              \
      exit(1);                                                                                                      \
    }                                                                                                               \
  } while (0)
#endif

/* The communicator of a data-parallel plan (TrModel.ranks >= 1), once the
 * device is chosen: also at one rank, so one GPU runs the NCCL path. */
static void nccl_open(const TrModel *m) {
#ifdef MEMPLAN_NCCL
  if (m->ranks < 1) return;
  ncclUniqueId id;
  if (tr_rank == 0) TR_NCCL_CHECK(ncclGetUniqueId(&id));
  tr_bcast(&id, sizeof id);
  TR_NCCL_CHECK(ncclCommInitRank(&nccl, tr_ranks, id, tr_rank));
  printf("NCCL %d.%d.%d: %d rank%s, rank 0 on %s\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, tr_ranks,
         tr_ranks > 1 ? "s" : "", dev.name);
#else
  (void)m;
#endif
}

static void nccl_close(void) {
#ifdef MEMPLAN_NCCL
  if (nccl) TR_NCCL_CHECK(ncclCommDestroy(nccl));
  nccl = NULL;
#endif
}

extern "C" void tr_cuda_allreduce(float *g, int64_t n) {
#ifdef MEMPLAN_NCCL
  TR_NCCL_CHECK(ncclAllReduce(g, g, (size_t)n, ncclFloat, ncclSum, nccl, (cudaStream_t)rt_cuda_stream()));
#else
  (void)g, (void)n;
#endif
}

/* One in-place reduce per rank, rooted at the shard's owner, grouped (the
 * shards may differ in size, so not ncclReduceScatter); then the owner's
 * slice into its shard buffer when it has one (accumulate: added). */
extern "C" void tr_cuda_reduce_scatter(float *g, float *shard, int64_t n, int accumulate) {
  int64_t lo = tr_shard_lo(n), len = tr_shard_len(n);
#ifdef MEMPLAN_NCCL
  int64_t s = (n + tr_ranks - 1) / tr_ranks;
  TR_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < tr_ranks; r++) {
    int64_t rlo = (int64_t)r * s < n ? (int64_t)r * s : n, rlen = (rlo + s < n ? rlo + s : n) - rlo;
    if (rlen)
      TR_NCCL_CHECK(
          ncclReduce(g + rlo, g + rlo, (size_t)rlen, ncclFloat, ncclSum, r, nccl, (cudaStream_t)rt_cuda_stream()));
  }
  TR_NCCL_CHECK(ncclGroupEnd());
#endif
  if (!len || shard == g + lo) return;
  if (accumulate) rt_cuda_add_forward(shard, shard, g + lo, len);
  else
    TR_CUDA_CHECK(cudaMemcpyAsync(shard, g + lo, (size_t)len * sizeof(float), cudaMemcpyDeviceToDevice,
                                  (cudaStream_t)rt_cuda_stream()));
}

/* One broadcast per rank from the shard's owner, grouped. */
extern "C" void tr_cuda_all_gather(float *p, int64_t n) {
#ifdef MEMPLAN_NCCL
  int64_t s = (n + tr_ranks - 1) / tr_ranks;
  TR_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < tr_ranks; r++) {
    int64_t lo = (int64_t)r * s < n ? (int64_t)r * s : n, len = (lo + s < n ? lo + s : n) - lo;
    if (len)
      TR_NCCL_CHECK(ncclBroadcast(p + lo, p + lo, (size_t)len, ncclFloat, r, nccl, (cudaStream_t)rt_cuda_stream()));
  }
  TR_NCCL_CHECK(ncclGroupEnd());
#else
  (void)p, (void)n;
#endif
}

static unsigned char *cuda_open(const TrModel *m, int graph) {
  /* A graph replays the kernel arguments of its capture, dropout's and
   * stochastic_depth's random keys among them: every step would draw the
   * first one's masks. */
  for (int i = 0; graph && i < m->nops; i++)
    if (!strcmp(m->ops[i].kind, "dropout") || !strcmp(m->ops[i].kind, "stochastic_depth")) {
      fflush(stdout);
      fprintf(stderr,
              "trainer: error: --cuda-graph replays one captured step, and %s (layer %s) draws new masks every "
              "step from a key passed to its kernels: train this model without --cuda-graph\n",
              m->ops[i].kind, m->ops[i].layer);
      exit(1);
    }
  int n = rt_cuda_device_count();
  if (n == 0) {
    fprintf(stderr,
            "trainer: error: no CUDA device (cudaGetDeviceCount found none, or no driver); "
            "build and run the CPU trainer (trainer) instead\n");
    exit(1);
  }
  int d = 0;
  TR_CUDA_CHECK(cudaSetDevice(tr_rank % n)); /* one GPU per rank (rank 0 alone: device 0) */
  TR_CUDA_CHECK(cudaGetDevice(&d));
  cudaDeviceProp prop;
  TR_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
  snprintf(dev.name, sizeof dev.name, "%s", prop.name);
  size_t fr = 0;
  TR_CUDA_CHECK(cudaMemGetInfo(&fr, &dev.total));
  dev.used_before = dev.total - fr;
  char a[32], b[32], c[32];
  if ((size_t)m->arena_bytes > fr) {
    fflush(stdout);
    fprintf(stderr,
            "trainer: error: the plan's arena does not fit on %s: it needs %lld bytes (%s), the device has %zu "
            "bytes (%s) free of %zu (%s).\n  Recompile the model with --budget %zu (or less) to fit, or free the "
            "device.\n",
            dev.name, (long long)m->arena_bytes, gib(a, sizeof a, (double)m->arena_bytes), fr,
            gib(b, sizeof b, (double)fr), dev.total, gib(c, sizeof c, (double)dev.total), fr);
    exit(1);
  }
  unsigned char *arena = (unsigned char *)rt_cuda_malloc((size_t)m->arena_bytes);
  rt_cuda_init(arena + m->workspace_offset, (size_t)m->workspace_bytes);
  rt_cuda_memset_zero(arena, (size_t)m->arena_bytes); // optimizer state starts at zero
  rt_cuda_synchronize();
  nccl_open(m);
  dev.graph = graph;
  printf("device: %s (sm_%d%d), %s free of %s before the arena; arena %lld bytes (%s) at %p, workspace %s\n", dev.name,
         prop.major, prop.minor, gib(a, sizeof a, (double)fr), gib(b, sizeof b, (double)dev.total),
         (long long)m->arena_bytes, gib(c, sizeof c, (double)m->arena_bytes), (void *)arena,
         gib(c, sizeof c, (double)m->workspace_bytes));
  return arena;
}

static void cuda_upload(unsigned char *d, const unsigned char *host, int64_t offset, int64_t bytes) {
  rt_cuda_memcpy_h2d(d + offset, host + offset, (size_t)bytes);
}

static void cuda_download(unsigned char *host, const unsigned char *d, int64_t offset, int64_t bytes) {
  rt_cuda_memcpy_d2h(host + offset, d + offset, (size_t)bytes);
}

static void cuda_upload_from(unsigned char *d, int64_t offset, const void *src, int64_t bytes) {
  rt_cuda_memcpy_h2d(d + offset, src, (size_t)bytes);
}

static void cuda_download_to(void *dst, const unsigned char *d, int64_t offset, int64_t bytes) {
  rt_cuda_memcpy_d2h(dst, d + offset, (size_t)bytes);
}

static void cuda_step(const TrModel *m, unsigned char *d, double lr, int64_t t, int mb, float scale) {
  /* The first step runs directly, so that every kernel module and library
   * plan the step needs is loaded before capture (lazy loading). */
  if (!dev.graph || (!dev.captured && dev.direct++ == 0)) {
    m->step(d, lr, t, mb, scale);
    return;
  }
  if (!dev.captured) { // the graph holds one micro-batch of step(): the same calls every step
    rt_cuda_graph_begin();
    m->step(d, lr, t, mb, scale);
    rt_cuda_graph_end();
    dev.captured = 1;
  }
  rt_cuda_graph_launch(t);
}

static void cuda_sync(void) {
  rt_cuda_synchronize();
  size_t u = used_now();
  if (u > dev.used_max) dev.used_max = u;
}

static void cuda_report(const TrModel *m, const char *when) {
  rt_cuda_synchronize();
  size_t u = used_now();
  if (u > dev.used_max) dev.used_max = u;
  int setup = !dev.used_setup;
  if (setup) dev.used_setup = u;
  char a[32], b[32], c[32];
  printf(
      "memory (%s, %s): planned arena %lld bytes (%s); memory_allocated %lld, max_memory_allocated %lld "
      "(the arena is the only allocation)\n",
      dev.name, when, (long long)m->arena_bytes, gib(a, sizeof a, (double)m->arena_bytes), (long long)m->arena_bytes,
      (long long)m->arena_bytes);
  printf(
      "  device use of this process (cudaMemGetInfo): now %zu bytes (%s), max %zu (%s): the arena + %s of CUDA "
      "context, kernels and library handles\n",
      u - dev.used_before, gib(a, sizeof a, (double)(u - dev.used_before)), dev.used_max - dev.used_before,
      gib(b, sizeof b, (double)(dev.used_max - dev.used_before)),
      gib(c, sizeof c, (double)(dev.used_max - dev.used_before) - (double)m->arena_bytes));
  if (!setup)
    printf("  device memory allocated since setup: %lld bytes%s\n", (long long)dev.used_max - (long long)dev.used_setup,
           dev.used_max == dev.used_setup ? " (none: the training loop allocates nothing)" : "");
}

static void cuda_close(unsigned char *d) {
  rt_cuda_synchronize();
  nccl_close();
  rt_cuda_shutdown();
  rt_cuda_free(d);
}

extern "C" const TrDevice tr_cuda_device = {"CUDA",    cuda_open,   cuda_upload, cuda_download,    cuda_step,
                                            cuda_sync, cuda_report, cuda_close,  cuda_upload_from, cuda_download_to};
