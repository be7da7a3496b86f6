/* trainer_params.c: the trainer program's parameters: initialization, safetensors files (save, load, quantized loads)
 * (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// parameters: initialization, safetensors

/* What a weights file holds: the parameters, then the running state. */
int nsaved(const TrModel *m) { return m->nparams + m->nstates; }
const TrParam *saved_at(const TrModel *m, int i) { return i < m->nparams ? &m->params[i] : &m->states[i - m->nparams]; }

/* Running state starts at its init (zeros or ones); the seed plays no part. */
void init_states(unsigned char *arena, const TrModel *m) {
  for (int i = 0; i < m->nstates; i++) {
    const TrParam *p = &m->states[i];
    float *w = (float *)(arena + p->offset);
    for (int64_t k = 0; k < p->numel; k++) w[k] = p->init == TR_INIT_ONES ? 1.0f : 0.0f;
  }
}

/* Frozen weights' storage (memplan_kernels.h): elements k0 .. k0 + n - 1 of
 * parameter p (k0 and n whole rows for int8, whole blocks of RT_NF4_BLOCK
 * for NF4, the last chunk excepted) from fp32 values w, into codes (p's
 * storage, from its start) and absmax (its absmax tensor, from its start).
 * The code of x is the nearest of x / absmax, in double, ties to the lower;
 * an all-zero row or block has absmax 0 and every code 0.0's. */
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static int nearest_code(const float *table, int ncodes, double r) {
  int c = 0;
  while (c + 1 < ncodes && r > ((double)table[c] + (double)table[c + 1]) / 2) c++;
  return c;
}
static void quantize(const TrParam *p, const float *w, int64_t k0, int64_t n, unsigned char *codes, float *absmax) {
  static const float nf4[16] = RT_NF4_TABLE;
  if (p->store == TR_STORE_BF16) {
    for (int64_t k = 0; k < n; k++) ((uint16_t *)codes)[k0 + k] = f32_to_bf16(w[k]);
    return;
  }
  int64_t group = p->store == TR_STORE_I8 ? (p->rank ? p->shape[p->rank - 1] : 1) : RT_NF4_BLOCK;
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    int64_t len = n - g0 < group ? n - g0 : group;
    float a = 0.0f;
    for (int64_t k = 0; k < len; k++) a = fabsf(w[g0 + k]) > a ? fabsf(w[g0 + k]) : a;
    absmax[(k0 + g0) / group] = a;
    for (int64_t k = 0; k < len; k++) {
      double r = a > 0.0f ? (double)w[g0 + k] / (double)a : 0.0;
      int64_t at = k0 + g0 + k;
      if (p->store == TR_STORE_I8) ((int8_t *)codes)[at] = (int8_t)lrint(127.0 * r);
      else {
        int c = nearest_code(nf4, 16, r), shift = at % 2 ? 0 : 4;
        codes[at / 2] = (unsigned char)((codes[at / 2] & ~(15 << shift)) | (c << shift));
      }
    }
  }
}

/* Elements a chunk of quantize() takes: whole rows (int8) or blocks. */
static int64_t quant_chunk(const TrParam *p) {
  int64_t cols = p->store == TR_STORE_I8 && p->rank ? p->shape[p->rank - 1] : RT_NF4_BLOCK;
  int64_t rows = cols ? ((int64_t)1 << 20) / cols : 1;
  return cols * (rows ? rows : 1);
}

