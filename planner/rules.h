/* rules.h: the ops' shape rules (rules.c). A shape rule checks a layer's
 * inputs and attributes and creates its parameters and outputs through the
 * builder's BuildCtx API (build.h); a composite op's rule adds other ops
 * instead (build_sub). The rules sit above the builder, which reads the op
 * table (ops.h) below it: the loader hands shape_rules to gb_new, so the
 * builder never calls up. README "Adding an op" is the recipe. */
#ifndef MEMPLAN_RULES_H
#define MEMPLAN_RULES_H

#include "build.h"
#include "ops.h"

/* Op k's shape rule; NULL for the ops a layer cannot name (the updates,
 * casts and collectives the passes insert). */
extern const ShapeRule shape_rules[OP_COUNT];
/* The op whose YAML name is s (it has a shape rule), or -1. */
int op_lookup(const char *s);
/* The closest YAML op name to s, for "did you mean". */
const char *op_suggest(const char *s);

#endif
