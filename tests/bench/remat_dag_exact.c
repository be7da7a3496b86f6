/* remat_dag_exact: the exact optimum of tests/bench/remat_ilp.py's integer
 * program (Checkmate's MILP) on any DAG of at most 64 forward values, by a
 * dynamic program over the sets of values present, with dominance and an
 * optional bound (docs/budgets-and-levers.md#the-exact-benchmark). The model
 * comes from tests/bench/remat_dag_exact.py (write_model), which also runs the
 * schedule it returns through remat_ilp.replay().
 *
 * The search. Stage by stage, step by step in the nodes' order as
 * remat_ilp.formulate() writes its rows, a state is the set of forward values
 * present (a bit mask) at its least cost. A value is dropped only when a row
 * would not fit otherwise, and then in every inclusion-minimal way: any
 * schedule of the MILP charges, at each of its rows, a subset of what this
 * search holds on the path that follows it (it holds more, dropping later),
 * so a minimal drop set within the values the MILP's schedule does not charge
 * is one of the branches; every path's charges are a superset of the MILP's
 * for the schedule it spells, so each is feasible there. Hence the least cost
 * over the paths is the MILP's optimum.
 * - Dominance: a state holding a superset of another's values at no more cost
 *   is at least as good (it can drop the difference for free), so the other
 *   is discarded.
 * - A value of no use later (read by no later backward op and an input of no
 *   node that can still be computed) is dropped at once.
 * - With a bound U (argument), a state whose cost so far, plus the nodes whose
 *   own stage is still ahead, plus every value it must compute again (needed
 *   later, not present, own stage passed, and the missing inputs of those,
 *   each once), plus at a stage's start what the values it holds cost again
 *   where a later backward op's row cannot hold them all (spill()), exceeds
 *   U, is cut: the search then says whether any schedule costs at most U
 *   ("none" proves the optimum above U).
 *
 * Input (stdin, numbers separated by white space):
 *   F T cap maxstates bound            (bound < 0: none; costs are in any unit)
 *   F lines: bytes work cost inplace(-1) own_stage ndeps deps...
 *   T lines: pre fixed is_node_stage nreads reads... nsteps steps... nkeep keepable-into-next...
 * Output: "optimum COST STATES" then T lines "START RMASK" (hex: the values
 * present as stage t begins its steps, and those it computes), or
 * "none STATES", or "toolarge STATES STAGE STEP".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t Mask;
typedef struct {
  Mask p, hk, start, rmask;
  double c;
} State;
typedef struct {
  State *v;
  size_t n, cap;
  size_t *slot; /* open addressing on p: index + 1, 0 empty */
  size_t nslot;
} Set;

static int F, T;
static long long cap_bytes;
static size_t max_states;
static double bound;
static long long bytes_[64], work_[64];
static double cost_[64];
static int inplace_[64];
static Mask dmask[64];
static long long pre_[4096], fixed_[4096];
static int is_node[4096];
static Mask reads_[4096], keep_[4096], later_reads[4097]; /* later_reads[t]: read by stage t's op or a later one */
static int *steps_[4096], nsteps_[4096];
static int own_stage[64];
static size_t most;

static void *xalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    fprintf(stderr, "remat_dag_exact: out of memory\n");
    exit(2);
  }
  return p;
}

static long long size_of(Mask m) {
  long long s = 0;
  while (m) {
    s += bytes_[__builtin_ctzll(m)];
    m &= m - 1;
  }
  return s;
}

static uint64_t hash(Mask p) {
  p ^= p >> 33;
  p *= 0xff51afd7ed558ccdULL;
  p ^= p >> 33;
  return p;
}

static void set_reset(Set *s) {
  s->n = 0;
  if (s->slot) memset(s->slot, 0, s->nslot * sizeof *s->slot);
}

/* the slots again for the states as they lie in v */
static void set_reindex(Set *s) {
  if (!s->nslot) return;
  memset(s->slot, 0, s->nslot * sizeof *s->slot);
  for (size_t i = 0; i < s->n; i++) {
    size_t h = hash(s->v[i].p) & (s->nslot - 1);
    while (s->slot[h]) h = (h + 1) & (s->nslot - 1);
    s->slot[h] = i + 1;
  }
}

