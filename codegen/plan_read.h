/* plan_read.h: plan.json back into a Plan (plan_read.c). */
#ifndef MEMPLAN_PLAN_READ_H
#define MEMPLAN_PLAN_READ_H

#include <stddef.h>

#include "plan.h"

/* Parses text (len bytes, the contents of path) as a plan.json of format
 * PLAN_FORMAT_VERSION or older, into a Plan allocated in ar. Malformed JSON,
 * a foreign file, a newer format, a missing or mistyped field and an
 * out-of-range id or size are user errors (diag_error, path:line:col).
 * Every index the Plan holds is in range; whether its packing is sound is
 * left to verify_plan. */
Plan *plan_read(Arena *ar, const char *path, const char *text, size_t len);

/* One tensor of a safetensors header: its data is bytes [begin, end) after
 * the header. */
#define ST_MAX_RANK 8
typedef struct {
  const char *name, *dtype; /* "F32", "F16", "BF16", ... as written */
  int rank;
  int64_t shape[ST_MAX_RANK];
  int64_t begin, end;
} StTensor;

/* Parses a safetensors header (json: the len bytes after the file's u64
 * length; an object of name -> {dtype, shape, data_offsets}, "__metadata__"
 * skipped; data_bytes: the file's bytes after the header) into *n tensors
 * in file order, allocated in ar. Every check of the trainers' reader
 * (runtime/memplan_json.c: mj_st_read): known dtypes, rank <= 8, element
 * and byte counts without overflow, data_offsets that cover the data
 * exactly, no duplicate names. A failure is a user error (diag_error)
 * naming path, the byte and what is wrong. */
StTensor *st_read_header(Arena *ar, const char *path, const char *json, size_t len, int64_t data_bytes, int *n);

/* A small JSON document (a Hugging Face config.json or shard index) as a flat
 * list of its scalar values, each under its path: object keys and array
 * indices joined by '/' ("rope_scaling/factor", "architectures/0",
 * "weight_map/model.norm.weight"), in document order. Containers give no
 * field of their own, an empty one none. Malformed JSON is a user error
 * (diag_error, path:line:col). The same JSON reader as plan_read. */
typedef enum { JF_NULL, JF_BOOL, JF_NUM, JF_STR } JsonFieldKind;
typedef struct {
  const char *key;
  JsonFieldKind kind;
  bool b;
  double num;
  const char *s;
  Loc loc;
} JsonField;
JsonField *json_read_fields(Arena *ar, const char *path, const char *text, size_t len, int *n);

#endif
