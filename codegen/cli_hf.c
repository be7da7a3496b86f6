/* cli_hf.c: memplan import-hf DIR, a Hugging Face Llama-family model folder
 * (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM: config.json and
 * model.safetensors, or shards listed by model.safetensors.index.json) as a
 * memplan model folder: OUT/model.yaml, with the dims of config.json, and
 * OUT/weights.safetensors under memplan's names, F32, for the trainer's --load.
 *
 * The name map (HF -> memplan; N the layer):
 *   model.embed_tokens.weight [V, C]            -> emb.weight
 *   model.layers.N.input_layernorm.weight       -> hN.norm1.weight
 *   model.layers.N.self_attn.{q,k,v}_proj.weight -> hN.attn.qkv.weight [(NH + 2 KVH) hd, C], rows q | k | v
 *   model.layers.N.self_attn.{q,k,v}_proj.bias  -> hN.attn.qkv.bias (Qwen2; Llama with attention_bias)
 *   model.layers.N.self_attn.o_proj.weight      -> hN.attn.proj.weight (.bias: Llama with attention_bias)
 *   model.layers.N.post_attention_layernorm.weight -> hN.norm2.weight
 *   model.layers.N.mlp.{gate,up,down}_proj.weight -> hN.{gate,up,down}.weight
 *   model.norm.weight                           -> norm.weight
 *   lm_head.weight                              -> logits.weight (untied; tied: the model reads emb.weight)
 *   *.rotary_emb.inv_freq                       -> none (older files' buffer)
 * nn.Linear's [out, in] is memplan's layout, and memplan's rope rotates HF's
 * rotate_half pairs (i, i + hd/2), so no tensor is permuted or transposed:
 * q, k and v are stacked. Memory stays bounded: each tensor is copied in
 * CHUNK-element pieces. The folder is written as OUT.tmp.PID, each file
 * synced, then renamed to OUT: never half written. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf.h"
#include "memplan_kernels.h" /* RT_NF4_TABLE, RT_NF4_BLOCK */

/* ---- config.json ---- */

typedef struct {
  const char *path;
  JsonField *f;
  int n;
} Cfg;

static const JsonField *cfg_find(const Cfg *c, const char *key) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->f[i].key, key)) return &c->f[i];
  return NULL;
}

/* A number field; absent or null: dflt, or an error when required (dflt < 0). */
static double cfg_num(const Cfg *c, const char *key, double dflt, double lo, double hi, bool integer) {
  const JsonField *v = cfg_find(c, key);
  if (!v || v->kind == JF_NULL) {
    if (dflt < 0) hf_fail(c->path, "no \"%s\": a Llama-family config.json has it", key);
    return dflt;
  }
  if (v->kind != JF_NUM || !(v->num >= lo && v->num <= hi) || (integer && v->num != floor(v->num)))
    diag_error(v->loc, "\"%s\" must be %s in [%g, %g]", key, integer ? "an integer" : "a number", lo, hi);
  return v->num;
}

static bool cfg_bool(const Cfg *c, const char *key, bool dflt) {
  const JsonField *v = cfg_find(c, key);
  if (!v || v->kind == JF_NULL) return dflt;
  if (v->kind != JF_BOOL) diag_error(v->loc, "\"%s\" must be true or false", key);
  return v->b;
}

static const char *cfg_str(const Cfg *c, const char *key) {
  const JsonField *v = cfg_find(c, key);
  if (!v || v->kind == JF_NULL) return NULL;
  if (v->kind != JF_STR) diag_error(v->loc, "\"%s\" must be a string", key);
  return v->s;
}

/* Whole file into the arena (NUL-terminated); NULL when it does not exist. */
static char *slurp(Arena *ar, const char *path, size_t *len) {
  const char *why;
  FILE *f = mp_open_input(path, &why);
  if (!f) {
    if (errno == ENOENT) return NULL;
    hf_fail(path, "cannot read: %s", why);
  }
  Text t = {0};
  char b[65536];
  size_t got;
  while ((got = fread(b, 1, sizeof b, f)) > 0) text_append(&t, b, got);
  if (ferror(f)) hf_fail(path, "cannot read: %s", strerror(errno));
  fclose(f);
  char *s = ar_alloc(ar, t.n + 1);
  if (t.n) memcpy(s, t.s, t.n);
  *len = t.n;
  text_free(&t);
  return s;
}

static Cfg read_json(Arena *ar, const char *path, bool required) {
  size_t len = 0;
  char *s = slurp(ar, path, &len);
  if (!s) {
    if (required) hf_fail(path, "no such file: a Hugging Face model folder has config.json");
    return (Cfg){path, NULL, -1};
  }
  Cfg c = {path, NULL, 0};
  c.f = json_read_fields(ar, path, s, len, &c.n);
  return c;
}

/* ---- the model ---- */

