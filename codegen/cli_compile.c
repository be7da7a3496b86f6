/* cli_compile.c: `memplan compile`: the options, one call to the planner
 * (plan_model), and the outputs: the report, a pass's dump, or the trainer
 * folder written all or nothing. The options parser is sweep's too. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "live.h"
#include "ops.h"
#include "plan_build.h"

const char compile_help[] =
    "usage: memplan compile MODEL.yaml [OPTIONS]\n"
    "  Plans a training step of MODEL.yaml in one fixed arena and reports where every byte goes.\n"
    "  -b, --budget SIZE     the arena must fit SIZE bytes: 8G, 512M, 1.5G, 1000000\n"
    "                        (K, M, G, T are powers of 1024; KB, MB, GB, TB powers of 1000);\n"
    "                        at least one byte: for no budget, leave out --budget\n"
    "  -o, --output DIR      write DIR/: plan.json, trainer.c, trainer.cu and their runtime, plan.dot, plan.svg,\n"
    "                        timeline.svg (files appear only when everything succeeded; other files in DIR stay)\n"
    "      --expand          draw every repeat block of plan.svg open (default: collapsed when deep)\n"
    "      --block NAME      open one block in plan.svg, e.g. --block h3\n"
    "  -s, --set DIM=VALUE   override a dim of the model (repeatable), recorded in plan.json\n"
    "      --freeze GLOB     don't train the parameters whose names match GLOB (repeatable), e.g.\n"
    "                        --freeze 'h*.attn.*' --freeze wte.weight: no gradient, no optimizer state\n"
    "      --lora-rank R     LoRA adapters of rank R (the model's lora: section, or a new one with\n"
    "      --lora-alpha A    --lora-targets), scaled by A / R (default A = R), on the linear layers\n"
    "      --lora-targets T  whose names match T's comma-separated globs (gate,up,down,attn.proj,q,k,v)\n"
    "  -d, --dump=PASS       print a pass's result instead of the report: graph, step, live, plan\n"
    "      --align N         buffer alignment in bytes, a power of two (default 256)\n"
    "      --time-limit S    seconds the offset search may take (default 0.5)\n"
    "      --no-fuse-updates run every optimizer update after the whole backward pass\n"
    "      --precision P     storage of saved activations: fp32 (default), bf16, fp16 (with loss\n"
    "                        scaling), or auto (bf16, stage by stage, where it beats recomputing)\n"
    "      --micro-batch N   run the batch as micro-batches of N rows with gradient accumulation\n"
    "                        (default: the levers choose, see below)\n"
    "      --dropout-masks M dropout's masks: auto (default: stored when everything kept fits,\n"
    "                        else regenerated in backward), store (1 bit per element) or regen\n"
    "      --fused-loss F    the classifier's linear + cross_entropy as one op that never stores the\n"
    "                        logits (chunks of rows, gradients computed in forward; no extra FLOPs):\n"
    "                        auto (default: a lever under --budget, see below), on (the planner picks\n"
    "                        the chunk), off, or ROWS (on, ROWS rows a chunk)\n"
    "      --opt-state S     AdamW's moments: auto (default: fp32, lowered to bf16, then 8bit, only\n"
    "                        when nothing fits the budget without it), fp32, bf16, or 8bit\n"
    "                        (bitsandbytes' block-wise codes, a scale per 256; parameters under 4096\n"
    "                        elements stay fp32); the update's math is fp32 in every format\n"
    "      --base-weights W  frozen weights' storage: auto (default: the highest precision that fits:\n"
    "                        fp32, then bf16, int8, nf4), fp32, bf16, int8 (per-row absmax) or nf4\n"
    "                        (QLoRA's NormalFloat, an absmax per 64); dequantized to fp32 before each use\n"
    "      --ranks N         data parallelism: plan one of N ranks (processes, GPUs), each on its own\n"
    "                        batch of the model's B rows (the step trains on N x B); --budget is per rank\n"
    "      --zero Z          sharding over the ranks: 0 (gradients all-reduced), 1 (ZeRO-1: optimizer\n"
    "                        state sharded), 2 (ZeRO-2: gradients too), auto (default: the least that fits);\n"
    "                        with --ranks 1 (the default), a data-parallel plan of one rank\n"
    "      --guard           canary bytes after every buffer, checked by the CPU trainer after\n"
    "                        every op (names the op that wrote out of bounds); costs memory\n"
    "      --no-recompute    forbid recomputation (checkpointing): keep every activation\n"
    "      --no-micro-batch  forbid micro-batches: run the whole batch in one pass\n";
const char compile_help_levers[] = /* the first lines: compile_help's last options (C17's 4095 characters) */
    "      --gen-context N   plan generation's KV cache for N positions (a causal language model; the\n"
    "                        model's T at most with learned positions): the trainer's --generate then\n"
    "                        prefills the prompt once and decodes one token a step from the cache, which\n"
    "                        sits above the arena and counts against --budget (default: no cache)\n"
    "  -h, --help            this help\n"
    "  Levers: under --budget the planner considers every configuration of the levers left free\n"
    "  and keeps the plan with the least estimated step time (each op's roofline under the cost\n"
    "  model, recomputation, casts and every micro-batch's ops included) whose arena fits; the\n"
    "  report lists them all. Each lever is forced or forbidden by its option:\n"
    "    recomputation        free; --no-recompute forbids it\n"
    "    micro-batches        free (sizes dividing the batch); --micro-batch N forces one,\n"
    "                         --no-micro-batch forbids them (so does a model with batchnorm)\n"
    "    half storage         --precision auto frees it (bf16, per stage); fp32 (default) forbids\n"
    "                         it; bf16 or fp16 force it for every saved activation\n"
    "    dropout masks        free (store or regenerate); --dropout-masks store|regen forces one\n"
    "    fused loss           free (unfused, or fused with the chunk chosen); --fused-loss forces it\n"
    "    optimizer state      lowered last, only when nothing fits at fp32 (then bf16); --opt-state\n"
    "                         fp32 forbids it, bf16 or 8bit force a format\n"
    "    frozen weights       lowered after the optimizer state, only when nothing fits at fp32\n"
    "                         (then bf16, int8, nf4); --base-weights fp32 forbids it, others force it\n"
    "    trainable weights    --param-precision P: auto (default), fp32 or bf16 (weights of 4096+\n"
    "                         elements; fp32 updates stored back with stochastic rounding); auto\n"
    "                         lowers them last, only when nothing fits at fp32 after the two above\n"
    "    tied head gradient   --head-grad auto (default), kept or deferred: a fused loss whose\n"
    "                         weight the embedding shares makes its gradient right before the\n"
    "                         embedding's backward (a recompute) instead of keeping it from forward;\n"
    "                         the same numbers; auto defers only when nothing fits kept\n"
    "  Exit 1 also when the model does not fit the budget (the error names the smallest that does);\n"
    "  3 when the plan fails verification.\n";

