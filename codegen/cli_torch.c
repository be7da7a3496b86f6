/* cli_torch.c: memplan import-torch, the PyTorch front door. The work is
 * Python's (tools/torch_import.py: torch.fx traces the module, its nodes map
 * to memplan's ops); this front end finds that tool and a python3 with
 * torch, and runs it in its place, so its exit status is the command's.
 *
 * The tool: beside the installed memplan (BIN/../share/memplan/, CMake's
 * install rules put it there), else in the source tree memplan was built
 * from (MEMPLAN_TOOLS_DIR). The interpreter: $MEMPLAN_PYTHON, else
 * /usr/bin/python3 (Debian's, where python3-torch installs), else python3
 * on PATH. */
#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "cli.h"

#ifndef MEMPLAN_TOOLS_DIR
#define MEMPLAN_TOOLS_DIR "tools"
#endif

const char torch_help[] =
    "usage: memplan import-torch SPEC -o DIR [OPTIONS]\n"
    "       memplan import-torch load CHECKPOINT DIR/name_map.json -o STATE_DICT.pt\n"
    "  Traces a PyTorch nn.Module with torch.fx and writes DIR/model.yaml, DIR/weights.safetensors (the\n"
    "  module's weights and BatchNorm statistics under memplan's names, for the trainer's --load) and\n"
    "  DIR/name_map.json; nothing is written when a node has no memplan op (all of them are listed).\n"
    "  SPEC is package.module:factory or path/to/file.py:ClassOrFactory.\n"
    "  -o DIR                     the output folder\n"
    "      --kwargs K=V,...       the factory's keyword arguments (Python literals)\n"
    "      --input NAME=[dims]:dtype  each argument of forward and the loss's targets (f32, i32);\n"
    "                             dims are numbers or symbols of --dims (repeatable)\n"
    "      --dims B=32,...        the symbols' values (the YAML's dims: --set still works)\n"
    "      --loss cross_entropy:TARGETS | mse:TARGETS   the loss of forward's output (required)\n"
    "      --output INDEX         which value of a forward that returns a tuple\n"
    "      --optimizer adamw:lr=1e-3,betas=[0.9,0.999],weight_decay=0.01 (sgd:lr=,momentum=,...)\n"
    "      --name NAME            the model's name (default: the factory's, lower case)\n"
    "  load: a trainer checkpoint (--save) back into the module the name map names, with\n"
    "  load_state_dict(strict=True), saved as a torch state_dict.\n"
    "  Needs python3 with torch (Debian: apt install python3-torch); MEMPLAN_PYTHON picks the python3.\n";

/* The tool's path: beside the binary when installed, else the source tree's. */
static const char *tool_path(char *buf, size_t n) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      snprintf(buf, n, "%s/../share/memplan/torch_import.py", exe);
      if (access(buf, R_OK) == 0) return buf;
    }
  }
  snprintf(buf, n, "%s/torch_import.py", MEMPLAN_TOOLS_DIR);
  return access(buf, R_OK) == 0 ? buf : NULL;
}

int torch_main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(torch_help, argc < 2 ? stderr : stdout);
    if (argc >= 2) fputs(CLI_EXIT_HELP, stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  char tool[PATH_MAX + 64];
  if (!tool_path(tool, sizeof tool)) {
    fprintf(stderr,
            "memplan import-torch: error: torch_import.py is neither in ../share/memplan beside memplan nor in "
            "%s: reinstall memplan (cmake --install)\n",
            MEMPLAN_TOOLS_DIR);
    return EXIT_USER;
  }
  const char *py = getenv("MEMPLAN_PYTHON");
  if (!py || !*py) py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  char **args = calloc((size_t)argc + 3, sizeof *args);
  if (!args) {
    fputs("memplan import-torch: error: out of memory\n", stderr);
    return EXIT_USER;
  }
  bool load = !strcmp(argv[1], "load");
  int k = 0;
  args[k++] = (char *)py;
  args[k++] = tool;
  args[k++] = load ? "load" : "import";
  for (int i = load ? 2 : 1; i < argc; i++) args[k++] = argv[i];
  fflush(NULL);
  execvp(py, args);
  fprintf(stderr,
          "memplan import-torch: error: cannot run %s: %s; it needs python3 with PyTorch: install Debian's "
          "python3-torch (apt install python3-torch) or set MEMPLAN_PYTHON to a python3 that has torch\n",
          py, strerror(errno));
  free(args);
  return EXIT_USER;
}
