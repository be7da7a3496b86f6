/* live.h: liveness of one schedule of a Step. Tensors become buffers
 * (several tensors share one when an op runs in place), each live over the
 * half-open schedule interval [first, last). */
#ifndef MEMPLAN_LIVE_H
#define MEMPLAN_LIVE_H

#include <stdio.h>

#include "autodiff.h"

typedef struct {
  int tensor;      /* the defining (first) tensor */
  int first, last; /* [first, last) in schedule positions */
  int64_t bytes;
  bool persistent; /* params and optimizer state: live across steps and schedules */
  int nalias;      /* tensors computed in place into this buffer, besides the first */
} LiveBuf;

typedef struct {
  int n;       /* schedule length */
  int *buf_of; /* per step tensor: its buffer, -1 when the schedule never touches it */
  LiveBuf *b;
  int nb;
  int64_t inplace_saved; /* bytes saved by in-place execution */
} Live;

/* Liveness of ins[0..n) (the step's train or eval list). */
Live *live_build(Arena *ar, const Step *s, const Instr *ins, int n);

/* Max over positions of live bytes, each buffer rounded up to align. */
int64_t live_peak(const Live *l, int64_t align, int *at);

/* --dump=live */
void live_dump(const Step *s, const Live *l, FILE *out);

#endif