/* Sizes: a decimal number and an optional unit (B, K/KiB, M/MiB, G/GiB, T/TiB
 * binary; KB, MB, GB, TB decimal), at least one byte. */
static int64_t parse_size(const char *cmd, const char *s, const char *what) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  static const struct {
    const char *u;
    double m;
  } units[] = {{"", 1},         {"B", 1},      {"K", 0x1p10},   {"KiB", 0x1p10}, {"M", 0x1p20},
               {"MiB", 0x1p20}, {"G", 0x1p30}, {"GiB", 0x1p30}, {"T", 0x1p40},   {"TiB", 0x1p40},
               {"KB", 1e3},     {"MB", 1e6},   {"GB", 1e9},     {"TB", 1e12}};
  if (end != s && !errno && v >= 0) {
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
      if (strcmp(end, units[i].u) || !(v * units[i].m < 0x1p62)) continue;
      int64_t bytes = (int64_t)llround(v * units[i].m);
      if (bytes >= 1 && v * units[i].m >= 1) return bytes;
      if (!strcmp(what, "--budget"))
        cli_usage_error(cmd, "--budget %s is less than one byte; to plan without a budget, leave out --budget", s);
      cli_usage_error(cmd, "%s %s is less than one byte", what, s);
    }
  }
  cli_usage_error(cmd, "%s '%s' is not a size; write e.g. 8G, 512M, 1.5G or a number of bytes", what, s);
}

