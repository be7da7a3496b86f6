/* trainer_options.c: the trainer program's command-line options, --help (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// options

static const char help_text[] =
    "usage: trainer [options]\n"
    "Trains %s with the plan memplan compiled into this program.\n"
    "\n"
    "  --steps N         training steps (default 100)\n"
    "  --lr X            learning rate, > 0 and <= 3.4e38 (default %g, from the model's YAML)\n"
    "  --schedule S      lr schedule: constant, cosine or linear (default %s, from the YAML);\n"
    "                    linear warmup to lr, then cosine or linear decay to the floor\n"
    "                    final-fraction x lr at the last of the --steps steps\n"
    "  --warmup N        warmup steps: lr x t/N at step t <= N (default %lld); given with a decay,\n"
    "                    fewer than --steps\n"
    "  --final-fraction F  the decay's floor as a fraction of lr, in [0, 1] (default %g;\n"
    "                    cosine and linear only)\n"
    "  --seed N          parameter initialization seed (default 1337)\n"
    "  --threads N       OpenMP and OpenBLAS threads, 1 to 256 (default: OMP_NUM_THREADS or all\n"
    "                    cores; CPU trainer only)\n"
    "  --no-blas-select  CPU trainer: run the OpenBLAS kernel the library detected, even a\n"
    "                    generic one (see below; this exact spelling)\n"
    "  --text FILE       training text: each byte is a token (models with V >= 256)\n"
    "  --data FILE       training tokens, llm.c format: 256 int32 header (20240520, 1, n, ...),\n"
    "                    then n uint16 tokens; or (20240801, 7, n, ...), then n uint32 tokens\n"
    "  --val FILE        evaluation data, same format (default: the training data)\n"
    "  --npy DIR         every input from NumPy files named after it: DIR/train/<input>.npy\n"
    "                    for training, DIR/test/<input>.npy for evaluation (see below)\n"
    "  --eval-every N    evaluate every N steps (default 0: only after the last step)\n"
    "  --eval-batches N  batches per evaluation, read from the start of the data (default 4;\n"
    "                    with --npy, every test sample once; 0: none)\n"
    "  --log-every N     print one line every N steps (default 1)\n"
    "  --log FILE        also write step,loss,ms,eval_loss,eval_accuracy,lr,grad_norm as CSV\n"
    "  --clip X          gradient clipping: the largest global L2 norm of the gradients, >= 0\n"
    "                    (default %g, the YAML's optimizer.clip_grad_norm; 0: no clipping);\n"
    "                    only for plans compiled with clip_grad_norm (their gradients are kept)\n"
    "  --profile         time every op; print time per op kind and the top ops at the end\n"
    "  --load FILE       initial weights from a safetensors file (names as in plan.json); a new\n"
    "                    run: a checkpoint's optimizer state and metadata are not read\n"
    "  --save FILE       a checkpoint after the last step (atomic: temp file + fsync + rename;\n"
    "                    checked writable before the first step; see below)\n"
    "  --save-every N    a checkpoint after every N-th step, PATH-stepNNNNNN.safetensors\n"
    "                    (PATH: --save's name without .safetensors, or 'checkpoint')\n"
    "  --keep K          checkpoints of --save-every to keep, the newest (default 3)\n"
    "  --resume FILE     continue the run a checkpoint saved: weights, optimizer state, step,\n"
    "                    data position, seed, loss scale, lr schedule; options not given\n"
    "                    take the checkpoint's values (--steps: its run's total)\n"
    "  --no-shuffle      training windows in order (also --shuffle 0; default --shuffle 1:\n"
    "                    each pass over the data in a new order drawn from --seed)\n"
    "  --loss-scale X    initial loss scale of fp16 plans, > 0 and <= 3.4e38 (default 65536;\n"
    "                    halves on overflow, doubles after 2000 clean steps)\n"
    "  --force-overflow N  test hook: scale step N's loss gradient by inf, as an overflow would\n"
    "  --comm-timeout S  data-parallel plans (mpirun): a rank exits when a step takes more than\n"
    "                    S seconds, as when another rank died (default 600; 0: no limit)\n"
    "  --kill-rank R@N   test hook: rank R exits abruptly (no MPI_Finalize) at step N\n"
    "  --hang-rank R@N   test hook: rank R stops at step N, its watchdog too (the others' must\n"
    "                    end the run)\n"
    "  --cuda-graph      CUDA trainer: capture the step into a CUDA graph once, replay it\n"
    "                    every step (plans without micro-batches or loss scaling)\n"
    "  --generate N      generate N tokens after training (or alone: --load FILE --generate N,\n"
    "                    no data, no steps) from the eval plan's logits: from the plan's KV\n"
    "                    cache (--gen-context), else llm.c's loop, each token recomputing the\n"
    "                    last T tokens; text with a tokenizer or V = 256\n"
    "  --prompt TEXT     the prompt, tokenized as --text (default: <|endoftext|> with a\n"
    "                    tokenizer); at most T tokens\n"
    "  --prompt-tokens FILE  the prompt as token ids, --data's format\n"
    "  --temperature X   sampling temperature, >= 0 (default 1; 0: greedy, the first maximum)\n"
    "  --top-k K         sample among the K most likely tokens (default 0: all; 1: greedy)\n"
    "  --top-p P         sample among the fewest most likely tokens holding P of the mass,\n"
    "                    in (0, 1] (default 1); draws from --seed\n"
    "  --sample-every K  also generate after every K-th training step\n"
    "  --no-kv-cache     a plan with a KV cache (memplan compile --gen-context N) prefills the\n"
    "                    prompt once and decodes one token a step from the cache; this option\n"
    "                    recomputes each window instead, as without a cache\n"
    "  --kv-check        both: each token's cached logits against the window's recompute, the\n"
    "                    largest difference printed (a test of the cache)\n"
    "  --check-alloc     fail unless a preloaded counting allocator saw no allocation\n"
    "                    inside the training loop (tests/alloc_count.c)\n"
    "  --help            this text\n"
    "\n"
    "Each log line shows the step's lr, the time since the first step and the remaining\n"
    "time at the mean pace so far (ETA); the end shows the total and the mean throughput.\n"
    "The lr at step t of S (memplan_trainer.h): t <= warmup W: lr t/W; then with\n"
    "p = (t-W-1)/(S-W-1), cosine: lr (f + (1-f)(1+cos(pi p))/2), linear: lr (f + (1-f)(1-p)).\n"
    "Plans that clip show each step's gradient norm (before clipping; after unscaling under\n"
    "fp16), as torch.nn.utils.clip_grad_norm_ returns it, and scale every gradient by\n"
    "X / (norm + 1e-6) when that is below 1.\n"
    "\n"
    "Batches of a token model are windows of B*T+1 tokens (inputs, and targets shifted by\n"
    "one) at multiples of B*T; each pass over the data visits them in a new order, a\n"
    "Fisher-Yates permutation from --seed and the pass (as llm.c's shuffling loader; in order\n"
    "with --no-shuffle); evaluation reads them in order from the start. Models with f32\n"
    "inputs train on the synthetic 'blobs' data set (see memplan_trainer.h; never shuffled:\n"
    "every sample is new) unless --npy gives their data.\n"
    "\n"
    "A checkpoint is a safetensors file: the weights, running state and optimizer state\n"
    "(each in its own dtype), and in __metadata__ the step, data position, seed, loss scale,\n"
    "lr schedule and the plan's fingerprint (memplan_trainer.h lists the keys). Resuming with\n"
    "the same thread count continues bit for bit; a checkpoint of another plan is refused.\n"
    "\n"
    "--npy: axis 0 of every file is the sample, the rest the input's shape without its batch\n"
    "axis; f32 inputs need dtype '<f4', i32 inputs '<i4' or '<i8' (labels 0..K-1, token\n"
    "ids 0..V-1); format versions 1.0-3.0, C order. Training batches are windows of\n"
    "B samples of a permutation of the samples, new each pass (in order with --no-shuffle;\n"
    "a pass skips the last S mod B). Evaluation reads every test sample once; a last\n"
    "partial batch is padded with the first samples, not counted.\n"
    "Classification models (cross_entropy on [B, K] logits) report accuracy, the share\n"
    "of argmax(logits) == label, next to the eval loss.\n"
    "\n"
    "The CPU trainer names its BLAS library and kernel in its header (\"BLAS: ...\"). OpenBLAS\n"
    "picks a kernel when it loads; on a CPU newer than the library it may pick a generic\n"
    "one (Prescott), several times slower. When the CPU has AVX2+FMA or AVX-512 and the\n"
    "library detected an older kernel, the trainer restarts itself once with\n"
    "OPENBLAS_CORETYPE set to the best kernel (SkylakeX, Haswell or Zen) and says so. An\n"
    "OPENBLAS_CORETYPE you set is always kept; --no-blas-select keeps the library's choice.\n";

static int64_t opt_int(const char *s, const char *name, int64_t min, int64_t max) {
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  if (e == s || *e || errno || v < min || v > max) {
    if (max == INT64_MAX) die("%s '%s': expected an integer >= %lld", name, s, (long long)min);
    die("%s '%s': expected an integer in [%lld, %lld]", name, s, (long long)min, (long long)max);
  }
  return v;
}

/* Every float option (--lr, --loss-scale): finite, > 0 and at most float32's
 * largest (3.4e38: the kernels take them as floats, where more is inf).
 * strtod also reads "inf", "nan" and overflows like 1e999 to inf; none of
 * them can train. */
