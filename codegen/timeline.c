/* timeline.c: timeline.svg, the picture of where memory goes.
 *
 * x is the schedule position, y the arena offset (0 at the bottom). The
 * training step is the left panel and the forward-only eval step the right
 * one, on the same scales, because both share the arena. Every buffer is one
 * rectangle over its live range (persistent buffers span both panels),
 * colored by role, with a <title> that browsers show on hover. Over them: the
 * live-bytes curve (the height a perfect packing would need at each op), and
 * the budget, arena and lower-bound lines.
 *
 * The SVG is written as text: it is a chart, not a graph, so there is nothing
 * for Graphviz to lay out. Structure the tests rely on: every buffer rect, and
 * nothing else, sits in <g id="buffers">, in buffer id order. */
#include <stdint.h>
#include <string.h>

#include "emit.h"

/* Geometry in SVG pixels. */
enum { LEFT = 86, TOP = 92, PLOT_H = 600, TRAIN_W = 1000, GAP = 24, RIGHT = 200, STRIP_H = 12, BOTTOM = 150 };

typedef struct {
  const Plan *p;
  Text *t;
  double ymax;            /* bytes at the top of the plot */
  double px_per_op;       /* same in both panels */
  double x_train, x_eval; /* left edge of each panel */
  double x_end;           /* right edge of the eval panel */
} Chart;

/* Role colors; gradients of activations are activations by role but get a
 * lighter shade, since "saved forward output" and "gradient flowing back" are
 * the two halves of the activation story. */
static const char *const role_color[ROLE_COUNT] = {"#4e79a7", "#e15759", "#b07aa1", "#59a14f",
                                                   "#9d9d9d", "#f28e2b", "#9c755f", "#edc948"};
#define ACT_GRAD_COLOR "#b6dca8"

static const char *role_label(Role r) {
  static const char *const n[ROLE_COUNT] = {"parameter",   "gradient",  "optimizer state", "activation",
                                            "input batch", "temporary", "workspace",       "running state"};
  return n[r];
}

static bool ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && !strcmp(s + n - m, suf);
}

static bool is_act_grad(const PlanBuffer *b) { return b->role == ROLE_ACTIVATION && ends_with(b->name, ".grad"); }

static void xml(Text *t, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '<': text_printf(t, "&lt;"); break;
    case '>': text_printf(t, "&gt;"); break;
    case '&': text_printf(t, "&amp;"); break;
    case '"': text_printf(t, "&quot;"); break;
    default: text_printf(t, "%c", *s);
    }
  }
}

static const char *fmt(char *buf, size_t n, int64_t bytes) { return mp_fmt_bytes(buf, n, bytes); }

static double y_of(const Chart *c, double bytes) { return TOP + PLOT_H - PLOT_H * bytes / c->ymax; }

/* A "nice" axis step (1, 2 or 5 times a power of two of a byte unit) that
 * gives about `want` ticks. */
