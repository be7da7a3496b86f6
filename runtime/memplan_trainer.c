/* memplan_trainer.c: the trainer program's main loop: the run, evaluation, training, checkpoints on the way (tr_main)
 * (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// the program

/* Device I/O: after the host wrote inputs or parameters, before it reads the
 * loss or saves parameters. No-ops on the CPU. */
void put_inputs(Run *r, const TrInput *in, int n) {
  const TrDevice *d = r->m->device;
  for (int k = 0; d && k < n; k++) d->upload(r->dev, r->arena, in[k].offset, 4 * in[k].rows * in[k].cols);
}

/* Initialized parameters and running state, to the device (checkpoints
 * move theirs, and the optimizer state, through the staging buffer). */
static void put_params(Run *r) {
  const TrDevice *d = r->m->device;
  for (int i = 0; d && i < nsaved(r->m); i++)
    d->upload(r->dev, r->arena, saved_at(r->m, i)->offset, saved_at(r->m, i)->bytes);
}

static float read_loss(Run *r, int64_t offset) {
  if (r->m->device) r->m->device->download(r->arena, r->dev, offset, 4);
  return *(const float *)(r->arena + offset);
}

static void fill_train(Run *r, int64_t step, int mb) {
  const TrModel *m = r->m;
  int64_t rows = m->train_in[0].rows;
  /* data parallelism: each rank its own rows of the step's window (memplan_trainer.h) */
  if ((r->npy || m->vocab) && mb == 0) order_next(&r->order);
  if (r->npy) fill_npy_batch(r->arena, m->train_in, m->ntrain_in, &npy_train, &r->order, mb, m->accumulation, tr_rank);
  else if (m->vocab)
    fill_token_train(r->arena, m->train_in, m->ntrain_in, &r->train, &r->order, mb, m->accumulation, tr_rank, tr_ranks);
  else
    fill_blob_batch(r->arena, m->train_in, m->ntrain_in,
                    (((step - 1) * tr_ranks + tr_rank) * m->accumulation + mb) * rows, m->classes);
  put_inputs(r, m->train_in, m->ntrain_in);
}

/* One evaluation: the loss over its counted rows, and for a classification
 * model the accuracy (NAN otherwise). */
typedef struct {
  double loss, accuracy;
  int64_t correct, counted, batches;
} Eval;

/* Accuracy and, for a padded batch, the loss of the first `rows` rows of a
 * classification model's eval logits (memplan_trainer.h): the argmax is the
 * first maximum (NaN above all, as torch.argmax), the loss log-sum-exp minus
 * the label's logit, in double. Returns the summed loss. */
static double score_rows(Run *r, int64_t rows, int padded, Eval *e) {
  const TrModel *m = r->m;
  int64_t K = m->eval_logits_classes;
  if (m->device) m->device->download(r->arena, r->dev, m->eval_logits_offset, 4 * rows * K);
  const float *lg = (const float *)(r->arena + m->eval_logits_offset);
  const int32_t *y = (const int32_t *)(r->arena + r->labels->offset);
  double sum = 0.0;
  for (int64_t i = 0; i < rows; i++) {
    const float *x = lg + i * K;
    int64_t best = 0;
    for (int64_t j = 1; j < K; j++)
      if (x[j] > x[best] || (isnan(x[j]) && !isnan(x[best]))) best = j;
    e->correct += best == y[i];
    if (!padded) continue;
    double mx = x[best], z = 0.0;
    for (int64_t j = 0; j < K; j++) z += exp((double)x[j] - mx);
    sum += mx + log(z) - x[y[i]];
  }
  return sum;
}

/* The first `batches` eval batches (the same ones every time); with --npy,
 * every test sample once (a last partial batch's padding not counted) or
 * the first `batches` batches of them. */
