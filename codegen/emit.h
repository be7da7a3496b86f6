/* emit.h: what the emitters share: an in-memory text buffer that becomes a
 * file only on success (written atomically: temp file, fsync, rename), and
 * the emitters' entry points. Emitters read only the Plan. */
#ifndef MEMPLAN_EMIT_H
#define MEMPLAN_EMIT_H

#include <stdio.h>

#include "plan.h"

typedef struct {
  char *s;
  size_t n, cap;
} Text;

void text_printf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_json_str(Text *t, const char *s); /* a quoted, escaped JSON string */
void text_free(Text *t);
/* Writes t to path via a temp file in the same folder and rename(2), so the
 * path holds either the old file or the whole new one. Returns 0, or -1 with
 * a message on stderr. */
int text_write_atomic(const Text *t, const char *path);
/* mkdir -p; 0 or -1 with a message. */
int emit_mkdirs(const char *dir);

/* plan.json: the whole Plan, versioned (json.c). */
void json_plan(const Plan *p, Text *out);
/* The human report (report.c). */
void report_plan(const Plan *p, FILE *out);

#endif
