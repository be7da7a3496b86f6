/* assign.h: offsets in one arena for buffers with known lifetimes (the
 * dynamic storage allocation problem). A best-fit portfolio first; iterated
 * greedy and exact search (MiniMalloc-style branch and bound) when the
 * portfolio misses the lower bound. Results are checked by verify.c, which
 * shares no code with this. */
#ifndef MEMPLAN_ASSIGN_H
#define MEMPLAN_ASSIGN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
  int64_t lo, hi; /* live over the half-open interval [lo, hi), lo < hi */
  int64_t size;   /* bytes, > 0; rounded up to the alignment inside */
} AsgItem;

typedef struct {
  int64_t height;      /* max(offset + aligned size); 0 for no items */
  int64_t lower_bound; /* max over time of live aligned bytes */
  bool optimal;        /* height proven minimal (== lower bound, or by search) */
  const char *method;  /* what produced the kept solution, e.g. "best-fit/size" */
  double seconds;      /* total time spent */
  double best_seconds; /* when the kept solution was found (<= seconds) */
} AsgResult;

/* Assigns offsets (multiples of align) to n items, minimizing the height;
 * writes offsets[n]. Deterministic for a given input and limit. time_limit_s
 * becomes a work budget that the portfolio's passes, iterated greedy and the
 * exact search all draw from (0: the portfolio only, whatever it costs).
 * Never above assign_best_fit in any ordering. */
AsgResult assign_offsets(const AsgItem *items, int n, int64_t align, double time_limit_s, int64_t *offsets);

/* The liveness lower bound alone. */
int64_t assign_lower_bound(const AsgItem *items, int n, int64_t align);

/* Decides whether the items fit in `capacity` bytes: 1 (offsets written), 0
 * (proven not to fit), -1 (unknown when the time limit ran out). */
int assign_fit(const AsgItem *items, int n, int64_t align, int64_t capacity, double time_limit_s, int64_t *offsets);

/* The portfolio's best-fit orderings, 0 .. ASSIGN_N_ORDERINGS-1: by size
 * (then duration: XLA's spatial), by duration (then size: XLA's temporal),
 * area (all descending), start (ascending), TFLite's (whole-run buffers
 * first, size descending, first use ascending) and by end (descending, then
 * size); last ties by index. NULL past the end. */
#define ASSIGN_N_ORDERINGS 6
const char *assign_ordering_name(int ordering);

/* Plain best fit in one ordering over the whole instance, without the exact
 * decompositions assign_offsets applies first: the baseline a benchmark
 * compares against. Writes offsets[n]; returns the height. */
int64_t assign_best_fit(const AsgItem *items, int n, int64_t align, int ordering, int64_t *offsets);

#endif
