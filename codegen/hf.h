/* hf.h: what the Hugging Face importer and exporter share (cli_import.c:
 * reading safetensors files in bounded memory, the error exit). */
#ifndef MEMPLAN_HF_H
#define MEMPLAN_HF_H

#include "cli.h"
#include "emit.h"
#include "plan_read.h"

enum { CHUNK = 1 << 20 }; /* elements copied at a time */

/* An open safetensors file and its header's tensors. */
typedef struct {
  const char *path;
  FILE *f;
  int64_t data0, size; /* where the data starts; the file's bytes */
  StTensor *t;
  int n;
} HfIn;

extern const char *hf_cmd; /* "import-hf" or "export-hf": how errors begin */
/* "memplan CMD: error: PATH: message", exit status 1. */
_Noreturn void hf_fail(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Opens path and reads its header (errors name path). */
HfIn hf_open(Arena *ar, const char *path);
int64_t hf_dtype_bytes(const char *dt); /* F32 4, F16 and BF16 2, else 0 */
int64_t hf_numel(const StTensor *t);
/* n bytes of t's data from byte at, into raw (a short file: an error naming t). */
void hf_read_raw(const HfIn *in, const StTensor *t, int64_t at, int64_t n, unsigned char *raw);
/* count elements of t from element at, as floats (raw: 4 count bytes of scratch). */
void hf_read_f32(const HfIn *in, const StTensor *t, int64_t at, int64_t count, float *dst, unsigned char *raw);

/* memplan import-hf DIR -o OUT (cli_hf.c); set: "B=N", "T=N" or NULL. */
int import_dir_main(const char *dir, const char *out, const char *const set[2]);
/* A Hugging Face GPT-2 file's tensors under memplan's names, as a safetensors
 * file into f (cli_import.c); with plan, fitted to it. false on a write error. */
bool hf_gpt2_write(const HfIn *in, const Plan *plan, const char *plan_path, FILE *f, int *nout);

/* memplan export-hf PLAN CHECKPOINT -o HFDIR [--merge] (cli_hf.c). */
extern const char export_help[];
int export_main(int argc, char **argv);

#endif
