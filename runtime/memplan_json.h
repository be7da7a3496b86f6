/* memplan_json.h: the one reader of untrusted file headers, shared by memplan
 * (plan.json, import-hf's safetensors header) and every trainer (--load and
 * --resume safetensors headers, .npy headers). Nothing but the C library.
 *
 *   mj_parse     strict JSON (RFC 8259) into a tree: a depth limit, a size
 *                limit and a limit on the number of values; duplicate keys
 *                refused (a hash per object: linear time); \u0000, raw
 *                control bytes and invalid UTF-8 in strings refused; nothing
 *                but whitespace after the value; numbers checked against
 *                JSON's grammar without reading past the buffer.
 *   mj_st_read   a safetensors header on it: every entry {dtype, shape,
 *                data_offsets} checked, the data section exactly covered.
 *   mj_npy_header  a .npy header's dict.
 * Errors: a message and the byte offset it is about; nothing is printed and
 * nothing exits, the caller names the file. */
#ifndef MEMPLAN_JSON_H
#define MEMPLAN_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { MJ_NULL, MJ_BOOL, MJ_NUM, MJ_STR, MJ_ARR, MJ_OBJ } MjKind;

typedef struct MjVal MjVal;
struct MjVal {
  uint8_t kind;       /* MjKind */
  uint8_t is_int;     /* MJ_NUM: an integer literal that fits int64 (in u.i); else u.num */
  uint8_t b;          /* MJ_BOOL */
  int32_t n;          /* MJ_ARR, MJ_OBJ: items; MJ_STR: bytes */
  uint32_t off, koff; /* byte offsets in the text (under 4 GiB): the value, its key (an object's item) */
  const char *key;    /* an object's item: its key (NUL-free UTF-8) */
  union {
    int64_t i;
    double num;
    const char *s;      /* MJ_STR, NUL-terminated */
    const MjVal *items; /* MJ_ARR, MJ_OBJ: n of them, in order */
    size_t first;       /* (while parsing) */
  } u;
};

typedef struct {
  int max_depth;      /* containers nested at most this deep */
  int64_t max_bytes;  /* the text's length */
  int64_t max_values; /* values in all (bounds the memory: 40 bytes each) */
} MjLimits;

typedef struct {
  int64_t off; /* the byte the message is about */
  char msg[320];
} MjError;

typedef struct {
  MjVal *vals;
  char *pool;
  const MjVal *root;
} MjDoc;

/* 0: *d holds the tree (mj_free it); -1: *e says what and where (and *d
 * holds nothing). */
int mj_parse(MjDoc *d, const char *text, size_t len, const MjLimits *lim, MjError *e);
void mj_free(MjDoc *d);
/* The item of object obj with key key, or NULL (a scan: objects are small). */
const MjVal *mj_get(const MjVal *obj, const char *key);
double mj_num(const MjVal *v);           /* MJ_NUM as a double */
extern const char *const mj_kind_name[]; /* "null", "a boolean", "a number", ... */

/* ---- safetensors ---- */
enum { MJ_ST_MAX_RANK = 8, MJ_ST_MAX_META = 1024 };
#define MJ_ST_MAX_HEADER ((int64_t)100 << 20) /* the safetensors library's own limit */

typedef struct {
  const char *name, *dtype; /* "F32", "BF16", ... (safetensors' names) */
  int rank, dsize;          /* dsize: bytes per element */
  int64_t shape[MJ_ST_MAX_RANK];
  int64_t begin, end, numel; /* data_offsets: [begin, end) after the header */
  int64_t off;               /* the entry's byte offset in the header */
} MjStTensor;

typedef struct {
  MjDoc doc;
  MjStTensor *t; /* in file order */
  int n;
  const MjVal *meta; /* "__metadata__": an object of strings, or NULL */
} MjSt;

/* The header's len bytes (after the file's u64 length); data_bytes: the file's
 * bytes after the header. 0, or -1 with *e set; mj_st_free either way. */
int mj_st_read(MjSt *st, const char *hdr, size_t len, int64_t data_bytes, MjError *e);
void mj_st_free(MjSt *st);
int mj_st_dtype_size(const char *dtype); /* 0: not a safetensors dtype */

/* ---- .npy ---- */
enum { MJ_NPY_MAX_RANK = 16 };
typedef struct {
  char descr[32];
  int fortran, rank;
  int64_t shape[MJ_NPY_MAX_RANK];
} MjNpy;

/* The header dict's len bytes ({'descr': '<f4', 'fortran_order': False,
 * 'shape': (8000, 784), }, padded with spaces and a newline). 0, or -1 with
 * *e set ("structured dtype" when descr is a list). */
int mj_npy_header(const char *text, size_t len, MjNpy *h, MjError *e);

#endif
