/* ckpt.h: optimal checkpointing over a chain of stages, the dynamic program
 * of Beaumont et al. for heterogeneous chains (Rotor) with several keep
 * options per stage (as in Rockmate). Memory is counted in discrete units;
 * one table answers every memory size, hence the whole
 * memory-vs-recompute curve.
 *
 * C(s, t, m): least time to run forward and backward of stages s..t with the
 * input of s stored and m units free, the minimum of
 *   checkpoint at j (s < j <= t): forward s..j-1 keeping nothing,
 *       + C(j, t, m - x_j) + C(s, j - 1, m)
 *   keep stage s with option k: f_s + b_s^k + C(s + 1, t, m - keep_s^k)
 * and for s = t: f_s + b_s^k when keep_s^k + work_s <= m.
 *
 * Beyond Rotor: a stage whose backward reads nothing it makes but its
 * output (Stage.out_only: a conv + relu block) needs no forward when that
 * output is still held, the checkpoint x_j of the segment after it. So a
 * checkpoint at j may hold x_j past the backward of stage j (which reads it
 * as its input) until that of stage j - 1:
 *   F(s..j-1) + C(j, t, m - x_j) + H(s, j - 1, m - x_j)
 * where H(s, t, m) is C with stage t's output held (outside m): H(t, t, m)
 * = b_t^0 when work_t <= m, and for s < t the same choices as C, each
 * segment ending at t an H. Rotor's model reruns stage j - 1 from x_{j-1}
 * to tape an output it already has: on the benchmark's conv chain that is
 * one conv per checkpoint (docs/budgets-and-levers.md, the chain). */
#ifndef MEMPLAN_CKPT_H
#define MEMPLAN_CKPT_H

#include "chain.h"

typedef struct {
  const Chain *c;
  int M;           /* memory units: 0..M */
  int64_t unit;    /* bytes per unit */
  float *cost;     /* [(s * n + t) * (M + 1) + m], INFINITY when impossible */
  int16_t *choice; /* j > s: checkpoint at j; n + j: the same holding x_j (into H); -1 - k: keep option k */
  float *hcost;    /* H, the same layout (NULL: no stage is out_only); INFINITY where t is not */
  int16_t *hchoice;
} CkptTable;

/* Fills the table; unit = bytes per memory unit (ckpt_unit picks one). */
CkptTable *ckpt_solve(Arena *ar, const Chain *c, int M, int64_t unit);
/* A unit so that M units cover keeping everything. */
int64_t ckpt_unit(const Chain *c, int M);
/* C(0, n - 1, m). */
double ckpt_cost(const CkptTable *t, int m);
/* The actions of the optimal schedule with m units (ckpt_cost(t, m) finite),
 * ready for ad_build. */
Actions ckpt_actions(Arena *ar, const CkptTable *t, int m);

#endif
