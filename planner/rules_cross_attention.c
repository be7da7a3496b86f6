/* rules_cross_attention.c: cross_attention's shape rule (rules.h says what a
 * rule does; its other fields are its entry in ops.c). Its own file: rules.c
 * is at the 800-line limit. */
#include "rules_cross_attention.h"

/* q [B, Tq, C] and kv [B, Tk, 2C] (k | v) of the same B, f32; heads divides
 * C. Outputs out [B, Tq, C] and lse [B, heads, Tq]. */
void cross_attention_build(BuildCtx *c) {
  const Shape *q = &build_input(c, 0)->shape, *kv = &build_input(c, 1)->shape;
  for (int k = 0; k < 2; k++) {
    const Tensor *t = build_input(c, k);
    if (t->dtype != DT_F32)
      build_error(c, NULL, "input '%s' has dtype %s; this op needs f32", t->name, dtype_name(t->dtype));
    build_data(c, k, k);
  }
  if (q->rank != 3 || kv->rank != 3 || kv->d[0] != q->d[0] || kv->d[2] != 2 * q->d[2]) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "cross_attention needs q (B, Tq, C) and kv (B, Tk, 2*C); '%s' is %s %s, '%s' is %s %s",
                build_input(c, 0)->name, shape_sym_str(tmp, q), shape_val_str(tmp, q), build_input(c, 1)->name,
                shape_sym_str(tmp, kv), shape_val_str(tmp, kv));
  }
  const Attr *heads = build_attr(c, "heads");
  int64_t NH = heads->i, ld[3] = {q->d[0], NH, q->d[1]};
  if (NH <= 0 || q->d[2] % NH != 0)
    build_error(c, "heads", "heads = %lld must be positive and divide the channels %lld", (long long)NH,
                (long long)q->d[2]);
  const char *lsym[3] = {q->sym[0], heads->s, q->sym[1]};
  build_output(c, 0, NULL, *q, DT_F32);
  build_output(c, 1, "lse", build_shape(c, 3, ld, lsym), DT_F32);
}