static void parse_set(const char *cmd, const char *arg, DimOverride *ov, char *name, size_t namecap) {
  const char *eq = strchr(arg, '=');
  char *end;
  if (eq && eq != arg && (size_t)(eq - arg) < namecap) {
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (!*end && end != eq + 1 && !errno && v > 0) {
      snprintf(name, namecap, "%.*s", (int)(eq - arg), arg);
      ov->name = name;
      ov->value = v;
      return;
    }
  }
  cli_usage_error(cmd, "--set '%s': write DIM=VALUE with a positive integer, e.g. --set B=4", arg);
}

void cli_parse_options(int argc, char **argv, bool sweep, Options *o) {
  /* clang-format off */
  static const struct option compile_lo[] = {
      {"budget", required_argument, 0, 'b'}, {"output", required_argument, 0, 'o'},
      {"set", required_argument, 0, 's'},    {"dump", required_argument, 0, 'd'},
      {"align", required_argument, 0, 'a'},  {"time-limit", required_argument, 0, 't'},
      {"no-fuse-updates", no_argument, 0, 'F'}, {"expand", no_argument, 0, 'E'},
      {"block", required_argument, 0, 'B'},  {"micro-batch", required_argument, 0, 'M'},
      {"precision", required_argument, 0, 'P'}, {"guard", no_argument, 0, 'G'}, {"help", no_argument, 0, 'h'},
      {"dropout-masks", required_argument, 0, 'D'}, {"fused-loss", required_argument, 0, 'L'},
      {"opt-state", required_argument, 0, 'O'},         {"no-recompute", no_argument, 0, 'R'},
      {"no-micro-batch", no_argument, 0, 'N'},          {"ranks", required_argument, 0, 'r'},
      {"zero", required_argument, 0, 'Z'},              {"freeze", required_argument, 0, 'f'},
      {"lora-rank", required_argument, 0, 1001},        {"lora-alpha", required_argument, 0, 1002},
      {"lora-targets", required_argument, 0, 1003},     {"base-weights", required_argument, 0, 'W'},
      {"param-precision", required_argument, 0, 1004},  {"gen-context", required_argument, 0, 1005},
      {"head-grad", required_argument, 0, 1006},
      {0, 0, 0, 0}};
  static const struct option sweep_lo[] = {
      {"set", required_argument, 0, 's'},        {"align", required_argument, 0, 'a'},
      {"time-limit", required_argument, 0, 't'}, {"no-fuse-updates", no_argument, 0, 'F'},
      {"precision", required_argument, 0, 'P'},  {"guard", no_argument, 0, 'G'},
      {"help", no_argument, 0, 'h'},             {"dropout-masks", required_argument, 0, 'D'},
      {0, 0, 0, 0}};
  /* clang-format on */
  const char *cmd = sweep ? "sweep" : "compile";
  *o = (Options){.align = 256,
                 .time_limit = 0.5,
                 .loss_chunk = sweep ? LOSS_UNFUSED : LOSS_AUTO,
                 .opt_state = sweep ? OPTS_FP32 : OPTS_AUTO,
                 .base_weights = sweep ? BW_FP32 : BW_AUTO,
                 .param_prec = sweep ? PP_FP32 : PP_AUTO,
                 .head_grad = sweep ? HG_KEPT : HG_AUTO,
                 .ranks = 1,
                 .zero = -1};
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, sweep ? ":s:h" : ":b:o:s:d:h", sweep ? sweep_lo : compile_lo, NULL)) != -1) {
    switch (c) {
    case 'b': o->budget = parse_size(cmd, optarg, "--budget"); break;
    case 'o': o->outdir = optarg; break;
    case 's':
      if (o->nov == 64) cli_usage_error(cmd, "more than 64 --set options");
      parse_set(cmd, optarg, &o->ov[o->nov], o->ovname[o->nov], sizeof o->ovname[0]);
      o->nov++;
      break;
    case 'd': o->dump = optarg; break;
    case 'f':
      if (o->nfreeze == 64) cli_usage_error(cmd, "more than 64 --freeze options");
      o->freeze[o->nfreeze++] = optarg;
      break;
    case 1001: {
      char *end;
      errno = 0;
      long long r = strtoll(optarg, &end, 10);
      if (!*optarg || *end || errno || r <= 0 || r > (1 << 20))
        cli_usage_error(cmd, "--lora-rank wants a positive integer (e.g. 16), got '%s'", optarg);
      o->lora_rank = r;
      break;
    }
    case 1002: {
      char *end;
      o->lora_alpha = strtod(optarg, &end);
      if (!*optarg || *end || !(o->lora_alpha > 0) || !isfinite(o->lora_alpha))
        cli_usage_error(cmd, "--lora-alpha wants a positive number (e.g. 32), got '%s'", optarg);
      break;
    }
    case 1003:
      if (!*optarg || optarg[strspn(optarg, ",")] == '\0')
        cli_usage_error(cmd, "--lora-targets wants comma-separated layer names or globs (e.g. gate,up,down)");
      o->lora_targets = optarg;
      break;
    case 1005: {
      char *end;
      errno = 0;
      long long n = strtoll(optarg, &end, 10);
      if (!*optarg || *end || errno || n <= 0)
        cli_usage_error(cmd, "--gen-context wants the positions generation's KV cache holds (e.g. 1024), got '%s'",
                        optarg);
      o->gen_context = n;
      break;
    }
    case 'a': o->align = parse_size(cmd, optarg, "--align"); break;
    case 't': {
      char *end;
      o->time_limit = strtod(optarg, &end);
      if (!*optarg || *end || !(o->time_limit >= 0) || o->time_limit > 1e6)
        cli_usage_error(cmd, "--time-limit wants seconds (e.g. 0.5), got '%s'", optarg);
      break;
    }
    case 'F': o->no_fuse = true; break;
    case 'R': o->no_recompute = true; break;
    case 'N': o->no_micro_batch = true; break;
    case 'E': o->expand = true; break;
    case 'G': o->guard = true; break;
    case 'P': {
      static const char *const names[] = {"fp32", "bf16", "fp16", "auto"};
      int k = 0;
      while (k < 4 && strcmp(optarg, names[k])) k++;
      if (k == 4) cli_usage_error(cmd, "--precision %s: choose fp32, bf16, fp16 or auto", optarg);
      o->precision = (Precision)k;
      break;
    }
    case 'r': {
      char *end;
      errno = 0;
      long v = strtol(optarg, &end, 10);
      if (!*optarg || *end || errno || v < 1 || v > 65536)
        cli_usage_error(cmd, "--ranks wants the number of processes, 1 to 65536, got '%s'", optarg);
      o->ranks = (int)v;
      break;
    }
    case 'Z': {
      static const char *const names[] = {"0", "1", "2", "auto"};
      int k = 0;
      while (k < 4 && strcmp(optarg, names[k])) k++;
      if (k == 4) cli_usage_error(cmd, "--zero %s: choose 0 (all-reduce), 1 (ZeRO-1), 2 (ZeRO-2) or auto", optarg);
      o->zero = k == 3 ? -1 : k;
      o->zero_given = true;
      break;
    }
    case 'D': {
      static const char *const names[] = {"auto", "store", "regen"};
      int k = 0;
      while (k < 3 && strcmp(optarg, names[k])) k++;
      if (k == 3) cli_usage_error(cmd, "--dropout-masks %s: choose auto, store or regen", optarg);
      o->masks = (Masks)k;
      break;
    }
    case 'L': {
      static const char *const names[] = {"auto", "on", "off"};
      static const int64_t chunk[] = {LOSS_AUTO, LOSS_FUSED, LOSS_UNFUSED};
      int k = 0;
      while (k < 3 && strcmp(optarg, names[k])) k++;
      char *end;
      errno = 0;
      long long rows = k == 3 ? strtoll(optarg, &end, 10) : 0;
      if (k == 3 && (!*optarg || *end || errno || rows <= 0))
        cli_usage_error(cmd, "--fused-loss %s: choose auto, on, off or a number of rows per chunk", optarg);
      o->loss_chunk = k < 3 ? chunk[k] : rows;
      break;
    }
    case 'O': {
      int k = 0;
      while (k < OPTS_COUNT && strcmp(optarg, optprec_name((OptPrec)k))) k++;
      if (k == OPTS_COUNT) cli_usage_error(cmd, "--opt-state %s: choose fp32, bf16, 8bit or auto", optarg);
      o->opt_state = (OptPrec)k;
      break;
    }
    case 'W': {
      int k = 0;
      while (k < BW_COUNT && strcmp(optarg, basew_name((BaseFmt)k))) k++;
      if (k == BW_COUNT) cli_usage_error(cmd, "--base-weights %s: choose fp32, bf16, int8, nf4 or auto", optarg);
      o->base_weights = (BaseFmt)k;
      break;
    }
    case 1004: {
      int k = 0;
      while (k < PP_COUNT && strcmp(optarg, paramprec_name((ParamPrec)k))) k++;
      if (k == PP_COUNT) cli_usage_error(cmd, "--param-precision %s: choose fp32, bf16 or auto", optarg);
      o->param_prec = (ParamPrec)k;
      break;
    }
    case 1006: {
      int k = 0;
      while (k < HG_COUNT && strcmp(optarg, headgrad_name((HeadGrad)k))) k++;
      if (k == HG_COUNT) cli_usage_error(cmd, "--head-grad %s: choose kept, deferred or auto", optarg);
      o->head_grad = (HeadGrad)k;
      break;
    }
    case 'M': {
      char *end;
      errno = 0;
      o->micro_batch = strtoll(optarg, &end, 10);
      if (!*optarg || *end || errno || o->micro_batch <= 0)
        cli_usage_error(cmd, "--micro-batch '%s' must be a positive integer", optarg);
      break;
    }
    case 'B': o->block = optarg; break;
    case 'h':
      if (sweep) fputs(sweep_help, stdout);
      else fputs(compile_help, stdout), fputs(compile_help_levers, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      exit(EXIT_OK);
    default: cli_bad_option(cmd, c, argv);
    }
  }
  if (optind >= argc) cli_usage_error(cmd, "no model file given");
  if (optind < argc - 1)
    cli_usage_error(cmd, "more than one model file ('%s' and '%s')", argv[optind], argv[optind + 1]);
  o->model = argv[optind];
  if (o->micro_batch && o->no_micro_batch)
    cli_usage_error(cmd, "--micro-batch %lld and --no-micro-batch contradict each other: give one",
                    (long long)o->micro_batch);
  if (o->zero_given && o->ranks == 1 && o->zero < 0)
    cli_usage_error(cmd,
                    "--zero auto with one rank has nothing to choose: give --ranks N (N > 1), or --zero 0, 1 "
                    "or 2 for a data-parallel plan of one rank (its collectives run over that rank)");
  if ((o->align & (o->align - 1)) || o->align > (1 << 30))
    cli_usage_error(cmd, "--align %lld must be a power of two no larger than 1G", (long long)o->align);
  static const char *const dumps[] = {"graph", "step", "live", "plan", NULL};
  bool ok = !o->dump;
  for (int i = 0; dumps[i] && !ok; i++) ok = !strcmp(o->dump, dumps[i]);
  if (!ok) cli_usage_error(cmd, "--dump=%s: choose graph, step, live or plan", o->dump);
}