enum { FAM_LLAMA, FAM_MISTRAL, FAM_QWEN2, FAM_GPT2 };
static const char *const ARCH[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel"};

typedef struct {
  int family;
  int64_t C, NH, KVH, L, F, V, maxpos, B, T;
  double eps, theta;
  bool tied, qkv_bias, proj_bias;
  const char *dtype; /* torch_dtype, as written; NULL when absent */
  /* rope_scaling type llama3 (factor 0: none) */
  double rs_factor, rs_low, rs_high, rs_orig;
} Model;

typedef struct {
  const char *set[2]; /* B=, T= */
  const char *out, *dir;
} ImportOpts;

static void batch_and_length(const Cfg *c, const ImportOpts *o, Model *m) {
  m->B = 4, m->T = m->maxpos < 1024 ? m->maxpos : 1024;
  for (int i = 0; i < 2; i++)
    if (o->set[i]) {
      char *e;
      long long v = strtoll(o->set[i] + 2, &e, 10);
      if (*e || v < 1) cli_usage_error("import-hf", "--set %s: expected a positive integer", o->set[i]);
      *(i ? &m->T : &m->B) = v;
    }
  if (m->T > m->maxpos)
    hf_fail(c->path, "T = %lld is over the model's %lld positions: give --set T=N with N <= %lld", (long long)m->T,
            (long long)m->maxpos, (long long)m->maxpos);
}

/* GPT2LMHeadModel's config.json (n_embd, n_layer, n_head, n_positions, ...). */
static Model read_gpt2_config(const Cfg *c, const ImportOpts *o, Model m) {
  const double BIG = 1e12;
  m.C = (int64_t)cfg_num(c, "n_embd", -1, 1, BIG, true);
  m.L = (int64_t)cfg_num(c, "n_layer", -1, 1, 100000, true);
  m.NH = (int64_t)cfg_num(c, "n_head", -1, 1, BIG, true);
  m.V = (int64_t)cfg_num(c, "vocab_size", -1, 1, BIG, true);
  m.maxpos = (int64_t)cfg_num(c, "n_positions", 1024, 1, BIG, true);
  m.F = (int64_t)cfg_num(c, "n_inner", (double)(4 * m.C), 1, BIG, true);
  m.eps = cfg_num(c, "layer_norm_epsilon", 1e-5, 1e-30, 1, false);
  m.dtype = cfg_str(c, "torch_dtype");
  m.tied = cfg_bool(c, "tie_word_embeddings", true);
  if (m.C % m.NH) hf_fail(c->path, "n_head %lld must divide n_embd %lld", (long long)m.NH, (long long)m.C);
  const char *act = cfg_str(c, "activation_function");
  if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
    hf_fail(c->path, "unsupported \"activation_function\" \"%s\": memplan's GPT-2 uses the tanh GELU (gelu_new)", act);
  if (!m.tied) hf_fail(c->path, "unsupported \"tie_word_embeddings\": false: memplan's GPT-2 ties its head to wte");
  if (cfg_bool(c, "scale_attn_by_inverse_layer_idx", false) || cfg_bool(c, "reorder_and_upcast_attn", false))
    hf_fail(c->path, "unsupported \"scale_attn_by_inverse_layer_idx\" or \"reorder_and_upcast_attn\"");
  batch_and_length(c, o, &m);
  return m;
}

static Model read_config(const Cfg *c, const ImportOpts *o) {
  Model m = {0};
  const char *arch = cfg_str(c, "architectures/0");
  if (!arch)
    hf_fail(c->path, "no \"architectures\": which model is it? (memplan imports %s, %s, %s)", ARCH[0], ARCH[1],
            ARCH[2]);
  m.family = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(arch, ARCH[i])) m.family = i;
  if (m.family < 0)
    hf_fail(c->path, "unknown architecture '%s': memplan imports %s, %s, %s and %s", arch, ARCH[0], ARCH[1], ARCH[2],
            ARCH[3]);
  if (m.family == FAM_GPT2) return read_gpt2_config(c, o, m);
  const double BIG = 1e12;
  m.C = (int64_t)cfg_num(c, "hidden_size", -1, 1, BIG, true);
  m.L = (int64_t)cfg_num(c, "num_hidden_layers", -1, 1, 100000, true);
  m.NH = (int64_t)cfg_num(c, "num_attention_heads", -1, 1, BIG, true);
  m.KVH = (int64_t)cfg_num(c, "num_key_value_heads", (double)m.NH, 1, BIG, true);
  m.F = (int64_t)cfg_num(c, "intermediate_size", -1, 1, BIG, true);
  m.V = (int64_t)cfg_num(c, "vocab_size", -1, 1, BIG, true);
  m.maxpos = (int64_t)cfg_num(c, "max_position_embeddings", 2048, 1, BIG, true);
  m.eps = cfg_num(c, "rms_norm_eps", 1e-6, 1e-30, 1, false);
  m.theta = cfg_num(c, "rope_theta", 10000, 1e-30, 1e30, false);
  m.tied = cfg_bool(c, "tie_word_embeddings", false);
  m.dtype = cfg_str(c, "torch_dtype");
  if (m.C % m.NH || m.NH % m.KVH)
    hf_fail(c->path,
            "num_attention_heads %lld must divide hidden_size %lld, and num_key_value_heads %lld divide the heads",
            (long long)m.NH, (long long)m.C, (long long)m.KVH);
  if ((m.C / m.NH) % 2) hf_fail(c->path, "head dim %lld is odd: rope needs it even", (long long)(m.C / m.NH));
  double hd = cfg_num(c, "head_dim", (double)(m.C / m.NH), 1, BIG, true);
  if ((int64_t)hd != m.C / m.NH)
    hf_fail(c->path,
            "\"head_dim\" %lld is not hidden_size / num_attention_heads = %lld: memplan's attention "
            "needs them equal",
            (long long)hd, (long long)(m.C / m.NH));
  const char *act = cfg_str(c, "hidden_act");
  if (act && strcmp(act, "silu"))
    hf_fail(c->path, "unsupported \"hidden_act\" \"%s\": memplan's Llama-family MLP is SwiGLU (silu)", act);
  if (cfg_bool(c, "mlp_bias", false)) hf_fail(c->path, "unsupported \"mlp_bias\": true: the MLP has no biases");
  m.qkv_bias = m.family == FAM_QWEN2 || (m.family == FAM_LLAMA && cfg_bool(c, "attention_bias", false));
  m.proj_bias = m.family == FAM_LLAMA && cfg_bool(c, "attention_bias", false);
  const char *rs = cfg_str(c, "rope_scaling/rope_type");
  if (!rs) rs = cfg_str(c, "rope_scaling/type");
  bool has_rs = false;
  for (int i = 0; i < c->n; i++) has_rs |= !strncmp(c->f[i].key, "rope_scaling/", 13);
  if (has_rs && (!rs || strcmp(rs, "llama3")))
    hf_fail(c->path, "unsupported \"rope_scaling\" type \"%s\": memplan's rope does plain and llama3 scaling",
            rs ? rs : "(none given)");
  if (has_rs) {
    m.rs_factor = cfg_num(c, "rope_scaling/factor", -1, 1e-30, 1e30, false);
    m.rs_low = cfg_num(c, "rope_scaling/low_freq_factor", -1, 1e-30, 1e30, false);
    m.rs_high = cfg_num(c, "rope_scaling/high_freq_factor", -1, 1e-30, 1e30, false);
    m.rs_orig = cfg_num(c, "rope_scaling/original_max_position_embeddings", -1, 1, BIG, true);
    if (!(m.rs_high > m.rs_low))
      hf_fail(c->path, "\"rope_scaling\": high_freq_factor %g must exceed low_freq_factor %g", m.rs_high, m.rs_low);
  }
  batch_and_length(c, o, &m);
  if (m.family == FAM_QWEN2 && cfg_bool(c, "use_sliding_window", false))
    hf_fail(c->path, "unsupported \"use_sliding_window\": true: memplan's attention is full causal attention");
  if (m.family == FAM_MISTRAL) {
    double sw = cfg_num(c, "sliding_window", 0, 1, BIG, true);
    if (sw && sw < (double)m.T)
      hf_fail(c->path,
              "unsupported \"sliding_window\" %g below T = %lld: memplan's attention is full causal "
              "attention (give --set T=N with N <= %g: then the window changes nothing)",
              sw, (long long)m.T, sw);
  }
  return m;
}

/* ---- the tensors ---- */

typedef struct {
  const char *hf; /* the name */
  const HfIn *in; /* the file that holds it */
  const StTensor *t;
  bool used;
} Src;

typedef struct {
  char name[64]; /* memplan's */
  int rank;
  int64_t shape[2];
  int nsrc;
  Src *src[3]; /* stacked along dim 0 */
} Out;

typedef struct {
  Src *s;
  int n;
  const char *dir;
} Srcs;

static Src *src_find(const Srcs *S, const char *hf) {
  for (int i = 0; i < S->n; i++)
    if (!strcmp(S->s[i].hf, hf)) return &S->s[i];
  return NULL;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *s) {
  int k = snprintf(buf, n, "[");
  for (int d = 0; d < rank && k < (int)n; d++)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)s[d]);
  if (k < (int)n) snprintf(buf + k, n - (size_t)k, "]");
}

/* The source hf, which must have shape [r0] (r1 < 0) or [r0, r1]. */
static Src *need(const Srcs *S, const char *hf, int64_t r0, int64_t r1, const char *why) {
  Src *s = src_find(S, hf);
  if (!s) hf_fail(S->dir, "missing tensor '%s': config.json's model needs it", hf);
  int64_t want[2] = {r0, r1};
  int rank = r1 < 0 ? 1 : 2;
  bool ok = s->t->rank == rank;
  for (int d = 0; ok && d < rank; d++) ok = s->t->shape[d] == want[d];
  if (!ok) {
    char got[96], exp[96];
    shape_str(got, sizeof got, s->t->rank, s->t->shape);
    shape_str(exp, sizeof exp, rank, want);
    hf_fail(s->in->path, "tensor '%s' has shape %s; config.json (%s) makes it %s", hf, got, why, exp);
  }
  s->used = true;
  return s;
}

static void add_out(Out *o, int *k, const char *name, int nsrc, Src *a, Src *b, Src *c) {
  Out *u = &o[(*k)++];
  snprintf(u->name, sizeof u->name, "%s", name);
  u->nsrc = nsrc, u->src[0] = a, u->src[1] = b, u->src[2] = c;
  u->rank = a->t->rank;
  u->shape[0] = 0;
  for (int i = 0; i < nsrc; i++) u->shape[0] += u->src[i]->t->shape[0];
  u->shape[1] = u->rank == 2 ? a->t->shape[1] : 0;
}

