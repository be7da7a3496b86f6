/* trainer_generate.c: the trainer program's generation (--generate): sampling over the eval plan (trainer_internal.h).
 */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// generation (--generate): llm.c's sampling loop over the eval plan. Each new
// token runs the eval forward on the last T tokens (row 0 of its [B, T]
// tokens input; the other rows and the targets zero: attention is causal, so
// position w-1 sees only the window) and samples from the logits at the
// window's last position, which the plan keeps whole until eval() returns
// (TrModel.eval_logits_offset). Planned buffers only: the context, weights
// and order below are allocated at setup, nothing per token.

/* Whether token x ranks before y: the larger logit, the lower id on ties
 * (so the first is torch.argmax's first maximum). */
static int ranks_before(const float *lg, int32_t x, int32_t y) { return lg[x] > lg[y] || (lg[x] == lg[y] && x < y); }

static void sift(int32_t *a, int64_t i, int64_t n, const float *lg) {
  for (int64_t c; (c = 2 * i + 1) < n; i = c) {
    if (c + 1 < n && ranks_before(lg, a[c], a[c + 1])) c++; /* the worse child */
    if (!ranks_before(lg, a[i], a[c])) return;
    int32_t t = a[i];
    a[i] = a[c], a[c] = t;
  }
}

/* order[0, V): every id, best first (heapsort: no allocation, unlike qsort). */
static void sort_by_logit(int32_t *order, int64_t V, const float *lg) {
  for (int64_t j = 0; j < V; j++) order[j] = (int32_t)j;
  for (int64_t i = V / 2 - 1; i >= 0; i--) sift(order, i, V, lg);
  for (int64_t n = V - 1; n > 0; n--) {
    int32_t t = order[0];
    order[0] = order[n], order[n] = t;
    sift(order, 0, n, lg);
  }
}

/* The next token from logits lg[V]: greedy (the first maximum) at
 * temperature 0 or top-k 1; else softmax(lg / temperature) over the top-k
 * tokens (0: all), cut to the fewest best whose mass reaches top-p of it,
 * renormalized, sampled with one uniform draw (as HF's sampling). */
static int32_t pick_token(const float *lg, int64_t V, const Opts *o, Rng *rng, Gen *g, int64_t at) {
  int64_t best = 0;
  for (int64_t j = 0; j < V; j++) {
    if (!isfinite(lg[j]))
      die("--generate: the logit of token %lld is %g at generated token %lld: the weights are not finite "
          "(a diverged run?)",
          (long long)j, (double)lg[j], (long long)at + 1);
    if (lg[j] > lg[best]) best = j;
  }
  if (o->temperature == 0 || o->top_k == 1) return (int32_t)best;
  int sorted = o->top_k > 0 || o->top_p < 1;
  int64_t n = o->top_k > 0 && o->top_k < V ? o->top_k : V;
  if (sorted) sort_by_logit(g->order, V, lg);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = sorted ? g->order[i] : i;
    sum += g->prob[i] = exp(((double)lg[id] - (double)lg[best]) / o->temperature);
  }
  if (o->top_p < 1) {
    double c = 0.0;
    for (int64_t i = 0; i < n; i++)
      if ((c += g->prob[i]) >= o->top_p * sum) {
        n = i + 1, sum = c;
        break;
      }
  }
  double u = rng_uniform(rng) * sum, c = 0.0;
  int64_t i = 0;
  while (i < n - 1 && u >= (c += g->prob[i])) i++;
  return sorted ? g->order[i] : (int32_t)i;
}

/* A token as text (the tokenizer's bytes, or the byte itself for V = 256
 * without one); 0 when the model's tokens are printed as ids. */
static int put_token(const Gen *g, int64_t V, int32_t t) {
  size_t len = 1;
  unsigned char byte = (unsigned char)t;
  const unsigned char *b = g->bpe ? bpe_token_bytes(g->bpe, (uint32_t)t, &len) : V == 256 ? &byte : NULL;
  if (b) fwrite(b, 1, len, stdout);
  return b != NULL || g->bpe;
}

/* Setup: the prompt (--prompt TEXT tokenized as --text, --prompt-tokens FILE
 * in --data's format, or <|endoftext|> alone with a tokenizer) and the
 * buffers. The prompt must fit the eval plan's context T. */