static bool dumping(const Options *o, const char *pass) { return o->dump && !strcmp(o->dump, pass); }

PlanRequest cli_request(const Options *o) {
  /* generation samples from whole logits: no fused loss unless asked */
  int64_t chunk = o->gen_context && o->loss_chunk == LOSS_AUTO ? LOSS_UNFUSED : o->loss_chunk;
  return (PlanRequest){.model = o->model,
                       .ov = o->ov,
                       .nov = o->nov,
                       .tune = {.freeze = o->freeze,
                                .nfreeze = o->nfreeze,
                                .lora_rank = o->lora_rank,
                                .lora_alpha = o->lora_alpha,
                                .lora_targets = o->lora_targets},
                       .budget = o->budget,
                       .gen_context = o->gen_context,
                       .micro_batch = o->micro_batch,
                       .no_micro_batch = o->no_micro_batch,
                       .fit = {.fuse = !o->no_fuse,
                               .align = o->align,
                               .time_limit = o->time_limit,
                               .backend = BACKEND_CPU,
                               .units = 500,
                               .accumulation = 1,
                               .precision = o->precision,
                               .guard = o->guard ? 64 : 0,
                               .masks = o->masks,
                               .loss_chunk = chunk,
                               .opt_state = o->opt_state,
                               .base_weights = o->base_weights,
                               .param_prec = o->param_prec,
                               .head_grad = o->head_grad,
                               .no_recompute = o->no_recompute,
                               .ranks = o->ranks > 1 || o->zero_given ? o->ranks : 0,
                               .zero = o->ranks > 1 || o->zero_given ? o->zero : 0}};
}

