/* trainer_resume.c: the trainer program's checkpoints of a run: metadata, --save-every, --resume, pruning old ones
 * (trainer_internal.h). */
#include "trainer_internal.h"

static Meta ck_meta; /* one at a time: built before a save, read by --resume */

/* The run's state at the end of `step` as checkpoint metadata (the keys:
 * memplan_trainer.h). Numbers as decimal text; doubles with 17 digits, which
 * read back to the same bits. */
static void run_meta(Meta *mt, const Run *r, const Opts *o, const LossScaler *ls, int64_t step) {
  const TrModel *m = r->m;
  mt->n = 0;
  meta_set(mt, "format", "pt");
  meta_set(mt, "model", "%s", m->model);
  meta_set(mt, "plan", "%016llx", (unsigned long long)m->fingerprint);
  meta_set(mt, "training", "%s", m->training);
  meta_set(mt, "step", "%lld", (long long)step);
  meta_set(mt, "optimizer_step", "%lld", (long long)ls->applied);
  meta_set(mt, "steps", "%lld", (long long)o->steps);
  meta_set(mt, "lr", "%.17g", o->lr);
  meta_set(mt, "schedule", "%s", sched_names[o->schedule]);
  meta_set(mt, "warmup", "%lld", (long long)o->warmup);
  meta_set(mt, "final_fraction", "%.17g", o->final_fraction);
  meta_set(mt, "seed", "%lld", (long long)o->seed);
  meta_set(mt, "shuffle", "%d", o->shuffle);
  meta_set(mt, "data_epoch", "%lld", (long long)r->order.epoch);
  meta_set(mt, "data_index", "%lld", (long long)r->order.index);
  meta_set(mt, "data_windows", "%lld", (long long)r->order.nwin);
  meta_set(mt, "loss_scale", "%.17g", ls->scale);
  meta_set(mt, "loss_scale_clean", "%lld", (long long)ls->clean);
  meta_set(mt, "loss_scale_skipped", "%lld", (long long)ls->skipped);
  meta_set(mt, "threads", "%d", o->threads);
}

/* The non-finite guard: every f32 tensor a checkpoint holds (weights,
 * running state, optimizer state) checked after the updates, before each
 * save and at the end of the run; weights the updates made non-finite (an lr
 * too large) end the run with exit 1, never saved as a checkpoint. One read
 * of the bytes a save writes (through the staging buffer on a device). */
void check_run_finite(const Run *r, int64_t step) {
  char where[64];
  snprintf(where, sizeof where, "after step %lld", (long long)step);
  const char *then = " (the updates made it so: lower --lr?); nothing saved";
  for (int i = 0; i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    if (strcmp(c->dtype, "F32")) continue;
    if (!r->m->device) {
      check_finite(where, c, (const float *)(r->dev + c->offset), 0, c->numel, then);
      continue;
    }
    for (int64_t at = 0; at < c->bytes; at += ck.stage_bytes) {
      int64_t n = c->bytes - at < ck.stage_bytes ? c->bytes - at : ck.stage_bytes;
      r->m->device->download_to(ck.stage, r->dev, c->offset + at, n);
      check_finite(where, c, (const float *)ck.stage, at / 4, n / 4, then);
    }
  }
}

/* A checkpoint of the run after `step`, and a line saying so. */
void write_checkpoint(const char *path, const Run *r, const Opts *o, const LossScaler *ls, int64_t step) {
  check_run_finite(r, step);
  double t0 = now_s();
  int64_t bytes = 0;
  for (int i = 0; i < ck.n; i++) bytes += ck.t[i].bytes;
  run_meta(&ck_meta, r, o, ls, step);
  save_checkpoint(path, &ck_meta, r->dev, r->m->device);
  char b[32];
  printf("saved %s: step %lld, %s of tensors in %.2f s\n", path, (long long)step, fmt_bytes(b, sizeof b, bytes),
         now_s() - t0);
  fflush(stdout);
}