void gen_setup(Gen *g, const Run *r, const Opts *o) {
  const TrModel *m = r->m;
  for (int k = 0; k < m->neval_in; k++)
    if (m->eval_in[k].kind == TR_IN_TOKENS) g->tok = &m->eval_in[k];
  if (!g->tok) die("--generate: the eval plan of %s has no tokens input", m->model);
  int64_t T = g->tok->cols, V = m->eval_logits_classes;
  g->cached = m->decode_run && m->ndecode && !o->no_kv_cache;
  g->context = g->cached ? m->gen_context : T;
  if (o->kv_check && !g->cached)
    die("--kv-check compares the KV cache with a recompute, and %s", o->no_kv_cache ? "--no-kv-cache turns the "
                                                                                      "cache off"
                                                                     : m->ndecode ? "this backend has no decode kernels"
                                                                                  : "this plan has none: compile with "
                                                                                    "--gen-context N");
  if (m->tokenizer) {
    char err[1024];
    if (!(g->bpe = bpe_load(m->tokenizer, err, sizeof err)))
      die("%s (the model's tokenizer, from its YAML's tokenizer: entry)", err);
  }
  BpeTokens p = {0};
  const char *what = "--prompt";
  if (o->prompt_tokens) {
    Stream st = load_tokens(o->prompt_tokens, 0, m->vocab, NULL); /* 16- or 32-bit ids */
    p.ids = st.tok, p.n = (size_t)st.n, what = "--prompt-tokens";
  } else if (o->prompt && g->bpe) bpe_encode(g->bpe, (const unsigned char *)o->prompt, strlen(o->prompt), 1, &p);
  else if (o->prompt && m->vocab >= 256) {
    p.n = strlen(o->prompt);
    p.ids = xmalloc(p.n * sizeof(uint32_t) + 1, "prompt");
    for (size_t i = 0; i < p.n; i++) p.ids[i] = (unsigned char)o->prompt[i];
  } else if (o->prompt)
    die("--prompt: %s has no tokenizer and %lld tokens, too few for bytes (V >= 256): give --prompt-tokens FILE",
        m->model, (long long)m->vocab);
  else if (g->bpe && bpe_eot(g->bpe) >= 0) { /* as llm.c: a new document */ p.ids = xmalloc(sizeof(uint32_t), "prompt");
    p.ids[0] = (uint32_t)bpe_eot(g->bpe), p.n = 1;
  } else
    die("--generate: give --prompt TEXT or --prompt-tokens FILE (only a model with a tokenizer starts from "
        "<|endoftext|> without one)");
  if (!p.n) die("%s: the prompt is empty: give at least one token", what);
  if ((int64_t)p.n > g->context && g->cached)
    die("%s: %zu tokens, longer than the generation context of %s, %lld tokens (memplan compile --gen-context): "
        "give a shorter prompt (or compile with a larger --gen-context)",
        what, p.n, m->model, (long long)g->context);
  if ((int64_t)p.n > T)
    die("%s: %zu tokens, longer than the generation context of %s, T = %lld tokens: give a shorter prompt "
        "(or compile with a larger T)",
        what, p.n, m->model, (long long)T);
  for (size_t i = 0; i < p.n; i++)
    if ((int64_t)p.ids[i] >= V)
      die("%s: token %u at position %zu is out of range: the model's vocabulary has %lld entries", what, p.ids[i], i,
          (long long)V);
  g->nprompt = (int64_t)p.n;
  g->ctx = xmalloc((size_t)(g->nprompt + o->generate) * sizeof(int32_t), "generation context");
  for (int64_t i = 0; i < g->nprompt; i++) g->ctx[i] = (int32_t)p.ids[i];
  free(p.ids);
  g->prob = xmalloc((size_t)V * sizeof(double), "generation");
  g->order = xmalloc((size_t)V * sizeof(int32_t), "generation");
  if (o->kv_check) g->check = xmalloc((size_t)V * sizeof(float), "--kv-check");
}

/* The logits of the next token after ctx[0, n), from the eval plan's
 * forward over the window (llm.c's loop): their offset in the arena. */
