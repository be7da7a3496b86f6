/* rules_diffusion.c: the shape rules of the diffusion ops (docs/diffusion.md):
 * groupnorm, add_channels, upsample, timestep_embedding, conv_transpose2d and
 * ddpm_noise. Their other fields are their entries in ops.c; rules.c's table
 * names these functions (rules_diffusion.h). */
#include "rules_diffusion.h"

#include <math.h>

static const Shape *shape_of(BuildCtx *c, int k) { return &build_input(c, k)->shape; }
static int64_t int_attr(BuildCtx *c, const char *key) { return build_attr(c, key)->i; }

/* Input k must be f32 of rank lo .. hi; `what` names the layout in the message. */
static void need_layout(BuildCtx *c, int k, int lo, int hi, const char *what) {
  const Tensor *t = build_input(c, k);
  if (t->dtype != DT_F32 || t->shape.rank < lo || t->shape.rank > hi) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "input '%s' is %s %s %s; this op needs f32 of shape %s", t->name, dtype_name(t->dtype),
                shape_sym_str(tmp, &t->shape), shape_val_str(tmp, &t->shape), what);
  }
}

static Shape channels(BuildCtx *c, const Shape *x) { return build_shape(c, 1, &x->d[1], &x->sym[1]); }

/* groupnorm (torch.nn.GroupNorm): x [N, C, ...] normalized over each group of
 * C / groups channels and all positions; then times weight[C] plus bias[C]
 * when affine. Saves mean and rstd [N, groups]. */
void groupnorm_build(BuildCtx *c) {
  need_layout(c, 0, 3, MAX_RANK, "(N, C, ...) such as (N, C, H, W) or (N, C, T)");
  const Shape *x = shape_of(c, 0);
  int64_t G = int_attr(c, "groups");
  if (x->d[1] % G != 0)
    build_error(c, "groups", "groups = %lld must divide the channels %lld of '%s'", (long long)G, (long long)x->d[1],
                build_input(c, 0)->name);
  build_data(c, 0, 0);
  if (int_attr(c, "affine")) {
    build_param(c, 1, "weight", NULL, channels(c, x), (Init){INIT_ONES, 0});
    build_param(c, 2, "bias", NULL, channels(c, x), (Init){INIT_ZEROS, 0});
  }
  int64_t sd[2] = {x->d[0], G};
  const char *ss[2] = {x->sym[0], build_attr(c, "groups")->s};
  build_output(c, 0, NULL, *x, DT_F32);
  build_output(c, 1, "mean", build_shape(c, 2, sd, ss), DT_F32);
  build_output(c, 2, "rstd", build_shape(c, 2, sd, ss), DT_F32);
}

/* add_channels: x [N, C, ...] + e [N, C], e broadcast over the positions
 * (a U-Net's timestep embedding added to each channel). */
void add_channels_build(BuildCtx *c) {
  need_layout(c, 0, 3, MAX_RANK, "(N, C, ...)");
  need_layout(c, 1, 2, 2, "(N, C)");
  const Shape *x = shape_of(c, 0), *e = shape_of(c, 1);
  if (e->d[0] != x->d[0] || e->d[1] != x->d[1]) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "'%s' is %s %s; add_channels needs one value per (N, C) of '%s' %s %s: [%lld, %lld]",
                build_input(c, 1)->name, shape_sym_str(tmp, e), shape_val_str(tmp, e), build_input(c, 0)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x), (long long)x->d[0], (long long)x->d[1]);
  }
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, *x, DT_F32);
}

/* upsample: nearest neighbour, [N, C, H, W] -> [N, C, scale H, scale W]. */
void upsample_build(BuildCtx *c) {
  need_layout(c, 0, 4, 4, "(N, C, H, W)");
  const Shape *x = shape_of(c, 0);
  int64_t s = int_attr(c, "scale"), d[4] = {x->d[0], x->d[1], 0, 0};
  if (!ck_mul(x->d[2], s, &d[2]) || !ck_mul(x->d[3], s, &d[3]))
    build_error(c, "scale", "scale = %lld makes the image too large", (long long)s);
  const char *sym[4] = {x->sym[0], x->sym[1], NULL, NULL};
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 4, d, sym), DT_F32);
}

