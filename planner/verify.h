/* verify.h: the independent checker every plan goes through. It shares no
 * code with assign.c or live.c: it recomputes what it needs from the plan. */
#ifndef MEMPLAN_VERIFY_H
#define MEMPLAN_VERIFY_H

#include <stddef.h>
#include <stdint.h>

struct Plan;

/* Checks a packing: every offset aligned and >= 0, offset + size <= capacity,
 * and any two buffers whose half-open lifetimes [lo, hi) overlap occupy
 * disjoint bytes. Returns NULL when valid, else a message naming the first
 * violation (in a static buffer). O(n log n). */
const char *verify_packing(int n, const int64_t *lo, const int64_t *hi, const int64_t *size, const int64_t *offset,
                           int64_t align, int64_t capacity);

/* Checks a whole plan: verify_packing for the training and the eval schedule,
 * every op's buffers live at its position, an output in an input's place only
 * where the op table allows it in place, every activation and scratch buffer
 * written (not read) by the first op that uses it, sizes matching shapes and
 * dtypes, persistent buffers live throughout, totals consistent. NULL when
 * valid. */
const char *verify_plan(const struct Plan *p);

#endif