static int64_t recompute(Run *r, const Gen *g, int64_t n) {
  const TrModel *m = r->m;
  int64_t w = n < g->context ? n : g->context; /* T, or the cache's positions (at most T) */
  for (int k = 0; k < m->neval_in; k++)
    memset(r->arena + m->eval_in[k].offset, 0, 4 * (size_t)(m->eval_in[k].rows * m->eval_in[k].cols));
  memcpy(r->arena + g->tok->offset, g->ctx + n - w, 4 * (size_t)w);
  put_inputs(r, m->eval_in, m->neval_in);
  m->eval(r->dev);
  int64_t at = m->eval_logits_offset + 4 * m->eval_logits_classes * (w - 1);
  if (m->device) m->device->download(r->arena, r->dev, at, 4 * m->eval_logits_classes);
  return at;
}

/* The same from the KV cache: the prompt prefilled in one pass (i = 0), then
 * one token a step at position n - 1; once the cache is full, the last
 * window prefilled again each token (llm.c's sliding window). */
static int64_t decode_next(Run *r, const Gen *g, int64_t n, int64_t i) {
  const TrModel *m = r->m;
  int32_t *tok = (int32_t *)(r->arena + g->tok->offset);
  int prefill = i == 0 || n > g->context;
  int64_t w = prefill ? (n < g->context ? n : g->context) : 1; /* rows: the window, or the newest token */
  memcpy(tok, g->ctx + n - w, 4 * (size_t)w);
  if (m->device) m->device->upload(r->dev, r->arena, g->tok->offset, 4 * w);
  m->decode_run(m, r->dev, w, prefill ? 0 : n - 1);
  if (m->device) m->device->download(r->arena, r->dev, m->eval_logits_offset, 4 * m->eval_logits_classes);
  return m->eval_logits_offset;
}

/* One generation: --generate N tokens after the prompt, printed as they come. */
void generate(Run *r, const Opts *o, Gen *g) {
  const TrModel *m = r->m;
  int64_t T = g->tok->cols, V = m->eval_logits_classes, n = g->nprompt;
  Rng rng = {.s = key3(6, (uint64_t)o->seed, (uint64_t)g->calls++)};
  if (o->temperature == 0 || o->top_k == 1) printf("generate: %lld tokens, greedy\n", (long long)o->generate);
  else
    printf("generate: %lld tokens, temperature %g, top-k %lld, top-p %g, seed %lld\n", (long long)o->generate,
           o->temperature, (long long)o->top_k, o->top_p, (long long)o->seed);
  int text = 1;
  for (int64_t i = 0; i < n; i++) text = put_token(g, V, g->ctx[i]);
  fflush(stdout);
  double t0 = now_s(), t1 = t0, diff = 0.0, big = 0.0;
  for (int64_t i = 0; i < o->generate; i++) {
    int64_t at = g->cached ? decode_next(r, g, n, i) : recompute(r, g, n);
    if (i == 0) t1 = now_s();
    if (g->check) { /* the cached logits against the window's recompute */
      memcpy(g->check, r->arena + at, 4 * (size_t)V);
      at = recompute(r, g, n);
      for (int64_t j = 0; j < V; j++) {
        double a = g->check[j], b = ((const float *)(r->arena + at))[j];
        diff = fabs(a - b) > diff ? fabs(a - b) : diff, big = fabs(b) > big ? fabs(b) : big;
      }
    }
    int32_t t = pick_token((const float *)(r->arena + at), V, o, &rng, g, i);
    g->ctx[n++] = t;
    if (text) put_token(g, V, t), fflush(stdout);
  }
  double dt = now_s() - t0;
  if (text) printf("\n");
  printf("generated ids:");
  for (int64_t i = g->nprompt; i < n; i++) printf(" %d", g->ctx[i]);
  if (g->cached)
    printf(
        "\ngenerate: %lld tokens in %.3f s, %.1f tok/s (KV cache of %lld positions, %lld bytes: the %lld-token "
        "prompt prefilled in %.3f s, then %.2f decode tok/s)\n",
        (long long)o->generate, dt, (double)o->generate / dt, (long long)g->context, (long long)m->kv_cache_bytes,
        (long long)g->nprompt, t1 - t0, o->generate > 1 ? (double)(o->generate - 1) / (dt - (t1 - t0)) : 0.0);
  else
    printf("\ngenerate: %lld tokens in %.3f s, %.1f tok/s (each token recomputes its last %lld-token window)\n",
           (long long)o->generate, dt, (double)o->generate / dt, (long long)T);
  if (g->check)
    printf(
        "kv-check: cached logits against the recompute of each window: max |difference| %.3g, max |logit| "
        "%.3g, over %lld tokens\n",
        diff, big, (long long)o->generate);
  fflush(stdout);
}
