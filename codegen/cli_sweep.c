/* cli_sweep.c: `memplan sweep`: the memory/recompute Pareto table. */
#include <stdio.h>

#include "cli.h"

const char sweep_help[] =
    "usage: memplan sweep MODEL.yaml [OPTIONS]\n"
    "  Prints the memory/recompute Pareto table of MODEL.yaml: the fastest plan at each arena size,\n"
    "  from keeping every activation down to the least memory recomputation reaches, one row per\n"
    "  1% of the full arena saved (stages: K keep, S selective, R recompute; lowercase: bf16).\n"
    "  -s, --set DIM=VALUE   override a dim of the model (repeatable)\n"
    "      --precision P     fp32 (default), bf16, fp16, or auto (bf16 stage by stage in the table)\n"
    "      --align N         buffer alignment in bytes, a power of two (default 256)\n"
    "      --time-limit S    seconds the offset search may take per plan (default 0.5)\n"
    "      --no-fuse-updates run every optimizer update after the whole backward pass\n"
    "      --dropout-masks M store (default) or regen: dropout's masks in every row\n"
    "      --guard           plan with 64 canary bytes after every buffer\n"
    "  -h, --help            this help\n";

/* memplan sweep MODEL: the table of fit_sweep, after a line naming the model. */
int sweep_main(int argc, char **argv) {
  Options o;
  cli_parse_options(argc, argv, true, &o);
  Arena ar = {0};
  Graph *g = load_model(&ar, o.model, o.ov, o.nov);
  PlanRequest rq = cli_request(&o);
  printf("memplan sweep: %s (model %s): fastest plan at each arena size\n", o.model, g->model);
  fit_sweep(&ar, g, &rq.fit, stdout);
  ar_free(&ar);
  return EXIT_OK;
}
