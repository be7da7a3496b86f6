/* main.c: the memplan command line. `compile` parses its options, calls the
 * planner (plan_model: the passes in order) and writes what it returns. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "driver.h"
#include "emit.h"
#include "live.h"
#include "plan_build.h"

#ifndef MEMPLAN_VERSION
#define MEMPLAN_VERSION "0.0.0"
#endif

static const char usage[] =
    "usage: memplan compile MODEL.yaml [OPTIONS]   plan a training step; with -o, write the trainer folder\n"
    "       memplan sweep MODEL.yaml [OPTIONS]     the memory/recompute Pareto table\n"
    "       memplan show PLAN.json [OPTIONS]       draw a plan.json again (plan graph or timeline)\n"
    "       memplan pack FILE.csv [OPTIONS]        pack a MiniMalloc CSV instance into one arena\n"
    "       memplan CMD --help                     one command's options\n"
    "       memplan --help | --version\n";

static const char compile_help[] =
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
    "  -d, --dump=PASS       print a pass's result instead of the report: graph, step, live, plan\n"
    "      --align N         buffer alignment in bytes, a power of two (default 256)\n"
    "      --time-limit S    seconds the offset search may take (default 0.5)\n"
    "      --no-fuse-updates run every optimizer update after the whole backward pass\n"
    "      --precision P     storage of saved activations: fp32 (default), bf16, fp16 (with loss\n"
    "                        scaling), or auto (bf16, stage by stage, where it beats recomputing)\n"
    "      --micro-batch N   run the batch as micro-batches of N rows with gradient accumulation\n"
    "                        (default: only when nothing else fits the budget)\n"
    "      --guard           canary bytes after every buffer, checked by the CPU trainer after\n"
    "                        every op (names the op that wrote out of bounds); costs memory\n"
    "  -h, --help            this help\n"
    "  Exit 1 also when the model does not fit the budget (the error names the smallest that does);\n"
    "  3 when the plan fails verification.\n";

static const char sweep_help[] =
    "usage: memplan sweep MODEL.yaml [OPTIONS]\n"
    "  Prints the memory/recompute Pareto table of MODEL.yaml: the fastest plan at each arena size,\n"
    "  from keeping every activation down to the least memory recomputation reaches, one row per\n"
    "  1% of the full arena saved (stages: K keep, S selective, R recompute; lowercase: bf16).\n"
    "  -s, --set DIM=VALUE   override a dim of the model (repeatable)\n"
    "      --precision P     fp32 (default), bf16, fp16, or auto (bf16 stage by stage in the table)\n"
    "      --align N         buffer alignment in bytes, a power of two (default 256)\n"
    "      --time-limit S    seconds the offset search may take per plan (default 0.5)\n"
    "      --no-fuse-updates run every optimizer update after the whole backward pass\n"
    "      --guard           plan with 64 canary bytes after every buffer\n"
    "  -h, --help            this help\n";

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

typedef struct {
  const char *model, *outdir, *dump;
  int64_t budget, align;
  double time_limit;
  bool no_fuse, expand, guard;
  int64_t micro_batch;
  Precision precision;
  const char *block;
  DimOverride ov[64];
  char ovname[64][64];
  int nov;
} Options;

/* The options of compile, or with sweep set, the subset sweep uses. */
static void parse_options(int argc, char **argv, bool sweep, Options *o) {
  /* clang-format off */
  static const struct option compile_lo[] = {
      {"budget", required_argument, 0, 'b'}, {"output", required_argument, 0, 'o'},
      {"set", required_argument, 0, 's'},    {"dump", required_argument, 0, 'd'},
      {"align", required_argument, 0, 'a'},  {"time-limit", required_argument, 0, 't'},
      {"no-fuse-updates", no_argument, 0, 'F'}, {"expand", no_argument, 0, 'E'},
      {"block", required_argument, 0, 'B'},  {"micro-batch", required_argument, 0, 'M'},
      {"precision", required_argument, 0, 'P'}, {"guard", no_argument, 0, 'G'}, {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  static const struct option sweep_lo[] = {
      {"set", required_argument, 0, 's'},        {"align", required_argument, 0, 'a'},
      {"time-limit", required_argument, 0, 't'}, {"no-fuse-updates", no_argument, 0, 'F'},
      {"precision", required_argument, 0, 'P'},  {"guard", no_argument, 0, 'G'},
      {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
  /* clang-format on */
  const char *cmd = sweep ? "sweep" : "compile";
  *o = (Options){.align = 256, .time_limit = 0.5};
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
    case 'a': o->align = parse_size(cmd, optarg, "--align"); break;
    case 't': {
      char *end;
      o->time_limit = strtod(optarg, &end);
      if (!*optarg || *end || !(o->time_limit >= 0) || o->time_limit > 1e6)
        cli_usage_error(cmd, "--time-limit wants seconds (e.g. 0.5), got '%s'", optarg);
      break;
    }
    case 'F': o->no_fuse = true; break;
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
      fputs(sweep ? sweep_help : compile_help, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      exit(EXIT_OK);
    default: cli_bad_option(cmd, c, argv);
    }
  }
  if (optind >= argc) cli_usage_error(cmd, "no model file given");
  if (optind < argc - 1)
    cli_usage_error(cmd, "more than one model file ('%s' and '%s')", argv[optind], argv[optind + 1]);
  o->model = argv[optind];
  if ((o->align & (o->align - 1)) || o->align > (1 << 30))
    cli_usage_error(cmd, "--align %lld must be a power of two no larger than 1G", (long long)o->align);
  static const char *const dumps[] = {"graph", "step", "live", "plan", NULL};
  bool ok = !o->dump;
  for (int i = 0; dumps[i] && !ok; i++) ok = !strcmp(o->dump, dumps[i]);
  if (!ok) cli_usage_error(cmd, "--dump=%s: choose graph, step, live or plan", o->dump);
}

static bool dumping(const Options *o, const char *pass) { return o->dump && !strcmp(o->dump, pass); }

/* Removes a folder that holds only files (the temp folder), best effort. */
static void remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* Makes a folder's renames durable, best effort (not every file system can
 * fsync a folder). */
static void fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/* The folder that holds dir: "a/b" -> "a", "b" -> ".", "/b" -> "/". */
static void parent_of(const char *dir, char *out, size_t cap) {
  snprintf(out, cap, "%s", dir);
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/') out[--n] = 0;
  char *slash = strrchr(out, '/');
  if (!slash) snprintf(out, cap, ".");
  else if (slash == out) out[1] = 0;
  else *slash = 0;
}

/* out = dir (its first dirlen bytes) / name; false when it is too long. */
static bool in_dir(char *out, size_t cap, const char *dir, int dirlen, const char *name) {
  int k = snprintf(out, cap, "%.*s/%s", dirlen, dir, name);
  return k >= 0 && (size_t)k < cap;
}

/* Writes the n texts as dir/name[i], all or nothing: every file is written
 * (text_write_atomic: fsync, rename) into a temp folder first, beside dir
 * when dir is new (dir.tmp-XXXXXX, renamed to dir at the end) or inside it
 * when it exists (dir/.memplan-tmp-XXXXXX, each file renamed into dir at the
 * end, so that what else the folder holds, a build folder or saved weights,
 * stays). On a failure the temp folder goes and dir is as it was. */
static int write_folder(const char *dir, const char *const *name, const Text *out, int n) {
  char tmp[4096], parent[4096], path[4096], final[4096];
  struct stat st;
  bool exists = stat(dir, &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "memplan: error: cannot write %s/: %s exists and is not a folder\n", dir, dir);
    return EXIT_USER;
  }
  if (!exists && errno != ENOENT) {
    fprintf(stderr, "memplan: error: cannot write %s/: %s\n", dir, strerror(errno));
    return EXIT_USER;
  }
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  if (len + 64 > sizeof tmp) {
    fprintf(stderr, "memplan: error: the output folder's name is too long: %s\n", dir);
    return EXIT_USER;
  }
  parent_of(dir, parent, sizeof parent);
  if (exists) snprintf(tmp, sizeof tmp, "%.*s/.memplan-tmp-XXXXXX", (int)len, dir);
  else if (emit_mkdirs(parent)) return EXIT_USER;
  else snprintf(tmp, sizeof tmp, "%.*s.tmp-XXXXXX", (int)len, dir);
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "memplan: error: cannot create a temporary folder %s: %s\n", tmp, strerror(errno));
    return EXIT_USER;
  }
  mode_t mask = umask(0); /* mkdtemp makes 0700; the folder gets what mkdir would give */
  umask(mask);
  chmod(tmp, 0777 & ~mask);
  for (int i = 0; i < n; i++) {
    if (!in_dir(path, sizeof path, tmp, (int)strlen(tmp), name[i]) || text_write_atomic(&out[i], path)) {
      fprintf(stderr, "memplan: error: could not write %.*s/%s; %.*s was left as it was\n", (int)len, dir, name[i],
              (int)len, dir);
      remove_flat_dir(tmp);
      return EXIT_USER;
    }
  }
  if (!exists) {
    if (rename(tmp, dir)) {
      fprintf(stderr, "memplan: error: cannot rename %s to %s: %s\n", tmp, dir, strerror(errno));
      remove_flat_dir(tmp);
      return EXIT_USER;
    }
    fsync_dir(parent);
    return EXIT_OK;
  }
  for (int i = 0; i < n; i++) { /* nothing in dir changes if a name there cannot be replaced */
    if (in_dir(final, sizeof final, dir, (int)len, name[i]) && lstat(final, &st) == 0 && S_ISDIR(st.st_mode)) {
      fprintf(stderr, "memplan: error: cannot write %s: it is a folder\n", final);
      remove_flat_dir(tmp);
      return EXIT_USER;
    }
  }
  for (int i = 0; i < n; i++) {
    in_dir(path, sizeof path, tmp, (int)strlen(tmp), name[i]); /* both fit: written above */
    in_dir(final, sizeof final, dir, (int)len, name[i]);
    if (rename(path, final)) {
      fprintf(stderr, "memplan: error: cannot rename %s to %s: %s (%d of %d files replaced)\n", path, final,
              strerror(errno), i, n);
      remove_flat_dir(tmp);
      return EXIT_USER;
    }
  }
  rmdir(tmp);
  fsync_dir(dir);
  return EXIT_OK;
}

