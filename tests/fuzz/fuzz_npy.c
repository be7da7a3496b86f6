/* fuzz_npy.c: libFuzzer harness for the trainers' .npy header parser
 * (--npy: runtime/memplan_json.c's mj_npy_header). Input: the header's dict
 * text (what follows the magic, the version and the length); the seeds are
 * real NumPy headers. A refusal is a normal outcome; a crash, a sanitizer
 * report or a hang is a bug; an accepted header must have all three keys and
 * dimensions >= 0 (abort otherwise). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MjNpy h;
  MjError e;
  if (mj_npy_header((const char *)data, size, &h, &e)) return 0;
  int ok = h.descr[0] && (h.fortran == 0 || h.fortran == 1) && h.rank >= 0 && h.rank <= MJ_NPY_MAX_RANK;
  for (int d = 0; ok && d < h.rank; d++) ok = h.shape[d] >= 0;
  if (!ok) {
    fprintf(stderr, "fuzz_npy: an accepted header breaks its promise\n");
    abort();
  }
  return 0;
}
