/* cli_import.c: memplan import-hf, Hugging Face GPT-2 weights renamed and
 * laid out for memplan's GPT-2 models (models/gpt2-*.yaml), ready for the
 * trainer's --load.
 *
 * The name map (HF name, with or without the "transformer." prefix -> memplan):
 *   wte.weight [V, C]                  -> wte.weight [V', C]  rows padded with zeros to the plan's V'
 *   wpe.weight [P, C]                  -> pos.weight [T, C]   the first T rows (the plan's T <= P)
 *   h.N.ln_1.weight, .bias             -> hN.ln1.weight, .bias
 *   h.N.attn.c_attn.weight [C, 3C]     -> hN.attn.qkv.weight [3C, C]  (transposed)
 *   h.N.attn.c_attn.bias [3C]          -> hN.attn.qkv.bias
 *   h.N.attn.c_proj.weight [C, C]      -> hN.attn.proj.weight (transposed)
 *   h.N.attn.c_proj.bias               -> hN.attn.proj.bias
 *   h.N.ln_2.weight, .bias             -> hN.ln2.weight, .bias
 *   h.N.mlp.c_fc.weight [C, 4C]        -> hN.fc.weight [4C, C]  (transposed)
 *   h.N.mlp.c_fc.bias                  -> hN.fc.bias
 *   h.N.mlp.c_proj.weight [4C, C]      -> hN.proj.weight [C, 4C]  (transposed)
 *   h.N.mlp.c_proj.bias                -> hN.proj.bias
 *   ln_f.weight, .bias                 -> lnf.weight, .bias
 *   lm_head.weight                     -> none: tied to wte (checked equal to wte.weight)
 *   h.N.attn.bias, h.N.attn.masked_bias -> none: the causal mask buffers of older files
 * HF's Conv1D stores its weight [in, out] and computes x @ W + b; memplan's
 * linear stores [out, in] and computes x W^T + b, hence the transposes.
 * q, k, v sit in c_attn's output columns in the order memplan's packed qkv
 * rows use (q | k | v, heads contiguous within each).
 *
 * Memory stays bounded: the output header is built from the input header
 * alone, then each tensor is copied in 1 MiB chunks, except a transposed
 * weight, held whole (the largest is GPT-2 XL's 1600 x 6400 floats, 41 MB).
 * F16 and BF16 inputs become F32. The output is written to a temporary
 * file, synced and renamed: never half written. */
#include <errno.h>
#include <math.h>
#include <unistd.h>

#include "hf.h"

const char import_help[] =
    "usage: memplan import-hf DIR -o OUT [--set B=N] [--set T=N]\n"
    "       memplan import-hf gpt2 IN.safetensors -o OUT.safetensors [--plan PLAN.json]\n"
    "  DIR: a Hugging Face Llama, Mistral, Qwen2 or GPT-2 model folder (config.json; model.safetensors,\n"
    "  or shards with model.safetensors.index.json). Writes the folder OUT (new; atomically):\n"
    "  OUT/model.yaml, a memplan model with config.json's dims, and OUT/weights.safetensors\n"
    "  under memplan's names (F32), for the trainer's --load.\n"
    "      --set B=N, --set T=N  the model's batch (default 4) and sequence length (default\n"
    "                        max_position_embeddings, at most 1024); compile's --set overrides too\n"
    "  gpt2: renames a Hugging Face GPT-2 checkpoint (model.safetensors: transformer.h.N.attn.c_attn.weight\n"
    "  and the like) to memplan's GPT-2 names (hN.attn.qkv.weight, ...), transposing the Conv1D\n"
    "  weights ([in, out] -> [out, in]); the output loads with the trainer's --load.\n"
    "  -o, --output OUT      the output folder (DIR) or memplan safetensors file (gpt2), written atomically\n"
    "      --plan PLAN.json  gpt2: the compiled model to fit (memplan compile -o DIR writes DIR/plan.json):\n"
    "                        wte's rows padded with zeros to its V (50257 -> 50304), wpe cut to its\n"
    "                        T rows, every tensor's shape checked against it, none missing\n"
    "  -h, --help            this help\n"
    "  The name maps are in docs/fine-tuning.md (\"Hugging Face checkpoints\").\n";

