/* trainer_npy.c: the trainer program's NumPy .npy data (--npy DIR) (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// data: NumPy .npy files (--npy DIR; the conventions are in memplan_trainer.h)

/* The loaded splits and the file being parsed stay reachable from here, so
 * that an error's exit leaves nothing a leak checker would call lost. */
NpySet npy_train, npy_test;
static unsigned char *npy_file;

/* "(8000, 1, 28, 28)"; with sym, "(S, 784)": axis 0 written as sym. */
static const char *npy_fmt_shape(char *buf, size_t n, const int64_t *d, int rank, const char *sym) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++) {
    if (i == 0 && sym) k += (size_t)snprintf(buf + k, n - k, "%s", sym);
    else k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  }
  if (k < n) snprintf(buf + k, n - k, "%s)", rank == 1 ? "," : "");
  return buf;
}

/* DIR/SPLIT/NAME.npy for input `in` into a (a->path set): the header read and
 * checked against the input (dtype, per-sample shape, size), then every
 * value (finite floats; labels and token ids in range) into a->v. */
static void load_npy(NpyArray *a, const TrInput *in, const TrModel *m) {
  const char *path = a->path;
  int64_t size;
  npy_file = read_file(path, &size, ".npy");
  const unsigned char *b = npy_file;
  if (size < 10 || memcmp(b, "\x93NUMPY", 6))
    die("%s: not a .npy file: it does not start with the magic \\x93NUMPY (%lld bytes)", path, (long long)size);
  int major = b[6], minor = b[7], wide = major >= 2;
  if (major < 1 || major > 3 || minor != 0)
    die("%s: .npy format version %d.%d: the trainer reads versions 1.0, 2.0 and 3.0", path, major, minor);
  int64_t hlen = wide ? (size >= 12 ? (int64_t)le32(b + 8) : -1) : (int64_t)(b[8] | b[9] << 8);
  int64_t start = (wide ? 12 : 10) + hlen;
  if (hlen < 0 || start > size)
    die("%s: truncated: the header should end at byte %lld, the file has %lld bytes", path,
        (long long)(hlen < 0 ? 12 : start), (long long)size);
  MjNpy hd;
  MjError err;
  if (mj_npy_header((const char *)b + (wide ? 12 : 10), (size_t)hlen, &hd, &err)) {
    if (!strncmp(err.msg, "structured dtype", 16))
      die("%s: a structured dtype (descr is a list): input '%s' needs a plain array", path, in->name);
    die("%s: malformed .npy header at byte %lld: %s", path, (long long)err.off + (wide ? 12 : 10), err.msg);
  }
  const char *descr = hd.descr;
  int fortran = hd.fortran, rank = hd.rank;
  const int64_t *shape = hd.shape;
  if (fortran)
    die("%s: fortran_order is True (column-major data): the trainer reads row-major arrays; save "
        "np.ascontiguousarray(a) instead",
        path);
  int f32 = in->dtype == TR_F32;
  int item = f32 ? (!strcmp(descr, "<f4") ? 4 : 0) : !strcmp(descr, "<i4") ? 4 : !strcmp(descr, "<i8") ? 8 : 0;
  if (!item)
    die("%s: dtype '%s', but input '%s' of %s is %s and needs %s", path, descr, in->name, m->model, f32 ? "f32" : "i32",
        f32 ? "'<f4' (little-endian float32: a.astype('<f4'))"
            : "'<i4' or '<i8' (little-endian int32 or int64: a.astype('<i4'))");
  int ok = in->rank >= 1 && rank == in->rank;
  for (int d = 1; ok && d < rank; d++) ok = shape[d] == in->shape[d];
  if (!ok) {
    char have[160], need[160], each[160];
    die("%s: shape %s, but input '%s' of %s needs %s: S samples of shape %s", path,
        npy_fmt_shape(have, sizeof have, shape, rank, NULL), in->name, m->model,
        npy_fmt_shape(need, sizeof need, in->shape, in->rank, "S"),
        npy_fmt_shape(each, sizeof each, in->shape + 1, in->rank - 1, NULL));
  }
  if (shape[0] < 1) die("%s: no samples (shape[0] is 0)", path);
  int64_t need = item;
  for (int d = 0; d < rank; d++) need = need > ((int64_t)1 << 62) / shape[d] ? ((int64_t)1 << 62) : need * shape[d];
  if (size - start != need) {
    char have[160];
    die("%s: %s: %lld bytes of data after the header, but shape %s of '%s' needs %lld", path,
        size - start < need ? "truncated" : "longer than its header says", (long long)(size - start),
        npy_fmt_shape(have, sizeof have, shape, rank, NULL), descr, (long long)need);
  }
  a->n = shape[0], a->cols = in->cols;
  int64_t count = a->n * a->cols, bound = in->kind == TR_IN_LABELS ? m->classes : m->vocab;
  a->v = xmalloc((size_t)count * 4, "the .npy data");
  const unsigned char *src = b + start;
  for (int64_t k = 0; k < count; k++) {
    if (f32) {
      uint32_t u = le32(src + 4 * k);
      float f;
      memcpy(&f, &u, 4);
      if (!isfinite(f))
        die("%s: sample %lld, element %lld is %s: inputs must be finite", path, (long long)(k / a->cols),
            (long long)(k % a->cols),
            isnan(f) ? "nan"
            : f > 0  ? "inf"
                     : "-inf");
      ((float *)a->v)[k] = f;
      continue;
    }
    int64_t v = item == 4 ? (int64_t)(int32_t)le32(src + 4 * k)
                          : (int64_t)((uint64_t)le32(src + 8 * k) | (uint64_t)le32(src + 8 * k + 4) << 32);
    if (v < 0 || v >= bound) {
      char at[64] = "";
      if (a->cols > 1) snprintf(at, sizeof at, ", element %lld", (long long)(k % a->cols));
      die("%s: value %lld at sample %lld%s is out of range: input '%s' of %s holds %s, 0 <= value < %lld", path,
          (long long)v, (long long)(k / a->cols), at, in->name, m->model,
          in->kind == TR_IN_LABELS ? "class labels" : "token ids", (long long)bound);
    }
    ((int32_t *)a->v)[k] = (int32_t)v;
  }
  free(npy_file);
  npy_file = NULL;
}

