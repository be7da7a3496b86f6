/* ref.h: naive double-precision references of the memplan_rt.h kernels, for
 * tests that must run where the CPU backend cannot be built (no OpenBLAS on
 * the GPU machine).
 *
 * Each ref_<name> has the signature and contract of rt_<name> (acc flags,
 * NULL outputs, alias-safe pairs: every reference computes into temporaries
 * and stores at the end, so any aliasing is safe). Sums are plain loops in
 * double, results rounded to float once. Backward references compute the
 * exact gradient of the forward from the inputs alone: attention ignores
 * `out` and `lse`, cross-entropy ignores `lse`, so a kernel that misuses
 * them cannot agree by accident.
 *
 * The _f32 optimizer variants replay cpu.c's float operations in cpu.c's
 * order (compiled with -ffp-contract=off): the CUDA optimizers must match
 * them bit for bit.
 */
#ifndef MEMPLAN_TEST_REF_H
#define MEMPLAN_TEST_REF_H

#include <stdint.h>

void ref_linear_forward(float *out, const float *x, const float *W, const float *b, int64_t M, int64_t K, int64_t N);
void ref_linear_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, int64_t M,
                         int64_t K, int64_t N, int acc_dx, int acc_dW, int acc_db);
void ref_matmul_forward(float *out, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N);
void ref_matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t Bt, int64_t M,
                         int64_t K, int64_t N, int acc_da, int acc_db);
void ref_add_forward(float *out, const float *a, const float *b, int64_t n);
void ref_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db);
void ref_relu_forward(float *out, const float *x, int64_t n);
void ref_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc);
void ref_gelu_forward(float *out, const float *x, int64_t n);
void ref_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc);
void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int64_t N, int64_t C);
void ref_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int64_t N, int64_t C, int acc_dx, int acc_dw,
                            int acc_db);
void ref_softmax_forward(float *out, const float *x, int64_t N, int64_t C);
void ref_softmax_backward(float *dx, const float *dout, const float *out, int64_t N, int64_t C, int acc);
void ref_attention_forward(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH);
void ref_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                            int64_t B, int64_t T, int64_t C, int64_t NH, int acc);
void ref_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V);
void ref_embedding_backward(float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V,
                            int acc);
void ref_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T, int64_t C);
void ref_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows,
                                     int acc);
void ref_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                               int64_t V);
void ref_cross_entropy_backward(float *dlogits, const float *logits, const int32_t *targets, const float *lse,
                                int64_t N, int64_t V, float scale, int acc);
void ref_mse_forward(float *loss, const float *pred, const float *target, int64_t n);
void ref_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float scale, int acc);
void ref_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                      double eps, double wd, int64_t t);
void ref_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                    int nesterov);
void ref_adamw_update_f32(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t);
void ref_sgd_update_f32(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                        int nesterov);

#endif