static void set_rehash(Set *s) {
  free(s->slot);
  s->nslot = s->nslot ? s->nslot * 2 : 1024;
  s->slot = xalloc(s->nslot * sizeof *s->slot);
  set_reindex(s);
}

/* keeps the cheaper of two states with the same values present */
static void put(Set *s, State x) {
  if ((s->n + 1) * 2 > s->nslot) set_rehash(s);
  size_t h = hash(x.p) & (s->nslot - 1);
  while (s->slot[h]) {
    State *o = &s->v[s->slot[h] - 1];
    if (o->p == x.p) {
      if (x.c < o->c) *o = x;
      return;
    }
    h = (h + 1) & (s->nslot - 1);
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 1024;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) {
      fprintf(stderr, "remat_dag_exact: out of memory\n");
      exit(2);
    }
  }
  s->v[s->n] = x;
  s->slot[h] = ++s->n;
}

static int by_cost(const void *a, const void *b) {
  const State *x = a, *y = b;
  if (x->c != y->c) return x->c < y->c ? -1 : 1;
  int px = __builtin_popcountll(x->p), py = __builtin_popcountll(y->p);
  if (px != py) return py - px;
  return x->p < y->p ? -1 : x->p > y->p;
}

/* the states kept so far as one bit set per value (bit j: kept state j holds
 * it): a superset of p is in the intersection of the sets of p's values,
 * scanned word by word, the rarest values first */
static uint64_t *holds[64];
static size_t nholds[64], words;

static int kept_superset(Mask p, size_t nkept) {
  if (!p) return nkept > 0;
  int b[64], n = 0;
  for (Mask m = p; m; m &= m - 1) {
    int v = __builtin_ctzll(m), j = n++;
    for (; j > 0 && nholds[b[j - 1]] > nholds[v]; j--) b[j] = b[j - 1];
    b[j] = v;
  }
  if (!nholds[b[0]]) return 0;
  for (size_t w = 0, nw = (nkept + 63) / 64; w < nw; w++) {
    uint64_t x = holds[b[0]][w];
    for (int j = 1; j < n && x; j++) x &= holds[b[j]][w];
    if (x) return 1;
  }
  return 0;
}

/* drops every state whose values are a subset of another's at no more cost */
static void pareto(Set *s) {
  if (!s->n) return;
  qsort(s->v, s->n, sizeof *s->v, by_cost);
  size_t need = (s->n + 63) / 64;
  for (int v = 0; v < F; v++) {
    if (need > words) {
      free(holds[v]);
      holds[v] = xalloc(need * sizeof(uint64_t));
    } else {
      memset(holds[v], 0, need * sizeof(uint64_t));
    }
    nholds[v] = 0;
  }
  if (need > words) words = need;
  size_t kept = 0;
  for (size_t i = 0; i < s->n; i++) {
    Mask p = s->v[i].p;
    if (kept_superset(p, kept)) continue;
    for (Mask m = p; m; m &= m - 1) {
      int v = __builtin_ctzll(m);
      holds[v][kept / 64] |= (uint64_t)1 << (kept % 64);
      nholds[v]++;
    }
    s->v[kept++] = s->v[i];
  }
  s->n = kept;
  set_reindex(s); /* the slots index the new order */
}

/* every inclusion-minimal subset of cand whose bytes reach amount */
static Mask *drops;
static size_t ndrops, capdrops;
static int dc[64], ndc;
static long long dsuf[65];

static void drops_rec(int j, Mask m, long long tot, long long amount) {
  for (int q = j; q < ndc; q++) {
    if (tot + dsuf[q] < amount) return;
    long long t2 = tot + bytes_[dc[q]];
    if (t2 >= amount) {
      if (ndrops == capdrops) {
        capdrops = capdrops ? capdrops * 2 : 256;
        drops = realloc(drops, capdrops * sizeof *drops);
        if (!drops) exit(2);
      }
      drops[ndrops++] = m | (Mask)1 << dc[q];
    } else {
      drops_rec(q + 1, m | (Mask)1 << dc[q], t2, amount);
    }
  }
}

static int by_bytes_desc(const void *a, const void *b) {
  long long x = bytes_[*(const int *)a], y = bytes_[*(const int *)b];
  return x < y ? 1 : x > y ? -1 : 0;
}