/* One output tensor: where it comes from and how. */
typedef struct {
  char name[64];         /* memplan's */
  const StTensor *src;   /* the input tensor */
  bool transpose;        /* Conv1D [in, out] -> [out, in] */
  int rank;              /* of the output */
  int64_t shape[2];      /* of the output */
  int64_t rows, in_rows; /* wte, wpe: rows written; rows read from the input (the rest: zeros) */
  int64_t begin;         /* offset in the output's data */
} Out;

typedef struct {
  const char *in, *out, *plan, *dir;
  const char *set[2]; /* B=N, T=N (DIR) */
} Opts;

static Opts parse_opts(int argc, char **argv) {
  static const struct option longs[] = {{"output", required_argument, 0, 'o'},
                                        {"plan", required_argument, 0, 'p'},
                                        {"set", required_argument, 0, 's'},
                                        {"help", no_argument, 0, 'h'},
                                        {0}};
  Opts o = {0};
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
    if (c == 'h') {
      fputs(import_help, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      exit(EXIT_OK);
    } else if (c == 'o') o.out = optarg;
    else if (c == 'p') o.plan = optarg;
    else if (c == 's') {
      if (strncmp(optarg, "B=", 2) && strncmp(optarg, "T=", 2))
        cli_usage_error("import-hf", "--set %s: import-hf sets B=N or T=N (the rest comes from config.json)", optarg);
      o.set[optarg[0] == 'T'] = optarg;
    } else cli_bad_option("import-hf", c, argv);
  }
  if (optind >= argc) cli_usage_error("import-hf", "no model folder given: memplan import-hf DIR -o OUT");
  if (!o.out) cli_usage_error("import-hf", "no output given: -o OUT");
  if (strcmp(argv[optind], "gpt2")) {
    if (optind + 1 < argc) cli_usage_error("import-hf", "unexpected argument '%s'", argv[optind + 1]);
    if (o.plan) cli_usage_error("import-hf", "--plan is for import-hf gpt2; a model folder gives its own model.yaml");
    o.dir = argv[optind];
    return o;
  }
  if (o.set[0] || o.set[1]) cli_usage_error("import-hf", "--set is for a model folder; gpt2 fits --plan's dims");
  if (optind + 1 >= argc) cli_usage_error("import-hf", "no input file given");
  if (optind + 2 < argc) cli_usage_error("import-hf", "unexpected argument '%s'", argv[optind + 2]);
  o.in = argv[optind + 1];
  return o;
}

static char *pending_tmp; /* the temporary output until it is renamed: removed on any exit */
static void remove_pending(void) {
  if (pending_tmp) remove(pending_tmp);
}

const char *hf_cmd = "import-hf";

_Noreturn void hf_fail(const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "memplan %s: error: %s: ", hf_cmd, path);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  exit(EXIT_USER);
}

int64_t hf_dtype_bytes(const char *dt) {
  return !strcmp(dt, "F32") ? 4 : !strcmp(dt, "F16") || !strcmp(dt, "BF16") ? 2 : 0;
}

static float half_to_f32(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
  return h & 0x8000 ? -v : v;
}

/* n elements of dtype dt at p, as floats. */
static void to_f32(float *dst, const unsigned char *p, int64_t n, const char *dt) {
  for (int64_t i = 0; i < n; i++) {
    if (dt[0] == 'F' && dt[1] == '3') memcpy(&dst[i], p + 4 * i, 4);
    else {
      uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
      if (dt[0] == 'B') {
        uint32_t u = (uint32_t)h << 16;
        memcpy(&dst[i], &u, 4);
      } else dst[i] = half_to_f32(h);
    }
  }
}

void hf_read_raw(const HfIn *in, const StTensor *t, int64_t at, int64_t n, unsigned char *raw) {
  if (fseeko(in->f, (off_t)(in->data0 + t->begin + at), SEEK_SET) != 0 || fread(raw, 1, (size_t)n, in->f) != (size_t)n)
    hf_fail(in->path, "cannot read tensor '%s': %s", t->name, ferror(in->f) ? strerror(errno) : "the file is short");
}

