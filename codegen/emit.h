/* emit.h: what the emitters share: an in-memory text buffer that becomes a
 * file only on success (written atomically: temp file, fsync, rename), and
 * the emitters' entry points. Emitters read only the Plan. */
#ifndef MEMPLAN_EMIT_H
#define MEMPLAN_EMIT_H

#include <stdio.h>

#include "plan.h"

typedef struct {
  char *s;
  size_t n, cap;
} Text;

void text_printf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_append(Text *t, const void *data, size_t n); /* bytes, NULs included (PNG) */
void text_json_str(Text *t, const char *s);            /* a quoted, escaped JSON string */
void text_free(Text *t);
/* Writes t to path via a temp file in the same folder and rename(2), so the
 * path holds either the old file or the whole new one. Returns 0, or -1 with
 * a message on stderr. */
int text_write_atomic(const Text *t, const char *path);
/* Writes the n texts as dir/name[i], all or nothing: every file is written
 * (text_write_atomic: fsync, rename) into a temp folder first, beside dir
 * when dir is new (dir.tmp-XXXXXX, renamed to dir at the end) or inside it
 * when it exists (dir/.memplan-tmp-XXXXXX, each file renamed into dir at the
 * end, so that what else the folder holds, a build folder or saved weights,
 * stays). On a failure the temp folder goes and dir is as it was. Returns 0,
 * or -1 with a message on stderr. */
int text_write_folder(const char *dir, const char *const *name, const Text *out, int n);
/* mkdir -p; 0 or -1 with a message. */
int emit_mkdirs(const char *dir);

/* plan.json: the whole Plan, versioned (json.c); read back by plan_read.h. */
void json_plan(const Plan *p, Text *out);
/* The human report (report.c). */
void report_plan(const Plan *p, FILE *out);

/* The trainers (emitc.c): one schedule walk, two backends. An EmitBackend decides
 * only what differs between trainer.c and trainer.cu; everything else
 * (sections, op bodies, acc and micro-batch flags, casts, the update and
 * unscale split, the tables) is the same code. */
typedef struct {
  const char *file;        /* "trainer.c", "trainer.cu" */
  const char *prefix;      /* kernel prefix: "rt_" (memplan_rt.h), "rt_cuda_" (memplan_rt_cuda.h) */
  const char *about;       /* header comment lines after the arena's size */
  const char *includes;    /* #include lines */
  const char *tick;        /* the TICK(op) macro (--profile) */
  const char *unscale_all; /* NULL: unscale_check returns each gradient's verdict; else the
                              expression that returns all of them at once, after the calls */
  const char *hooks;       /* the model table's backend fields (set_threads, device) */
  const char *sqnorm_all;  /* gradient clipping: NULL: grad_sqnorm returns each gradient's sum; else the
                              expression that returns the total, after the calls */
  const char *decode;      /* generation's decode (TrModel.decode_run): "tr_decode" (cpu_generate.c), or "NULL" */
  const char *comm;        /* collectives' prefix (plans for N ranks): "tr_" (memplan_trainer.h, MPI),
                              "tr_cuda_" (NCCL) */
} EmitBackend;
extern const EmitBackend emit_backend_c;    /* emitc.c */
extern const EmitBackend emit_backend_cuda; /* emitcu.c */

/* trainer.c or trainer.cu from the Plan alone. 0, or -1 with a message on
 * stderr when the plan needs something the trainer cannot do; the Text is then
 * incomplete and must be dropped. */
int emit_trainer(const Plan *p, const EmitBackend *be, Text *out);
/* The folder's CMakeLists.txt: the CPU trainer where OpenBLAS and OpenMP are
 * found, the CUDA trainer where a CUDA compiler is (architectures 80;90 by
 * default); an error only when neither can be built. */
void emit_cmakelists(const Plan *p, Text *out);

/* The runtime files a trainer folder needs (runtime/CMakeLists.txt lists them: the kernel
 * headers, cpu_*.c, memplan_trainer.{h,c} and trainer_*.c, and the CUDA side: memplan_rt_cuda.h,
 * cuda_*.cu, memplan_trainer_cuda.cu), embedded in memplan at build time from runtime/
 * (runtime_files.c, made by codegen/embed.cmake). */
typedef struct {
  const char *name;
  const unsigned char *data;
  size_t size;
} EmbeddedFile;
extern const EmbeddedFile emitc_runtime_files[];
extern const int emitc_nruntime_files;

/* The plan graph (dot.c): the training step's ops as a Graphviz graph built
 * with cgraph, as DOT text (unlaid, for people and other tools) and laid out
 * by gvc and rendered (SVG, or PNG with DotOptions.format). Repeat blocks
 * ("h3.*") are clusters; when the model has more than about 40 forward and
 * backward ops they start collapsed to one node per phase. Either Text may be
 * NULL. No file I/O. */
typedef struct {
  bool expand;        /* --expand: open every block */
  const char *block;  /* --block NAME: open this block (NULL: none) */
  const char *format; /* what the laid-out graph is rendered as: "svg" (NULL) or "png" */
} DotOptions;
void dot_plan(const Plan *p, const DotOptions *o, Text *dot_out, Text *render_out);
/* Whether the training step has a repeat block of that name (for --block). */
bool dot_block_exists(const Plan *p, const char *block);

/* timeline.svg (timeline.c): every buffer as a rectangle over its live range
 * (x: schedule position, y: arena offset), colored by role, with hover
 * titles; the live-bytes curve; budget, arena and lower-bound lines. */
void timeline_svg(const Plan *p, Text *out);

#endif
