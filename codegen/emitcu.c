/* emitcu.c: the CUDA backend of the trainer emitter (emitc.c walks the plan
 * for both). trainer.cu is the same straight-line schedule as trainer.c with
 * rt_cuda_* kernels (runtime/cuda/memplan_rt_cuda.h) enqueued on one stream,
 * on constant offsets into the device arena (one cudaMalloc, made by
 * memplan_trainer_cuda.cu before the first step; nothing is allocated inside
 * the step). Differences from the CPU backend:
 * - loss scaling unscales every gradient on the device and reads one flag
 *   back (one synchronization per step) instead of a verdict per gradient;
 * - --profile synchronizes after every op to time it;
 * - the model table names the CUDA device (tr_cuda_device) and no thread
 *   setter. trainer.cu is compiled as C++20 (designated initializers). */
#include "emit.h"

const EmitBackend emit_backend_cuda = {
    .file = "trainer.cu",
    .prefix = "rt_cuda_",
    .about =
        "// allocated once on the GPU (one cudaMalloc at start); buffers whose lifetimes don't overlap\n"
        "// share bytes. step() and eval() are the plan's two schedules as straight-line rt_cuda_* calls\n"
        "// (memplan_rt_cuda.h) enqueued on one stream; the program around them is memplan_trainer.c,\n"
        "// its device side memplan_trainer_cuda.cu. Build: cmake -S . -B build && cmake --build build\n//\n",
    .includes = "#include \"memplan_rt_cuda.h\"\n#include \"memplan_trainer.h\"\n",
    .tick = "#define TICK(op) do { if (tr_profiling) { rt_cuda_synchronize(); tr_tick(op); } } while (0)",
    .unscale_all = "rt_cuda_all_finite()",
    .hooks = ".set_threads = NULL, .blas = NULL, .device = &tr_cuda_device",
    .sqnorm_all = "rt_cuda_grad_sqnorm_total()",
    .decode = "tr_cuda_decode", /* cuda/cuda_generate.cu */
    .comm = "tr_cuda_",
};
