/* rules_attention.c: the shape rules of attention's variants, cross_attention
 * and window_attention (rules.h says what a rule does; their other fields are
 * their entries in ops.c). Their own file: rules.c is at the 800-line limit. */
#include "rules_attention.h"

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

/* window_attention (Swin): qkv [B, H, W, 3C] of whole windows; its relative position bias table [(2 window - 1)^2,
 * heads] (torchvision's init, std 0.02). Outputs out [B, H, W, C], lse [B, heads, H, W]. */
void window_attention_build(BuildCtx *c) {
  if (build_input(c, 0)->dtype != DT_F32)
    build_error(c, NULL, "input '%s' has dtype %s; this op needs f32", build_input(c, 0)->name,
                dtype_name(build_input(c, 0)->dtype));
  const Shape *x = &build_input(c, 0)->shape;
  int64_t NH = build_attr(c, "heads")->i, ws = build_attr(c, "window")->i, R = 2 * ws - 1,
          sh = build_attr(c, "shift")->i;
  if (x->rank != 4 || x->d[3] % (3 * NH) != 0)
    build_error(c, "heads", "window_attention needs qkv [B, H, W, 3*C] with heads = %lld dividing C; '%s' is %s",
                (long long)NH, build_input(c, 0)->name, shape_val_str(build_scratch(c), x));
  if (x->d[1] % ws != 0 || x->d[2] % ws != 0 || ws > 32 || sh >= ws)
    build_error(c, "window", "window = %lld must divide H = %lld and W = %lld, be at most 32 and exceed shift = %lld",
                (long long)ws, (long long)x->d[1], (long long)x->d[2], (long long)sh);
  build_data(c, 0, 0);
  const char *hy = build_attr(c, "heads")->s, *ty[2] = {NULL, hy};
  build_param(c, 1, "table", NULL, build_shape(c, 2, (int64_t[2]){R * R, NH}, ty), (Init){INIT_NORMAL, 0.02});
  const char *sy[4] = {x->sym[0], x->sym[1], x->sym[2], NULL}, *ly[4] = {x->sym[0], hy, sy[1], sy[2]};
  build_output(c, 0, NULL, build_shape(c, 4, (int64_t[4]){x->d[0], x->d[1], x->d[2], x->d[3] / 3}, sy), DT_F32);
  build_output(c, 1, "lse", build_shape(c, 4, (int64_t[4]){x->d[0], NH, x->d[1], x->d[2]}, ly), DT_F32);
}
