/* rss_probe COMMAND [ARGS...]: runs COMMAND, passes its stdout and stderr through, and prints
 * "rss_probe: peak RSS N bytes" (its ru_maxrss) on stderr; exits with its status. A child of
 * Python reports Python's peak as its own (vfork shares the parent's memory until exec, and exec
 * keeps the old high-water mark): forked from this small program, a trainer's peak RSS is its own,
 * and `rss_probe trainer --help` measures its baseline (binary, libraries, C runtime) before any
 * setup. tests/e2e/e2e.py's memory_truth. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: rss_probe COMMAND [ARGS...]\n");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("rss_probe: fork");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    _exit(127);
  }
  int st = 0;
  struct rusage ru;
  if (wait4(pid, &st, 0, &ru) < 0) {
    perror("rss_probe: wait4");
    return 2;
  }
  fprintf(stderr, "rss_probe: peak RSS %lld bytes\n", (long long)ru.ru_maxrss * 1024);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