static void minimal_drops(Mask cand, long long amount) {
  ndrops = 0;
  if (amount <= 0) {
    if (!capdrops) {
      capdrops = 256;
      drops = xalloc(capdrops * sizeof *drops);
    }
    drops[ndrops++] = 0;
    return;
  }
  ndc = 0;
  for (Mask m = cand; m; m &= m - 1) dc[ndc++] = __builtin_ctzll(m);
  qsort(dc, (size_t)ndc, sizeof *dc, by_bytes_desc);
  dsuf[ndc] = 0;
  for (int j = ndc - 1; j >= 0; j--) dsuf[j] = dsuf[j + 1] + bytes_[dc[j]];
  drops_rec(0, 0, 0, amount);
}

/* the values of use after step index si of stage t (si = -1: before its first) */
static Mask useful(int t, int si) {
  Mask u = later_reads[t];
  for (int t2 = t; t2 < T; t2++)
    for (int i = t2 == t ? si + 1 : 0; i < nsteps_[t2]; i++) u |= dmask[steps_[t2][i]];
  return u;
}

/* what any schedule still computes after step index si of stage t (si = -1:
 * before its first): the nodes whose own stage is ahead (their cost), their
 * inputs and every later backward op's reads (needed), over the values whose
 * own stage has passed */
typedef struct {
  Mask passed, need;
  double own;
} Ahead;

static Ahead ahead(int t, int si) {
  Ahead a = {0, 0, 0};
  int k = si >= 0 ? steps_[t][si] : -1;
  for (int j = 0; j < F; j++) {
    if (own_stage[j] < t || (own_stage[j] == t && j <= k)) {
      a.passed |= (Mask)1 << j;
    } else {
      a.own += cost_[j];
      a.need |= dmask[j];
    }
  }
  a.need |= later_reads[t];
  return a;
}

/* a lower bound on the cost still to come from values present p: the nodes
 * ahead, and each value needed later that is not present (and each missing
 * input of those) computed once more */
static double to_come(const Ahead *a, Mask p) {
  Mask u = a->need & ~p & a->passed, todo = u;
  while (todo) {
    int v = __builtin_ctzll(todo);
    todo &= todo - 1;
    Mask nw = dmask[v] & ~p & a->passed & ~u;
    u |= nw;
    todo |= nw;
  }
  double c = a->own;
  for (; u; u &= u - 1) c += cost_[__builtin_ctzll(u)];
  return c;
}

/* a lower bound on what values cost again where later backward ops cannot
 * hold them all: at the op of a later stage u, its reads and every value
 * held past it fit cap - fixed. A value read after u and present now, or
 * read by an op up to u (present then), is held past u or computed after u,
 * at its cost at least: present now, not counted by to_come(); read up to u
 * and not present now, to_come() counts its computation up to u.
 * Of the values that would not fit, the cheapest per byte (a fractional
 * knapsack); the most over the stages u (the same values could serve each). */
static double spill(int t, Mask p) {
  double worst = 0;
  Mask between = 0; /* read by the ops of stages t..u */
  for (int u = t; u < T; u++) {
    between |= reads_[u];
    if (is_node[u] || !reads_[u]) continue;
    Mask later = later_reads[u + 1] & (p | between);
    long long over = size_of(reads_[u] | later) - (cap_bytes - fixed_[u]);
    if (over <= 0) continue;
    int c[64], n = 0;
    for (Mask m = later & ~reads_[u]; m; m &= m - 1) {
      int v = __builtin_ctzll(m), j = n++;
      for (; j > 0 && cost_[c[j - 1]] * (double)bytes_[v] > cost_[v] * (double)bytes_[c[j - 1]]; j--) c[j] = c[j - 1];
      c[j] = v;
    }
    double sum = 0;
    for (int j = 0; j < n && over > 0; j++) {
      long long take = bytes_[c[j]] < over ? bytes_[c[j]] : over;
      sum += cost_[c[j]] * (double)take / (double)bytes_[c[j]];
      over -= take;
    }
    if (over > 0) return 1e300; /* its reads alone do not fit */
    if (sum > worst) worst = sum;
  }
  return worst;
}

/* with a bound: drops every state that cannot end within it (at a stage's
 * start also counting spill()); then the dominated ones */