static const char *meta_need(const Meta *mt, const char *key, const char *path) {
  const char *v = meta_get(mt, key);
  if (!v) die("%s: corrupt checkpoint: its metadata has no '%s' (written by another program?)", path, key);
  return v;
}

static int64_t meta_int(const Meta *mt, const char *key, const char *path, int64_t min, int64_t max) {
  const char *v = meta_need(mt, key, path);
  char *e;
  errno = 0;
  long long x = strtoll(v, &e, 10);
  if (e == v || *e || errno || x < min || x > max)
    die("%s: corrupt checkpoint: metadata '%s' is '%s', expected an integer in [%lld, %lld]", path, key, v,
        (long long)min, (long long)max);
  return x;
}

/* A number in [0, max] (lr and loss_scale: float32's largest, as the options). */
static double meta_num(const Meta *mt, const char *key, const char *path, double max) {
  const char *v = meta_need(mt, key, path);
  char *e;
  double x = strtod(v, &e);
  if (e == v || *e || !(x >= 0 && x <= max))
    die("%s: corrupt checkpoint: metadata '%s' is '%s', expected a number in [0, %g]", path, key, v, max);
  return x;
}

/* --resume: the checkpoint must come from this plan. When the fingerprint
 * differs, says what differs (the training text, tensors) and what to do. */
static void resume_check(const char *path, const CkEntry *e, int ne, const Meta *mt, const TrModel *m) {
  const char *plan = meta_get(mt, "plan"), *model = meta_get(mt, "model");
  if (!plan || !meta_get(mt, "step"))
    die("%s holds no trainer state (its metadata has no step and plan: a weights file?); --load %s starts a new run "
        "from its weights",
        path, path);
  if (model && strcmp(model, m->model))
    die("%s is a checkpoint of model '%s', and this trainer trains '%s': resume it with the trainer compiled from "
        "'%s' (or --load %s to start a new run from weights that fit this model)",
        path, model, m->model, model, path);
  char fp[32];
  snprintf(fp, sizeof fp, "%016llx", (unsigned long long)m->fingerprint);
  if (!strcmp(plan, fp)) return;
  char why[2048] = "";
  size_t k = 0;
  int shown = 0;
#define WHY(...)                                                                                    \
  do {                                                                                              \
    if (shown++ < 6 && k < sizeof why) k += (size_t)snprintf(why + k, sizeof why - k, __VA_ARGS__); \
  } while (0)
  const char *tr = meta_get(mt, "training");
  if (tr && strcmp(tr, m->training))
    WHY("\n  the checkpoint's plan trains with: %s\n  this trainer's plan trains with:  %s", tr, m->training);
  for (int i = 0; i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    int x = 0;
    while (x < ne && strcmp(e[x].name, c->name)) x++;
    char want[128], got[128];
    shape_str(want, sizeof want, c->rank, c->shape);
    if (x == ne) {
      WHY("\n  the checkpoint has no tensor '%s' (%s %s in this plan)", c->name, c->dtype, want);
      continue;
    }
    int same = e[x].rank == c->rank && !strcmp(e[x].dtype, c->dtype);
    for (int d = 0; same && d < c->rank; d++) same = e[x].shape[d] == c->shape[d];
    shape_str(got, sizeof got, e[x].rank, e[x].shape);
    if (!same)
      WHY("\n  tensor '%s' is %s %s in the checkpoint, %s %s in this plan", c->name, e[x].dtype, got, c->dtype, want);
  }
  for (int x = 0; x < ne; x++) {
    int i = 0;
    while (i < ck.n && strcmp(ck.t[i].name, e[x].name)) i++;
    if (i == ck.n) WHY("\n  the checkpoint's tensor '%s' is not in this plan", e[x].name);
  }
  if (shown > 6) WHY("\n  ... and %d more differences", shown - 6);
#undef WHY
  die("%s was saved by another plan of %s (plan fingerprint %s, this trainer's %s):%s\n  Resume it with the trainer "
      "compiled from the same YAML and options (memplan compile: the same --set, --precision, --micro-batch); or "
      "--load %s to start a new run from its weights.",
      path, m->model, plan, fp, *why ? why : "\n  (the tensors and the training text agree: another memplan version?)",
      path);
}

