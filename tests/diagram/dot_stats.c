/* dot_stats: reads a DOT file with Graphviz's own parser (cgraph) and prints
 * what the diagram tests compare against the plan, one "key value" a line:
 * node counts by id prefix (op, blk:, upd, in, legend), clusters, edges,
 * labelled edges, saved-for-backward edges and each op node's id.
 * Exit 1 when the file does not parse. */
#include <stdio.h>
#include <string.h>

#include <graphviz/cgraph.h>

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static int count_clusters(Agraph_t *g) {
  int n = 0;
  for (Agraph_t *s = agfstsubg(g); s; s = agnxtsubg(s)) n += starts(agnameof(s), "cluster_") + count_clusters(s);
  return n;
}

int main(int argc, char **argv) {
  FILE *f = argc == 2 ? fopen(argv[1], "r") : NULL;
  if (!f) {
    fprintf(stderr, "usage: dot_stats FILE.dot\n");
    return 2;
  }
  Agraph_t *g = agread(f, NULL);
  fclose(f);
  if (!g) {
    fprintf(stderr, "dot_stats: %s does not parse as DOT\n", argv[1]);
    return 1;
  }
  int op = 0, blk = 0, upd = 0, in = 0, legend = 0, edges = 0, labelled = 0, saved = 0;
  for (Agnode_t *n = agfstnode(g); n; n = agnxtnode(g, n)) {
    const char *id = agnameof(n);
    if (starts(id, "op")) {
      op++;
      printf("op_node %s\n", id + 2);
    } else if (starts(id, "blk:")) {
      blk++;
      printf("blk_node %s\n", id + 4);
    } else if (starts(id, "upd")) upd++;
    else if (starts(id, "in")) in++;
    else if (!strcmp(id, "legend")) legend++;
    for (Agedge_t *e = agfstout(g, n); e; e = agnxtout(g, e)) {
      const char *label = agget(e, "label"), *color = agget(e, "color");
      edges++;
      labelled += label && *label;
      saved += color && !strcmp(color, "#8e44ad");
    }
  }
  printf("op %d\nblk %d\nupd %d\nin %d\nlegend %d\nclusters %d\nedges %d\nlabelled %d\nsaved %d\n", op, blk, upd, in,
         legend, count_clusters(g), edges, labelled, saved);
  agclose(g);
  return 0;
}