static void cut(Set *s, int t, int si) {
  if (bound >= 0) {
    Ahead a = ahead(t, si);
    size_t kept = 0;
    for (size_t i = 0; i < s->n; i++)
      if (s->v[i].c + to_come(&a, s->v[i].p) + (si < 0 ? spill(t, s->v[i].p) : 0) <= bound * (1 + 1e-12))
        s->v[kept++] = s->v[i];
    s->n = kept;
  }
  pareto(s);
}

typedef struct {
  Mask key, hk, start, rmask;
} Back;
static int by_key(const void *a, const void *b) {
  Mask x = ((const Back *)a)->key, y = ((const Back *)b)->key;
  return x < y ? -1 : x > y;
}

static Set cur, nxt, layer;
static Back **back;
static size_t *nback;
static Mask *start, *rm;

/* frees everything (the sanitizers' leak check) and returns rc */
static int finish(int rc) {
  Set *sets[] = {&cur, &nxt, &layer};
  for (int i = 0; i < 3; i++) {
    free(sets[i]->v);
    free(sets[i]->slot);
  }
  for (int t = 0; t < T; t++) {
    free(steps_[t]);
    if (back) free(back[t]);
  }
  for (int v = 0; v < 64; v++) free(holds[v]);
  free(back);
  free(nback);
  free(drops);
  free(start);
  free(rm);
  return rc;
}

static int bad_input(void) {
  fprintf(stderr, "remat_dag_exact: the model is cut short or malformed (tests/bench/remat_dag_exact.py writes it)\n");
  return finish(2);
}

