/* cli.h: what the memplan commands (cli_compile.c, cli_sweep.c, show.c,
 * pack.c; main.c picks one) share: one scheme of exit statuses, each
 * command's help, so that `memplan --help` can list every option of every
 * command, and the options compile and sweep have in common. */
#ifndef MEMPLAN_CLI_H
#define MEMPLAN_CLI_H

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* The exit statuses of every command. */
enum {
  EXIT_OK = 0,
  EXIT_USER = 1,     /* bad model, input or plan file; does not fit; I/O failure */
  EXIT_USAGE = 2,    /* unknown option, bad option value, missing or extra argument */
  EXIT_INTERNAL = 3, /* a result that failed verification: a bug in memplan */
};

/* The exit statuses as each --help prints them. */
#define CLI_EXIT_HELP                                                                                  \
  "exit status: 0 success; 1 user error (bad model, input or plan file, does not fit, I/O failure);\n" \
  "  2 usage (unknown option, bad option value, missing argument); 3 internal error (a bug)\n"

extern const char compile_help[], compile_help_levers[]; /* cli_compile.c: the options, the levers */
extern const char sweep_help[];                          /* cli_sweep.c */
extern const char show_help[];                           /* show.c */
extern const char pack_help[];                           /* pack.c */
extern const char import_help[];                         /* cli_import.c */
extern const char tokenize_help[];                       /* cli_tokenize.c */
extern const char torch_help[];                          /* cli_torch.c */
int compile_main(int argc, char **argv);
int sweep_main(int argc, char **argv);
int show_main(int argc, char **argv);
int pack_main(int argc, char **argv);
int import_main(int argc, char **argv);
int tokenize_main(int argc, char **argv);
int torch_main(int argc, char **argv);

/* The options of compile; sweep takes a subset. */
typedef struct {
  const char *model, *outdir, *dump;
  int64_t budget, align;
  double time_limit;
  bool no_fuse, expand, guard;
  int64_t micro_batch;
  bool no_recompute, no_micro_batch; /* levers forbidden */
  Precision precision;
  Masks masks;          /* --dropout-masks */
  int64_t loss_chunk;   /* --fused-loss: LOSS_AUTO (default), LOSS_FUSED (on), LOSS_UNFUSED (off) */
  OptPrec opt_state;    /* --opt-state (compile only) */
  BaseFmt base_weights; /* --base-weights (compile only) */
  ParamPrec param_prec; /* --param-precision (compile only) */
  HeadGrad head_grad;   /* --head-grad (compile only) */
  int ranks;            /* --ranks N (default 1) */
  int zero;             /* --zero 0, 1, 2; -1: auto (the default) */
  bool zero_given;
  const char *block;
  DimOverride ov[64];
  char ovname[64][64];
  int nov;
  const char *freeze[64]; /* --freeze patterns */
  int nfreeze;
  int64_t lora_rank; /* --lora-rank, --lora-alpha, --lora-targets (0, 0, NULL: the YAML's) */
  double lora_alpha;
  const char *lora_targets;
  int64_t gen_context; /* --gen-context N: generation's KV cache positions (0: none) */
} Options;

/* Parses compile's options, or with sweep set, the subset sweep takes
 * (cli_compile.c); usage errors and --help exit. */
void cli_parse_options(int argc, char **argv, bool sweep, Options *o);
/* What the options ask of the planner. */
PlanRequest cli_request(const Options *o);

/* A usage error of `memplan CMD`: the message, where to read the options,
 * and exit status 2. */
__attribute__((format(printf, 2, 3), noreturn, unused)) static void cli_usage_error(const char *cmd, const char *fmt,
                                                                                    ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "memplan %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(memplan %s --help lists the options)\n", cmd);
  exit(EXIT_USAGE);
}

/* getopt_long's '?' (unknown option, or a value given to a flag) and ':'
 * (missing value; the option string starts with ':' and opterr is 0) as a
 * usage error. An old name gets its new one. */
__attribute__((noreturn, unused)) static void cli_bad_option(const char *cmd, int c, char **argv) {
  const char *arg = argv[optind - 1];
  int len = (int)strcspn(arg, "=");
  bool is_long = !strncmp(arg, "--", 2) && (optopt == 0 || arg[len]);
  if (c == ':') cli_usage_error(cmd, "%s needs a value", arg);
  if (!is_long) cli_usage_error(cmd, "unknown option '-%c'", optopt);
  if (!strncmp(arg, "--timeout", 9))
    cli_usage_error(cmd, "%.*s: the search limit is called --time-limit SECONDS (in every command)", len, arg);
  if (optopt) cli_usage_error(cmd, "%.*s takes no value", len, arg);
  cli_usage_error(cmd, "unknown option '%.*s'", len, arg);
}

#endif