void init_params(unsigned char *arena, const TrModel *m, uint64_t seed) {
  for (int i = 0; i < m->nparams; i++) {
    const TrParam *p = &m->params[i];
    if (p->store == TR_STORE_ABSMAX) continue; /* its weight's quantize() writes it */
    int q = p->store != TR_STORE_F32;
    int64_t chunk = q ? quant_chunk(p) : p->numel;
    float *w =
        q ? xmalloc(sizeof(float) * (size_t)(chunk ? chunk : 1), "a weight's chunk") : (float *)(arena + p->offset);
    Rng r = {.s = mix64(seed) ^ mix64((uint64_t)i + 1)}; // one stream per parameter
    for (int64_t k0 = 0; k0 < p->numel; k0 += chunk) {
      int64_t n = p->numel - k0 < chunk ? p->numel - k0 : chunk;
      for (int64_t k = 0; k < n; k++) {
        switch (p->init) {
        case TR_INIT_NORMAL: w[k] = (float)(p->scale * rng_normal(&r)); break;
        case TR_INIT_UNIFORM: w[k] = (float)(p->scale * (2.0 * rng_uniform(&r) - 1.0)); break;
        case TR_INIT_ONES: w[k] = 1.0f; break;
        default: w[k] = 0.0f; break;
        }
      }
      if (q)
        quantize(p, w, k0, n, arena + p->offset,
                 p->absmax >= 0 ? (float *)(arena + m->params[p->absmax].offset) : NULL);
    }
    if (q) free(w);
  }
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* safetensors: u64 header length N, N bytes of JSON (padded with spaces to a
 * multiple of 8), then the tensors' bytes; F32, little-endian, row-major.
 * Written to a temp file, synced, then renamed over path. */

/* Temp files PATH.tmp.PID that a process killed inside a save left behind
 * (PID no longer running): removed after a save succeeded. Only this
 * pattern, only dead writers; a failure here is harmless. */
static void remove_stale_temps(const char *path) {
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  int dn = slash && slash > path ? (int)(slash - path) : 1; /* "dir", "/" or "." */
  char *dir = xmalloc((size_t)dn + 1, "a path");
  snprintf(dir, (size_t)dn + 1, "%.*s", dn, slash ? path : ".");
  DIR *d = opendir(dir);
  size_t bn = strlen(base);
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
    char *end;
    if (strncmp(e->d_name, base, bn) || strncmp(e->d_name + bn, ".tmp.", 5)) continue;
    long pid = strtol(e->d_name + bn + 5, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    size_t fn = strlen(dir) + strlen(e->d_name) + 2;
    char *f = xmalloc(fn, "a path");
    snprintf(f, fn, "%s/%s", dir, e->d_name);
    remove(f);
    free(f);
  }
  if (d) closedir(d);
  free(dir);
}

/* The temp file a save writes before it renames it over path: PATH.tmp.PID. */
static char *temp_name(const char *path) {
  size_t tn = strlen(path) + 32;
  char *tmp = xmalloc(tn, "a path");
  snprintf(tmp, tn, "%s.tmp.%ld", path, (long)getpid());
  return tmp;
}

/* --save, checked before the first step: the save creates its temp file in
 * PATH's directory and renames it over PATH, so create (and remove) that same
 * temp file now, and refuse a PATH that is a directory; a run must not train
 * for hours and then fail to write. */
void check_save_path(const char *path) {
  struct stat st;
  if (!*path) die("--save '': expected a file name");
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) die("cannot write --save %s: it is a directory", path);
  char *tmp = temp_name(path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    int e = errno;
    die("cannot write --save %s: %s (checked by creating %s)", path, strerror(e), tmp);
  }
  close(fd);
  remove(tmp);
  free(tmp);
}

void shape_str(char *buf, size_t n, int rank, const int64_t *d) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Checkpoints (the format: memplan_trainer.h). Every tensor a checkpoint
 * holds: the parameters, the running state, then the optimizer state (raw
 * bytes in its own dtype). */
enum { CK_PARAM, CK_STATE, CK_OPT };

__attribute__((format(printf, 3, 4))) void meta_set(Meta *mt, const char *key, const char *fmt, ...) {
  if (mt->n == META_MAX) die("internal: too many metadata entries");
  snprintf(mt->key[mt->n], META_KEY, "%s", key);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mt->val[mt->n], META_VAL, fmt, ap);
  va_end(ap);
  mt->n++;
}

const char *meta_get(const Meta *mt, const char *key) {
  for (int i = 0; i < mt->n; i++)
    if (!strcmp(mt->key[i], key)) return mt->val[i];
  return NULL;
}

/* The tensors, and a device's staging buffer (at most TR_STAGE_BYTES): set
 * up once, before the first step, so that saving inside the training loop
 * needs no memory for the tensors. */
#define TR_STAGE_BYTES ((int64_t)64 << 20)
CkTable ck;

/* Buffers of one load or save, reachable from here while they live, so that
 * an error's exit leaves nothing a leak checker would call lost. */
CkIo ck_io;

/* with_opt 0: the weights and running state only (a ZeRO run's ranks each
 * hold a shard of the optimizer state, which is not saved). */