static double opt_float(const char *s, const char *name) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !(v > 0 && v <= FLT_MAX))
    die("%s '%s': expected a finite number > 0 (at most 3.4e38, float32's largest)", name, s);
  return v;
}

const char *const sched_names[] = {"constant", "cosine", "linear"};

static int opt_schedule(const char *s) {
  for (int k = 0; k < 3; k++)
    if (!strcmp(s, sched_names[k])) return k;
  die("--schedule '%s': expected constant, cosine or linear", s);
}

/* --clip: a finite number >= 0 (0: no clipping). */
static double opt_clip(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !isfinite(v) || !(v >= 0)) die("--clip '%s': expected a finite number >= 0", s);
  return v;
}

/* --temperature: a finite number >= 0 (0: greedy). */
static double opt_temperature(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !isfinite(v) || !(v >= 0))
    die("--temperature '%s': expected a finite number >= 0 (0: greedy, 1: the model's distribution)", s);
  return v;
}

/* --top-p: a number in (0, 1] (1: no nucleus cut). */
static double opt_top_p(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !(v > 0 && v <= 1))
    die("--top-p '%s': expected a number in (0, 1] (the probability mass kept; 1: all of it)", s);
  return v;
}

/* --final-fraction: a number in [0, 1]. */
static double opt_fraction(const char *s, const char *name) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e || !(v >= 0 && v <= 1)) die("%s '%s': expected a number in [0, 1]", name, s);
  return v;
}

