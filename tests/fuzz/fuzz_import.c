/* fuzz_import.c: libFuzzer harness for import-hf's header path
 * (codegen/plan_read.c's st_read_header, user errors caught with
 * diag_catch). Input as fuzz_st.c's: 8 bytes of data-section size (mod
 * 2^40), then the header's JSON. An accepted header's tensors must be what
 * cli_import.c relies on: known dtype, rank <= 8, [begin, end) inside the
 * data with end - begin = numel * dtype size (abort otherwise). */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_json.h"
#include "plan_read.h"

static Arena ar; /* read after the longjmp */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  uint64_t db = 0;
  for (int k = 0; k < 8; k++) db |= (uint64_t)data[k] << (8 * k);
  int64_t data_bytes = (int64_t)(db & (((uint64_t)1 << 40) - 1));
  ar = (Arena){0};
  jmp_buf jb;
  if (!setjmp(jb)) {
    diag_catch(&jb);
    int n;
    StTensor *t = st_read_header(&ar, "fuzz.safetensors", (const char *)data + 8, size - 8, data_bytes, &n);
    for (int i = 0; i < n; i++) {
      int64_t es = mj_st_dtype_size(t[i].dtype), numel = 1;
      int ok = es > 0 && t[i].rank >= 0 && t[i].rank <= ST_MAX_RANK;
      for (int d = 0; ok && d < t[i].rank; d++) ok = !__builtin_mul_overflow(numel, t[i].shape[d], &numel);
      ok = ok && t[i].begin >= 0 && t[i].end <= data_bytes && t[i].end - t[i].begin == numel * es;
      if (!ok) {
        fprintf(stderr, "fuzz_import: tensor %d of an accepted header breaks cli_import.c's assumptions\n", i);
        abort();
      }
    }
  }
  diag_catch(NULL);
  ar_free(&ar);
  return 0;
}