void ck_setup(const TrModel *m, int with_opt) {
  ck.n = nsaved(m) + (with_opt ? m->nopt_states : 0);
  ck.t = xmalloc(sizeof(CkTensor) * (size_t)(ck.n ? ck.n : 1), "the checkpoint table");
  int64_t most = 0;
  for (int i = 0; i < ck.n; i++) {
    CkTensor *c = &ck.t[i];
    if (i < nsaved(m)) {
      const TrParam *p = saved_at(m, i);
      static const char *const dt[] = {"F32", "BF16", "I8", "U8", "F32"}; /* by TR_STORE_* */
      *c = (CkTensor){
          p->name,  p->offset,           p->bytes, p->numel, "", p->rank, i < m->nparams ? CK_PARAM : CK_STATE,
          p->shape, {(p->numel + 1) / 2}};
      snprintf(c->dtype, sizeof c->dtype, "%s", dt[p->store]);
      if (p->store == TR_STORE_NF4) c->rank = 1, c->shape = c->packed;
    } else {
      const TrOptState *p = &m->opt_states[i - nsaved(m)];
      int64_t numel = 1;
      for (int d = 0; d < p->rank; d++) numel *= p->shape[d];
      *c = (CkTensor){p->name, p->offset, p->bytes, numel, "", p->rank, CK_OPT, p->shape, {0}};
      for (int k = 0; k < 7 && p->dtype[k]; k++)
        c->dtype[k] = (char)(p->dtype[k] >= 'a' && p->dtype[k] <= 'z' ? p->dtype[k] - 32 : p->dtype[k]);
    }
    if (c->bytes > most) most = c->bytes;
  }
  if (m->device) {
    ck.stage_bytes = most < TR_STAGE_BYTES ? most : TR_STAGE_BYTES;
    ck.stage = xmalloc((size_t)(ck.stage_bytes ? ck.stage_bytes : 1), "the checkpoint staging buffer");
  }
}

/* Writes the checkpoint: the header (metadata first, then the tensors in
 * table order), then their bytes, from the host arena, or on a device
 * through the staging buffer. To a temp file, synced, renamed over path,
 * and the directory synced: a crash leaves the old file or the new one. */
void save_checkpoint(const char *path, const Meta *mt, const unsigned char *arena, const TrDevice *dev) {
  size_t hn = 0;
  FILE *h = open_memstream(&ck_io.hdr, &hn);
  if (!h) die("cannot build the safetensors header: %s", strerror(errno));
  fprintf(h, "{\"__metadata__\":{");
  for (int i = 0; i < mt->n; i++) {
    if (i) fputc(',', h);
    json_str(h, mt->key[i]);
    fputc(':', h);
    json_str(h, mt->val[i]);
  }
  fputc('}', h);
  int64_t off = 0;
  for (int i = 0; i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    fputc(',', h);
    json_str(h, c->name);
    fprintf(h, ":{\"dtype\":\"%s\",\"shape\":[", c->dtype);
    for (int d = 0; d < c->rank; d++) fprintf(h, "%s%lld", d ? "," : "", (long long)c->shape[d]);
    fprintf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + c->bytes));
    off += c->bytes;
  }
  fputc('}', h);
  while ((ftell(h) % 8) != 0) fputc(' ', h);
  fclose(h);
  char *tmp = ck_io.tmp = temp_name(path);
  FILE *f = fopen(tmp, "wb");
  if (!f) die("cannot write %s: %s", tmp, strerror(errno));
  unsigned char len[8];
  for (int k = 0; k < 8; k++) len[k] = (unsigned char)((uint64_t)hn >> (8 * k));
  int ok = fwrite(len, 1, 8, f) == 8 && fwrite(ck_io.hdr, 1, hn, f) == hn;
  for (int i = 0; ok && i < ck.n; i++) {
    const CkTensor *c = &ck.t[i];
    if (!dev) {
      ok = fwrite(arena + c->offset, 1, (size_t)c->bytes, f) == (size_t)c->bytes;
      continue;
    }
    for (int64_t at = 0; ok && at < c->bytes; at += ck.stage_bytes) {
      int64_t n = c->bytes - at < ck.stage_bytes ? c->bytes - at : ck.stage_bytes;
      dev->download_to(ck.stage, arena, c->offset + at, n);
      ok = fwrite(ck.stage, 1, (size_t)n, f) == (size_t)n;
    }
  }
  ok = fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    die("cannot write %s: %s", path, strerror(e));
  }
  const char *slash = strrchr(path, '/');
  char *dir = xmalloc(slash ? (size_t)(slash - path) + 2 : 2, "a path");
  snprintf(dir, slash ? (size_t)(slash - path) + 2 : 2, "%.*s", slash ? (int)(slash - path + (slash == path)) : 1,
           slash ? path : ".");
  int dfd = open(dir, O_RDONLY);
  if (dfd >= 0) fsync(dfd), close(dfd); /* the rename itself on disk; a failure here loses nothing written */
  free(dir);
  free(tmp);
  free(ck_io.hdr);
  ck_io.tmp = ck_io.hdr = NULL;
  remove_stale_temps(path);
}

