/* fuzz_pack.c: libFuzzer harness for `memplan pack`'s CSV reader and the
 * packing behind it: the input is written to a memfd and pack_main runs on
 * /proc/self/fd/N, minimizing or (from a hash of the input) deciding a
 * capacity. Bad input must come back as status 1 (pack_main returns instead
 * of exiting while it reads); a crash, a sanitizer report or a packing that
 * fails verification (status 3, an internal error) is a bug. Built by
 * tests/fuzz/run.sh. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int pack_main(int argc, char **argv);

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fd = memfd_create("fuzz_pack.csv", 0);
  if (fd < 0) abort();
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return 0;
}

static uint64_t fnv(const uint8_t *d, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ull;
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1 << 16)) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  uint64_t h = fnv(data, size);
  char cap[32];
  snprintf(cap, sizeof cap, "%llu", (unsigned long long)(h >> 8) % 4096);
  char *argv[] = {"pack", path, "--time-limit", "0.01", "--capacity", cap, NULL};
  int argc = (h & 1) ? 6 : 4;
  /* stdout carries pack's summary; keep the fuzzer's log readable */
  fflush(stdout);
  int rc = pack_main(argc, argv);
  if (rc < 0 || rc > 1) { /* 0: packed or fits; 1: bad input or does not fit */
    fprintf(stderr, "fuzz_pack: pack_main returned %d\n", rc);
    abort();
  }
  return 0;
}