/* timestep_embedding (diffusers' get_timestep_embedding): t [B] -> [B, dim]. */
void timestep_embedding_build(BuildCtx *c) {
  need_layout(c, 0, 1, 1, "(B): one timestep per sample");
  int64_t D = int_attr(c, "dim");
  double shift = build_attr(c, "downscale_freq_shift")->f;
  if (D < 2 || !(D / 2 - shift > 0))
    build_error(c, "dim",
                "dim = %lld gives %lld frequencies; with downscale_freq_shift = %g the exponent's divisor dim/2 - "
                "shift = %g must be positive: use a larger dim or a smaller shift",
                (long long)D, (long long)(D / 2), shift, (double)(D / 2) - shift);
  const Shape *t = shape_of(c, 0);
  int64_t d[2] = {t->d[0], D};
  const char *sym[2] = {t->sym[0], build_attr(c, "dim")->s};
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 2, d, sym), DT_F32);
}

/* conv_transpose2d (torch.nn.ConvTranspose2d, groups 1, dilation 1): weight
 * [C, out, k, k], Ho = (H - 1) stride - 2 padding + kernel + output_padding. */
void conv_transpose2d_build(BuildCtx *c) {
  need_layout(c, 0, 4, 4, "(N, C, H, W)");
  const Shape *x = shape_of(c, 0);
  int64_t O = int_attr(c, "out"), k = int_attr(c, "kernel"), s = int_attr(c, "stride"), p = int_attr(c, "padding"),
          op = int_attr(c, "output_padding");
  if (op >= s)
    build_error(c, "output_padding", "output_padding = %lld must be smaller than stride = %lld, as torch requires",
                (long long)op, (long long)s);
  int64_t o[2];
  for (int i = 0; i < 2; i++) {
    int64_t n = x->d[2 + i];
    bool ok = ck_mul(n - 1, s, &o[i]) && ck_add(o[i], k + op, &o[i]);
    if (!ok || o[i] - 2 * p < 1)
      build_error(c, "padding",
                  "padding = %lld leaves no output: (%lld - 1) * stride %lld - 2 * padding + kernel %lld + "
                  "output_padding %lld must be at least 1",
                  (long long)p, (long long)n, (long long)s, (long long)k, (long long)op);
    o[i] -= 2 * p;
  }
  build_data(c, 0, 0);
  int64_t wd[4] = {x->d[1], O, k, k};
  const char *ws[4] = {x->sym[1], build_attr(c, "out")->s, build_attr(c, "kernel")->s, build_attr(c, "kernel")->s};
  /* torch's fan_in of a [C, O, k, k] weight is O k k: U(+-1/sqrt(O k k)) for weight and bias */
  Init u = {INIT_UNIFORM, 1.0 / sqrt((double)O * (double)k * (double)k)};
  build_param(c, 1, "weight", NULL, build_shape(c, 4, wd, ws), u);
  if (int_attr(c, "bias")) build_param(c, 2, "bias", NULL, build_shape(c, 1, &O, &ws[1]), u);
  int64_t od[4] = {x->d[0], O, o[0], o[1]};
  const char *os[4] = {x->sym[0], ws[1], NULL, NULL};
  build_output(c, 0, NULL, build_shape(c, 4, od, os), DT_F32);
}

/* ddpm_noise: x0 [B, ...] -> x_t (the layer), eps (LAYER.eps, x0's shape) and
 * t (LAYER.t, [B] f32), drawn from the op's key (docs/diffusion.md). */
void ddpm_noise_build(BuildCtx *c) {
  need_layout(c, 0, 1, MAX_RANK, "(B, ...)");
  double b0 = build_attr(c, "beta_start")->f, b1 = build_attr(c, "beta_end")->f;
  if (!(b0 <= b1 && b1 < 1))
    build_error(c, "beta_end", "beta_end = %g must be at least beta_start = %g and below 1", b1, b0);
  const Shape *x = shape_of(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *x, DT_F32);
  build_output(c, 1, "eps", *x, DT_F32);
  build_output(c, 2, "t", build_shape(c, 1, &x->d[0], &x->sym[0]), DT_F32);
}
