/* cuda_context.cu: the CUDA backend's context (stream, cuBLAS handles, workspace), launch helpers
 * (cuda_internal.cuh). */
#include "cuda_internal.cuh"

// ----------------------------------------------------------------------------
// error checking: trainers are programs, so every failure prints file:line and
// the library's reason, then exits

void rt_cuda_fail(const char *file, int line, const char *what, const char *why) {
  fprintf(stderr, "%s:%d: memplan CUDA runtime: %s: %s\n", file, line, what, why);
  exit(1);
}

// ----------------------------------------------------------------------------
// context

RtCudaContext ctx;

void need_ctx(void) { RT_CHECK(ctx.ready, "call rt_cuda_init first"); }

int rt_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void rt_cuda_init(void *workspace, size_t workspace_bytes) {
  RT_CHECK(!ctx.ready, "rt_cuda_init called twice");
  RT_CHECK(workspace_bytes == 0 || workspace != NULL, "workspace bytes without a pointer");
  RT_CHECK((uintptr_t)workspace % 256 == 0, "cuBLAS needs a 256-byte aligned workspace");
  int dev = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&ctx.num_sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  ctx.smem_optin = (size_t)optin;
  CUDA_CHECK(cudaStreamCreate(&ctx.stream));
  CUBLAS_CHECK(cublasCreate(&ctx.blas));
  CUBLAS_CHECK(cublasLtCreate(&ctx.lt));
  // cublasSetStream resets the handle to cuBLAS's own workspace pool, so the
  // plan's workspace is set after it.
  CUBLAS_CHECK(cublasSetStream(ctx.blas, ctx.stream));
  CUBLAS_CHECK(cublasSetWorkspace(ctx.blas, workspace, workspace_bytes));
  ctx.workspace = workspace;
  ctx.workspace_bytes = workspace_bytes;
  ctx.ready = 1;
}

void rt_cuda_shutdown(void) {
  need_ctx();
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (ctx.graph_exec) CUDA_CHECK(cudaGraphExecDestroy(ctx.graph_exec));
  if (ctx.graph) CUDA_CHECK(cudaGraphDestroy(ctx.graph));
  ctx.graph_exec = NULL, ctx.graph = NULL, ctx.graph_adamw = 0;
  CUBLAS_CHECK(cublasLtDestroy(ctx.lt));
  CUBLAS_CHECK(cublasDestroy(ctx.blas));
  CUDA_CHECK(cudaStreamDestroy(ctx.stream));
  ctx.ready = 0;
}

rt_cuda_stream_t rt_cuda_stream(void) {
  need_ctx();
  return ctx.stream;
}

void rt_cuda_set_tf32(int on) { ctx.tf32 = on != 0; }
void rt_cuda_set_cublaslt(int on) { ctx.lt_off = on == 0; }

void rt_cuda_synchronize(void) {
  need_ctx();
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void *rt_cuda_malloc(size_t bytes) {
  void *p = NULL;
  CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

void rt_cuda_free(void *dev) { CUDA_CHECK(cudaFree(dev)); }

void rt_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes) {
  need_ctx();
  CUDA_CHECK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void rt_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes) {
  need_ctx();
  CUDA_CHECK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void rt_cuda_memset_zero(void *dev, size_t bytes) {
  need_ctx();
  CUDA_CHECK(cudaMemsetAsync(dev, 0, bytes, ctx.stream));
}

float rt_cuda_read_loss(const float *loss_dev) {
  float v = 0.0f;
  rt_cuda_memcpy_d2h(&v, loss_dev, sizeof v);
  return v;
}

void rt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes) { CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes)); }

// ----------------------------------------------------------------------------
// launch helpers and device reductions

/* cuBLAS and the kernels' 32-bit row/column indices take int dimensions. */
int dim_int(int64_t d) {
  RT_CHECK(d >= 0 && d <= INT_MAX, "dimension does not fit int");
  return (int)d;
}

/* Blocks for a grid-stride loop over n items: enough to fill the GPU, no
 * more (the loop covers the rest). */
unsigned grid_for(int64_t n, int block) {
  int64_t g = (n + block - 1) / block, cap = (int64_t)ctx.num_sms * 16;
  return (unsigned)(g < cap ? g : cap);
}

/* Lets `kernel` use `bytes` of dynamic shared memory (above 48 KiB needs an
 * explicit opt-in). */
void smem_optin(const void *kernel, size_t bytes, const char *what) {
  if (bytes <= 48 * 1024) return;
  if (bytes > ctx.smem_optin) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s needs %zu bytes of shared memory, the device has %zu", what, bytes, ctx.smem_optin);
    rt_cuda_fail(__FILE__, __LINE__, "shared memory", msg);
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}
