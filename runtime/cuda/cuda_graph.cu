/* cuda_graph.cu: the CUDA backend's graphs, a step captured once and replayed (cuda_internal.cuh).
 */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// CUDA graphs: one per context. Capture records every kernel and library call
// enqueued between begin and end (nothing runs); launch replays them. cuBLAS
// captures cleanly because its workspace is the plan's, set at init.

void rt_cuda_graph_begin(void) {
  need_ctx();
  RT_CHECK(!ctx.graph_exec && !ctx.capturing, "one CUDA graph per context");
  ctx.capturing = 1, ctx.graph_adamw = 0;
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
}

void rt_cuda_graph_end(void) {
  need_ctx();
  RT_CHECK(ctx.capturing, "rt_cuda_graph_end without rt_cuda_graph_begin");
  CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &ctx.graph));
  ctx.capturing = 0;
  CUDA_CHECK(cudaGraphInstantiate(&ctx.graph_exec, ctx.graph, 0));
  CUDA_CHECK(cudaGraphUpload(ctx.graph_exec, ctx.stream));
}

void rt_cuda_graph_launch(int64_t t) {
  need_ctx();
  RT_CHECK(ctx.graph_exec != NULL, "no captured CUDA graph");
  if (ctx.graph_adamw) { // as rt_cuda_adamw_update rounds them
    double bc1 = 1.0 - pow(ctx.beta1, (double)t), bc2 = 1.0 - pow(ctx.beta2, (double)t);
    adam_scalars_kernel<<<1, 1, 0, ctx.stream>>>((float)(ctx.lr / bc1), (float)sqrt(bc2));
    LAUNCH_CHECK();
  }
  CUDA_CHECK(cudaGraphLaunch(ctx.graph_exec, ctx.stream));
}