static Eval evaluate(Run *r, int64_t batches) {
  const TrModel *m = r->m;
  int64_t be = m->eval_in[0].rows;
  Eval e = {.batches = batches};
  double total = 0.0;
  r->val.pos = 0;
  for (int64_t k = 0; k < batches; k++) {
    int64_t real = be;
    if (r->npy) {
      fill_npy_rows(r->arena, m->eval_in, m->neval_in, &npy_test, k * be);
      if (npy_test.n - k * be < be) real = npy_test.n - k * be;
    } else if (m->vocab) fill_token_batch(r->arena, m->eval_in, m->neval_in, &r->val, 0, 1);
    else fill_blob_batch(r->arena, m->eval_in, m->neval_in, TR_EVAL_SAMPLE0 + k * be, m->classes);
    put_inputs(r, m->eval_in, m->neval_in);
    m->eval(r->dev);
    double loss = read_loss(r, m->eval_loss_offset);
    if (r->labels) { /* rows of logits and labels: samples times the labels per sample */
      int64_t rows = real * r->labels->cols;
      double padded = score_rows(r, rows, real < be, &e);
      total += real < be ? padded : loss * (double)rows;
      e.counted += rows;
    } else {
      total += loss * (double)real;
      e.counted += real;
    }
  }
  e.loss = total / (double)e.counted;
  e.accuracy = r->labels ? (double)e.correct / (double)e.counted : NAN;
  return e;
}

/* Eval batches of one evaluation: --eval-batches, or with --npy by default
 * as many as cover the test set (at most that many). */
static int64_t eval_batch_count(const Run *r, const Opts *o) {
  if (!r->npy || !o->eval_batches) return o->eval_batches;
  int64_t be = r->m->eval_in[0].rows, all = (npy_test.n + be - 1) / be;
  return o->eval_batches_given && o->eval_batches < all ? o->eval_batches : all;
}

/* One forward pass of the eval plan before training: OpenMP starts its
 * threads and OpenBLAS sets up its buffers on first use, and those one-time
 * allocations belong to setup, not to the training loop. Changes no weights. */
static void warm_up(Run *r) {
  const TrModel *m = r->m;
  if (!m->neval_in) return;
  Stream s = r->train;
  s.pos = 0;
  if (r->npy) { /* the test set's first batch; without evaluations, the zeroed inputs */
    if (npy_test.n) fill_npy_rows(r->arena, m->eval_in, m->neval_in, &npy_test, 0);
  } else if (m->vocab) { /* standalone generation has no data: the zeroed inputs */
    if (s.n) fill_token_batch(r->arena, m->eval_in, m->neval_in, &s, 0, 1);
  } else fill_blob_batch(r->arena, m->eval_in, m->neval_in, TR_EVAL_SAMPLE0, m->classes);
  put_inputs(r, m->eval_in, m->neval_in);
  m->eval(r->dev);
  if (m->device) m->device->sync();
}

static void check_window(const Stream *s, const TrInput *in, int micro) {
  int64_t w = micro * in->rows * in->cols + 1;
  if (s->n < w)
    die("%s: %lld tokens is too short: one batch needs %lld x %lld + 1 = %lld tokens%s", s->path, (long long)s->n,
        (long long)(micro * in->rows), (long long)in->cols, (long long)w,
        micro > 1 && tr_ranks > 1 ? " (the batches of every rank)" : "");
}

static unsigned char *alloc_arena(const TrModel *m) {
  size_t n = ((size_t)m->arena_bytes + 4095) / 4096 * 4096;
  if (m->device) { /* an I/O shadow: zero pages, touched only where the program reads or writes */
    void *s = calloc(1, n ? n : 4096);
    if (!s) die("cannot allocate the host shadow of the arena: %lld bytes", (long long)m->arena_bytes);
    return s;
  }
  void *p = NULL;
  if (posix_memalign(&p, 4096, n ? n : 4096) != 0) {
    char b[32];
    die("cannot allocate the arena: %lld bytes (%s)", (long long)m->arena_bytes,
        fmt_bytes(b, sizeof b, m->arena_bytes));
  }
  memset(p, 0, n); // touches every page (RSS shows the arena) and zeroes optimizer state
  return p;
}

