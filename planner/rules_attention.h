/* rules_attention.h: cross_attention's and window_attention's shape rules
 * (rules_attention.c), for rules.c's table. */
#ifndef MEMPLAN_RULES_ATTENTION_H
#define MEMPLAN_RULES_ATTENTION_H

#include "build.h"

void cross_attention_build(BuildCtx *c);
void window_attention_build(BuildCtx *c);

#endif