static int write_outputs(const Plan *p, const char *dir, const DotOptions *dot) {
  // Every output is built in memory first, then written all or nothing.
  enum { NFIXED = 7, MAXF = NFIXED + 16 };
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
  if (rc == EXIT_OK) rc = write_folder(dir, name, out, n);
  if (rc == EXIT_OK) {
    printf("\nwrote %s/:", dir);
    for (int i = 0; i < n; i++) printf(" %s", name[i]);
    printf(
        "\n  build and train: cmake -S %s -B %s/build && cmake --build %s/build && %s/build/trainer --help\n"
        "  (build/trainer where OpenBLAS is found, build/trainer_cuda where nvcc is)\n",
        dir, dir, dir, dir);
  }
  for (int i = 0; i < n; i++) text_free(&out[i]);
  return rc;
}

static void over_budget(const char *model, int64_t budget, int64_t min_arena) {
  char a[32], b[32];
  fprintf(stderr,
          "memplan: error: %s does not fit the budget of %lld bytes (%s).\n"
          "  Smallest budget that fits: --budget %lld (%s)\n"
          "  (tried recomputation, then every micro-batch size down to 1; a shorter sequence (--set T=...)\n"
          "  shrinks activations; --precision auto or bf16 stores saved activations in half precision)\n",
          model, (long long)budget, mp_fmt_bytes(a, sizeof a, budget), (long long)min_arena,
          mp_fmt_bytes(b, sizeof b, min_arena));
}

