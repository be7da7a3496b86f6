/* trainer_ranks.c: the trainer program's data parallelism: MPI collectives in trainer_mpi, the watchdog
 * (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// data parallelism (plans for N ranks): MPI in trainer_mpi (MEMPLAN_MPI)
//
// Errors return (MPI_ERRORS_RETURN) and end the run with the call and MPI's
// message. A rank that dies makes mpirun end the others; a rank that hangs
// (or a collective that never completes) trips the watchdog: every step must
// end within --comm-timeout seconds, or the rank exits naming the step.

#ifdef MEMPLAN_MPI
/* Counts of one MPI call are ints: 2^31 - 1 elements (8 GiB of f32) at most. */
static int mpi_count(int64_t n, const char *what) {
  if (n > 0x7fffffff) die("%s: %lld elements are more than one MPI call carries (2^31 - 1)", what, (long long)n);
  return (int)n;
}

static void mpi_ok(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  die("%s failed: %s (did another rank stop?)", what, msg);
}
#endif

void tr_allreduce(float *g, int64_t n) {
#ifdef MEMPLAN_MPI
  mpi_ok(MPI_Allreduce(MPI_IN_PLACE, g, mpi_count(n, "allreduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
         "MPI_Allreduce");
#else
  (void)g, (void)n;
#endif
}

/* One reduce per rank, rooted at the shard's owner, in place there (sizes
 * may differ: the last shards are shorter); then the owner's slice into
 * its shard buffer, when it has one. */
void tr_reduce_scatter(float *g, float *shard, int64_t n, int accumulate) {
  int64_t s = (n + tr_ranks - 1) / tr_ranks;
  for (int r = 0; r < tr_ranks; r++) {
    int64_t lo = (int64_t)r * s < n ? (int64_t)r * s : n, len = (lo + s < n ? lo + s : n) - lo;
    if (!len) continue;
#ifdef MEMPLAN_MPI
    int c = mpi_count(len, "reduce_scatter");
    mpi_ok(MPI_Reduce(r == tr_rank ? MPI_IN_PLACE : g + lo, r == tr_rank ? g + lo : NULL, c, MPI_FLOAT, MPI_SUM, r,
                      MPI_COMM_WORLD),
           "MPI_Reduce");
#endif
    if (r != tr_rank || shard == g + lo) continue;
    if (!accumulate) memcpy(shard, g + lo, (size_t)len * sizeof(float));
    else
      for (int64_t i = 0; i < len; i++) shard[i] += g[lo + i];
  }
}

/* One broadcast per rank, from the shard's owner. */
void tr_all_gather(float *p, int64_t n) {
#ifdef MEMPLAN_MPI
  int64_t s = (n + tr_ranks - 1) / tr_ranks;
  for (int r = 0; r < tr_ranks; r++) {
    int64_t lo = (int64_t)r * s < n ? (int64_t)r * s : n, len = (lo + s < n ? lo + s : n) - lo;
    if (len) mpi_ok(MPI_Bcast(p + lo, mpi_count(len, "all_gather"), MPI_FLOAT, r, MPI_COMM_WORLD), "MPI_Bcast");
  }
#else
  (void)p, (void)n;
#endif
}

void tr_bcast(void *p, int64_t bytes) {
#ifdef MEMPLAN_MPI
  if (tr_ranks > 1) mpi_ok(MPI_Bcast(p, mpi_count(bytes, "broadcast"), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
#else
  (void)p, (void)bytes;
#endif
}

/* The mean of a value over the ranks (the logged loss). */
double ranks_mean(double v) {
#ifdef MEMPLAN_MPI
  if (tr_ranks > 1) {
    double sum = 0.0;
    mpi_ok(MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce (loss)");
    return sum / tr_ranks;
  }
#endif
  return v;
}

/* The watchdog: SIGALRM when a step outlives --comm-timeout. */
static volatile sig_atomic_t watchdog_step;
int watchdog_secs;

static void watchdog_fire(int sig) {
  (void)sig;
  char msg[256];
  int n = snprintf(msg, sizeof msg,
                   "trainer: error: rank %d: step %lld did not finish within %d s (--comm-timeout): a rank died "
                   "or stopped answering (another, or this one); exiting\n",
                   tr_rank, (long long)watchdog_step, watchdog_secs);
  if (n > 0 && write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0) _exit(7);
  _exit(7);
}

void watchdog_arm(int64_t step) {
  if (tr_ranks < 2 || !watchdog_secs) return;
  watchdog_step = (sig_atomic_t)step;
  alarm((unsigned)watchdog_secs);
}

/* MPI up (trainer_mpi), the rank known, and the plan's rank count checked. */
void ranks_init(int *argc, char ***argv, const TrModel *m) {
  int want = m->ranks > 1 ? m->ranks : 1;
#ifdef MEMPLAN_MPI
  int ok = MPI_Init(argc, argv) == MPI_SUCCESS;
  if (!ok) die("MPI_Init failed: run this trainer with mpirun -np %d", want);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &tr_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != want) { /* one message, from rank 0 */
    if (tr_rank) _exit(1);
    die("%s was planned for %d rank%s and mpirun started %d: run mpirun -np %d, or compile the model again with "
        "--ranks %d",
        m->model, want, want > 1 ? "s" : "", size, want, size);
  }
  tr_ranks = size;
  if (tr_rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot silence stdout on rank %d", tr_rank);
#else
  (void)argc, (void)argv;
  if (want > 1)
    die("%s was planned for %d ranks (memplan compile --ranks %d), and this trainer has no MPI: run mpirun -np %d "
        "build/trainer_mpi (built where CMake finds MPI)",
        m->model, want, want, want);
#endif
  signal(SIGALRM, watchdog_fire);
}

void ranks_finish(void) {
#ifdef MEMPLAN_MPI
  alarm(0);
  MPI_Finalize();
#endif
}