typedef long (*AllocCount)(void);

/* Gradient clipping (plans with clip_grad_norm): the global L2 norm of every
 * gradient, summed in double; when max_norm > 0 and max_norm / (norm + 1e-6)
 * < 1, every gradient is multiplied by that coefficient, computed in float as
 * torch.nn.utils.clip_grad_norm_ computes it. Returns the norm before
 * clipping (NAN when the plan does not keep its gradients). */
static double clip_grads(const TrModel *m, unsigned char *arena, double max_norm) {
  if (!(m->clip_grad_norm > 0)) return NAN;
  double norm = sqrt(m->grad_sqnorm(arena));
  float coef = (float)max_norm / ((float)norm + 1e-6f);
  if (max_norm > 0 && coef < 1.0f) m->unscale(arena, coef);
  return norm;
}

static void scaler_step(LossScaler *ls, const TrModel *m, unsigned char *arena, double lr, int64_t step,
                        double max_norm, double *norm) {
  if (m->unscale(arena, (float)(1.0 / ls->scale))) {
    *norm = clip_grads(m, arena, max_norm); /* unscaled first, then clipped (GradScaler's order) */
    m->update(arena, lr, ++ls->applied);
    if (++ls->clean == TR_SCALE_GROWTH_INTERVAL) {
      ls->scale *= 2;
      ls->clean = 0;
    }
    return;
  }
  ls->skipped++, ls->clean = 0;
  ls->scale *= 0.5;
  printf("step %lld skipped: a gradient overflowed; loss scale now %g\n", (long long)step, ls->scale);
}

/* ----------------------------------------------------------------------------
 * checkpoints of the run: metadata, --resume, --save-every */

/* Whether argv holds flag, before any "--". */
static int has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], flag)) return 1;
  return 0;
}