static Out *map_tensors(const Model *m, const Srcs *S, int *nout) {
  Out *o = calloc((size_t)(26 * m->L + 10), sizeof(Out)); /* and PEFT's adapters: 14 a layer, 2 on lm_head */
  if (!o) hf_fail(S->dir, "out of memory");
  int k = 0;
  int64_t C = m->C, hd = C / m->NH, Q = m->NH * hd, KV = m->KVH * hd;
  char why[128], hf[3][160], mp[64];
  snprintf(why, sizeof why, "vocab_size %lld, hidden_size %lld", (long long)m->V, (long long)C);
  add_out(o, &k, "emb.weight", 1, need(S, "model.embed_tokens.weight", m->V, C, why), NULL, NULL);
  for (int64_t l = 0; l < m->L; l++) {
    const char *norms[2][2] = {{"input_layernorm", "norm1"}, {"post_attention_layernorm", "norm2"}};
    snprintf(why, sizeof why, "hidden_size %lld", (long long)C);
    for (int i = 0; i < 2; i++) {
      snprintf(hf[0], sizeof hf[0], "model.layers.%lld.%s.weight", (long long)l, norms[i][0]);
      snprintf(mp, sizeof mp, "h%lld.%s.weight", (long long)l, norms[i][1]);
      add_out(o, &k, mp, 1, need(S, hf[0], C, -1, why), NULL, NULL);
    }
    snprintf(why, sizeof why, "hidden_size %lld, heads %lld, kv heads %lld", (long long)C, (long long)m->NH,
             (long long)m->KVH);
    for (int b = 0; b < 1 + m->qkv_bias; b++) {
      Src *s[3];
      const char *qkv = "qkv";
      for (int i = 0; i < 3; i++) {
        snprintf(hf[i], sizeof hf[i], "model.layers.%lld.self_attn.%c_proj.%s", (long long)l, qkv[i],
                 b ? "bias" : "weight");
        s[i] = need(S, hf[i], i ? KV : Q, b ? -1 : C, why);
      }
      snprintf(mp, sizeof mp, "h%lld.attn.qkv.%s", (long long)l, b ? "bias" : "weight");
      add_out(o, &k, mp, 3, s[0], s[1], s[2]);
    }
    for (int b = 0; b < 1 + m->proj_bias; b++) {
      snprintf(hf[0], sizeof hf[0], "model.layers.%lld.self_attn.o_proj.%s", (long long)l, b ? "bias" : "weight");
      snprintf(mp, sizeof mp, "h%lld.attn.proj.%s", (long long)l, b ? "bias" : "weight");
      add_out(o, &k, mp, 1, need(S, hf[0], C, b ? -1 : Q, why), NULL, NULL);
    }
    snprintf(why, sizeof why, "hidden_size %lld, intermediate_size %lld", (long long)C, (long long)m->F);
    const char *mlp[3] = {"gate", "up", "down"};
    for (int i = 0; i < 3; i++) {
      snprintf(hf[0], sizeof hf[0], "model.layers.%lld.mlp.%s_proj.weight", (long long)l, mlp[i]);
      snprintf(mp, sizeof mp, "h%lld.%s.weight", (long long)l, mlp[i]);
      add_out(o, &k, mp, 1, need(S, hf[0], i == 2 ? C : m->F, i == 2 ? m->F : C, why), NULL, NULL);
    }
  }
  snprintf(why, sizeof why, "hidden_size %lld", (long long)C);
  add_out(o, &k, "norm.weight", 1, need(S, "model.norm.weight", C, -1, why), NULL, NULL);
  snprintf(why, sizeof why, "vocab_size %lld, hidden_size %lld", (long long)m->V, (long long)C);
  if (!m->tied) add_out(o, &k, "logits.weight", 1, need(S, "lm_head.weight", m->V, C, why), NULL, NULL);
  else if (src_find(S, "lm_head.weight")) need(S, "lm_head.weight", m->V, C, why); /* tied: the embedding's copy */
  for (int i = 0; i < S->n; i++) {
    const char *n = S->s[i].hf;
    size_t len = strlen(n);
    if (!S->s[i].used && !(len > 21 && !strcmp(n + len - 21, ".rotary_emb.inv_freq")))
      hf_fail(S->s[i].in->path,
              "tensor '%s' is not in the %s name map (docs/fine-tuning.md, \"Hugging Face checkpoints\"): "
              "config.json's model has no such parameter (more layers than num_hidden_layers?)",
              n, ARCH[m->family]);
  }
  *nout = k;
  return o;
}

/* Every tensor of the folder's safetensors files: model.safetensors, or the
 * shards model.safetensors.index.json's weight_map names (each tensor must be
 * in the shard the index says). */
static Srcs read_sources(Arena *ar, const char *dir, HfIn **files, int *nfiles) {
  Srcs S = {NULL, 0, dir};
  const char *idx_path = ar_printf(ar, "%s/model.safetensors.index.json", dir);
  Cfg idx = read_json(ar, idx_path, false);
  const char **fname;
  int nf = 0;
  if (idx.n < 0) {
    fname = ar_alloc(ar, sizeof(char *));
    fname[nf++] = "model.safetensors";
  } else {
    fname = ar_alloc(ar, sizeof(char *) * (size_t)(idx.n + 1));
    for (int i = 0; i < idx.n; i++) {
      const JsonField *f = &idx.f[i];
      if (strncmp(f->key, "weight_map/", 11)) continue;
      if (f->kind != JF_STR || !*f->s || strchr(f->s, '/'))
        diag_error(f->loc, "\"%s\" must name a shard file in the folder", f->key);
      int j = 0;
      while (j < nf && strcmp(fname[j], f->s)) j++;
      if (j == nf) fname[nf++] = f->s;
    }
    if (!nf) hf_fail(idx_path, "no \"weight_map\" entries: not a safetensors index?");
  }
  HfIn *in = ar_alloc(ar, sizeof(HfIn) * (size_t)nf);
  int total = 0;
  for (int j = 0; j < nf; j++) {
    const char *p = ar_printf(ar, "%s/%s", dir, fname[j]);
    struct stat st;
    if (stat(p, &st) != 0)
      hf_fail(p, "cannot read%s: %s", idx.n < 0 ? "" : " (a shard model.safetensors.index.json names)",
              strerror(errno));
    in[j] = hf_open(ar, p);
    total += in[j].n;
  }
  S.s = ar_alloc(ar, sizeof(Src) * (size_t)(total + 1));
  for (int j = 0; j < nf; j++)
    for (int i = 0; i < in[j].n; i++) {
      const StTensor *t = &in[j].t[i];
      int64_t es = hf_dtype_bytes(t->dtype);
      if (!es) hf_fail(in[j].path, "tensor '%s' has dtype %s; the importer reads F32, F16 and BF16", t->name, t->dtype);
      if (t->end - t->begin != es * hf_numel(t) || in[j].data0 + t->end > in[j].size)
        hf_fail(in[j].path,
                "tensor '%s': data_offsets [%lld, %lld] do not hold its %lld elements within the file (truncated?)",
                t->name, (long long)t->begin, (long long)t->end, (long long)hf_numel(t));
      if (src_find(&S, t->name)) hf_fail(in[j].path, "tensor '%s' is in two shards", t->name);
      if (idx.n >= 0) {
        const char *key = ar_printf(ar, "weight_map/%s", t->name);
        const JsonField *f = cfg_find(&idx, key);
        if (!f || strcmp(f->s, fname[j]))
          hf_fail(in[j].path, "tensor '%s' is in this shard, but model.safetensors.index.json says %s", t->name,
                  f ? f->s : "nothing of it");
      }
      S.s[S.n++] = (Src){t->name, &in[j], t, false};
    }
  if (idx.n >= 0)
    for (int i = 0; i < idx.n; i++)
      if (!strncmp(idx.f[i].key, "weight_map/", 11) && !src_find(&S, idx.f[i].key + 11))
        hf_fail(idx_path, "tensor '%s' is not in its shard %s", idx.f[i].key + 11, idx.f[i].s);
  *files = in, *nfiles = nf;
  return S;
}

/* ---- the output ---- */

