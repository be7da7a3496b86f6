/* plan_read.h: plan.json back into a Plan (plan_read.c). */
#ifndef MEMPLAN_PLAN_READ_H
#define MEMPLAN_PLAN_READ_H

#include <stddef.h>

#include "plan.h"

/* Parses text (len bytes, the contents of path) as a plan.json of format
 * PLAN_FORMAT_VERSION or older, into a Plan allocated in ar. Malformed JSON,
 * a foreign file, a newer format, a missing or mistyped field and an
 * out-of-range id or size are user errors (diag_error, path:line:col).
 * Every index the Plan holds is in range; whether its packing is sound is
 * left to verify_plan. */
Plan *plan_read(Arena *ar, const char *path, const char *text, size_t len);

#endif