/* count elements of t from element `at`, as floats. */
void hf_read_f32(const HfIn *in, const StTensor *t, int64_t at, int64_t count, float *dst, unsigned char *raw) {
  int64_t es = hf_dtype_bytes(t->dtype);
  hf_read_raw(in, t, at * es, count * es, raw);
  to_f32(dst, raw, count, t->dtype);
}

int64_t hf_numel(const StTensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++)
    if (__builtin_mul_overflow(n, t->shape[d], &n)) return INT64_MAX;
  return n;
}

HfIn hf_open(Arena *ar, const char *path) {
  const char *why;
  HfIn in = {path, mp_open_input(path, &why), 0, 0, NULL, 0};
  if (!in.f) hf_fail(path, "cannot read: %s", why);
  unsigned char len8[8];
  if (fseeko(in.f, 0, SEEK_END) != 0 || (in.size = (int64_t)ftello(in.f)) < 8 || fseeko(in.f, 0, SEEK_SET) != 0 ||
      fread(len8, 1, 8, in.f) != 8)
    hf_fail(path, "too short for a safetensors file");
  uint64_t hn = 0;
  for (int k = 0; k < 8; k++) hn |= (uint64_t)len8[k] << (8 * k);
  if (hn > (uint64_t)in.size - 8 || hn > (100u << 20))
    hf_fail(path, "header length %llu runs past the end of the file or over 100 MiB: not a safetensors file?",
            (unsigned long long)hn);
  in.data0 = 8 + (int64_t)hn;
  char *json = ar_alloc(ar, (size_t)hn + 1);
  if (fread(json, 1, (size_t)hn, in.f) != (size_t)hn) hf_fail(path, "cannot read the header");
  in.t = st_read_header(ar, path, json, (size_t)hn, in.size - in.data0, &in.n);
  return in;
}

/* A Hugging Face GPT-2 name (prefix stripped) as memplan's; *transpose for
 * Conv1D weights. NULL for the tensors that have no memplan counterpart
 * (lm_head.weight, the mask buffers); "?" for a name outside the map. */
static const char *map_name(const char *hf, char *buf, size_t n, bool *transpose) {
  static const char *const top[][2] = {{"wte.weight", "wte.weight"},
                                       {"wpe.weight", "pos.weight"},
                                       {"ln_f.weight", "lnf.weight"},
                                       {"ln_f.bias", "lnf.bias"}};
  static const struct {
    const char *hf, *mp;
    bool t;
  } block[] = {{"ln_1.weight", "ln1.weight", 0},
               {"ln_1.bias", "ln1.bias", 0},
               {"attn.c_attn.weight", "attn.qkv.weight", 1},
               {"attn.c_attn.bias", "attn.qkv.bias", 0},
               {"attn.c_proj.weight", "attn.proj.weight", 1},
               {"attn.c_proj.bias", "attn.proj.bias", 0},
               {"ln_2.weight", "ln2.weight", 0},
               {"ln_2.bias", "ln2.bias", 0},
               {"mlp.c_fc.weight", "fc.weight", 1},
               {"mlp.c_fc.bias", "fc.bias", 0},
               {"mlp.c_proj.weight", "proj.weight", 1},
               {"mlp.c_proj.bias", "proj.bias", 0},
               {"attn.bias", NULL, 0},
               {"attn.masked_bias", NULL, 0}};
  *transpose = false;
  if (!strcmp(hf, "lm_head.weight")) return NULL;
  for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
    if (!strcmp(hf, top[i][0])) return top[i][1];
  int layer, used = 0;
  if (sscanf(hf, "h.%d.%n", &layer, &used) != 1 || !used || layer < 0 || layer > 9999) return "?";
  for (size_t i = 0; i < sizeof block / sizeof block[0]; i++)
    if (!strcmp(hf + used, block[i].hf)) {
      if (!block[i].mp) return NULL;
      *transpose = block[i].t;
      snprintf(buf, n, "h%d.%s", layer, block[i].mp);
      return buf;
    }
  return "?";
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *s) {
  int k = snprintf(buf, n, "[");
  for (int d = 0; d < rank && k < (int)n; d++)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)s[d]);
  if (k < (int)n) snprintf(buf + k, n - (size_t)k, "]");
}

