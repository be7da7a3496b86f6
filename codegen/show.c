/* show.c: `memplan show PLAN.json`: renders a written plan again (the plan
 * graph as SVG, PNG or DOT, or the memory timeline) without the model or a
 * recompile. The plan is read back (plan_read.c) and verified first: a plan
 * that was edited into an unsound one is refused, not drawn. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "emit.h"
#include "plan_read.h"
#include "verify.h"

const char show_help[] =
    "usage: memplan show PLAN.json [OPTIONS]\n"
    "  Renders a plan.json that memplan compile wrote, without recompiling.\n"
    "  -f, --format F        the plan graph as svg (default), png or dot\n"
    "      --timeline        the memory timeline instead (SVG: buffers over schedule time)\n"
    "      --expand          draw every repeat block open\n"
    "      --block NAME      open one repeat block, e.g. --block h3\n"
    "  -o, --output F        write F (atomically) instead of standard output (PNG: needed on a terminal)\n"
    "  -h, --help            this help\n"
    "  Exit 1 also for an unreadable, malformed or foreign file, or a plan that fails verification\n"
    "  (an edited plan.json).\n";

/* The whole file, NUL-terminated; NULL with a message. */
static char *slurp(const char *path, size_t *len) {
  const char *why;
  FILE *f = mp_open_input(path, &why);
  if (!f) {
    fprintf(stderr, "memplan show: error: cannot open %s: %s\n", path, why);
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 65536 + 1 > cap) {
      cap = cap ? 2 * cap : 1 << 20;
      char *b = realloc(buf, cap);
      if (!b) break;
      buf = b;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0 || n > ((size_t)1 << 30)) break; /* plan_read refuses more than 1 GiB */
  }
  bool bad = ferror(f) || !buf;
  fclose(f);
  if (bad) {
    fprintf(stderr, "memplan show: error: cannot read %s: %s\n", path, strerror(errno ? errno : EIO));
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

int show_main(int argc, char **argv) {
  static const struct option lo[] = {{"format", required_argument, 0, 'f'},
                                     {"timeline", no_argument, 0, 'T'},
                                     {"expand", no_argument, 0, 'E'},
                                     {"block", required_argument, 0, 'B'},
                                     {"output", required_argument, 0, 'o'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  const char *format = "svg", *out = NULL;
  bool timeline = false;
  DotOptions dot = {0};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":f:o:h", lo, NULL)) != -1) {
    switch (c) {
    case 'f': format = optarg; break;
    case 'T': timeline = true; break;
    case 'E': dot.expand = true; break;
    case 'B': dot.block = optarg; break;
    case 'o': out = optarg; break;
    case 'h':
      fputs(show_help, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      return EXIT_OK;
    default: cli_bad_option("show", c, argv);
    }
  }
  if (optind >= argc) cli_usage_error("show", "no plan file given");
  if (optind < argc - 1)
    cli_usage_error("show", "more than one plan file ('%s' and '%s')", argv[optind], argv[optind + 1]);
  if (strcmp(format, "svg") && strcmp(format, "png") && strcmp(format, "dot"))
    cli_usage_error("show", "--format %s: choose svg, png or dot", format);
  if (timeline && strcmp(format, "svg"))
    cli_usage_error("show", "the timeline is drawn as SVG only (drop --format %s)", format);
  if (!out && !strcmp(format, "png") && isatty(STDOUT_FILENO))
    cli_usage_error("show", "PNG is binary: write it with -o FILE.png");
  const char *path = argv[optind];
  size_t len = 0;
  char *text = slurp(path, &len);
  if (!text) return EXIT_USER;
  Arena ar = {0};
  Plan *p = plan_read(&ar, path, text, len); /* exits 1 on a malformed file */
  int rc = EXIT_OK;
  const char *bad = verify_plan(p);
  if (bad) {
    fprintf(stderr, "%s: error: the plan fails verification: %s\n(was it edited? compile the model again)\n", path,
            bad);
    rc = EXIT_USER;
  } else if (dot.block && !dot_block_exists(p, dot.block)) {
    fprintf(stderr,
            "memplan show: error: --block %s: the plan has no repeat block named '%s' (blocks are named like h3)\n",
            dot.block, dot.block);
    rc = EXIT_USER;
  }
  if (rc != EXIT_OK) {
    free(text);
    ar_free(&ar);
    return rc;
  }
  Text t = {0};
  if (timeline) timeline_svg(p, &t);
  else if (!strcmp(format, "dot")) dot_plan(p, &dot, &t, NULL);
  else {
    dot.format = format;
    dot_plan(p, &dot, NULL, &t);
  }
  if (out) {
    rc = text_write_atomic(&t, out) ? EXIT_USER : EXIT_OK;
  } else if (fwrite(t.s, 1, t.n, stdout) != t.n || fflush(stdout)) {
    fprintf(stderr, "memplan show: error: cannot write to standard output: %s\n", strerror(errno));
    rc = EXIT_USER;
  }
  text_free(&t);
  free(text);
  ar_free(&ar);
  return rc;
}
