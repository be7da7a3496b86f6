/* fuzz_plan.c: libFuzzer harness for the plan.json reader (`memplan show`).
 *
 * bytes -> plan_read (user errors caught with diag_catch) -> verify_plan ->
 * for plans that verify: the timeline and the plan.json writer, then the
 * written JSON read back, which must succeed and write the same bytes again
 * (reading loses nothing the writer wrote). A user error is a normal
 * outcome; a crash, a sanitizer report, a hang or a failed round trip
 * (abort) is a bug. The Graphviz drawing is left out: its layout takes
 * milliseconds per input and belongs to Graphviz. Built by tests/fuzz/run.sh. */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "plan_read.h"
#include "verify.h"

/* Static: read after the longjmp, so never in a register. */
static Arena ar;
static Text json, again, svg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1 << 20)) return 0;
  ar = (Arena){0};
  json = again = svg = (Text){0};
  jmp_buf jb;
  if (!setjmp(jb)) {
    diag_catch(&jb);
    Plan *p = plan_read(&ar, "fuzz.json", (const char *)data, size);
    if (!verify_plan(p)) {
      timeline_svg(p, &svg);
      json_plan(p, &json);
      Plan *q = plan_read(&ar, "fuzz-again.json", json.s, json.n);
      json_plan(q, &again);
      if (json.n != again.n || memcmp(json.s, again.s, json.n)) {
        fprintf(stderr, "fuzz_plan: plan.json does not survive writing and reading back\n");
        abort();
      }
    }
  }
  diag_catch(NULL);
  text_free(&json), text_free(&again), text_free(&svg);
  ar_free(&ar);
  return 0;
}