static int write_outputs(const Plan *p, const char *dir, const DotOptions *dot) {
  // Every output is built in memory first, then written all or nothing.
  enum { NFIXED = 7, MAXF = NFIXED + 64 };
  if (emitc_nruntime_files > MAXF - NFIXED) {
    fprintf(stderr, "memplan: internal error: %d runtime files, room for %d (cli_compile.c's MAXF)\n",
            emitc_nruntime_files, MAXF - NFIXED);
    return EXIT_INTERNAL;
  }
  const char *name[MAXF] = {"plan.json", "trainer.c", "trainer.cu",  "CMakeLists.txt",
                            "plan.dot",  "plan.svg",  "timeline.svg"};
  Text out[MAXF] = {{0}};
  int n = NFIXED, rc = EXIT_OK;
  json_plan(p, &out[0]);
  if (emit_trainer(p, &emit_backend_c, &out[1]) || emit_trainer(p, &emit_backend_cuda, &out[2])) rc = EXIT_USER;
  emit_cmakelists(p, &out[3]);
  dot_plan(p, dot, &out[4], &out[5]);
  timeline_svg(p, &out[6]);
  for (int i = 0; i < emitc_nruntime_files && n < MAXF; i++, n++) {
    name[n] = emitc_runtime_files[i].name;
    text_printf(&out[n], "%.*s", (int)emitc_runtime_files[i].size, (const char *)emitc_runtime_files[i].data);
  }
  if (rc == EXIT_OK && text_write_folder(dir, name, out, n)) rc = EXIT_USER;
  if (rc == EXIT_OK) {
    printf("\nwrote %s/:", dir);
    for (int i = 0; i < NFIXED; i++) printf(" %s", name[i]);
    printf(" + %d runtime files (the trainer program, the CPU and CUDA kernels)", n - NFIXED);
    printf(
        "\n  build and train: cmake -S %s -B %s/build && cmake --build %s/build && %s/build/trainer --help\n"
        "  (build/trainer where OpenBLAS is found, build/trainer_cuda where nvcc is)\n",
        dir, dir, dir, dir);
  }
  for (int i = 0; i < n; i++) text_free(&out[i]);
  return rc;
}

