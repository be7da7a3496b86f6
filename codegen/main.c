/* main.c: the memplan command line: each command's front end (cli_compile.c,
 * cli_sweep.c, show.c, pack.c, cli_import.c, cli_hf.c, cli_tokenize.c, cli_torch.c) by its name, and the
 * help of them all. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "hf.h"

#ifndef MEMPLAN_VERSION
#define MEMPLAN_VERSION "0.0.0"
#endif

static const char usage[] =
    "usage: memplan compile MODEL.yaml [OPTIONS]   plan a training step; with -o, write the trainer folder\n"
    "       memplan sweep MODEL.yaml [OPTIONS]     the memory/recompute Pareto table\n"
    "       memplan show PLAN.json [OPTIONS]       draw a plan.json again (plan graph or timeline)\n"
    "       memplan pack FILE.csv [OPTIONS]        pack a MiniMalloc CSV instance into one arena\n"
    "       memplan import-hf DIR -o OUT           a Hugging Face Llama/Mistral/Qwen2/GPT-2 folder as a model\n"
    "       memplan import-hf gpt2 IN.safetensors -o OUT.safetensors [--plan PLAN.json]\n"
    "                                              Hugging Face GPT-2 weights under memplan's names\n"
    "       memplan export-hf PLAN CKPT -o HFDIR [--merge]  a trained checkpoint as a Hugging Face folder\n"
    "       memplan tokenize --vocab DIR IN.txt -o OUT.bin\n"
    "                                              GPT-2 BPE text to an llm.c token file (--decode: back)\n"
    "       memplan import-torch SPEC -o DIR [OPTIONS]  a PyTorch nn.Module as model.yaml + weights\n"
    "       memplan CMD --help                     one command's options\n"
    "       memplan --help | --version\n";

/* memplan --help: every command with every option. */
static void print_help(void) {
  printf("memplan %s: plan neural-network training in a fixed memory budget.\n\n%s\n", MEMPLAN_VERSION, usage);
  printf("%s%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s", compile_help, compile_help_levers, sweep_help, show_help, pack_help,
         import_help, export_help, tokenize_help, torch_help, CLI_EXIT_HELP);
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
  /* A budget search builds and drops a plan per candidate: freed memory
   * stays in the process for the next one instead of going back to the
   * kernel and faulting in again (glibc's adaptive thresholds otherwise cost
   * a search about half of its time). */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  /* A write over the file size limit (ulimit -f) fails with EFBIG instead of
   * killing memplan: the failed write removes its temporary file or folder. */
  signal(SIGXFSZ, SIG_IGN);
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
  if (!strcmp(cmd, "import-hf")) return import_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "export-hf")) return export_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "tokenize")) return tokenize_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "import-torch")) return torch_main(argc - 1, argv + 1);
  fprintf(stderr, "memplan: error: unknown command '%s'\n%s", cmd, usage);
  return EXIT_USAGE;
}
