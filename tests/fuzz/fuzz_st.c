/* fuzz_st.c: libFuzzer harness for the trainers' safetensors reader
 * (--load, --resume: runtime/memplan_json.c's mj_st_read).
 *
 * Input: 8 bytes, the size of the data section after the header (little
 * endian, taken mod 2^40), then the header's JSON: the seeds are real
 * checkpoints' headers without their data. A refusal is a normal outcome;
 * a crash, a sanitizer report or a hang is a bug. What an accepted header
 * promises is checked (abort on a broken promise): every entry's dtype is
 * known and its bytes are numel * dtype size within the data, the entries
 * cover the data exactly, names and metadata are NUL-free strings; then the
 * metadata is walked as the trainer's read_header and resume_opts do. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_json.h"

#define PROMISE(c)                                                     \
  do {                                                                 \
    if (!(c)) {                                                        \
      fprintf(stderr, "fuzz_st: an accepted header breaks: %s\n", #c); \
      abort();                                                         \
    }                                                                  \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  uint64_t db = 0;
  for (int k = 0; k < 8; k++) db |= (uint64_t)data[k] << (8 * k);
  int64_t data_bytes = (int64_t)(db & (((uint64_t)1 << 40) - 1));
  MjSt st;
  MjError e;
  if (mj_st_read(&st, (const char *)data + 8, size - 8, data_bytes, &e)) {
    PROMISE(e.off >= 0 && e.off <= (int64_t)size && memchr(e.msg, 0, sizeof e.msg));
    mj_st_free(&st);
    return 0;
  }
  int64_t total = 0;
  for (int i = 0; i < st.n; i++) {
    const MjStTensor *t = &st.t[i];
    PROMISE(t->dsize == mj_st_dtype_size(t->dtype) && t->dsize > 0);
    PROMISE(t->rank >= 0 && t->rank <= MJ_ST_MAX_RANK);
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) PROMISE(t->shape[d] >= 0 && !__builtin_mul_overflow(n, t->shape[d], &n));
    PROMISE(n == t->numel && t->begin >= 0 && t->end - t->begin == n * t->dsize && t->end <= data_bytes);
    PROMISE(strlen(t->name) < size);
    total += t->end - t->begin;
  }
  PROMISE(total == data_bytes);
  /* the trainer's metadata walk: keys and values copied, then looked up and parsed */
  if (st.meta) {
    PROMISE(st.meta->kind == MJ_OBJ && st.meta->n <= MJ_ST_MAX_META);
    for (int k = 0; k < st.meta->n; k++) {
      const MjVal *v = &st.meta->u.items[k];
      PROMISE(v->kind == MJ_STR && (size_t)v->n == strlen(v->u.s));
      char key[24], val[2048];
      snprintf(key, sizeof key, "%s", v->key);
      snprintf(val, sizeof val, "%s", v->u.s);
      if (!strcmp(key, "step") || !strcmp(key, "lr")) {
        char *end;
        (void)strtoll(val, &end, 10);
        (void)strtod(val, &end);
      }
    }
    (void)mj_get(st.meta, "plan");
  }
  mj_st_free(&st);
  return 0;
}
