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

/* A model file read and parsed once (the YAML document, which keeps every
 * node's line and column), from which load_build makes a Graph per set of
 * dims (the levers' micro-batch sizes). User errors go through diag_error
 * (exit 1 or longjmp). */
typedef struct ModelSrc ModelSrc;

/* Fine-tuning choices from the command line, applied by every load_build
 * of a source after the YAML's own (load_set_tune). */
typedef struct {
  const char *const *freeze; /* --freeze: glob patterns over parameter names (fnmatch) */
  int nfreeze;
  int64_t lora_rank;        /* --lora-rank (0: the YAML's) */
  double lora_alpha;        /* --lora-alpha (0: the YAML's) */
  const char *lora_targets; /* --lora-targets: comma-separated (NULL: the YAML's) */
} Tune;

/* Reads and parses path; the text stays in ar (error carets read it). */
ModelSrc *load_parse(Arena *ar, const char *path);
/* Same, from text in memory, which must outlive the source; path is used in
 * messages. */
ModelSrc *load_parse_text(Arena *ar, const char *path, const char *text, size_t len);
/* The Graph (in the source's arena) with the overrides, which replace dims
 * by name before later dims are computed. A user error frees the document
 * before it leaves (nothing more can be built; load_free is then a no-op). */
Graph *load_build(ModelSrc *src, const DimOverride *ov, int nov);
/* The command line's fine-tuning choices for every later load_build of src
 * (t must outlive it). */
void load_set_tune(ModelSrc *src, const Tune *t);
/* Frees the parsed document, once: later calls do nothing. The Graphs built
 * from it stay (they hold only arena strings). */
void load_free(ModelSrc *src);

/* load_parse, one load_build and load_free. */
Graph *load_model(Arena *ar, const char *path, const DimOverride *ov, int nov);
/* The same from text in memory (tests, fuzzers). */
Graph *load_model_text(Arena *ar, const char *path, const char *text, size_t len, const DimOverride *ov, int nov);

/* --dump=graph: a stable text listing of dims, tensors and ops. */
void load_dump(const Graph *g, FILE *out);

#endif