/* A loaded f32 tensor that holds NaN or Inf would only show up steps later as
 * a non-finite loss; name the tensor and the element (flat and per
 * dimension). Optimizer state too, and AdamW's second moment (.adam_v, a mean
 * of squares) must not be negative. w holds elements k0 .. k0 + count - 1 of
 * it; where: the file, or the step (check_run_finite); then ends the message. */
void check_finite(const char *where, const CkTensor *c, const float *w, int64_t k0, int64_t count, const char *then) {
  size_t nl = strlen(c->name);
  int second_moment = c->kind == CK_OPT && nl > 7 && !strcmp(c->name + nl - 7, ".adam_v");
  uint32_t bad = 0; /* first a branch-free pass (it vectorizes): an exponent of all ones is Inf or NaN */
  for (int64_t i = 0; i < count; i++) {
    uint32_t u;
    memcpy(&u, &w[i], 4);
    bad |= (u & 0x7f800000u) == 0x7f800000u || (second_moment && u >> 31);
  }
  if (!bad) return;
  int64_t i = 0;
  while (i < count && isfinite(w[i]) && !(second_moment && w[i] < 0)) i++;
  if (i == count) return;
  int64_t k = k0 + i, at[6] = {0}, rest = k;
  for (int d = c->rank - 1; d >= 0; d--) {
    at[d] = c->shape[d] ? rest % c->shape[d] : 0;
    rest = c->shape[d] ? rest / c->shape[d] : 0;
  }
  char idx[128], val[32];
  shape_str(idx, sizeof idx, c->rank, at);
  snprintf(val, sizeof val, "%g", (double)w[i]);
  die("%s: tensor '%s' has a %s: element %lld (index %s) is %s%s", where, c->name,
      isfinite(w[i])      ? "negative value, and it is AdamW's second moment (a mean of squares)"
      : c->kind == CK_OPT ? "non-finite value"
                          : "non-finite weight",
      (long long)k, idx, val, then);
}