/* --resume, before anything else is set up: the header and metadata, checked
 * against this plan; every option not given on the command line takes the
 * checkpoint's value (a given one overrides it, said on stdout). */
Resume resume_opts(Opts *o, const TrModel *m) {
  int fd = open_input(o->resume, "checkpoint");
  int ne;
  int64_t data0, size;
  ck_meta.n = 0;
  CkEntry *ents = read_header(fd, o->resume, "checkpoint", &ck_meta, &ne, &data0, &size);
  close(fd);
  resume_check(o->resume, ents, ne, &ck_meta, m);
  mj_st_free(&ck_io.st);
  const Meta *mt = &ck_meta;
  const char *p = o->resume;
  /* every count within its range, and the counts consistent with each
   * other: a step updates the weights (optimizer_step) or, with loss
   * scaling, is skipped; it reads one window of the data */
  Resume rs = {.step = meta_int(mt, "step", p, 0, TR_MAX_STEPS)};
  rs.epoch = meta_int(mt, "data_epoch", p, 0, rs.step);
  rs.index = meta_int(mt, "data_index", p, 0, TR_MAX_STEPS); /* against the data: tr_main */
  rs.windows = meta_int(mt, "data_windows", p, 0, INT64_MAX);
  rs.ls.scale = meta_num(mt, "loss_scale", p, FLT_MAX);
  rs.ls.clean = meta_int(mt, "loss_scale_clean", p, 0, TR_SCALE_GROWTH_INTERVAL - 1);
  rs.ls.applied = meta_int(mt, "optimizer_step", p, 0, rs.step);
  rs.ls.skipped = meta_int(mt, "loss_scale_skipped", p, 0, rs.step);
  if (!(rs.ls.scale > 0)) die("%s: corrupt checkpoint: metadata 'loss_scale' is not > 0", p);
  if (rs.ls.applied + rs.ls.skipped != rs.step)
    die("%s: corrupt checkpoint: metadata 'optimizer_step' %lld + 'loss_scale_skipped' %lld is not 'step' %lld (each "
        "step updates the weights once or, with loss scaling, is skipped)",
        p, (long long)rs.ls.applied, (long long)rs.ls.skipped, (long long)rs.step);
  int64_t steps = meta_int(mt, "steps", p, 0, TR_MAX_STEPS), warmup = meta_int(mt, "warmup", p, 0, TR_MAX_STEPS);
  int64_t seed = meta_int(mt, "seed", p, 0, INT64_MAX), shuffle = meta_int(mt, "shuffle", p, 0, 1);
  double lr = meta_num(mt, "lr", p, FLT_MAX), ff = meta_num(mt, "final_fraction", p, 1);
  const char *sched = meta_need(mt, "schedule", p);
  int sk = 0;
  while (sk < 3 && strcmp(sched, sched_names[sk])) sk++;
  if (sk == 3) die("%s: corrupt checkpoint: metadata 'schedule' is '%s'", p, sched);
  if (!(lr > 0)) die("%s: corrupt checkpoint: metadata 'lr' is 0", p);
#define TAKE(given, field, val, T, fmt, name)                                                          \
  do {                                                                                                 \
    if (!(given)) o->field = val;                                                                      \
    else if (o->field != (val))                                                                        \
      printf("resume: " name " " fmt " instead of the checkpoint's " fmt "\n", (T)o->field, (T)(val)); \
  } while (0)
  TAKE(o->steps_given, steps, steps, long long, "%lld", "--steps");
  TAKE(o->lr_given, lr, lr, double, "%g", "--lr");
  TAKE(o->warmup_given, warmup, warmup, long long, "%lld", "--warmup");
  TAKE(o->final_fraction_given, final_fraction, ff, double, "%g", "--final-fraction");
  TAKE(o->seed_given, seed, seed, long long, "%lld", "--seed (dropout keys, shuffling)");
  TAKE(o->shuffle_given, shuffle, (int)shuffle, int, "%d", "--shuffle");
#undef TAKE
  if (!o->schedule_given) o->schedule = sk;
  else if (o->schedule != sk)
    printf("resume: --schedule %s instead of the checkpoint's %s\n", sched_names[o->schedule], sched_names[sk]);
  if (o->loss_scale_given && m->loss_scaling) {
    printf("resume: --loss-scale %g instead of the checkpoint's %g\n", o->loss_scale, rs.ls.scale);
    rs.ls.scale = o->loss_scale;
  }
  int64_t threads = meta_int(mt, "threads", p, 1, INT64_MAX);
  if (!m->device && threads != o->threads)
    printf(
        "resume: note: %d threads, the checkpoint's run had %lld: the steps continue, not bit for bit as "
        "uninterrupted (the kernels' sums depend on the thread count)\n",
        o->threads, (long long)threads);
  if (o->final_fraction_given && o->schedule == TR_SCHED_CONSTANT)
    die("--final-fraction is the floor of a decay, and the schedule is constant: give --schedule cosine or linear");
  return rs;
}