/* lm_head.weight must equal wte.weight (GPT-2 ties them; memplan's models read wte). */
static void check_tied(const HfIn *in, const StTensor *head, const StTensor *wte) {
  if (!wte || head->rank != wte->rank || hf_numel(head) != hf_numel(wte))
    hf_fail(in->path,
            "tensor 'lm_head.weight' is not tied to 'wte.weight' (another shape, or no wte): memplan's GPT-2 "
            "ties its output layer to the embedding");
  float *a = malloc(sizeof(float) * CHUNK), *b = malloc(sizeof(float) * CHUNK);
  unsigned char *raw = malloc(4 * (size_t)CHUNK);
  if (!a || !b || !raw) hf_fail(in->path, "out of memory");
  for (int64_t at = 0, n = hf_numel(wte); at < n; at += CHUNK) {
    int64_t c = n - at < CHUNK ? n - at : CHUNK;
    hf_read_f32(in, head, at, c, a, raw);
    hf_read_f32(in, wte, at, c, b, raw);
    for (int64_t i = 0; i < c; i++)
      if (memcmp(&a[i], &b[i], 4))
        hf_fail(in->path,
                "tensor 'lm_head.weight' differs from 'wte.weight' at element %lld: memplan's GPT-2 ties its "
                "output layer to the embedding, so an untied checkpoint cannot be imported",
                (long long)(at + i));
  }
  free(a), free(b), free(raw);
}

/* The output tensors from the input header (and the plan): every check
 * before a byte is written. */