static const char *model_yaml(Text *y, const Model *m, const char *dir) {
  static const char *const mp[] = {"llama", "mistral", "qwen2", "gpt2"};
  text_printf(y, "# Imported by memplan import-hf from %s (%s", dir, ARCH[m->family]);
  if (m->dtype) text_printf(y, ", torch_dtype %s: the weights load as f32", m->dtype);
  text_printf(y,
              ").\n# Train from its weights: memplan compile model.yaml -o DIR; DIR/build/trainer --load "
              "weights.safetensors\n");
  text_printf(y, "model: %s-import\n", mp[m->family]);
  if (m->family == FAM_GPT2) { /* models/gpt2-*.yaml's layers; positions: all of the file's (P) */
    text_printf(y, "dims: {B: %lld, T: %lld, C: %lld, NH: %lld, L: %lld, F: %lld, V: %lld, P: %lld}\n", (long long)m->B,
                (long long)m->T, (long long)m->C, (long long)m->NH, (long long)m->L, (long long)m->F, (long long)m->V,
                (long long)m->maxpos);
    text_printf(y, "inputs:\n  tokens:  {shape: [B, T], dtype: i32}\n  targets: {shape: [B, T], dtype: i32}\n");
    text_printf(y, "optimizer: {type: adamw, lr: 1.0e-4, betas: [0.9, 0.95], eps: 1.0e-8, weight_decay: 0.0}\n");
    text_printf(y, "init: gpt2\nlayers:\n  - {name: wte, op: embedding, input: tokens, num: V, dim: C}\n");
    text_printf(y, "  - {name: pos, op: position_embedding, max: P, dim: C}\n");
    text_printf(y, "  - {name: emb, op: add, inputs: [wte, pos]}\n  - repeat: L\n    name: h\n    layers:\n");
    text_printf(y, "      - {name: ln1, op: layernorm, eps: %.9g}\n", m->eps);
    text_printf(y, "      - {name: attn, op: causal_self_attention, heads: NH}\n");
    text_printf(y, "      - {name: res1, op: add, inputs: [attn, $in]}\n");
    text_printf(y, "      - {name: ln2, op: layernorm, eps: %.9g}\n", m->eps);
    text_printf(y, "      - {name: fc, op: linear, out: F}\n      - {name: act, op: gelu, approximate: tanh}\n");
    text_printf(y, "      - {name: proj, op: linear, out: C}\n      - {name: res2, op: add, inputs: [proj, res1]}\n");
    text_printf(y, "  - {name: lnf, op: layernorm, eps: %.9g}\n", m->eps);
    text_printf(y, "  - {name: logits, op: linear, out: V, bias: false, weight: wte.weight}\n");
    text_printf(y, "  - {name: loss, op: cross_entropy, inputs: [logits, targets]}\n");
    return y->s;
  }
  text_printf(y, "dims: {B: %lld, T: %lld, C: %lld, NH: %lld, KVH: %lld, L: %lld, F: %lld, V: %lld}\n", (long long)m->B,
              (long long)m->T, (long long)m->C, (long long)m->NH, (long long)m->KVH, (long long)m->L, (long long)m->F,
              (long long)m->V);
  text_printf(y, "inputs:\n  tokens:  {shape: [B, T], dtype: i32}\n  targets: {shape: [B, T], dtype: i32}\n");
  text_printf(y, "optimizer: {type: adamw, lr: 1.0e-5, betas: [0.9, 0.95], eps: 1.0e-8, weight_decay: 0.0}\n");
  text_printf(y, "init: gpt2\nlayers:\n  - {name: emb, op: embedding, input: tokens, num: V, dim: C}\n");
  text_printf(y, "  - repeat: L\n    name: h\n    layers:\n");
  text_printf(y, "      - {name: norm1, op: rmsnorm, eps: %.9g}\n", m->eps);
  text_printf(y,
              "      - {name: attn, op: causal_self_attention, heads: NH, kv_heads: KVH, rope: true, theta: %.9g, "
              "bias: %s, qkv_bias: %s",
              m->theta, m->proj_bias ? "true" : "false", m->qkv_bias ? "true" : "false");
  if (m->rs_factor)
    text_printf(y,
                ",\n         rope_factor: %.9g, low_freq_factor: %.9g, high_freq_factor: %.9g, "
                "original_max_position_embeddings: %.9g",
                m->rs_factor, m->rs_low, m->rs_high, m->rs_orig);
  text_printf(y, "}\n");
  text_printf(y, "      - {name: res1, op: add, inputs: [attn, $in]}\n");
  text_printf(y, "      - {name: norm2, op: rmsnorm, eps: %.9g}\n", m->eps);
  text_printf(y, "      - {name: gate, op: linear, out: F, bias: false}\n");
  text_printf(y, "      - {name: up, op: linear, input: norm2, out: F, bias: false}\n");
  text_printf(y, "      - {name: act, op: silu, input: gate}\n");
  text_printf(y, "      - {name: glu, op: mul, inputs: [act, up]}\n");
  text_printf(y, "      - {name: down, op: linear, out: C, bias: false}\n");
  text_printf(y, "      - {name: res2, op: add, inputs: [down, res1]}\n");
  text_printf(y, "  - {name: norm, op: rmsnorm, eps: %.9g}\n", m->eps);
  text_printf(y, "  - {name: logits, op: linear, out: V, bias: false%s}\n", m->tied ? ", weight: emb.weight" : "");
  text_printf(y, "  - {name: loss, op: cross_entropy, inputs: [logits, targets]}\n");
  return y->s;
}

/* A PEFT LoRA adapter in DIR/adapter/ (adapter_config.json, adapter_model.safetensors, as export-hf writes it
 * or PEFT's save_pretrained): its tensors under memplan's names appended to o, and model.yaml's lora section
 * into y. PEFT's module names map as the README's LoRA targets: q_proj -> hN.attn.q, o_proj -> hN.attn.proj,
 * gate_proj -> hN.gate, lm_head -> logits; every layer must have the same modules adapted. */
static void peft_import(Arena *ar, const char *dir, const Model *m, Out *o, int *nout, Text *y) {
  const char *cp = ar_printf(ar, "%s/adapter/adapter_config.json", dir);
  Cfg c = read_json(ar, cp, false);
  if (c.n < 0) return;
  const char *type = cfg_str(&c, "peft_type"), *bias = cfg_str(&c, "bias");
  if (!type || strcmp(type, "LORA"))
    hf_fail(cp, "\"peft_type\" %s: memplan imports LoRA adapters (\"LORA\")", type ? type : "absent");
  if (cfg_bool(&c, "use_rslora", false) || cfg_bool(&c, "use_dora", false) || cfg_bool(&c, "fan_in_fan_out", false) ||
      (bias && strcmp(bias, "none")))
    hf_fail(cp,
            "use_rslora, use_dora, fan_in_fan_out or a bias other than \"none\": memplan's LoRA is "
            "PEFT's plain lora.Linear");
  for (int i = 0; i < c.n; i++) /* per-module ranks or scales, whole modules trained beside: not one LoRA */
    if (!strncmp(c.f[i].key, "rank_pattern/", 13) || !strncmp(c.f[i].key, "alpha_pattern/", 14) ||
        (!strncmp(c.f[i].key, "modules_to_save", 15) && c.f[i].kind != JF_NULL))
      hf_fail(cp, "\"%s\": memplan's LoRA has one rank and alpha for every adapter and trains nothing else",
              c.f[i].key);
  int64_t r = (int64_t)cfg_num(&c, "r", -1, 1, 1 << 20, true);
  double alpha = cfg_num(&c, "lora_alpha", (double)r, 1e-30, 1e30, false);
  double dropout = cfg_num(&c, "lora_dropout", 0, 0, 0.999999, false);
  HfIn *in = ar_alloc(ar, sizeof(HfIn));
  *in = hf_open(ar, ar_printf(ar, "%s/adapter/adapter_model.safetensors", dir));
  static const char *const mods[][2] = {{"self_attn.q_proj", "attn.q"}, {"self_attn.k_proj", "attn.k"},
                                        {"self_attn.v_proj", "attn.v"}, {"self_attn.o_proj", "attn.proj"},
                                        {"mlp.gate_proj", "gate"},      {"mlp.up_proj", "up"},
                                        {"mlp.down_proj", "down"}};
  enum { NMOD = 7 };
  int count[NMOD + 1] = {0}; /* adapters per module (lm_head last) */
  for (int i = 0; i < in->n; i++) {
    const StTensor *t = &in->t[i];
    const char *n = t->name, *pre = "base_model.model.";
    char AB = 0, mp[64] = "";
    size_t len = strlen(n);
    if (len > 14 && (!strcmp(n + len - 14, ".lora_A.weight") || !strcmp(n + len - 14, ".lora_B.weight")))
      AB = n[len - 8];
    const char *mod = !strncmp(n, pre, strlen(pre)) ? n + strlen(pre) : n;
    long long l = -1;
    int used = 0, k = -1;
    if (AB && sscanf(mod, "model.layers.%lld.%n", &l, &used) == 1 && used && l >= 0 && l < m->L)
      for (int j = 0; j < NMOD && k < 0; j++)
        if (!strncmp(mod + used, mods[j][0], strlen(mods[j][0])) && mod + used + strlen(mods[j][0]) == n + len - 14)
          k = j, snprintf(mp, sizeof mp, "h%lld.%s.lora_%c", l, mods[j][1], AB);
    if (AB && !strncmp(mod, "lm_head.lora_", 13) && !m->tied) k = NMOD, snprintf(mp, sizeof mp, "logits.lora_%c", AB);
    if (k < 0)
      hf_fail(in->path,
              "tensor '%s' is not a LoRA adapter of a %s module memplan has (q_proj, k_proj, v_proj, o_proj, "
              "gate_proj, up_proj, down_proj of layers 0..%lld, lm_head when untied)",
              n, ARCH[m->family], (long long)m->L - 1);
    if (t->rank != 2 || t->shape[AB == 'A' ? 0 : 1] != r)
      hf_fail(in->path, "tensor '%s' must be %s (r %lld from adapter_config.json)", n,
              AB == 'A' ? "[r, in]" : "[out, r]", (long long)r);
    if (!hf_dtype_bytes(t->dtype) || t->end - t->begin != hf_dtype_bytes(t->dtype) * hf_numel(t) ||
        in->data0 + t->end > in->size)
      hf_fail(in->path, "tensor '%s': dtype %s or data_offsets do not hold it within the file", n, t->dtype);
    count[k]++;
    Src *s = ar_alloc(ar, sizeof(Src));
    *s = (Src){n, in, t, true};
    add_out(o, nout, mp, 1, s, NULL, NULL);
  }
  bool qkv = count[0] || count[1] || count[2];
  for (int k = 0; k <= NMOD; k++)
    if ((count[k] && count[k] != 2 * (k == NMOD ? 1 : m->L)) || (qkv && k < 3 && !count[k]))
      hf_fail(in->path,
              "%s has adapters on %d of its %lld modules%s: memplan adapts every layer a target matches, and q, k "
              "and v together",
              k == NMOD ? "lm_head" : mods[k][0], count[k] / 2, (long long)(k == NMOD ? 1 : m->L),
              k < 3 ? " (or q_proj, k_proj, v_proj are not all adapted)" : "");
  text_printf(y, "lora: {rank: %lld, alpha: %.17g, dropout: %.17g, targets: [", (long long)r, alpha, dropout);
  for (int k = 0, first = 1; k <= NMOD; k++)
    if (count[k]) text_printf(y, "%s%s", first ? "" : ", ", k == NMOD ? "logits" : mods[k][1]), first = 0;
  text_printf(y, "]}   # PEFT's adapter_config.json\n");
}