/* n bytes at file offset off into dst; a short file is an error naming the tensor. */
static void read_at(int fd, void *dst, int64_t n, int64_t off, const char *path, const char *name) {
  unsigned char *p = dst;
  while (n > 0) {
    ssize_t k = pread(fd, p, (size_t)n, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      die("%s: cannot read tensor '%s': %s", path, name, k < 0 ? strerror(errno) : "the file ended early (truncated?)");
    p += k, off += k, n -= k;
  }
}

/* A checkpoint's header, read without its data and checked whole by the
 * project's one safetensors reader (mj_st_read: the JSON, every entry, the
 * data section exactly covered): the entries, and the metadata into mt
 * (when not NULL). Returns the entries (*n of them, alive in ck_io.st until
 * mj_st_free) and sets *data0 (where the data starts) and *size. */
CkEntry *read_header(int fd, const char *path, const char *what, Meta *mt, int *n, int64_t *data0, int64_t *size) {
  struct stat st;
  if (fstat(fd, &st) != 0) die("cannot read %s file %s: %s", what, path, strerror(errno));
  if (S_ISDIR(st.st_mode)) die("cannot read %s file %s: it is a directory", what, path);
  *size = (int64_t)st.st_size;
  if (*size < 8) die("%s: too short for a safetensors file (%lld bytes)", path, (long long)*size);
  unsigned char len[8];
  read_at(fd, len, 8, 0, path, "(the header length)");
  uint64_t hn = 0;
  for (int k = 0; k < 8; k++) hn |= (uint64_t)len[k] << (8 * k);
  if (hn > (uint64_t)*size - 8)
    die("%s: header length %llu runs past the end of the file (truncated?)", path, (unsigned long long)hn);
  if (hn > (uint64_t)MJ_ST_MAX_HEADER)
    die("%s: a header of %llu bytes, over the 100 MiB a safetensors header may have (not a checkpoint?)", path,
        (unsigned long long)hn);
  *data0 = 8 + (int64_t)hn;
  char *hdr = ck_io.hdr = xmalloc((size_t)hn + 1, "the safetensors header");
  read_at(fd, hdr, (int64_t)hn, 8, path, "(the header)");
  MjError err;
  if (mj_st_read(&ck_io.st, hdr, (size_t)hn, *size - *data0, &err))
    die("%s: malformed safetensors header at byte %lld: %s", path, (long long)err.off + 8, err.msg);
  free(hdr);
  ck_io.hdr = NULL;
  const MjVal *meta = ck_io.st.meta;
  if (mt && meta) {
    if (meta->n > META_MAX)
      die("%s: __metadata__ holds %d entries; a trainer checkpoint has at most %d (not a checkpoint of this trainer?)",
          path, meta->n, META_MAX);
    for (int k = 0; k < meta->n; k++) {
      const MjVal *v = &meta->u.items[k];
      if (strlen(v->key) >= META_KEY || v->n >= META_VAL)
        die("%s: __metadata__ '%.100s': a key over %d bytes or a value over %d bytes (not a checkpoint of this "
            "trainer?)",
            path, v->key, META_KEY - 1, META_VAL - 1);
      snprintf(mt->key[mt->n], META_KEY, "%s", v->key);
      snprintf(mt->val[mt->n++], META_VAL, "%s", v->u.s);
    }
  }
  *n = ck_io.st.n;
  return ck_io.st.t;
}

/* A frozen weight that the plan stores quantized, given in the file as F32
 * (or BF16 for int8 and NF4): read in chunks, checked finite, quantized into
 * its storage and its absmax (on a device through host copies of both). */
static int quantizes(const TrParam *p, const CkEntry *e) {
  return (p->store == TR_STORE_BF16 || p->store == TR_STORE_I8 || p->store == TR_STORE_NF4) &&
         (!strcmp(e->dtype, "F32") || (!strcmp(e->dtype, "BF16") && p->store != TR_STORE_BF16));
}
static void load_quantized(int fd, const char *path, const CkEntry *e, int64_t data0, unsigned char *arena,
                           const TrModel *m, const TrParam *p) {
  int bf = !strcmp(e->dtype, "BF16"), same = e->rank == p->rank;
  for (int d = 0; same && d < e->rank; d++) same = e->shape[d] == p->shape[d];
  if (!same) {
    char got[128], want[128];
    shape_str(got, sizeof got, e->rank, e->shape);
    shape_str(want, sizeof want, p->rank, p->shape);
    die("%s: shape mismatch for tensor '%s': the file has %s, the model needs %s", path, e->name, got, want);
  }
  if (e->end - e->begin != (bf ? 2 : 4) * p->numel)
    die("%s: tensor '%s': data_offsets [%lld, %lld] do not hold its %lld %s elements", path, e->name,
        (long long)e->begin, (long long)e->end, (long long)p->numel, e->dtype);
  const TrDevice *dev = m->device;
  const TrParam *a = p->absmax >= 0 ? &m->params[p->absmax] : NULL;
  unsigned char *codes = dev ? xmalloc((size_t)p->bytes, "a weight's codes") : arena + p->offset;
  float *am = !a ? NULL : dev ? xmalloc((size_t)a->bytes, "a weight's absmax") : (float *)(arena + a->offset);
  int64_t chunk = quant_chunk(p);
  float *w = xmalloc(sizeof(float) * (size_t)chunk, "a weight's chunk");
  uint16_t *h = bf ? xmalloc(sizeof(uint16_t) * (size_t)chunk, "a weight's chunk") : NULL;
  CkTensor c = {p->name, p->offset, 4 * p->numel, p->numel, "F32", p->rank, CK_PARAM, p->shape, {0}};
  for (int64_t k0 = 0; k0 < p->numel; k0 += chunk) {
    int64_t n = p->numel - k0 < chunk ? p->numel - k0 : chunk;
    if (bf) {
      read_at(fd, h, 2 * n, data0 + e->begin + 2 * k0, path, p->name);
      for (int64_t k = 0; k < n; k++) {
        uint32_t x = (uint32_t)h[k] << 16;
        memcpy(&w[k], &x, 4);
      }
    } else read_at(fd, w, 4 * n, data0 + e->begin + 4 * k0, path, p->name);
    check_finite(path, &c, w, k0, n, "");
    quantize(p, w, k0, n, codes, am);
  }
  if (dev) {
    dev->upload_from(arena, p->offset, codes, p->bytes);
    if (a) dev->upload_from(arena, a->offset, am, a->bytes);
    free(codes), free(am);
  }
  free(w), free(h);
}

/* --load (weights: parameters and running state; optimizer state and
 * metadata in the file are ignored) or --resume (every tensor), streamed:
 * each tensor read from the file straight to its arena offset, on a device
 * through the staging buffer in chunks; never a copy of the whole file.
 * --resume checked the header and metadata before (resume_opts). */
/* A LoRA adapter's parameter ("L.lora_A", "L.lora_B"): --load of a base model's weights initializes it. */
int is_adapter(const char *name) {
  size_t n = strlen(name);
  return n > 7 && (!strcmp(name + n - 7, ".lora_A") || !strcmp(name + n - 7, ".lora_B"));
}

void load_checkpoint(const char *path, unsigned char *arena, const TrModel *m, int resume) {
  const char *what = resume ? "checkpoint" : "weights";
  int fd = open_input(path, what);
  int ne;
  int64_t data0, size;
  CkEntry *ents = read_header(fd, path, what, NULL, &ne, &data0, &size);
  int need = resume ? ck.n : nsaved(m);
  char *seen = ck_io.seen = xmalloc((size_t)ck.n + 1, "flags");
  memset(seen, 0, (size_t)ck.n + 1);
  const TrDevice *dev = m->device;
  for (int x = 0; x < ne; x++) {
    const CkEntry *e = &ents[x];
    int i = 0;
    while (i < ck.n && strcmp(ck.t[i].name, e->name)) i++;
    if (i >= need) { /* --load: the optimizer state of a checkpoint is not a weight */
      if (i == ck.n)
        fprintf(stderr, "trainer: warning: %s: tensor '%s' is not a parameter of %s; ignored\n", path, e->name,
                m->model);
      continue;
    }
    const CkTensor *c = &ck.t[i];
    if (c->kind == CK_PARAM && quantizes(&m->params[i], e)) {
      load_quantized(fd, path, e, data0, arena, m, &m->params[i]);
      seen[i] = 1;
      if (m->params[i].absmax >= 0) seen[m->params[i].absmax] = 1;
      continue;
    }
    if (strcmp(e->dtype, c->dtype))
      die("%s: tensor '%s' has dtype %s; the trainer reads %s", path, e->name, e->dtype, c->dtype);
    int same = e->rank == c->rank;
    for (int d = 0; same && d < e->rank; d++) same = e->shape[d] == c->shape[d];
    if (!same) {
      char got[128], want[128];
      shape_str(got, sizeof got, e->rank, e->shape);
      shape_str(want, sizeof want, c->rank, c->shape);
      die("%s: shape mismatch for tensor '%s': the file has %s, the model needs %s", path, e->name, got, want);
    }
    if (e->end - e->begin != c->bytes) /* a dtype and shape that agree have the bytes: a check of the checks */
      die("%s: tensor '%s': data_offsets [%lld, %lld] do not hold its %lld bytes", path, e->name, (long long)e->begin,
          (long long)e->end, (long long)c->bytes);
    int f32 = !strcmp(c->dtype, "F32");
    if (!dev) {
      read_at(fd, arena + c->offset, c->bytes, data0 + e->begin, path, c->name);
      if (f32) check_finite(path, c, (const float *)(arena + c->offset), 0, c->numel, "");
    } else {
      for (int64_t at = 0; at < c->bytes; at += ck.stage_bytes) {
        int64_t n = c->bytes - at < ck.stage_bytes ? c->bytes - at : ck.stage_bytes;
        read_at(fd, ck.stage, n, data0 + e->begin + at, path, c->name);
        if (f32) check_finite(path, c, (const float *)ck.stage, at / 4, n / 4, "");
        dev->upload_from(arena, c->offset + at, ck.stage, n);
      }
    }
    seen[i] = 1;
  }
  int fresh = 0;
  for (int i = 0; i < need; i++)
    if (!seen[i] && !resume && is_adapter(ck.t[i].name)) fresh++; /* a base model's weights: new adapters */
    else if (!seen[i])
      die("%s: no tensor '%s' (the model needs every %s)", path, ck.t[i].name,
          ck.t[i].kind == CK_PARAM   ? "parameter"
          : ck.t[i].kind == CK_STATE ? "running statistic: role \"state\" in plan.json"
                                     : "optimizer state to resume: role \"optimizer_state\" in plan.json");
  if (fresh)
    printf("%s: %d LoRA adapter tensors not in the file: initialized (A Kaiming-uniform, B zeros)\n", path, fresh);
  free(seen);
  mj_st_free(&ck_io.st);
  ck_io.seen = NULL;
  close(fd);
}