static Out *plan_outputs(const HfIn *in, const StTensor *t, int n, const Plan *plan, const char *plan_path, int *nout) {
  Out *o = calloc((size_t)n + 1, sizeof(Out));
  if (!o) hf_fail(in->path, "out of memory");
  int k = 0;
  const StTensor *head = NULL, *wte = NULL;
  for (int i = 0; i < n; i++) {
    const char *hf = t[i].name;
    if (!strncmp(hf, "transformer.", 12)) hf += 12;
    int64_t es = hf_dtype_bytes(t[i].dtype);
    if (!es) hf_fail(in->path, "tensor '%s' has dtype %s; the importer reads F32, F16 and BF16", t[i].name, t[i].dtype);
    if (t[i].end - t[i].begin != es * hf_numel(&t[i]) || in->data0 + t[i].end > in->size)
      hf_fail(in->path,
              "tensor '%s': data_offsets [%lld, %lld] do not hold its %lld elements within the file (truncated?)",
              t[i].name, (long long)t[i].begin, (long long)t[i].end, (long long)hf_numel(&t[i]));
    char buf[64];
    bool tr;
    const char *mp = map_name(hf, buf, sizeof buf, &tr);
    if (!strcmp(hf, "lm_head.weight")) head = &t[i];
    if (!mp) continue;
    if (!strcmp(mp, "?"))
      hf_fail(in->path,
              "tensor '%s' is not in the GPT-2 name map (docs/fine-tuning.md, \"Hugging Face checkpoints\"): not a "
              "Hugging Face "
              "GPT-2 checkpoint?",
              t[i].name);
    Out *u = &o[k];
    snprintf(u->name, sizeof u->name, "%s", mp);
    for (int j = 0; j < k; j++)
      if (!strcmp(o[j].name, u->name))
        hf_fail(in->path, "tensors '%s' and '%s' both map to '%s' (given with and without 'transformer.'?)",
                o[j].src->name, t[i].name, u->name);
    u->src = &t[i], u->transpose = tr, u->rank = t[i].rank;
    if (t[i].rank < 1 || t[i].rank > 2 || (tr && t[i].rank != 2))
      hf_fail(in->path, "tensor '%s' has rank %d; GPT-2's are %s", t[i].name, t[i].rank,
              tr ? "2 (Conv1D weights [in, out])" : "1 or 2");
    for (int d = 0; d < u->rank; d++) u->shape[d] = t[i].shape[tr ? u->rank - 1 - d : d];
    u->rows = u->in_rows = u->shape[0];
    if (!strcmp(u->name, "wte.weight")) wte = &t[i];
    k++;
  }
  if (head) check_tied(in, head, wte);
  if (!k) hf_fail(in->path, "no GPT-2 tensor in the file");
  *nout = k;
  if (!plan) return o;
  /* the plan's parameters (and state), each produced once with its shape */
  for (int b = 0; b < plan->nbuf; b++) {
    const PlanBuffer *pb = &plan->buf[b];
    if (pb->role != ROLE_PARAM && pb->role != ROLE_STATE) continue;
    int j = 0;
    while (j < k && strcmp(o[j].name, pb->name)) j++;
    if (j == k)
      hf_fail(in->path,
              "no tensor for the plan's parameter '%s' (%s): the checkpoint has fewer layers, or the model is "
              "not GPT-2",
              pb->name, plan_path);
  }
  for (int j = 0; j < k; j++) {
    Out *u = &o[j];
    const PlanBuffer *pb = NULL;
    for (int b = 0; b < plan->nbuf && !pb; b++)
      if ((plan->buf[b].role == ROLE_PARAM || plan->buf[b].role == ROLE_STATE) && !strcmp(plan->buf[b].name, u->name))
        pb = &plan->buf[b];
    if (!pb)
      hf_fail(in->path,
              "tensor '%s' (memplan '%s') has no parameter in %s: the checkpoint has more layers than the model",
              u->src->name, u->name, plan_path);
    bool is_wte = !strcmp(u->name, "wte.weight"), pos = !strcmp(u->name, "pos.weight");
    bool same = pb->shape.rank == u->rank;
    for (int d = 0; same && d < u->rank; d++) same = pb->shape.d[d] == u->shape[d] || (d == 0 && (is_wte || pos));
    char got[64], need[64];
    shape_str(got, sizeof got, u->src->rank, u->src->shape);
    shape_str(need, sizeof need, pb->shape.rank, pb->shape.d);
    if (!same)
      hf_fail(in->path, "tensor '%s' has shape %s%s; the plan's '%s' is %s (%s)", u->src->name, got,
              u->transpose ? " (Conv1D [in, out], transposed on import)" : "", u->name, need, plan_path);
    if (is_wte && u->shape[0] > pb->shape.d[0])
      hf_fail(in->path, "tensor '%s' has %lld vocabulary rows; the plan's V is %lld: compile the model with V >= %lld",
              u->src->name, (long long)u->shape[0], (long long)pb->shape.d[0], (long long)u->shape[0]);
    if (pos && u->shape[0] < pb->shape.d[0])
      hf_fail(in->path, "tensor '%s' has %lld positions; the plan's T is %lld: compile the model with T <= %lld",
              u->src->name, (long long)u->shape[0], (long long)pb->shape.d[0], (long long)u->shape[0]);
    if (pos) u->in_rows = pb->shape.d[0]; /* the first T positions */
    u->rows = u->shape[0] = pb->shape.d[0];
  }
  return o;
}

/* The output's header: F32 tensors in order, padded with spaces to 8 bytes. */
static void write_header(Text *h, Out *o, int n) {
  int64_t at = 0;
  text_printf(h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"memplan import-hf gpt2\"}");
  for (int j = 0; j < n; j++) {
    int64_t count = o[j].shape[0] * (o[j].rank == 2 ? o[j].shape[1] : 1);
    o[j].begin = at;
    text_printf(h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld", o[j].name, (long long)o[j].shape[0]);
    if (o[j].rank == 2) text_printf(h, ",%lld", (long long)o[j].shape[1]);
    text_printf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)at, (long long)(at + 4 * count));
    at += 4 * count;
  }
  text_printf(h, "}");
  while (h->n % 8) text_printf(h, " ");
}

/* One tensor's data into f: transposed whole, else in chunks (rows past
 * in_rows are zeros). */
