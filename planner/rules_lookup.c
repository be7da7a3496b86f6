/* rules_lookup.c: the YAML ops by name (rules.h): those with a shape rule, and the closest one to a
 * misspelt name. */
#include "rules.h"

#include <string.h>

int op_lookup(const char *s) {
  for (int k = 0; k < OP_COUNT; k++)
    if (shape_rules[k] && strcmp(op_info(k)->name, s) == 0) return k;
  return -1;
}

const char *op_suggest(const char *s) {
  const char *best = NULL;
  int bd = 1 << 30;
  for (int k = 0; k < OP_COUNT; k++) {
    if (!shape_rules[k]) continue;
    int d = mp_edit_distance(s, op_info(k)->name);
    if (d < bd) {
      bd = d;
      best = op_info(k)->name;
    }
  }
  return bd <= 3 ? best : NULL;
}
