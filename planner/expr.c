/* expr.c: a recursive-descent evaluator for dim expressions.
 *   expr   = term (("+" | "-") term)*
 *   term   = unary (("*" | "/" | "%") unary)*
 *   unary  = "-" unary | primary
 *   primary = integer | ident | "(" expr ")" */
#include "expr.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *s, *p;
  Loc loc;
  const Dim *dims;
  int ndims;
  int depth;
} Ex;

_Noreturn static void ex_error(Ex *e, const char *fmt, const char *arg) {
  Loc at = e->loc;
  at.col += (int)(e->p - e->s);
  diag_error(at, fmt, arg);
}

static void skip(Ex *e) {
  while (*e->p == ' ' || *e->p == '\t') e->p++;
}

static int64_t expr(Ex *e);

static int64_t primary(Ex *e) {
  skip(e);
  if (*e->p == '(') {
    if (++e->depth > 64) ex_error(e, "expression nested too deeply%s", "");
    e->p++;
    int64_t v = expr(e);
    skip(e);
    if (*e->p != ')') ex_error(e, "expected ')' in expression '%s'", e->s);
    e->p++;
    e->depth--;
    return v;
  }
  if (isdigit((unsigned char)*e->p)) {
    int64_t v = 0;
    while (isdigit((unsigned char)*e->p)) {
      if (!ck_mul(v, 10, &v) || !ck_add(v, *e->p - '0', &v))
        ex_error(e, "integer too large in '%s' (limit is 2^63 - 1)", e->s);
      e->p++;
    }
    return v;
  }
  if (isalpha((unsigned char)*e->p) || *e->p == '_') {
    const char *b = e->p;
    while (isalnum((unsigned char)*e->p) || *e->p == '_') e->p++;
    size_t n = (size_t)(e->p - b);
    for (int i = 0; i < e->ndims; i++)
      if (strlen(e->dims[i].name) == n && memcmp(e->dims[i].name, b, n) == 0) return e->dims[i].value;
    char name[80];
    snprintf(name, sizeof name, "%.*s", (int)(n < 64 ? n : 64), b);
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; i < e->ndims; i++) {
      int d = mp_edit_distance(name, e->dims[i].name);
      if (d < bd) {
        bd = d;
        best = e->dims[i].name;
      }
    }
    e->p = b;
    Loc at = e->loc;
    at.col += (int)(b - e->s);
    if (best) diag_error(at, "unknown dim '%s'; did you mean '%s'?", name, best);
    diag_error(at, "unknown dim '%s'; define it under 'dims:' (dims are defined in order)", name);
  }
  if (*e->p == '\0') ex_error(e, "expression '%s' ends early", e->s);
  ex_error(e, "unexpected character in expression '%s'", e->s);
}

static int64_t unary(Ex *e) {
  skip(e);
  if (*e->p == '-') {
    e->p++;
    if (++e->depth > 64) ex_error(e, "expression nested too deeply%s", "");
    int64_t v = unary(e);
    e->depth--;
    if (v == INT64_MIN) ex_error(e, "integer overflow in '%s'", e->s);
    return -v;
  }
  return primary(e);
}

static int64_t term(Ex *e) {
  int64_t v = unary(e);
  for (;;) {
    skip(e);
    char op = *e->p;
    if (op != '*' && op != '/' && op != '%') return v;
    const char *at = e->p++;
    int64_t r = unary(e);
    if (op == '*') {
      if (!ck_mul(v, r, &v)) {
        e->p = at;
        ex_error(e, "integer overflow in '%s'", e->s);
      }
    } else {
      if (r == 0) {
        e->p = at;
        ex_error(e, "division by zero in '%s'", e->s);
      }
      if (v == INT64_MIN && r == -1) {
        e->p = at;
        ex_error(e, "integer overflow in '%s'", e->s);
      }
      v = op == '/' ? v / r : v % r;
    }
  }
}

static int64_t expr(Ex *e) {
  int64_t v = term(e);
  for (;;) {
    skip(e);
    char op = *e->p;
    if (op != '+' && op != '-') return v;
    const char *at = e->p++;
    int64_t r = term(e);
    bool ok = op == '+' ? ck_add(v, r, &v) : !__builtin_sub_overflow(v, r, &v);
    if (!ok) {
      e->p = at;
      ex_error(e, "integer overflow in '%s'", e->s);
    }
  }
}

int64_t expr_eval(const char *s, Loc loc, const Dim *dims, int ndims) {
  Ex e = {s, s, loc, dims, ndims, 0};
  int64_t v = expr(&e);
  skip(&e);
  if (*e.p) ex_error(&e, "unexpected text after the expression '%s'", s);
  return v;
}

bool expr_is_ident(const char *s) {
  if (!isalpha((unsigned char)*s) && *s != '_') return false;
  for (s++; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_') return false;
  return true;
}