int tr_main(int argc, char **argv, const TrModel *m) {
  /* first: it may restart the program with another BLAS kernel (cpu_blas.c) */
  const char *blas = m->blas ? m->blas(argv, !has_flag(argc, argv, "--no-blas-select")) : NULL;
  ranks_init(&argc, &argv, m);
  /* a save over the file size limit (ulimit -f) fails with EFBIG and removes
   * its temporary file, instead of the process dying with it left behind */
  signal(SIGXFSZ, SIG_IGN);
  Opts o = parse_opts(argc, argv, m);
  watchdog_secs = (int)o.comm_timeout;
  int sharded = tr_ranks > 1 && m->zero >= 1; /* each rank holds a shard of the optimizer state */
  if (sharded && (o.save_every || o.resume))
    die("--save-every and --resume with ZeRO-%d: each rank holds only its shard of the optimizer state, and "
        "checkpoints of sharded state are not written yet (--save writes the weights); plan with --zero 0 to "
        "checkpoint a data-parallel run",
        m->zero);
  ck_setup(m, !sharded);
  if (sharded && o.save && tr_rank == 0)
    printf("--save with ZeRO-%d: the weights and running state only (the optimizer state is sharded)\n", m->zero);
  Resume rs = {.ls = {0}};
  if (o.resume) rs = resume_opts(&o, m);
  /* a decay starts after the warmup: with warmup >= steps it never would.
   * Asked for on the command line, that is a contradiction, refused; from the
   * plan (a short run of a model with a long warmup: a smoke test, the
   * reference tests' 10 steps) the run goes on and the banner says so */
  if (o.warmup_given && o.schedule != TR_SCHED_CONSTANT && o.steps > 0 && o.warmup >= o.steps)
    die("--warmup %lld with --steps %lld: the %s decay starts after the warmup, so this run would never decay (nor "
        "train at the full lr); give --warmup < --steps, or --schedule constant",
        (long long)o.warmup, (long long)o.steps, sched_names[o.schedule]);
  op_key_seed = (uint64_t)o.seed;
  if (o.save && tr_rank == 0) check_save_path(o.save);
  char *base = o.save_every && tr_rank == 0 ? ckpt_base(&o) : NULL;
  if (base) { /* the first checkpoint's name stands for all of them */
    char *first = ckpt_name(base, o.save_every);
    check_save_path(first);
    free(first);
  }
  if (m->set_threads) m->set_threads(o.threads);
  Run r = {.m = m, .npy = o.npy != NULL};
  for (int k = 0; m->eval_logits_offset >= 0 && k < m->neval_in; k++)
    if (m->eval_in[k].kind == TR_IN_LABELS) r.labels = &m->eval_in[k];
  if (o.npy) {
    load_npy_set(&npy_train, o.npy, "train", m->train_in, m->ntrain_in, m);
    int64_t w = m->accumulation * m->train_in[0].rows * tr_ranks;
    if (npy_train.n < w)
      die("--npy %s: %lld training samples are too few: one batch reads %lld", o.npy, (long long)npy_train.n,
          (long long)w);
    if (o.eval_batches) load_npy_set(&npy_test, o.npy, "test", m->eval_in, m->neval_in, m);
  } else if (m->vocab && (o.text || o.data)) {
    r.train = load_tokens(o.text ? o.text : o.data, o.text != NULL, m->vocab, m->tokenizer);
    r.val = o.val ? load_tokens(o.val, o.text != NULL, m->vocab, m->tokenizer) : r.train;
    check_window(&r.train, &m->train_in[0], m->accumulation * tr_ranks);
    if (o.eval_batches) check_window(&r.val, &m->eval_in[0], 1);
  }
  /* a window holds every rank's micro-batches (memplan_trainer.h) */
  int64_t wrows = (int64_t)m->accumulation * tr_ranks * m->train_in[0].rows;
  if (o.npy) order_init(&r.order, npy_train.n, wrows, o.shuffle, (uint64_t)o.seed);
  else if (m->vocab && r.train.n) { /* windows of ranks x micro x B x T tokens and the one after them */
    int64_t w = wrows * m->train_in[0].cols;
    order_init(&r.order, (r.train.n - 1) / w, 1, o.shuffle, (uint64_t)o.seed);
  }
  if (o.resume) {
    if (rs.windows != r.order.nwin)
      die("%s: the checkpoint's training data has %lld windows a pass, this run's %lld: resume on the same data "
          "(--text, --data or --npy) and batch",
          o.resume, (long long)rs.windows, (long long)r.order.nwin);
    if (rs.index > r.order.nwin)
      die("%s: corrupt checkpoint: metadata 'data_index' is %lld, past the %lld windows of a pass over this data",
          o.resume, (long long)rs.index, (long long)r.order.nwin);
    r.order.epoch = rs.epoch, r.order.index = rs.index;
  }
  FILE *log = o.log && tr_rank == 0 ? fopen(o.log, "w") : NULL;
  if (o.log && tr_rank == 0 && !log) die("cannot write %s: %s", o.log, strerror(errno));
  if (log) fprintf(log, "step,loss,ms,eval_loss,eval_accuracy,lr,grad_norm\n");
  AllocCount alloc_count = (AllocCount)(uintptr_t)dlsym(RTLD_DEFAULT, "memplan_alloc_count");
  if (o.check_alloc && !alloc_count) die("--check-alloc needs a counting allocator: LD_PRELOAD=liballoc_count.so");
  tr_profiling = o.profile;
  if (o.profile) {
    prof_time = xmalloc(sizeof(double) * (size_t)(m->nops ? m->nops : 1), "profile");
    memset(prof_time, 0, sizeof(double) * (size_t)(m->nops ? m->nops : 1));
  }

  char b1[32], b2[32];
  r.arena = alloc_arena(m);
  r.dev = m->device ? m->device->open(m, o.cuda_graph) : r.arena;
  int adapters = 0; /* LoRA: --load of a base model's weights initializes the adapters */
  for (int i = 0; i < m->nparams; i++) adapters |= is_adapter(m->params[i].name);
  if (!o.resume && (!o.load || adapters)) {
    init_params(r.arena, m, (uint64_t)o.seed);
    init_states(r.arena, m);
    put_params(&r);
  }
  if (o.load || o.resume) load_checkpoint(o.load ? o.load : o.resume, r.dev, m, o.resume != NULL);
  char from[600];
  if (o.resume) snprintf(from, sizeof from, "resumed from %s at step %lld", o.resume, (long long)rs.step);
  else snprintf(from, sizeof from, "%s", o.load ? o.load : "initialized from --seed");
  if (m->device)
    printf("%s: %lld parameters, %s%s, lr %g, %s\n", m->model, (long long)m->param_count, m->device->name,
           o.cuda_graph ? " (CUDA graph)" : "", o.lr, from);
  else
    printf("%s: %lld parameters, %d threads, lr %g, %s\n", m->model, (long long)m->param_count, o.threads, o.lr, from);
  if (blas) /* rt_set_threads: the trainer's pool splits each product into single-threaded OpenBLAS calls */
    printf("BLAS: %s; %d thread%s (the trainer's pool, 1 BLAS thread a call)\n", blas, o.threads,
           o.threads > 1 ? "s" : "");
  if (m->ranks >= 1) { /* a data-parallel plan (of one rank, too) */
    static const char *const zero[] = {"gradients all-reduced", "ZeRO-1: optimizer state sharded",
                                       "ZeRO-2: optimizer state and gradients sharded"};
    printf("data parallel: %d rank%s (%s), %lld %s per rank and step; rank 0 logs\n", tr_ranks, tr_ranks > 1 ? "s" : "",
           zero[m->zero >= 0 && m->zero <= 2 ? m->zero : 0], (long long)m->samples_per_step,
           m->vocab ? "tokens" : "samples");
  }
  if (r.order.nwin)
    printf("data: %lld windows a pass, %s (--seed %lld), next: pass %lld, window %lld\n", (long long)r.order.nwin,
           o.shuffle ? "shuffled each pass" : "in order", (long long)o.seed, (long long)r.order.epoch + 1,
           (long long)r.order.index + 1);
  if (o.resume && rs.step >= o.steps)
    printf(
        "resume: the checkpoint is at step %lld of --steps %lld: nothing to train (give --steps N > %lld to go "
        "on)\n",
        (long long)rs.step, (long long)o.steps, (long long)rs.step);
  if (o.schedule != TR_SCHED_CONSTANT || o.warmup) {
    printf("lr schedule: %lld warmup steps, then %s", (long long)o.warmup, sched_names[o.schedule]);
    if (o.steps > 0 && o.warmup >= o.steps)
      printf(": these %lld steps end inside the warmup (lr up to %g x lr), before any decay", (long long)o.steps,
             (double)o.steps / (double)o.warmup);
    else if (o.schedule != TR_SCHED_CONSTANT)
      printf(" decay to %g x lr at step %lld", o.final_fraction, (long long)o.steps);
    printf("\n");
  }
  printf("arena: planned %lld bytes (%s); peak RSS after setup %s\n", (long long)m->arena_bytes,
         fmt_bytes(b1, sizeof b1, m->arena_bytes), fmt_bytes(b2, sizeof b2, peak_rss()));
  fflush(stdout);
  Gen gen = {0};
  if (o.generate) gen_setup(&gen, &r, &o);
  warm_up(&r);
  if (m->device) m->device->report(m, "after setup");

  long allocs0 = alloc_count ? alloc_count() : 0;
  double t_steps = 0.0;
  int64_t eval_batches = eval_batch_count(&r, &o);
  Eval ev = {NAN, NAN, 0, 0, 0};
  LossScaler ls = o.resume ? rs.ls : (LossScaler){o.loss_scale, 0, 0, 0};
  int64_t first = rs.step + 1, ran = o.steps > rs.step ? o.steps - rs.step : 0; /* this run's steps */
  long ckpt_allocs = 0; /* checkpoints allocate (file, header, names): not the training's own */
  double t_start = now_s();
  for (int64_t step = first; step <= o.steps; step++) {
    double t0 = now_s(), sum = 0.0;
    double lr = tr_schedule_lr(o.schedule, o.lr, o.warmup, o.final_fraction, step, o.steps);
    /* over N ranks the collectives sum: each rank's loss gradient is scaled by 1/N */
    float scale = (float)((m->loss_scaling ? ls.scale : 1.0) / m->accumulation / tr_ranks);
    watchdog_arm(step);
    if (step == o.kill_step && tr_rank == o.kill_rank) { /* --kill-rank, --hang-rank: a rank dies or hangs */
      fprintf(stderr, "trainer: rank %d: %s at step %lld (test hook)\n", tr_rank, o.hang ? "hanging" : "exiting",
              (long long)step);
      if (!o.hang) _exit(9);
      alarm(0); /* stopped as from outside (SIGSTOP): its own watchdog with it; the others' must end the run */
      for (;;) pause();
    }
    if (step == o.force_overflow) scale = INFINITY;
    for (int mb = 0; mb < m->accumulation; mb++) {
      fill_train(&r, step, mb);
      if (o.profile) prof_last = now_s();
      if (m->device) m->device->step(m, r.dev, lr, ls.applied + 1, mb, scale);
      else m->step(r.dev, lr, ls.applied + 1, mb, scale);
      sum += read_loss(&r, m->loss_offset);
    }
    double gnorm = NAN; /* NAN: not clipping, or a skipped step */
    if (!m->loss_scaling) {
      gnorm = clip_grads(m, r.dev, o.clip);
      m->update(r.dev, lr, step);
      ls.applied = step;
    } else scaler_step(&ls, m, r.dev, lr, step, o.clip, &gnorm);
    if (m->device) m->device->sync();                      /* the step's time includes its updates */
    float loss = (float)ranks_mean(sum / m->accumulation); /* the mean over the ranks: a collective too */
    if (tr_ranks > 1) alarm(0);
    double dt = now_s() - t0;
    t_steps += dt;
    if (!isfinite(loss)) die("the loss is %f at step %lld (lower --lr?)", (double)loss, (long long)step);
    ev = (Eval){NAN, NAN, 0, 0, 0};
    if (o.eval_every && step % o.eval_every == 0 && eval_batches) ev = evaluate(&r, eval_batches);
    if (step % o.log_every == 0 || step == first || step == o.steps) {
      /* elapsed: wall time since the first step began (evaluations included);
       * ETA: the remaining steps at the mean pace so far */
      double el = now_s() - t_start, eta = el / (double)(step - rs.step) * (double)(o.steps - step);
      char e1[32], e2[32];
      printf("step %5lld/%lld | loss %.6f | lr %.3e | %8.2f ms | %9.0f %s/s | %s elapsed, ETA %s", (long long)step,
             (long long)o.steps, (double)loss, lr, 1e3 * dt, (double)(m->samples_per_step * tr_ranks) / dt,
             m->vocab ? "tok" : "samples", fmt_secs(e1, sizeof e1, el), fmt_secs(e2, sizeof e2, eta));
      if (!isnan(gnorm)) printf(" | norm %.4f", gnorm);
      if (!isnan(ev.loss)) printf(" | eval loss %.6f", ev.loss);
      if (!isnan(ev.accuracy)) printf(" | accuracy %.2f%%", 100.0 * ev.accuracy);
      printf("\n");
      fflush(stdout);
    }
    if (log)
      fprintf(log, "%lld,%.9g,%.4f,%.9g,%.9g,%.17g,%.9g\n", (long long)step, (double)loss, 1e3 * dt, ev.loss,
              ev.accuracy, lr, gnorm);
    if (o.sample_every && step % o.sample_every == 0 && tr_rank == 0) generate(&r, &o, &gen);
    if (base && step % o.save_every == 0) /* rank 0 only: base is NULL elsewhere */ {
      long a0 = alloc_count ? alloc_count() : 0;
      char *path = ckpt_name(base, step);
      write_checkpoint(path, &r, &o, &ls, step);
      prune_checkpoints(base, o.keep, step);
      free(path);
      if (alloc_count) ckpt_allocs += alloc_count() - a0;
    }
  }
  long allocs = alloc_count ? alloc_count() - allocs0 - ckpt_allocs : -1;
  double t_total = now_s() - t_start;
  if (ran) check_run_finite(&r, rs.step + ran);

  if (eval_batches && !(o.eval_every && ran && o.steps % o.eval_every == 0)) ev = evaluate(&r, eval_batches);
  if (ev.batches) { /* the last evaluation, also when the last step's line showed it */
    printf("eval loss %.6f", ev.loss);
    if (!isnan(ev.accuracy))
      printf(", accuracy %.2f%% (%lld of %lld correct)", 100.0 * ev.accuracy, (long long)ev.correct,
             (long long)ev.counted);
    printf(" (%lld batches, forward only)\n", (long long)ev.batches);
  }
  if (ran) {
    double ms = 1e3 * t_steps / (double)ran;
    char e1[32];
    printf("mean %.2f ms/step, %.0f %s/s, %.2f GFLOP/s; %lld steps in %s (%.0f %s/s overall, evaluations included)\n",
           ms, (double)(m->samples_per_step * tr_ranks) * 1e3 / ms, m->vocab ? "tok" : "samples",
           (double)m->step_flops * tr_ranks / ms * 1e-6, (long long)ran, fmt_secs(e1, sizeof e1, t_total),
           (double)(m->samples_per_step * tr_ranks) * (double)ran / t_total, m->vocab ? "tok" : "samples");
  }
  if (o.profile && ran) prof_report(m, ran, t_steps / (double)ran);
  if (o.generate && tr_rank == 0 && !(o.sample_every && ran && o.steps % o.sample_every == 0)) generate(&r, &o, &gen);
  if (o.save && tr_rank == 0) { /* every rank holds all parameters after the step */
    write_checkpoint(o.save, &r, &o, &ls, rs.step + ran);
  }
  int64_t rss = peak_rss();
  printf("memory: planned arena %lld bytes (%s), measured peak RSS %lld bytes (%s)\n", (long long)m->arena_bytes,
         fmt_bytes(b1, sizeof b1, m->arena_bytes), (long long)rss, fmt_bytes(b2, sizeof b2, rss));
  if (m->device) m->device->report(m, "after training");
  if (alloc_count) printf("allocations inside the training loop: %ld\n", allocs);
  if (m->loss_scaling)
    printf("loss scaling: %lld of %lld steps skipped, final scale %g\n", (long long)ls.skipped,
           (long long)(rs.step + ran), ls.scale);
  if (log) fclose(log);
  if (m->device) m->device->close(r.dev);
  free(r.arena);
  if (r.val.tok != r.train.tok) free(r.val.tok);
  free(r.train.tok);
  for (int s = 0; s < 2; s++) {
    NpySet *set = s ? &npy_test : &npy_train;
    for (int k = 0; k < set->na; k++) free(set->a[k].path), free(set->a[k].v);
    free(set->a);
  }
  free(prof_time);
  free(gen.ctx), free(gen.prob), free(gen.order), free(gen.check);
  if (gen.bpe) bpe_free(gen.bpe);
  free(r.order.perm);
  free(base);
  free(ck.t);
  free(ck.stage);
  ranks_finish();
  if (o.check_alloc && allocs != 0) {
    fprintf(stderr, "trainer: error: %ld allocations inside the training loop (expected none)\n", allocs);
    return 4;
  }
  return 0;
}