static PlanRequest request(const Options *o) {
  return (PlanRequest){.model = o->model,
                       .ov = o->ov,
                       .nov = o->nov,
                       .budget = o->budget,
                       .micro_batch = o->micro_batch,
                       .fit = {.fuse = !o->no_fuse,
                               .align = o->align,
                               .time_limit = o->time_limit,
                               .backend = BACKEND_CPU,
                               .units = 500,
                               .accumulation = 1,
                               .precision = o->precision,
                               .guard = o->guard ? 64 : 0}};
}

/* What compile prints and writes for the planner's outcome; the exit status. */
static int write_result(Arena *ar, const Options *o, const PlanOutcome *r) {
  if (dumping(o, "graph")) {
    load_dump(r->graph, stdout);
    return EXIT_OK;
  }
  switch (r->status) {
  case PLAN_OK: break;
  case PLAN_OVER_BUDGET: over_budget(o->model, o->budget, r->min_arena); return EXIT_USER;
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

static int compile_main(int argc, char **argv) {
  Options o;
  parse_options(argc, argv, false, &o);
  Arena ar = {0};
  PlanRequest rq = request(&o);
  rq.graph_only = dumping(&o, "graph");
  PlanOutcome r = plan_model(&ar, &rq);
  int rc = write_result(&ar, &o, &r);
  ar_free(&ar);
  return rc;
}

/* memplan sweep MODEL: the memory/recompute Pareto table. */
static int sweep_main(int argc, char **argv) {
  Options o;
  parse_options(argc, argv, true, &o);
  Arena ar = {0};
  Graph *g = load_model(&ar, o.model, o.ov, o.nov);
  PlanRequest rq = request(&o);
  printf("memplan sweep: %s (model %s): fastest plan at each arena size\n", o.model, g->model);
  fit_sweep(&ar, g, &rq.fit, stdout);
  ar_free(&ar);
  return EXIT_OK;
}

/* memplan --help: every command with every option. */
static void print_help(void) {
  printf("memplan %s: plan neural-network training in a fixed memory budget.\n\n%s\n", MEMPLAN_VERSION, usage);
  printf("%s\n%s\n%s\n%s\n%s", compile_help, sweep_help, show_help, pack_help, CLI_EXIT_HELP);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    print_help();
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version")) {
    printf("memplan %s\n", MEMPLAN_VERSION);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "compile")) return compile_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "pack")) return pack_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "sweep")) return sweep_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "show")) return show_main(argc - 1, argv + 1);
  fprintf(stderr, "memplan: error: unknown command '%s'\n%s", cmd, usage);
  return EXIT_USAGE;
}