/* --save-every: PATH-stepNNNNNN.safetensors, PATH being --save's name without
 * ".safetensors" (default "checkpoint"). */
char *ckpt_base(const Opts *o) {
  const char *s = o->save ? o->save : "checkpoint";
  size_t n = strlen(s);
  if (n > 12 && !strcmp(s + n - 12, ".safetensors")) n -= 12;
  char *b = xmalloc(n + 1, "a path");
  memcpy(b, s, n);
  b[n] = 0;
  return b;
}

char *ckpt_name(const char *base, int64_t step) {
  /* base copied, not formatted with %s: gcc under -fsanitize warns the %s argument may be null (inlined into
   * prune_checkpoints), an error in the sanitized trainers' -Werror build */
  size_t nb = strlen(base), n = nb + 48;
  char *p = xmalloc(n, "a path");
  memcpy(p, base, nb);
  snprintf(p + nb, n - nb, "-step%06lld.safetensors", (long long)step);
  return p;
}

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Keeps the `keep` newest BASE-stepN.safetensors with N <= step (a resumed
 * run's older ones too); later ones (a run resumed from an earlier
 * checkpoint) are left alone until overwritten. */
void prune_checkpoints(const char *base, int64_t keep, int64_t step) {
  const char *slash = strrchr(base, '/'), *name = slash ? slash + 1 : base;
  int dn = slash ? (int)(slash - base) + (slash == base) : 1;
  char *dir = xmalloc((size_t)dn + 1, "a path");
  snprintf(dir, (size_t)dn + 1, "%.*s", dn, slash ? base : ".");
  DIR *d = opendir(dir);
  size_t nn = strlen(name), cap = 16, n = 0;
  int64_t *steps = xmalloc(sizeof(int64_t) * cap, "checkpoint steps");
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
    const char *f = e->d_name, *q = f + nn + 5;
    if (strncmp(f, name, nn) || strncmp(f + nn, "-step", 5) || *q < '0' || *q > '9') continue;
    char *end;
    long long v = strtoll(q, &end, 10);
    if (strcmp(end, ".safetensors") || v > step) continue;
    if (n == cap) {
      int64_t *g = realloc(steps, sizeof(int64_t) * (cap *= 2));
      if (!g) break;
      steps = g;
    }
    steps[n++] = v;
  }
  if (d) closedir(d);
  qsort(steps, n, sizeof *steps, cmp_desc);
  for (size_t i = (size_t)keep; i < n; i++) {
    char *f = ckpt_name(base, steps[i]);
    remove(f);
    free(f);
  }
  free(steps);
  free(dir);
}
