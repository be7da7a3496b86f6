/* load.h: YAML model file -> Graph (forward ops in topological order, shapes
 * inferred, parameters created, every node with its source location). */
#ifndef MEMPLAN_LOAD_H
#define MEMPLAN_LOAD_H

#include <stdio.h>

#include "graph.h"

typedef struct {
  const char *name;
  int64_t value;
} DimOverride;

/* Loads path; user errors go through diag_error (exit 1 or longjmp).
 * Overrides replace dims by name before later dims are computed. */
Graph *load_model(Arena *ar, const char *path, const DimOverride *ov, int nov);

/* Same, from text in memory (tests, fuzzers); path is used in messages. */
Graph *load_model_text(Arena *ar, const char *path, const char *text, size_t len, const DimOverride *ov, int nov);

/* --dump=graph: a stable text listing of dims, tensors and ops. */
void load_dump(const Graph *g, FILE *out);

#endif