/* g: the model as asked for. A model with batch statistics (batchnorm) is
 * never micro-batched by the levers (levers.c), and the message says so. */
static void over_budget(const Options *o, const Graph *g, int64_t min_arena) {
  const char *model = o->model;
  int64_t budget = o->budget;
  char a[32], b[32];
  bool stats = false;
  for (int i = 0; g && i < g->nops; i++) stats |= op_info(g->ops[i].kind)->batch_stats;
  fprintf(stderr,
          "memplan: error: %s does not fit the budget of %lld bytes (%s).\n"
          "  Smallest budget that fits: --budget %lld (%s)\n",
          model, (long long)budget, mp_fmt_bytes(a, sizeof a, budget), (long long)min_arena,
          mp_fmt_bytes(b, sizeof b, min_arena));
  if (o->no_recompute || (o->no_micro_batch && !o->micro_batch)) /* the smallest under what was allowed */
    fprintf(stderr,
            "  (with %s%s%s forbidden: allowing %s may fit a smaller budget; a smaller batch or a\n"
            "  shorter sequence (--set B=... or T=..., the model's dims) shrinks activations)\n",
            o->no_recompute ? "recomputation" : "", o->no_recompute && o->no_micro_batch ? " and " : "",
            o->no_micro_batch ? "micro-batches" : "", o->no_recompute && o->no_micro_batch ? "them" : "it");
  else if (stats)
    fprintf(stderr,
            "  (tried recomputation; not micro-batches: the model's batch statistics (batchnorm) would\n"
            "  change, --micro-batch N forces them; a smaller batch (--set B=...) shrinks activations;\n"
            "  --precision auto or bf16 stores saved activations in half precision)\n");
  else
    fprintf(stderr,
            "  (tried recomputation, then every micro-batch size down to 1; a smaller batch or a shorter\n"
            "  sequence (--set B=... or T=..., the model's dims) shrinks activations; --precision auto or\n"
            "  bf16 stores saved activations in half precision)\n");
  if (g && g->opt.kind == OPT_ADAMW && o->opt_state == OPTS_AUTO && !o->zero_given && o->ranks <= 1)
    fprintf(stderr, "  (AdamW's moments tried in fp32, bf16 and 8 bits: the smallest budget is 8-bit's)\n");
  if (g && o->param_prec == PP_AUTO && paramprec_any(g) && !o->zero_given && o->ranks <= 1)
    fprintf(stderr,
            "  (trainable weights tried in fp32 and bf16 (--param-precision): the smallest budget is bf16's)\n");
  Arena ar = {0};
  if (g && o->head_grad == HG_AUTO && o->loss_chunk != LOSS_UNFUSED && o->ranks <= 1 && !o->zero_given &&
      headgrad_tied(&ar, g))
    fprintf(stderr,
            "  (the tied classifier's gradient tried kept and deferred (--head-grad): the smallest budget "
            "is the lesser)\n");
  ar_free(&ar);
}