static bool write_tensor(const HfIn *in, const Out *u, FILE *f, float *buf, unsigned char *raw) {
  if (u->transpose) {
    int64_t r = u->src->shape[0], c = u->src->shape[1]; /* [in, out] */
    float *w = malloc(sizeof(float) * (size_t)(r * c)), *row = malloc(sizeof(float) * (size_t)r);
    unsigned char *rw = malloc((size_t)(4 * r * c));
    if (!w || !row || !rw) hf_fail(in->path, "out of memory for tensor '%s'", u->src->name);
    hf_read_f32(in, u->src, 0, r * c, w, rw);
    bool ok = true;
    for (int64_t j = 0; j < c && ok; j++) { /* output row j: column j of the input */
      for (int64_t i = 0; i < r; i++) row[i] = w[i * c + j];
      ok = fwrite(row, sizeof(float), (size_t)r, f) == (size_t)r;
    }
    free(w), free(row), free(rw);
    return ok;
  }
  int64_t cols = u->rank == 2 ? u->shape[1] : 1, total = u->rows * cols, have = u->in_rows * cols;
  for (int64_t at = 0; at < total; at += CHUNK) {
    int64_t c = total - at < CHUNK ? total - at : CHUNK, from = at < have ? (have - at < c ? have - at : c) : 0;
    if (from) hf_read_f32(in, u->src, at, from, buf, raw);
    memset(buf + from, 0, sizeof(float) * (size_t)(c - from));
    if (fwrite(buf, sizeof(float), (size_t)c, f) != (size_t)c) return false;
  }
  return true;
}

bool hf_gpt2_write(const HfIn *in, const Plan *plan, const char *plan_path, FILE *f, int *nout) {
  Out *out = plan_outputs(in, in->t, in->n, plan, plan_path, nout);
  Text h = {0};
  write_header(&h, out, *nout);
  float *buf = malloc(sizeof(float) * CHUNK);
  unsigned char *raw = malloc(4 * (size_t)CHUNK);
  if (!buf || !raw) hf_fail(in->path, "out of memory");
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
  bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.s, 1, h.n, f) == h.n;
  for (int j = 0; j < *nout && ok; j++) ok = write_tensor(in, &out[j], f, buf, raw);
  free(buf), free(raw), free(out);
  text_free(&h);
  return ok;
}

int import_main(int argc, char **argv) {
  Opts o = parse_opts(argc, argv);
  if (o.dir) return import_dir_main(o.dir, o.out, o.set);
  Arena ar = {0};
  HfIn in = hf_open(&ar, o.in);
  const Plan *plan = NULL;
  if (o.plan) {
    const char *why;
    FILE *pf = mp_open_input(o.plan, &why);
    if (!pf) hf_fail(o.plan, "cannot read: %s", why);
    Text pt = {0};
    char b[65536];
    size_t got;
    while ((got = fread(b, 1, sizeof b, pf)) > 0) text_printf(&pt, "%.*s", (int)got, b);
    fclose(pf);
    plan = plan_read(&ar, o.plan, pt.s ? pt.s : "", pt.n);
  }
  /* atomically: a temporary file beside OUT, synced, renamed */
  size_t pl = strlen(o.out);
  char *tmp = malloc(pl + 32);
  if (!tmp) hf_fail(o.in, "out of memory");
  snprintf(tmp, pl + 32, "%s.tmp.%ld", o.out, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) hf_fail(o.out, "cannot write %s: %s", tmp, strerror(errno));
  pending_tmp = tmp;
  atexit(remove_pending);
  int nout;
  bool ok = hf_gpt2_write(&in, plan, o.plan, f, &nout);
  ok = fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, o.out) != 0) hf_fail(o.out, "cannot write: %s", strerror(errno));
  pending_tmp = NULL;
  printf("memplan import-hf: %s -> %s: %d tensors (F32)%s%s\n", o.in, o.out, nout, plan ? ", shapes of " : "",
         plan ? o.plan : "");
  fclose(in.f);
  free(tmp);
  ar_free(&ar);
  return EXIT_OK;
}