/* The .npy files of one split, DIR/SPLIT/<input>.npy for every input of a
 * schedule, each with the same number of samples. */
void load_npy_set(NpySet *s, const char *dir, const char *split, const TrInput *in, int nin, const TrModel *m) {
  size_t dn = strlen(dir) + strlen(split) + 2;
  char *sub = xmalloc(dn, "a path"), names[256] = "";
  snprintf(sub, dn, "%s/%s", dir, split);
  for (int k = 0; k < nin; k++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s.npy", k ? ", " : "", in[k].name);
  struct stat st;
  int rc = stat(sub, &st), e = errno;
  if (rc != 0 || !S_ISDIR(st.st_mode))
    die("--npy %s: %s: %s; it needs %s/train and %s/test, each with one .npy file per input of %s: %s", dir, sub,
        rc != 0 ? strerror(e) : "not a directory", dir, dir, m->model, names);
  s->a = xmalloc(sizeof(NpyArray) * (size_t)(nin ? nin : 1), "the .npy inputs");
  memset(s->a, 0, sizeof(NpyArray) * (size_t)(nin ? nin : 1));
  s->na = nin;
  for (int k = 0; k < nin; k++) {
    size_t pn = dn + strlen(in[k].name) + 6;
    s->a[k].path = xmalloc(pn, "a path");
    snprintf(s->a[k].path, pn, "%s/%s.npy", sub, in[k].name);
    if (stat(s->a[k].path, &st) != 0)
      die("cannot open %s: %s (--npy %s reads %s/%s/<input>.npy for every input of %s: %s)", s->a[k].path,
          strerror(errno), dir, dir, split, m->model, names);
    load_npy(&s->a[k], &in[k], m);
    if (s->a[k].n != s->a[0].n)
      die("%s has %lld samples but %s has %lld: the inputs of a split need one entry per sample", s->a[k].path,
          (long long)s->a[k].n, s->a[0].path, (long long)s->a[0].n);
  }
  s->n = nin ? s->a[0].n : 0;
  free(sub);
}

/* Row r of every input from sample (first + r) mod n of the split. */
void fill_npy_rows(unsigned char *arena, const TrInput *in, int nin, const NpySet *s, int64_t first) {
  for (int k = 0; k < nin; k++) {
    size_t row = (size_t)in[k].cols * 4;
    for (int64_t r = 0; r < in[k].rows; r++)
      memcpy(arena + in[k].offset + (size_t)r * row,
             (const unsigned char *)s->a[k].v + (size_t)((first + r) % s->n) * row, row);
  }
}

/* Micro-batch mb of the current training window (Order) for this rank: its
 * rows (rank*micro + mb)*B .. + B - 1 (data parallelism: the window holds
 * every rank's micro-batches, memplan_trainer.h). */
void fill_npy_batch(unsigned char *arena, const TrInput *in, int nin, const NpySet *s, const Order *o, int mb,
                    int micro, int rank) {
  int64_t first = ((int64_t)rank * micro + mb) * in[0].rows;
  for (int k = 0; k < nin; k++) {
    size_t row = (size_t)in[k].cols * 4;
    for (int64_t r = 0; r < in[k].rows; r++)
      memcpy(arena + in[k].offset + (size_t)r * row,
             (const unsigned char *)s->a[k].v + (size_t)order_item(o, first + r) * row, row);
  }
}