/* What compile prints and writes for the planner's outcome; the exit status. */
static int write_result(Arena *ar, const Options *o, const PlanOutcome *r) {
  if (dumping(o, "graph")) {
    load_dump(r->graph, stdout);
    return EXIT_OK;
  }
  switch (r->status) {
  case PLAN_OK: break;
  case PLAN_OVER_BUDGET:
    over_budget(o, r->graph, r->min_arena);
    if (r->noclip_min_arena) { /* gradient clipping's price */
      char a[32];
      if (r->noclip_fits)
        fprintf(stderr,
                "  Gradient clipping (optimizer clip_grad_norm) keeps every gradient until the update phase:\n"
                "  without it the model fits, in %s (updates fused into backward); remove clip_grad_norm or\n"
                "  raise --budget\n",
                mp_fmt_bytes(a, sizeof a, r->noclip_min_arena));
      else
        fprintf(stderr,
                "  Gradient clipping (optimizer clip_grad_norm) keeps every gradient until the update phase;\n"
                "  without it the least arena would be %s, also over the budget\n",
                mp_fmt_bytes(a, sizeof a, r->noclip_min_arena));
    }
    return EXIT_USER;
  case PLAN_BAD_REQUEST: fprintf(stderr, "memplan: error: %s\n", r->message); return EXIT_USER;
  case PLAN_UNVERIFIED:
    fprintf(stderr, "memplan: internal error: the plan failed verification: %s\n(this is a bug in memplan)\n",
            r->message);
    return EXIT_INTERNAL;
  }
  const Plan *p = r->plan;
  if (dumping(o, "step")) ad_dump(r->step, stdout);
  else if (dumping(o, "live")) live_dump(r->step, live_build(ar, r->step, r->step->train, r->step->ntrain), stdout);
  else if (dumping(o, "plan")) plan_dump(p, stdout);
  if (o->dump) return EXIT_OK;
  report_plan(p, stdout);
  printf("  compiled in  %.1f ms; plan verified\n", 1e3 * p->compile_seconds);
  DotOptions dot = {o->expand, o->block, NULL};
  if (o->block && !dot_block_exists(p, o->block)) {
    fprintf(stderr, "memplan: error: --block %s: the plan has no repeat block named '%s' (blocks are named like h3)\n",
            o->block, o->block);
    return EXIT_USER;
  }
  return o->outdir ? write_outputs(p, o->outdir, &dot) : EXIT_OK;
}

int compile_main(int argc, char **argv) {
  Options o;
  cli_parse_options(argc, argv, false, &o);
  Arena ar = {0};
  PlanRequest rq = cli_request(&o);
  rq.graph_only = dumping(&o, "graph");
  PlanOutcome r = plan_model(&ar, &rq);
  int rc = write_result(&ar, &o, &r);
  ar_free(&ar);
  return rc;
}