static int64_t nice_step(double range, int want) {
  int64_t unit = 1;
  while ((double)unit * 1024 <= range / want) unit *= 1024;
  static const int mult[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  for (size_t i = 0; i < sizeof mult / sizeof mult[0]; i++)
    if ((double)unit * mult[i] * want >= range) return unit * mult[i];
  return unit * 1024;
}

static void header(const Chart *c) {
  const Plan *p = c->p;
  char a[32], lb[32], bu[32];
  double w = c->x_end + RIGHT, h = TOP + PLOT_H + BOTTOM;
  text_printf(c->t,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
              "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n",
              w, h, w, h);
  text_printf(c->t, "<title>");
  xml(c->t, p->model);
  text_printf(c->t, ": memory timeline</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  text_printf(c->t, "<text x=\"%d\" y=\"26\" font-size=\"17\" font-weight=\"bold\">", LEFT);
  xml(c->t, p->model);
  text_printf(c->t, ": where memory goes</text>\n<text x=\"%d\" y=\"46\" font-size=\"12\">arena %s, lower bound %s",
              LEFT, fmt(a, sizeof a, p->arena_bytes), fmt(lb, sizeof lb, p->lower_bound_bytes));
  if (p->budget_bytes) text_printf(c->t, ", budget %s", fmt(bu, sizeof bu, p->budget_bytes));
  text_printf(c->t, "; micro-batch %d x %d; %d training ops, %d eval ops</text>\n", p->micro_batch,
              p->accumulation_steps, p->nsched, p->neval);
  text_printf(c->t,
              "<text x=\"%d\" y=\"62\" fill=\"#555\">x: schedule position (op); y: arena offset. Each rectangle is "
              "one buffer over its live range; hover for name, shape, dtype, bytes and live range.</text>\n",
              LEFT);
}

static void y_axis(const Chart *c) {
  int64_t step = nice_step(c->ymax, 8);
  char b[32];
  text_printf(c->t, "<g id=\"y-axis\" fill=\"#333\" text-anchor=\"end\">\n");
  for (int64_t v = 0; (double)v <= c->ymax; v += step) {
    double y = y_of(c, (double)v);
    text_printf(c->t,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%d\" y=\"%.1f\">%s</text>\n",
                LEFT, y, c->x_end, y, LEFT - 6, y + 4, v ? fmt(b, sizeof b, v) : "0");
  }
  text_printf(c->t, "<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">arena offset</text>\n",
              TOP + PLOT_H / 2);
  text_printf(c->t, "</g>\n");
}

/* Ticks below a panel, then a strip with each op's phase (hover: the op). */
static void x_axis(const Chart *c, double x0, const PlanOp *ops, int n, const char *name) {
  static const char *const phase_color[PHASE_COUNT] = {"#4e79a7", "#e15759", "#f28e2b", "#59a14f"};
  double yb = TOP + PLOT_H;
  static const int steps[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
  int step = 1; /* ticks at least 40 px apart */
  for (size_t i = 0; i < sizeof steps / sizeof steps[0] && step * c->px_per_op < 40; i++) step = steps[i];
  text_printf(c->t, "<g class=\"x-axis\" text-anchor=\"middle\" fill=\"#333\">\n");
  for (int i = 0; i <= n; i += step)
    text_printf(c->t,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text x=\"%.1f\" y=\"%.1f\">%d</text>\n",
                x0 + i * c->px_per_op, yb + STRIP_H + 2, x0 + i * c->px_per_op, yb + STRIP_H + 6, x0 + i * c->px_per_op,
                yb + STRIP_H + 18, i);
  text_printf(c->t, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", x0 + n * c->px_per_op / 2,
              yb + STRIP_H + 34, name);
  for (int i = 0; i < n; i++) {
    text_printf(c->t, "<rect class=\"op\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>",
                x0 + i * c->px_per_op, yb + 1, c->px_per_op, STRIP_H, phase_color[ops[i].phase]);
    text_printf(c->t, "op %d: %s ", i, plan_phase_name(ops[i].phase));
    xml(c->t, ops[i].layer);
    text_printf(c->t, "</title></rect>\n");
  }
  text_printf(c->t, "</g>\n");
}

/* The hover text: name, role, dtype, shape (symbolic and values), bytes,
 * offset, live range with the ops that open and close it. */
static void buffer_title(const Chart *c, const PlanBuffer *b) {
  const Plan *p = c->p;
  Text *t = c->t;
  char s[32];
  text_printf(t, "<title>");
  xml(t, b->name);
  text_printf(t, "\n%s, %s, (", is_act_grad(b) ? "activation gradient" : role_label(b->role), dtype_name(b->dtype));
  for (int d = 0; d < b->shape.rank; d++) {
    text_printf(t, "%s", d ? ", " : "");
    xml(t, b->shape.sym[d]);
  }
  text_printf(t, ") = [");
  for (int d = 0; d < b->shape.rank; d++) text_printf(t, "%s%lld", d ? ", " : "", (long long)b->shape.d[d]);
  text_printf(t, "]\n%s (%lld bytes) at offset %lld\n", fmt(s, sizeof s, b->bytes), (long long)b->bytes,
              (long long)b->offset);
  if (b->sched == SCHED_BOTH) {
    text_printf(t, "live: the whole step (training and eval)");
  } else {
    const PlanOp *ops = b->sched == SCHED_TRAIN ? p->sched : p->eval;
    int n = b->sched == SCHED_TRAIN ? p->nsched : p->neval;
    text_printf(t, "live: %s ops [%d, %d)", b->sched == SCHED_TRAIN ? "training" : "eval", b->first, b->last);
    if (b->first < n && b->last > b->first && b->last <= n) {
      text_printf(t, ", from %s ", plan_phase_name(ops[b->first].phase));
      xml(t, ops[b->first].layer);
      text_printf(t, " to %s ", plan_phase_name(ops[b->last - 1].phase));
      xml(t, ops[b->last - 1].layer);
    }
  }
  if (*b->aliases) {
    text_printf(t, "\nin place: ");
    xml(t, b->aliases);
  }
  text_printf(t, "</title>");
}

/* One rect per buffer; a name inside when it fits. Rects are at least one
 * pixel tall so every buffer can be hovered. */
static void buffers(const Chart *c) {
  const Plan *p = c->p;
  text_printf(c->t, "<g id=\"buffers\" stroke=\"white\" stroke-width=\"0.5\">\n");
  for (int i = 0; i < p->nbuf; i++) {
    const PlanBuffer *b = &p->buf[i];
    double x0 = b->sched == SCHED_EVAL ? c->x_eval + b->first * c->px_per_op : c->x_train + b->first * c->px_per_op;
    double x1 = b->sched == SCHED_BOTH ? c->x_end : x0 + (b->last - b->first) * c->px_per_op;
    if (b->sched == SCHED_BOTH) x0 = c->x_train;
    double y1 = y_of(c, (double)b->offset), y0 = y_of(c, (double)(b->offset + b->bytes));
    double w = x1 - x0 < 1 ? 1 : x1 - x0, h = y1 - y0 < 1 ? 1 : y1 - y0;
    /* outlines only where they separate, not wash out, thin buffers */
    text_printf(c->t, "<rect class=\"buf %s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"%s>",
                plan_role_name(b->role), x0, y1 - h, w, h, is_act_grad(b) ? ACT_GRAD_COLOR : role_color[b->role],
                h < 3 || w < 3 ? " stroke=\"none\"" : "");
    buffer_title(c, b);
    text_printf(c->t, "</rect>\n");
  }
  text_printf(c->t, "</g>\n");
  /* names on top, in their own group so the buffer group holds only rects */
  text_printf(c->t,
              "<g id=\"buffer-names\" font-size=\"9\" fill=\"white\" text-anchor=\"middle\" "
              "pointer-events=\"none\">\n");
  for (int i = 0; i < p->nbuf; i++) {
    const PlanBuffer *b = &p->buf[i];
    if (b->sched == SCHED_BOTH) continue; /* persistent buffers are a band; the legend names it */
    double x0 = (b->sched == SCHED_EVAL ? c->x_eval : c->x_train) + b->first * c->px_per_op;
    double w = (b->last - b->first) * c->px_per_op;
    double y1 = y_of(c, (double)b->offset), h = y1 - y_of(c, (double)(b->offset + b->bytes));
    if (h < 11 || w < 5.5 * (double)strlen(b->name) + 6) continue;
    text_printf(c->t, "<text x=\"%.1f\" y=\"%.1f\">", x0 + w / 2, y1 - h / 2 + 3);
    xml(c->t, b->name);
    text_printf(c->t, "</text>\n");
  }
  text_printf(c->t, "</g>\n");
}

/* Persistent buffers are a band of many thin rects: name each role's part
 * of it (params, then optimizer state) where it is tall enough. */
static void band_labels(const Chart *c) {
  const Plan *p = c->p;
  char b[32];
  text_printf(c->t,
              "<g id=\"band-names\" font-size=\"11\" font-weight=\"bold\" fill=\"white\" "
              "pointer-events=\"none\">\n");
  for (int r = 0; r < ROLE_COUNT; r++) {
    int64_t lo = INT64_MAX, hi = 0, sum = 0;
    for (int i = 0; i < p->nbuf; i++)
      if (p->buf[i].sched == SCHED_BOTH && p->buf[i].role == (Role)r) {
        const PlanBuffer *pb = &p->buf[i];
        lo = pb->offset < lo ? pb->offset : lo;
        hi = pb->offset + pb->bytes > hi ? pb->offset + pb->bytes : hi;
        sum += pb->bytes;
      }
    if (!sum || y_of(c, (double)lo) - y_of(c, (double)hi) < 13) continue;
    text_printf(c->t, "<text x=\"%.1f\" y=\"%.1f\">%s: %s, the whole step</text>\n", c->x_train + 8,
                (y_of(c, (double)lo) + y_of(c, (double)hi)) / 2 + 4, role_label((Role)r), fmt(b, sizeof b, sum));
  }
  text_printf(c->t, "</g>\n");
}

/* Live bytes (aligned, as the lower bound counts them) at each position of
 * one schedule, drawn as a step curve over its panel. */
static int64_t live_at(const Plan *p, SchedSet set, int pos) {
  int64_t sum = 0;
  for (int i = 0; i < p->nbuf; i++) {
    const PlanBuffer *b = &p->buf[i];
    if (b->sched == SCHED_BOTH || (b->sched == set && b->first <= pos && pos < b->last))
      sum += mp_align_up(b->bytes, p->align);
  }
  return sum;
}

static void live_curve(const Chart *c, SchedSet set, double x0, int n) {
  text_printf(c->t,
              "<polyline class=\"live-bytes\" fill=\"none\" stroke=\"#111\" stroke-width=\"1.6\" "
              "stroke-linejoin=\"round\" points=\"");
  for (int i = 0; i < n; i++) {
    double y = y_of(c, (double)live_at(c->p, set, i));
    text_printf(c->t, "%.2f,%.2f %.2f,%.2f ", x0 + i * c->px_per_op, y, x0 + (i + 1) * c->px_per_op, y);
  }
  text_printf(c->t,
              "\"><title>live bytes (%s): the arena height a perfect packing needs at each op</title>"
              "</polyline>\n",
              set == SCHED_TRAIN ? "training" : "eval");
}

/* A labelled horizontal line across both panels; labels sit right of the
 * plot at label_y (already moved apart from each other). */
static void hline(const Chart *c, const char *id, int64_t bytes, double label_y, const char *color, const char *dash,
                  const char *what) {
  char b[32];
  double y = y_of(c, (double)bytes);
  text_printf(c->t,
              "<g id=\"%s\"><line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.8\" "
              "stroke-dasharray=\"%s\"/>"
              "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"0.8\"/>"
              "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-weight=\"bold\">%s %s</text></g>\n",
              id, LEFT, y, c->x_end, y, color, dash, c->x_end, y, c->x_end + 8, label_y, color, c->x_end + 10,
              label_y + 4, color, what, fmt(b, sizeof b, bytes));
}

static void limit_lines(const Chart *c) {
  const Plan *p = c->p;
  struct {
    const char *id, *what, *color, *dash;
    int64_t v;
    double y;
  } l[3] = {{"arena", "arena", "#111", "none", p->arena_bytes, 0},
            {"lower-bound", "lower bound", "#1f5fbf", "6 3", p->lower_bound_bytes, 0},
            {"budget", "budget", "#c0392b", "10 4 2 4", p->budget_bytes, 0}};
  int n = p->budget_bytes && (double)p->budget_bytes <= c->ymax ? 3 : 2;
  for (int i = 0; i < n; i++) l[i].y = y_of(c, (double)l[i].v);
  /* labels top to bottom, at least 14 px apart */
  int ord[3] = {0, 1, 2};
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (l[ord[j]].y < l[ord[i]].y) {
        int tmp = ord[i];
        ord[i] = ord[j], ord[j] = tmp;
      }
  double ly[3];
  for (int i = 0; i < n; i++) ly[ord[i]] = i && l[ord[i]].y < ly[ord[i - 1]] + 14 ? ly[ord[i - 1]] + 14 : l[ord[i]].y;
  for (int i = 0; i < n; i++) hline(c, l[i].id, l[i].v, ly[i], l[i].color, l[i].dash, l[i].what);
  if (p->budget_bytes && n == 2) { /* far above the plot: say so instead of squashing it */
    char b[32];
    text_printf(c->t,
                "<text id=\"budget\" x=\"%.1f\" y=\"%d\" fill=\"#c0392b\" font-weight=\"bold\">budget %s "
                "(above)</text>\n",
                c->x_end + 10, TOP + 4, fmt(b, sizeof b, p->budget_bytes));
  }
}

static void peak_marker(const Chart *c) {
  const Plan *p = c->p;
  if (p->peak_position < 0 || p->peak_position >= p->nsched) return;
  double x = c->x_train + (p->peak_position + 0.5) * c->px_per_op;
  const PlanOp *o = &p->sched[p->peak_position];
  text_printf(c->t,
              "<g id=\"peak\"><line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#111\" stroke-width=\"1\" "
              "stroke-dasharray=\"2 3\"/><text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">peak: "
              "op %d, %s ",
              x, TOP - 4, x, TOP + PLOT_H, x, TOP - 8, p->peak_position, plan_phase_name(o->phase));
  xml(c->t, o->layer);
  text_printf(c->t, "</text></g>\n");
}

static void panel_frames(const Chart *c) {
  text_printf(c->t,
              "<g id=\"panels\" fill=\"none\" stroke=\"#888\" stroke-width=\"0.8\">"
              "<rect class=\"frame\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>"
              "<rect class=\"frame\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/></g>\n",
              c->x_train, TOP, c->x_eval - c->x_train, PLOT_H, c->x_eval, TOP, c->x_end - c->x_eval, PLOT_H);
}

/* Role swatches with each role's live bytes at the training peak, then the
 * line styles: the legend is also the one-line answer to "where does memory
 * go". */
static void legend(const Chart *c) {
  const Plan *p = c->p;
  double y = TOP + PLOT_H + STRIP_H + 58, x = LEFT;
  char b[32];
  text_printf(c->t,
              "<g id=\"legend\">\n<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">at the training peak "
              "(op %d):</text>\n",
              x, y, p->peak_position);
  x += 170;
  bool has[ROLE_COUNT + 1] = {false}; /* roles in the plan; [ROLE_COUNT]: activation gradients */
  for (int i = 0; i < p->nbuf; i++) has[is_act_grad(&p->buf[i]) ? ROLE_COUNT : p->buf[i].role] = true;
  for (int r = 0; r <= ROLE_COUNT; r++) {
    if (!has[r]) continue;
    bool actg = r == ROLE_COUNT;
    const char *what = actg ? "activation gradient" : role_label((Role)r);
    const char *bytes = actg ? "" : fmt(b, sizeof b, p->peak_by_role[r]);
    text_printf(c->t,
                "<rect class=\"swatch\" x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">%s %s</text>\n",
                x, y - 10, actg ? ACT_GRAD_COLOR : role_color[r], x + 16, y, what, bytes);
    x += 16 + 6.5 * (double)(strlen(what) + strlen(bytes) + 3);
    if (x > c->x_end - 60) {
      x = LEFT + 170;
      y += 18;
    }
  }
  y += 22, x = LEFT;
  text_printf(c->t,
              "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#111\" stroke-width=\"1.6\"/>"
              "<text x=\"%.0f\" y=\"%.0f\">live bytes (what a perfect packing needs)</text>\n",
              x, y - 4, x + 24, y - 4, x + 30, y);
  text_printf(c->t,
              "<rect class=\"swatch\" x=\"%.0f\" y=\"%.0f\" width=\"36\" height=\"10\" fill=\"#4e79a7\"/>"
              "<rect class=\"swatch\" x=\"%.0f\" y=\"%.0f\" width=\"36\" height=\"10\" fill=\"#e15759\"/>"
              "<rect class=\"swatch\" x=\"%.0f\" y=\"%.0f\" width=\"36\" height=\"10\" fill=\"#f28e2b\"/>"
              "<text x=\"%.0f\" y=\"%.0f\">op strip under the axis: forward, backward, optimizer update</text>\n",
              x + 300, y - 9, x + 336, y - 9, x + 372, y - 9, x + 414, y);
  text_printf(c->t, "</g>\n");
}

void timeline_svg(const Plan *p, Text *out) {
  Chart c = {.p = p, .t = out};
  int64_t top = p->arena_bytes > p->lower_bound_bytes ? p->arena_bytes : p->lower_bound_bytes;
  if (p->budget_bytes && p->budget_bytes <= top + top / 2 && p->budget_bytes > top) top = p->budget_bytes;
  c.ymax = (double)(top ? top : 1) * 1.06;
  c.px_per_op = (double)TRAIN_W / (p->nsched ? p->nsched : 1);
  c.x_train = LEFT;
  c.x_eval = LEFT + TRAIN_W + GAP;
  c.x_end = c.x_eval + p->neval * c.px_per_op;
  header(&c);
  y_axis(&c);
  buffers(&c);
  band_labels(&c);
  panel_frames(&c);
  live_curve(&c, SCHED_TRAIN, c.x_train, p->nsched);
  live_curve(&c, SCHED_EVAL, c.x_eval, p->neval);
  limit_lines(&c);
  peak_marker(&c);
  x_axis(&c, c.x_train, p->sched, p->nsched, "training step");
  x_axis(&c, c.x_eval, p->eval, p->neval, "eval");
  legend(&c);
  text_printf(out, "</svg>\n");
}