int main(void) {
  if (scanf("%d %d %lld %zu %lf", &F, &T, &cap_bytes, &max_states, &bound) != 5 || F < 1 || F > 64 || T < 1 ||
      T > 4096) {
    fprintf(stderr, "remat_dag_exact: bad header (F <= 64 values, T <= 4096 stages)\n");
    return 2;
  }
  for (int i = 0; i < F; i++) {
    int nd;
    if (scanf("%lld %lld %lf %d %d %d", &bytes_[i], &work_[i], &cost_[i], &inplace_[i], &own_stage[i], &nd) != 6 ||
        own_stage[i] < 0 || own_stage[i] >= T || inplace_[i] < -1 || inplace_[i] >= F)
      return bad_input();
    for (int j = 0; j < nd; j++) {
      int d;
      if (scanf("%d", &d) != 1 || d < 0 || d >= F) return bad_input();
      dmask[i] |= (Mask)1 << d;
    }
  }
  for (int t = 0; t < T; t++) {
    int n;
    if (scanf("%lld %lld %d %d", &pre_[t], &fixed_[t], &is_node[t], &n) != 4) return bad_input();
    for (int j = 0, r; j < n; j++) {
      if (scanf("%d", &r) != 1 || r < 0 || r >= F) return bad_input();
      reads_[t] |= (Mask)1 << r;
    }
    if (scanf("%d", &nsteps_[t]) != 1 || nsteps_[t] < 0 || nsteps_[t] > F) return bad_input();
    steps_[t] = xalloc(sizeof(int) * (size_t)(nsteps_[t] + 1));
    for (int j = 0; j < nsteps_[t]; j++)
      if (scanf("%d", &steps_[t][j]) != 1 || steps_[t][j] < 0 || steps_[t][j] >= F) return bad_input();
    if (scanf("%d", &n) != 1) return bad_input();
    for (int j = 0, r; j < n; j++) {
      if (scanf("%d", &r) != 1 || r < 0 || r >= F) return bad_input();
      keep_[t] |= (Mask)1 << r;
    }
  }
  for (int t = T - 1; t >= 0; t--) later_reads[t] = later_reads[t + 1] | reads_[t];
  int verbose = getenv("REMAT_DAG_VERBOSE") != NULL;
  back = xalloc(sizeof *back * (size_t)T);
  nback = xalloc(sizeof *nback * (size_t)T);
  put(&layer, (State){0, 0, 0, 0, 0.0});
  for (int t = 0; t < T; t++) {
    long long room = cap_bytes - pre_[t];
    Mask use0 = useful(t, -1);
    set_reset(&cur);
    for (size_t i = 0; i < layer.n; i++) {
      Mask h = layer.v[i].p & use0;
      long long by = size_of(h);
      minimal_drops(h, nsteps_[t] && by > room ? by - room : 0);
      for (size_t d = 0; d < ndrops; d++)
        put(&cur, (State){h & ~drops[d], layer.v[i].p, h & ~drops[d], 0, layer.v[i].c});
    }
    cut(&cur, t, -1);
    for (int si = 0; si < nsteps_[t]; si++) {
      int k = steps_[t][si];
      int own = own_stage[k] == t;
      Mask use = useful(t, si), kb = (Mask)1 << k;
      set_reset(&nxt);
      for (size_t i = 0; i < cur.n; i++) {
        State s = cur.v[i];
        if (!own) {
          State q = s;
          q.p &= use;
          put(&nxt, q);
        }
        if (s.p & kb || (s.p & dmask[k]) != dmask[k] || (!own && !(use & kb))) continue;
        long long by = size_of(s.p);
        for (int o = 0; o < 2; o++) {
          Mask dip = 0;
          long long row = by + work_[k];
          if (o) {
            int ip = inplace_[k];
            if (ip < 0 || !(s.p >> ip & 1)) break;
            dip = (Mask)1 << ip;
            row -= bytes_[ip];
          }
          minimal_drops(s.p & ~dmask[k], row > room ? row - room : 0);
          for (size_t d = 0; d < ndrops; d++) {
            State q = {((s.p & ~drops[d] & ~dip) | kb) & use, s.hk, s.start, s.rmask | kb, s.c + cost_[k]};
            put(&nxt, q);
          }
        }
      }
      Set tmp = cur;
      cur = nxt;
      nxt = tmp;
      cut(&cur, t, si);
      if (cur.n > most) most = cur.n;
      if (cur.n > max_states) {
        printf("toolarge %zu %d %d\n", cur.n, t, k);
        return finish(0);
      }
    }
    /* the stage's end: every read present; its backward op's row; what is held into the next stage */
    set_reset(&layer);
    for (size_t i = 0; i < cur.n; i++) {
      State s = cur.v[i];
      if ((s.p & reads_[t]) != reads_[t]) continue;
      Mask H = s.p & keep_[t];
      long long over = is_node[t] ? 0 : size_of(H | reads_[t]) - (cap_bytes - fixed_[t]);
      minimal_drops(H & ~reads_[t], over);
      for (size_t d = 0; d < ndrops; d++) put(&layer, (State){H & ~drops[d], s.hk, s.start, s.rmask, s.c});
    }
    pareto(&layer);
    back[t] = xalloc(sizeof(Back) * (layer.n + 1));
    for (size_t i = 0; i < layer.n; i++)
      back[t][i] = (Back){layer.v[i].p, layer.v[i].hk, layer.v[i].start, layer.v[i].rmask};
    nback[t] = layer.n;
    qsort(back[t], nback[t], sizeof(Back), by_key);
    if (layer.n > most) most = layer.n;
    if (verbose) fprintf(stderr, "stage %d/%d: %zu held sets, %zu states a step at most\n", t, T, layer.n, most);
    if (!layer.n) {
      printf("none %zu\n", most);
      return finish(0);
    }
  }
  double best = -1;
  for (size_t i = 0; i < layer.n; i++)
    if (layer.v[i].p == 0) best = layer.v[i].c;
  if (best < 0) {
    printf("none %zu\n", most);
    return finish(0);
  }
  printf("optimum %.17g %zu\n", best, most);
  start = xalloc(sizeof(Mask) * (size_t)T);
  rm = xalloc(sizeof(Mask) * (size_t)T);
  Mask h = 0;
  for (int t = T - 1; t >= 0; t--) {
    Back key = {h, 0, 0, 0};
    Back *e = bsearch(&key, back[t], nback[t], sizeof(Back), by_key);
    if (!e) {
      fprintf(stderr, "remat_dag_exact: no back pointer at stage %d\n", t);
      return finish(2);
    }
    start[t] = e->start;
    rm[t] = e->rmask;
    h = e->hk;
  }
  for (int t = 0; t < T; t++) printf("%" PRIx64 " %" PRIx64 "\n", start[t], rm[t]);
  return finish(0);
}