static char *pending_dir;                            /* the temporary folder until it is renamed: removed on any exit */
static void remove_dir(const char *dir, int depth) { /* its files, and export-hf's adapter/ folder */
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char p[4200];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      if (unlink(p) != 0 && depth < 1) remove_dir(p, depth + 1);
    }
    closedir(d);
  }
  rmdir(dir);
}
static void remove_pending_dir(void) {
  if (pending_dir) remove_dir(pending_dir, 0);
}

static bool close_synced(FILE *f) {
  bool ok = fflush(f) == 0;
  ok = fsync(fileno(f)) == 0 && ok;
  return fclose(f) == 0 && ok;
}

static bool write_weights(FILE *f, const Out *o, int n) {
  Text h = {0};
  text_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"memplan import-hf\"}");
  int64_t at = 0;
  for (int j = 0; j < n; j++) {
    int64_t count = o[j].shape[0] * (o[j].rank == 2 ? o[j].shape[1] : 1);
    text_printf(&h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld", o[j].name, (long long)o[j].shape[0]);
    if (o[j].rank == 2) text_printf(&h, ",%lld", (long long)o[j].shape[1]);
    text_printf(&h, "],\"data_offsets\":[%lld,%lld]}", (long long)at, (long long)(at + 4 * count));
    at += 4 * count;
  }
  text_printf(&h, "}");
  while (h.n % 8) text_printf(&h, " ");
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
  bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.s, 1, h.n, f) == h.n;
  text_free(&h);
  float *buf = malloc(sizeof(float) * CHUNK);
  unsigned char *raw = malloc(4 * (size_t)CHUNK);
  if (!buf || !raw) hf_fail("weights.safetensors", "out of memory");
  for (int j = 0; j < n && ok; j++)
    for (int s = 0; s < o[j].nsrc && ok; s++) {
      const Src *u = o[j].src[s];
      int64_t total = hf_numel(u->t);
      for (int64_t a = 0; a < total && ok; a += CHUNK) {
        int64_t c = total - a < CHUNK ? total - a : CHUNK;
        hf_read_f32(u->in, u->t, a, c, buf, raw);
        ok = fwrite(buf, sizeof(float), (size_t)c, f) == (size_t)c;
      }
    }
  free(buf), free(raw);
  return ok;
}

int import_dir_main(const char *dir, const char *out, const char *const set[2]) {
  Arena ar = {0};
  ImportOpts o = {{set[0], set[1]}, out, dir};
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    hf_fail(dir, "not a folder: give a Hugging Face model folder (config.json, model.safetensors)");
  if (stat(out, &st) == 0 || errno != ENOENT)
    hf_fail(out, "exists: give a new folder (import-hf never writes over one)");
  Cfg cfg = read_json(&ar, ar_printf(&ar, "%s/config.json", dir), true);
  Model m = read_config(&cfg, &o);
  HfIn *files;
  int nfiles, nout;
  Srcs S = read_sources(&ar, dir, &files, &nfiles);
  if (m.family == FAM_GPT2 && nfiles != 1)
    hf_fail(dir, "a sharded GPT-2: memplan reads GPT-2 from one model.safetensors");
  Out *outs = m.family == FAM_GPT2 ? NULL : map_tensors(&m, &S, &nout);
  Text y = {0};
  model_yaml(&y, &m, dir);
  if (m.family != FAM_GPT2) peft_import(&ar, dir, &m, outs, &nout, &y);
  /* atomically: a temporary folder beside OUT, each file synced, renamed */
  char *tmp = ar_printf(&ar, "%s.tmp.%ld", out, (long)getpid());
  if (mkdir(tmp, 0777) != 0) hf_fail(out, "cannot create %s: %s", tmp, strerror(errno));
  pending_dir = tmp;
  atexit(remove_pending_dir);
  FILE *f = fopen(ar_printf(&ar, "%s/model.yaml", tmp), "wb");
  bool ok = f && fwrite(y.s, 1, y.n, f) == y.n;
  ok = f && close_synced(f) && ok;
  f = ok ? fopen(ar_printf(&ar, "%s/weights.safetensors", tmp), "wb") : NULL;
  ok = f && (m.family == FAM_GPT2 ? hf_gpt2_write(&files[0], NULL, NULL, f, &nout) : write_weights(f, outs, nout));
  ok = f && close_synced(f) && ok;
  if (!ok || rename(tmp, out) != 0) hf_fail(out, "cannot write: %s", strerror(errno));
  pending_dir = NULL;
  printf("memplan import-hf: %s (%s, %lld layers) -> %s/model.yaml, %s/weights.safetensors: %d tensors (F32)\n", dir,
         ARCH[m.family], (long long)m.L, out, out, nout);
  for (int j = 0; j < nfiles; j++) fclose(files[j].f);
  free(outs);
  text_free(&y);
  ar_free(&ar);
  return EXIT_OK;
}

/* ---- memplan export-hf: a trained checkpoint back as a Hugging Face folder ---- */

const char export_help[] =
    "usage: memplan export-hf PLAN CHECKPOINT -o HFDIR [--merge]\n"
    "  Writes a checkpoint of a Llama-family plan (PLAN: the folder memplan compile -o wrote, or its\n"
    "  plan.json; CHECKPOINT: the trainer's --save file, or any safetensors file of its parameters)\n"
    "  as a Hugging Face folder HFDIR (new; atomically): config.json (LlamaForCausalLM,\n"
    "  Qwen2ForCausalLM or MistralForCausalLM, from the plan's dims, eps, theta and rope scaling)\n"
    "  and model.safetensors (HF's names, F32), the name map of import-hf reversed.\n"
    "      --merge     fold LoRA adapters L.lora_A [r, in], L.lora_B [out, r] into L.weight:\n"
    "                  W + (alpha / r) B A, alpha and r from plan.json's \"lora\"; without it the\n"
    "                  adapters are written as PEFT's in HFDIR/adapter/ (adapter_config.json,\n"
    "                  adapter_model.safetensors)\n"
    "  -o, --output HFDIR  the folder to write\n"
    "  -h, --help    this help\n";

typedef struct {
  const char *hf;    /* HF's name */
  const StTensor *w; /* the memplan parameter it comes from */
  int64_t row0, rows, cols;
  int64_t wrows;           /* the whole parameter's rows (its plan shape's first dim) */
  int rank;                /* the parameter's rank in the plan */
  const StTensor *la, *lb; /* LoRA A [r, in], B [out, r] of it (--merge), or NULL */
  bool lpart;              /* la, lb are the row block's own (B [rows, r]: PEFT's q_proj), not the whole weight's */
  const StTensor *absmax;  /* a frozen weight stored as int8 (I8) or NF4 (U8): its <param>.absmax, else NULL */
  int64_t group;           /* elements per absmax: the row (int8) or RT_NF4_BLOCK */
} XOut;

static const StTensor *st_find(const HfIn *in, const char *name) {
  for (int i = 0; i < in->n; i++)
    if (!strcmp(in->t[i].name, name)) return &in->t[i];
  return NULL;
}

/* plan.json's lora {rank, alpha} (part of the LoRA plans' format): the merge's scale alpha / rank. */
static double lora_scale(Arena *ar, const char *plan_path) {
  size_t len = 0;
  char *s = slurp(ar, plan_path, &len);
  Cfg c = {plan_path, NULL, 0};
  c.f = json_read_fields(ar, plan_path, s, len, &c.n);
  const JsonField *r = cfg_find(&c, "lora/rank"), *a = cfg_find(&c, "lora/alpha");
  if (!r || !a || r->kind != JF_NUM || a->kind != JF_NUM || !(r->num > 0))
    hf_fail(plan_path, "no \"lora\": {\"rank\", \"alpha\"}: --merge needs the plan of the LoRA run");
  return a->num / r->num;
}

typedef struct {
  Arena *ar;
  const HfIn *in;
  XOut *x;
  int n;
  const char *ck, *plan, *model;
  const Plan *p;
} XCtx;

/* HF's tensor hf: rows [row0, row0 + rows) of the parameter mp (rows 0: all), with its adapters: the whole
 * weight's, or those of the row block named part (NULL: none), "h0.attn.q" of "h0.attn.qkv.weight". */
