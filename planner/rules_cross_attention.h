/* rules_cross_attention.h: cross_attention's shape rule
 * (rules_cross_attention.c), for rules.c's table. */
#ifndef MEMPLAN_RULES_CROSS_ATTENTION_H
#define MEMPLAN_RULES_CROSS_ATTENTION_H

#include "build.h"

void cross_attention_build(BuildCtx *c);

#endif