double tr_schedule_lr(int schedule, double lr, int64_t warmup, double final_fraction, int64_t t, int64_t steps) {
  if (t <= warmup) return lr * (double)t / (double)warmup;
  if (schedule == TR_SCHED_CONSTANT) return lr;
  double p = steps - warmup - 1 > 0 ? (double)(t - warmup - 1) / (double)(steps - warmup - 1) : 1.0;
  double f = final_fraction;
  if (schedule == TR_SCHED_COSINE) return lr * (f + (1.0 - f) * 0.5 * (1.0 + cos(3.14159265358979323846 * p)));
  return lr * (f + (1.0 - f) * (1.0 - p));
}

Opts parse_opts(int argc, char **argv, const TrModel *m) {
  enum {
    O_STEPS = 256,
    O_LR,
    O_SEED,
    O_THREADS,
    O_TEXT,
    O_DATA,
    O_VAL,
    O_EVERY,
    O_EBATCH,
    O_LOGE,
    O_LOG,
    O_PROF,
    O_LOAD,
    O_SAVE,
    O_CHECK,
    O_SCALE,
    O_FORCE,
    O_GRAPH,
    O_NPY,
    O_SCHED,
    O_WARMUP,
    O_FINAL,
    O_CLIP,
    O_COMM_TIMEOUT,
    O_KILL_RANK,
    O_HANG_RANK,
    O_RESUME,
    O_SAVE_EVERY,
    O_KEEP,
    O_SHUFFLE,
    O_NO_SHUFFLE,
    O_NO_BLAS_SELECT,
    O_GENERATE,
    O_PROMPT,
    O_PROMPT_TOKENS,
    O_TEMPERATURE,
    O_TOP_K,
    O_TOP_P,
    O_SAMPLE_EVERY,
    O_NO_KV_CACHE,
    O_KV_CHECK,
    O_HELP
  };
  // clang-format off
  static const struct option lo[] = {
      {"steps", 1, 0, O_STEPS}, {"lr", 1, 0, O_LR}, {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS},
      {"text", 1, 0, O_TEXT}, {"data", 1, 0, O_DATA}, {"val", 1, 0, O_VAL}, {"eval-every", 1, 0, O_EVERY},
      {"eval-batches", 1, 0, O_EBATCH}, {"log-every", 1, 0, O_LOGE}, {"log", 1, 0, O_LOG},
      {"profile", 0, 0, O_PROF}, {"load", 1, 0, O_LOAD}, {"save", 1, 0, O_SAVE}, {"check-alloc", 0, 0, O_CHECK},
      {"loss-scale", 1, 0, O_SCALE}, {"force-overflow", 1, 0, O_FORCE}, {"cuda-graph", 0, 0, O_GRAPH},
      {"npy", 1, 0, O_NPY}, {"schedule", 1, 0, O_SCHED}, {"warmup", 1, 0, O_WARMUP},
      {"final-fraction", 1, 0, O_FINAL}, {"clip", 1, 0, O_CLIP}, {"help", 0, 0, O_HELP},
      {"comm-timeout", 1, 0, O_COMM_TIMEOUT}, {"kill-rank", 1, 0, O_KILL_RANK}, {"hang-rank", 1, 0, O_HANG_RANK},
      {"resume", 1, 0, O_RESUME}, {"save-every", 1, 0, O_SAVE_EVERY},
      {"keep", 1, 0, O_KEEP}, {"shuffle", 1, 0, O_SHUFFLE}, {"no-shuffle", 0, 0, O_NO_SHUFFLE},
      {"no-blas-select", 0, 0, O_NO_BLAS_SELECT}, {"generate", 1, 0, O_GENERATE}, {"prompt", 1, 0, O_PROMPT},
      {"prompt-tokens", 1, 0, O_PROMPT_TOKENS}, {"temperature", 1, 0, O_TEMPERATURE}, {"top-k", 1, 0, O_TOP_K},
      {"top-p", 1, 0, O_TOP_P}, {"sample-every", 1, 0, O_SAMPLE_EVERY},
      {"no-kv-cache", 0, 0, O_NO_KV_CACHE}, {"kv-check", 0, 0, O_KV_CHECK}, {0, 0, 0, 0}};
  // clang-format on
  Opts o = {.steps = 100,
            .seed = 1337,
            .eval_batches = 4,
            .log_every = 1,
            .lr = m->lr,
            .schedule = m->schedule,
            .warmup = m->warmup,
            .final_fraction = m->final_fraction,
            .clip = m->clip_grad_norm,
            .loss_scale = 65536.0,
            .comm_timeout = 600,
            .kill_rank = -1,
            .keep = 3,
            .shuffle = 1,
            .temperature = 1.0,
            .top_p = 1.0,
#ifdef _OPENMP
            .threads = omp_get_max_threads()
#else
            .threads = 1
#endif
  };
  int c;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
    case O_STEPS: o.steps = opt_int(optarg, "--steps", 0, TR_MAX_STEPS), o.steps_given = 1; break;
    case O_LR: o.lr = opt_float(optarg, "--lr"), o.lr_given = 1; break;
    case O_SEED: o.seed = opt_int(optarg, "--seed", 0, INT64_MAX), o.seed_given = 1; break;
    case O_THREADS: o.threads = (int)opt_int(optarg, "--threads", 1, TR_MAX_THREADS); break;
    case O_TEXT: o.text = optarg; break;
    case O_DATA: o.data = optarg; break;
    case O_VAL: o.val = optarg; break;
    case O_NPY: o.npy = optarg; break;
    case O_EVERY: o.eval_every = opt_int(optarg, "--eval-every", 0, INT64_MAX); break;
    case O_EBATCH: o.eval_batches = opt_int(optarg, "--eval-batches", 0, INT64_MAX), o.eval_batches_given = 1; break;
    case O_LOGE: o.log_every = opt_int(optarg, "--log-every", 1, INT64_MAX); break;
    case O_LOG: o.log = optarg; break;
    case O_PROF: o.profile = 1; break;
    case O_LOAD: o.load = optarg; break;
    case O_SAVE: o.save = optarg; break;
    case O_CHECK: o.check_alloc = 1; break;
    case O_NO_BLAS_SELECT: break; /* read before everything else, in tr_main */
    case O_GRAPH: o.cuda_graph = 1; break;
    case O_FORCE: o.force_overflow = opt_int(optarg, "--force-overflow", 1, INT64_MAX); break;
    case O_SCALE: o.loss_scale = opt_float(optarg, "--loss-scale"), o.loss_scale_given = 1; break;
    case O_SCHED: o.schedule = opt_schedule(optarg), o.schedule_given = 1; break;
    case O_WARMUP: o.warmup = opt_int(optarg, "--warmup", 0, TR_MAX_STEPS), o.warmup_given = 1; break;
    case O_RESUME: o.resume = optarg; break;
    case O_SAVE_EVERY: o.save_every = opt_int(optarg, "--save-every", 1, INT64_MAX); break;
    case O_KEEP: o.keep = opt_int(optarg, "--keep", 1, INT64_MAX); break;
    case O_SHUFFLE:
      if (strcmp(optarg, "0") && strcmp(optarg, "1")) die("--shuffle '%s': expected 0 or 1", optarg);
      o.shuffle = optarg[0] == '1', o.shuffle_given = 1;
      break;
    case O_NO_SHUFFLE: o.shuffle = 0, o.shuffle_given = 1; break;
    case O_FINAL: o.final_fraction = opt_fraction(optarg, "--final-fraction"), o.final_fraction_given = 1; break;
    case O_CLIP: o.clip = opt_clip(optarg), o.clip_given = 1; break;
    case O_GENERATE: o.generate = opt_int(optarg, "--generate", 1, INT32_MAX); break;
    case O_PROMPT: o.prompt = optarg; break;
    case O_PROMPT_TOKENS: o.prompt_tokens = optarg; break;
    case O_TEMPERATURE: o.temperature = opt_temperature(optarg); break;
    case O_TOP_K: o.top_k = opt_int(optarg, "--top-k", 0, INT64_MAX); break;
    case O_TOP_P: o.top_p = opt_top_p(optarg); break;
    case O_SAMPLE_EVERY: o.sample_every = opt_int(optarg, "--sample-every", 1, INT64_MAX); break;
    case O_NO_KV_CACHE: o.no_kv_cache = 1; break;
    case O_KV_CHECK: o.kv_check = 1; break;
    case O_COMM_TIMEOUT: o.comm_timeout = opt_int(optarg, "--comm-timeout", 0, INT32_MAX); break;
    case O_KILL_RANK:
    case O_HANG_RANK: {
      const char *name = c == O_KILL_RANK ? "--kill-rank" : "--hang-rank";
      char *at = strchr(optarg, '@');
      if (!at) die("%s '%s': expected RANK@STEP, e.g. 1@3", name, optarg);
      *at = '\0';
      o.kill_rank = opt_int(optarg, name, 0, INT64_MAX);
      o.kill_step = opt_int(at + 1, name, 1, INT64_MAX);
      o.hang = c == O_HANG_RANK;
      break;
    }
    case 'h':
    case O_HELP:
      printf(help_text, m->model, m->lr, sched_names[m->schedule], (long long)m->warmup, m->final_fraction,
             m->clip_grad_norm);
      exit(0);
    default: fprintf(stderr, "run 'trainer --help' for the options\n"); exit(2);
    }
  }
  if (optind < argc) die("unexpected argument '%s' (see --help)", argv[optind]);
  if (!isfinite(o.lr) || !(o.lr > 0)) die("the model's learning rate is %g: give --lr X (finite, > 0)", o.lr);
  if (o.final_fraction_given && o.schedule == TR_SCHED_CONSTANT)
    die("--final-fraction is the floor of a decay, and the schedule is constant: give --schedule cosine or linear");
  if (o.cuda_graph && !m->device) die("--cuda-graph needs the CUDA trainer (trainer_cuda)");
  if (o.cuda_graph && (o.schedule != TR_SCHED_CONSTANT || o.warmup))
    die("--cuda-graph replays a step captured with one lr: not with an lr schedule (give --schedule constant "
        "--warmup 0)");
  if (o.cuda_graph && (m->accumulation > 1 || m->loss_scaling))
    die("--cuda-graph replays one captured step: not with micro-batches (%d) or loss scaling", m->accumulation);
  if (o.cuda_graph && o.profile) die("--profile times ops one by one: not with --cuda-graph");
  if (o.clip_given && !(m->clip_grad_norm > 0))
    die("--clip: this plan was compiled without gradient clipping, so each parameter is updated inside "
        "backward as soon as its gradient is complete and the gradients are never all kept; add "
        "clip_grad_norm: X to the YAML's optimizer and compile again (the report shows its memory price)");
  if (o.loss_scale_given && !m->loss_scaling)
    die("--loss-scale: this plan was compiled without loss scaling (only fp16 plans scale the loss: memplan compile "
        "--precision fp16), so it would do nothing");
  if (o.cuda_graph && m->clip_grad_norm > 0)
    die("--cuda-graph replays one captured step: not with gradient clipping (the norm is read back each step)");
  if (o.text && o.data) die("give --text or --data, not both");
  if (o.load && o.resume)
    die("--load starts a new run from a file's weights, --resume continues the run a checkpoint saved: give one");
  if (o.npy && (o.text || o.data || o.val)) die("--npy DIR gives every input: not with --text, --data or --val");
  if ((o.prompt || o.prompt_tokens || o.sample_every) && !o.generate)
    die("--prompt, --prompt-tokens and --sample-every go with --generate N (the tokens to generate)");
  if (o.prompt && o.prompt_tokens) die("give --prompt TEXT or --prompt-tokens FILE, not both");
  if (o.generate && !m->vocab) die("--generate: %s is not a language model (it reads no tokens)", m->model);
  if (o.generate && m->eval_logits_offset < 0)
    die("--generate reads the eval plan's whole logits of a causal model, and %s has none: a fused classifier "
        "loss (linear_cross_entropy: use cross_entropy on the logits in its YAML to generate) or an attention "
        "that is not causal (each token would see the ones after it)",
        m->model);
  /* standalone generation: --load CKPT --generate N trains nothing */
  int standalone = o.generate && !o.text && !o.data && !o.npy;
  if (standalone && o.steps_given && o.steps > 0)
    die("--steps %lld: training reads tokens: give --text FILE or --data FILE (or --steps 0 to only generate)",
        (long long)o.steps);
  if (standalone) o.steps = 0, o.eval_batches = 0;
  if (m->vocab && !o.text && !o.data && !o.npy && !standalone)
    die("%s reads tokens: give --text FILE, --data FILE or --npy DIR", m->model);
  if (!m->vocab && (o.text || o.data || o.val))
    die("%s reads no tokens: --text, --data and --val do not apply (--npy DIR gives its inputs; without it, it "
        "trains on synthetic data)",
        m->model);
  return o;
}