static void xadd(XCtx *X, const char *hf, const char *mp, int64_t row0, int64_t rows, const char *part) {
  const StTensor *w = st_find(X->in, mp);
  if (!w) hf_fail(X->ck, "no tensor '%s': not a checkpoint of %s (%s)", mp, X->model, X->plan);
  /* --base-weights int8 and nf4 store a frozen weight as I8 codes (its shape) or U8 pairs of NF4 codes
   * ([ceil(numel / 2)]) with an F32 <param>.absmax (README, "Frozen weights' storage") */
  bool i8 = !strcmp(w->dtype, "I8"), nf4 = !strcmp(w->dtype, "U8");
  int64_t es = i8 || nf4 ? 1 : hf_dtype_bytes(w->dtype);
  if (!es || w->end - w->begin != es * hf_numel(w) || X->in->data0 + w->end > X->in->size || w->rank > 2)
    hf_fail(X->ck, "tensor '%s': dtype %s, rank %d or data_offsets do not hold it within the file", mp, w->dtype,
            w->rank);
  const PlanBuffer *pb = NULL;
  for (int b = 0; b < X->p->nbuf && !pb; b++)
    if (X->p->buf[b].role == ROLE_PARAM && !strcmp(X->p->buf[b].name, mp)) pb = &X->p->buf[b];
  int64_t numel = 1;
  for (int d = 0; pb && d < pb->shape.rank; d++) numel *= pb->shape.d[d];
  bool same = pb && (nf4 ? w->rank == 1 && w->shape[0] == (numel + 1) / 2 : pb->shape.rank == w->rank);
  for (int d = 0; same && !nf4 && d < w->rank; d++) same = pb->shape.d[d] == w->shape[d];
  if (!same || pb->shape.rank > 2 || row0 + rows > pb->shape.d[0]) {
    char got[96], need[96];
    shape_str(got, sizeof got, w->rank, w->shape);
    shape_str(need, sizeof need, pb ? pb->shape.rank : 0, pb ? pb->shape.d : w->shape);
    hf_fail(X->ck, "tensor '%s' has shape %s; the plan's is %s%s (%s)", mp, got, pb ? need : "absent",
            nf4 ? " (as NF4: U8 [ceil(numel / 2)])" : "", X->plan);
  }
  XOut *u = &X->x[X->n++];
  u->hf = ar_strdup(X->ar, hf), u->w = w, u->row0 = row0, u->rank = pb->shape.rank;
  u->cols = u->rank == 2 ? pb->shape.d[1] : 1;
  u->wrows = pb->shape.d[0];
  u->rows = rows ? rows : u->wrows;
  if ((i8 || nf4) && pb->dtype != (i8 ? DT_I8 : DT_NF4))
    hf_fail(X->ck,
            "tensor '%s' is stored as %s (%s), but the plan stores it as %s: give the plan of the run that "
            "saved the checkpoint",
            mp, i8 ? "int8" : "NF4", w->dtype, dtype_name(pb->dtype));
  if (i8 || nf4) {
    const char *an = ar_printf(X->ar, "%s.absmax", mp);
    u->absmax = st_find(X->in, an);
    u->group = i8 ? pb->shape.d[pb->shape.rank - 1] : RT_NF4_BLOCK;
    int64_t groups = (numel + u->group - 1) / u->group;
    if (!u->absmax || strcmp(u->absmax->dtype, "F32") || hf_numel(u->absmax) != groups ||
        u->absmax->end - u->absmax->begin != 4 * groups || X->in->data0 + u->absmax->end > X->in->size)
      hf_fail(X->ck,
              "tensor '%s' is stored as %s: it needs '%s', F32 with %lld values (one per %lld "
              "elements), as the trainer's --save writes it",
              mp, i8 ? "int8" : "NF4", an, (long long)groups, (long long)u->group);
  }
  if (u->rank == 2) {
    char *base = ar_strdup(X->ar, mp);
    base[strlen(base) - 7] = 0; /* ".weight" */
    u->la = st_find(X->in, ar_printf(X->ar, "%s.lora_A", base));
    u->lb = st_find(X->in, ar_printf(X->ar, "%s.lora_B", base));
    const StTensor *pa = part ? st_find(X->in, ar_printf(X->ar, "%s.lora_A", part)) : NULL;
    const StTensor *pb2 = part ? st_find(X->in, ar_printf(X->ar, "%s.lora_B", part)) : NULL;
    if ((pa || pb2) && (u->la || u->lb))
      hf_fail(X->ck, "'%s' has adapters of its own and of its row block '%s': a LoRA run makes one or the other", mp,
              part);
    if (pa || pb2) u->la = pa, u->lb = pb2, u->lpart = true;
  }
}

/* count elements of u's weight from element at, as floats; int8 and NF4 codes dequantized with the trainer's
 * float operations (runtime/cpu.c's rt_i8_to_f32 and rt_nf4_to_f32), so the export is the weights it computed
 * with. raw: 4 count bytes of scratch; am: count floats. */
static void x_read(const HfIn *in, const XOut *u, int64_t at, int64_t count, float *dst, unsigned char *raw,
                   float *am) {
  if (!u->absmax) {
    hf_read_f32(in, u->w, at, count, dst, raw);
    return;
  }
  static const float nf4[16] = RT_NF4_TABLE;
  int64_t g0 = at / u->group, b0 = at / 2;
  hf_read_f32(in, u->absmax, g0, (at + count - 1) / u->group - g0 + 1, am, raw);
  bool i8 = !strcmp(u->w->dtype, "I8");
  if (i8) hf_read_raw(in, u->w, at, count, raw);
  else hf_read_raw(in, u->w, b0, (at + count - 1) / 2 - b0 + 1, raw);
  for (int64_t i = at; i < at + count; i++)
    dst[i - at] = i8 ? (float)(int8_t)raw[i - at] * (am[i / u->group - g0] / 127.0f)
                     : nf4[(raw[i / 2 - b0] >> (i % 2 ? 0 : 4)) & 15] * am[i / u->group - g0];
}

/* PEFT's name of an adapter of HF's weight "model.layers.0.self_attn.q_proj.weight": "base_model.model.model.
 * layers.0.self_attn.q_proj.lora_A.weight" (AB: 'A' or 'B'). */
static const char *peft_name(Arena *ar, const char *hf, char AB) {
  return ar_printf(ar, "base_model.model.%.*s.lora_%c.weight", (int)(strlen(hf) - 7), hf, AB);
}

/* Without --merge: the adapters as PEFT writes them (its LoraConfig in adapter_config.json, lora_A [r, in] and
 * lora_B [out, r] of each adapted module in adapter_model.safetensors, F32): the header into h, the config into
 * cfg. A packed qkv adapter has no PEFT form for a Llama (its q_proj, k_proj and v_proj are apart). */
static void peft_adapters(Arena *ar, const XOut *x, int nx, const Plan *p, const char *ck, Text *h, Text *cfg) {
  text_printf(h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"memplan export-hf\"}");
  text_printf(cfg, "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"r\": %lld,\n",
              (long long)p->lora_rank);
  text_printf(cfg, "  \"lora_alpha\": %.17g,\n  \"lora_dropout\": %.17g,\n", p->lora_alpha, p->lora_dropout);
  text_printf(cfg,
              "  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n  \"use_rslora\": false,\n"
              "  \"use_dora\": false,\n  \"inference_mode\": true,\n  \"target_modules\": [");
  int64_t at = 0;
  int nt = 0;
  const char *seen[16];
  for (int j = 0; j < nx; j++) {
    const XOut *u = &x[j];
    if (!u->la) continue;
    if (!u->lpart && u->rows != u->wrows)
      hf_fail(ck,
              "'%s' has one adapter over q, k and v (LoRA target qkv), which PEFT cannot write for a Llama: give "
              "--merge, or fine-tune with the targets q, k, v (PEFT's q_proj, k_proj, v_proj)",
              u->w->name);
    int64_t r = u->la->shape[0], n[2][2] = {{r, u->cols}, {u->lpart ? u->rows : u->wrows, r}};
    for (int k = 0; k < 2; k++) {
      text_printf(h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                  peft_name(ar, u->hf, "AB"[k]), (long long)n[k][0], (long long)n[k][1], (long long)at,
                  (long long)(at + 4 * n[k][0] * n[k][1]));
      at += 4 * n[k][0] * n[k][1];
    }
    const char *dot = strrchr(u->hf, '.'), *m = dot - 1; /* the module: "q_proj" of "...self_attn.q_proj.weight" */
    while (m > u->hf && m[-1] != '.') m--;
    const char *mod = ar_printf(ar, "%.*s", (int)(dot - m), m);
    bool dup = false;
    for (int i = 0; i < nt; i++) dup |= !strcmp(seen[i], mod);
    if (!dup && nt < 16) text_printf(cfg, "%s\"%s\"", nt ? ", " : "", mod), seen[nt++] = mod;
  }
  text_printf(h, "}");
  while (h->n % 8) text_printf(h, " ");
  text_printf(cfg, "],\n  \"base_model_name_or_path\": null\n}\n");
}

