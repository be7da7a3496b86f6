/* expr.h: integer expressions over dims ("4*C", "(T + 1) / 2"), evaluated
 * with checked 64-bit arithmetic. */
#ifndef MEMPLAN_EXPR_H
#define MEMPLAN_EXPR_H

#include "graph.h"

/* Evaluates s: integers, dim names, + - * / % and parentheses; / and % are
 * floor division on non-negative results. Errors (unknown dim with a
 * suggestion, syntax, overflow, division by zero) are reported at loc, with
 * the column moved to the offending character. */
int64_t expr_eval(const char *s, Loc loc, const Dim *dims, int ndims);

/* Is s a valid dim or layer identifier ([A-Za-z_][A-Za-z0-9_]*)? */
bool expr_is_ident(const char *s);

#endif