/* adapter_model.safetensors: the header h, then each adapter's A and B (peft_adapters' order). */
static bool peft_write(FILE *f, const HfIn *in, const XOut *x, int nx, const Text *h) {
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h->n >> (8 * k));
  bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h->s, 1, h->n, f) == h->n;
  float *buf = malloc(sizeof(float) * CHUNK);
  unsigned char *raw = malloc(4 * (size_t)CHUNK);
  if (!buf || !raw) hf_fail(in->path, "out of memory");
  for (int j = 0; j < nx && ok; j++)
    for (int k = 0; k < 2 && x[j].la && ok; k++) {
      const StTensor *t = k ? x[j].lb : x[j].la;
      for (int64_t a = 0, n = hf_numel(t); a < n && ok; a += CHUNK) {
        int64_t c = n - a < CHUNK ? n - a : CHUNK;
        hf_read_f32(in, t, a, c, buf, raw);
        ok = fwrite(buf, sizeof(float), (size_t)c, f) == (size_t)c;
      }
    }
  free(buf), free(raw);
  return ok;
}

int export_main(int argc, char **argv) {
  hf_cmd = "export-hf";
  static const struct option longs[] = {
      {"output", required_argument, 0, 'o'}, {"merge", no_argument, 0, 'm'}, {"help", no_argument, 0, 'h'}, {0}};
  const char *out = NULL;
  bool merge = false;
  optind = 1;
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
    if (ch == 'h') {
      fputs(export_help, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      exit(EXIT_OK);
    } else if (ch == 'o') out = optarg;
    else if (ch == 'm') merge = true;
    else cli_bad_option("export-hf", ch, argv);
  }
  if (optind + 2 > argc)
    cli_usage_error("export-hf", "give the plan and the checkpoint: memplan export-hf PLAN CKPT -o HFDIR");
  if (optind + 2 < argc) cli_usage_error("export-hf", "unexpected argument '%s'", argv[optind + 2]);
  if (!out) cli_usage_error("export-hf", "no output given: -o HFDIR");
  Arena ar = {0};
  const char *plan_path = argv[optind], *ck = argv[optind + 1];
  struct stat st;
  if (stat(plan_path, &st) == 0 && S_ISDIR(st.st_mode)) plan_path = ar_printf(&ar, "%s/plan.json", plan_path);
  if (stat(out, &st) == 0 || errno != ENOENT)
    hf_fail(out, "exists: give a new folder (export-hf never writes over one)");
  size_t len = 0;
  char *text = slurp(&ar, plan_path, &len);
  if (!text) hf_fail(plan_path, "no such file: give the folder memplan compile -o wrote, or its plan.json");
  const Plan *p = plan_read(&ar, plan_path, text, len);
  /* the model: rope's heads and frequencies, rmsnorm's eps, the parameters */
  const PlanOp *rope = NULL, *norm = NULL;
  for (int i = 0; i < p->nsched; i++) {
    if (p->sched[i].phase != PHASE_FORWARD) continue;
    if (p->sched[i].op == OP_ROPE && !rope) rope = &p->sched[i];
    if (p->sched[i].op == OP_RMSNORM && !norm) norm = &p->sched[i];
  }
  if (!rope || !norm || rope->nfarg < 5 || norm->nfarg < 1)
    hf_fail(plan_path,
            "model '%s' is not of the Llama family (no rope or no rmsnorm): export-hf writes Llama, "
            "Qwen2 and Mistral models",
            p->model);
  int64_t NH = rope->dim[2], KVH = rope->dim[3], hd = rope->dim[4], L = 0;
  const PlanBuffer *emb = NULL;
  bool head = false, qkv_bias = false, proj_bias = false;
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    if (pb->role != ROLE_PARAM) continue;
    long long l;
    int used = 0;
    if (sscanf(pb->name, "h%lld.%n", &l, &used) == 1 && used && l + 1 > L) L = l + 1;
    if (!strcmp(pb->name, "emb.weight")) emb = pb;
    head |= !strcmp(pb->name, "logits.weight");
    qkv_bias |= !strcmp(pb->name, "h0.attn.qkv.bias");
    proj_bias |= !strcmp(pb->name, "h0.attn.proj.bias");
  }
  if (!emb || !L)
    hf_fail(plan_path,
            "model '%s' has no emb.weight or no layers hN: not import-hf's Llama-family "
            "names (docs/fine-tuning.md, \"Hugging Face checkpoints\")",
            p->model);
  int64_t V = emb->shape.d[0], C = emb->shape.d[1], F = 0, T = 0;
  for (int i = 0; i < p->ndims; i++)
    if (!strcmp(p->dims[i].name, "T")) T = p->dims[i].value;
  int family = strstr(p->model, "mistral") ? FAM_MISTRAL : qkv_bias && !proj_bias ? FAM_QWEN2 : FAM_LLAMA;
  if (proj_bias && !qkv_bias) hf_fail(plan_path, "an o_proj bias without q/k/v biases: no Hugging Face Llama has that");
  if (family == FAM_MISTRAL && (qkv_bias || proj_bias)) family = FAM_LLAMA;
  /* the checkpoint, and what it writes */
  HfIn in = hf_open(&ar, ck);
  double scale = 0;
  XOut *x = calloc((size_t)(12 * L + 8), sizeof(XOut));
  if (!x) hf_fail(ck, "out of memory");
  int nx = 0, nlora = 0;
  for (int i = 0; i < in.n; i++) nlora += strstr(in.t[i].name, ".lora_A") != NULL;
  if (nlora && merge) scale = lora_scale(&ar, plan_path);
  if (nlora && !merge && !p->lora_rank)
    hf_fail(plan_path, "no \"lora\": {\"rank\", \"alpha\"}: a checkpoint with adapters needs the plan of its LoRA run");
  Text cfg = {0};
  XCtx X = {&ar, &in, x, 0, ck, plan_path, p->model, p};
  xadd(&X, "model.embed_tokens.weight", "emb.weight", 0, 0, NULL);
  char hf[160];
  for (int64_t l = 0; l < L; l++) {
    const char *qkv = "qkv";
    snprintf(hf, sizeof hf, "model.layers.%lld.input_layernorm.weight", (long long)l);
    xadd(&X, hf, ar_printf(&ar, "h%lld.norm1.weight", (long long)l), 0, 0, NULL);
    for (int b = 0; b < 1 + qkv_bias; b++)
      for (int i = 0; i < 3; i++) {
        snprintf(hf, sizeof hf, "model.layers.%lld.self_attn.%c_proj.%s", (long long)l, qkv[i], b ? "bias" : "weight");
        xadd(&X, hf, ar_printf(&ar, "h%lld.attn.qkv.%s", (long long)l, b ? "bias" : "weight"),
             i == 0 ? 0 : (NH + (i - 1) * KVH) * hd, (i ? KVH : NH) * hd,
             b ? NULL : ar_printf(&ar, "h%lld.attn.%c", (long long)l, qkv[i]));
      }
    for (int b = 0; b < 1 + proj_bias; b++) {
      snprintf(hf, sizeof hf, "model.layers.%lld.self_attn.o_proj.%s", (long long)l, b ? "bias" : "weight");
      xadd(&X, hf, ar_printf(&ar, "h%lld.attn.proj.%s", (long long)l, b ? "bias" : "weight"), 0, 0, NULL);
    }
    snprintf(hf, sizeof hf, "model.layers.%lld.post_attention_layernorm.weight", (long long)l);
    xadd(&X, hf, ar_printf(&ar, "h%lld.norm2.weight", (long long)l), 0, 0, NULL);
    const char *mlp[3] = {"gate", "up", "down"};
    for (int i = 0; i < 3; i++) {
      snprintf(hf, sizeof hf, "model.layers.%lld.mlp.%s_proj.weight", (long long)l, mlp[i]);
      xadd(&X, hf, ar_printf(&ar, "h%lld.%s.weight", (long long)l, mlp[i]), 0, 0, NULL);
      if (i == 0) F = x[X.n - 1].rows;
    }
  }
  xadd(&X, "model.norm.weight", "norm.weight", 0, 0, NULL);
  if (head) xadd(&X, "lm_head.weight", "logits.weight", 0, 0, NULL);
  nx = X.n;
  for (int i = 0; i < in.n; i++) { /* every adapter belongs to an exported weight */
    const char *n = in.t[i].name, *dot = strstr(n, ".lora_A");
    bool found = !dot;
    for (int j = 0; j < nx && !found; j++)
      found = (x[j].la && strlen(x[j].la->name) == (size_t)(dot - n) + 7 &&
               !strncmp(x[j].la->name, n, (size_t)(dot - n) + 7)) ||
              (strlen(x[j].w->name) == (size_t)(dot - n) + 7 && !strncmp(x[j].w->name, n, (size_t)(dot - n)));
    if (!found) hf_fail(ck, "adapter '%s' belongs to no weight export-hf writes: cannot merge it", n);
  }
  for (int j = 0; j < nx; j++) { /* adapters: A [r, cols], B [rows of the whole weight, r] */
    XOut *u = &x[j];
    const char *of = u->lpart ? u->hf : u->w->name;
    int64_t brows = u->lpart ? u->rows : u->wrows;
    if (!u->la != !u->lb) hf_fail(ck, "the adapters of '%s' have only one of lora_A and lora_B", of);
    if (u->la && (u->la->rank != 2 || u->lb->rank != 2 || u->la->shape[1] != u->cols || u->lb->shape[0] != brows ||
                  u->lb->shape[1] != u->la->shape[0]))
      hf_fail(ck, "the adapters of '%s' do not fit it: lora_A must be [r, %lld], lora_B [%lld, r]", of,
              (long long)u->cols, (long long)brows);
  }
  Text ah = {0}, acfg = {0}; /* without --merge: PEFT's adapter_model.safetensors header, adapter_config.json */
  if (nlora && !merge) peft_adapters(&ar, x, nx, p, ck, &ah, &acfg);
  /* config.json */
  text_printf(&cfg, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", ARCH[family],
              family == FAM_QWEN2     ? "qwen2"
              : family == FAM_MISTRAL ? "mistral"
                                      : "llama");
  text_printf(&cfg, "  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n  \"num_hidden_layers\": %lld,\n",
              (long long)C, (long long)F, (long long)L);
  text_printf(&cfg, "  \"num_attention_heads\": %lld,\n  \"num_key_value_heads\": %lld,\n  \"head_dim\": %lld,\n",
              (long long)NH, (long long)KVH, (long long)hd);
  text_printf(&cfg, "  \"vocab_size\": %lld,\n  \"rms_norm_eps\": %.17g,\n  \"rope_theta\": %.17g,\n", (long long)V,
              norm->farg[0], rope->farg[0]);
  int64_t maxpos = T > (int64_t)rope->farg[4] ? T : (int64_t)rope->farg[4];
  text_printf(&cfg, "  \"max_position_embeddings\": %lld,\n  \"hidden_act\": \"silu\",\n", (long long)maxpos);
  if (rope->farg[1] > 0)
    text_printf(&cfg,
                "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g, \"low_freq_factor\": %.17g, "
                "\"high_freq_factor\": %.17g, \"original_max_position_embeddings\": %lld},\n",
                rope->farg[1], rope->farg[2], rope->farg[3], (long long)rope->farg[4]);
  else text_printf(&cfg, "  \"rope_scaling\": null,\n");
  if (family == FAM_LLAMA)
    text_printf(&cfg, "  \"attention_bias\": %s,\n  \"mlp_bias\": false,\n", proj_bias ? "true" : "false");
  if (family == FAM_QWEN2) text_printf(&cfg, "  \"use_sliding_window\": false,\n");
  if (family == FAM_MISTRAL) text_printf(&cfg, "  \"sliding_window\": null,\n");
  text_printf(&cfg, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\"\n}\n", head ? "false" : "true");
  /* model.safetensors's header */
  Text h = {0};
  text_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"memplan export-hf\"}");
  int64_t at = 0;
  for (int j = 0; j < nx; j++) {
    int64_t count = x[j].rows * x[j].cols;
    text_printf(&h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld", x[j].hf, (long long)x[j].rows);
    if (x[j].rank == 2) text_printf(&h, ",%lld", (long long)x[j].cols);
    text_printf(&h, "],\"data_offsets\":[%lld,%lld]}", (long long)at, (long long)(at + 4 * count));
    at += 4 * count;
  }
  text_printf(&h, "}");
  while (h.n % 8) text_printf(&h, " ");
  /* atomically: a temporary folder beside HFDIR, each file synced, renamed */
  char *tmp = ar_printf(&ar, "%s.tmp.%ld", out, (long)getpid());
  if (mkdir(tmp, 0777) != 0) hf_fail(out, "cannot create %s: %s", tmp, strerror(errno));
  pending_dir = tmp;
  atexit(remove_pending_dir);
  FILE *f = fopen(ar_printf(&ar, "%s/config.json", tmp), "wb");
  bool ok = f && fwrite(cfg.s, 1, cfg.n, f) == cfg.n;
  ok = f && close_synced(f) && ok;
  f = ok ? fopen(ar_printf(&ar, "%s/model.safetensors", tmp), "wb") : NULL;
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
  ok = f && fwrite(len8, 1, 8, f) == 8 && fwrite(h.s, 1, h.n, f) == h.n;
  /* row by row (a row of a merged weight: W[o] + scale sum_r B[o, r] A[r]; A held whole) */
  int64_t maxc = 1;
  for (int j = 0; j < nx; j++) maxc = x[j].cols > maxc ? x[j].cols : maxc;
  float *row = malloc(sizeof(float) * (size_t)(maxc > CHUNK ? maxc : CHUNK)), *brow = malloc(sizeof(float) * 4096);
  unsigned char *raw = malloc(4 * (size_t)(maxc > CHUNK ? maxc : CHUNK));
  float *am = malloc(sizeof(float) * (size_t)(maxc > CHUNK ? maxc : CHUNK));
  if (!row || !brow || !raw || !am) hf_fail(ck, "out of memory");
  for (int j = 0; j < nx && ok; j++) {
    const XOut *u = &x[j];
    if (!u->la || !merge) {
      for (int64_t a = 0, n = u->rows * u->cols; a < n && ok; a += CHUNK) {
        int64_t c = n - a < CHUNK ? n - a : CHUNK;
        x_read(&in, u, u->row0 * u->cols + a, c, row, raw, am);
        ok = fwrite(row, sizeof(float), (size_t)c, f) == (size_t)c;
      }
      continue;
    }
    int64_t r = u->la->shape[0];
    if (r > 4096) hf_fail(ck, "LoRA rank %lld of '%s' is over 4096", (long long)r, u->w->name);
    float *A = malloc(sizeof(float) * (size_t)(r * u->cols));
    unsigned char *araw = malloc(4 * (size_t)(r * u->cols));
    if (!A || !araw) hf_fail(ck, "out of memory for the adapters of '%s'", u->w->name);
    hf_read_f32(&in, u->la, 0, r * u->cols, A, araw);
    for (int64_t o = u->row0; o < u->row0 + u->rows && ok; o++) {
      x_read(&in, u, o * u->cols, u->cols, row, raw, am);
      hf_read_f32(&in, u->lb, (u->lpart ? o - u->row0 : o) * r, r, brow, raw);
      for (int64_t k = 0; k < r; k++) {
        double b = scale * brow[k];
        for (int64_t c = 0; c < u->cols; c++) row[c] += (float)(b * A[k * u->cols + c]);
      }
      ok = fwrite(row, sizeof(float), (size_t)u->cols, f) == (size_t)u->cols;
    }
    free(A), free(araw);
  }
  ok = f && close_synced(f) && ok;
  if (ok && ah.n) { /* in HFDIR/adapter/: HFDIR itself stays a plain model folder for from_pretrained */
    ok = mkdir(ar_printf(&ar, "%s/adapter", tmp), 0777) == 0;
    f = ok ? fopen(ar_printf(&ar, "%s/adapter/adapter_config.json", tmp), "wb") : NULL;
    ok = f && fwrite(acfg.s, 1, acfg.n, f) == acfg.n;
    ok = f && close_synced(f) && ok;
    f = ok ? fopen(ar_printf(&ar, "%s/adapter/adapter_model.safetensors", tmp), "wb") : NULL;
    ok = f && peft_write(f, &in, x, nx, &ah);
    ok = f && close_synced(f) && ok;
  }
  if (!ok || rename(tmp, out) != 0) hf_fail(out, "cannot write: %s", strerror(errno));
  pending_dir = NULL;
  printf("memplan export-hf: %s -> %s/config.json, %s/model.safetensors: %s, %d tensors (F32)%s\n", ck, out, out,
         ARCH[family], nx,
         !nlora  ? ""
         : merge ? ", LoRA adapters merged"
                 : "; adapter/adapter_config.json, "
                   "adapter/adapter_model.safetensors: PEFT's LoRA adapters");
  fclose(in.f);
  free(x), free(row), free(brow), free(raw), free(am);
  text_free(&cfg), text_free(&h), text_free(&ah), text_free(&acfg);
  ar_free(&ar);
  return EXIT_OK;
}
