# The CUDA trainer compiles for every bundled model (label e2e, no GPU needed):
# memplan compile, then the generated folder's own CMakeLists.txt builds
# trainer_cuda with nvcc (trainer.cu, cuda_*.cu, memplan_trainer_cuda.cu, and
# the trainer program as C), warnings as errors. Variants cover the paths a
# plain fp32 plan does not: bf16 casts, and fp16 loss scaling with
# micro-batches. Running them is tests/gpu/run.sh's job, on a GPU machine.
# One test, cuda_trainers, compiles them all (tests/gpu/compile_trainers.sh):
# the runtime, the same in every folder, is compiled once and each plan's
# trainer.cu after it (22 nvcc builds of the runtime took 11 of CI's minutes).
# The runtime by concern (11 cuda_*.cu, issue #31) costs nvcc 50 s of CPU against
# one kernels.cu's 21 s (sm_80 and sm_90, -O3; 2026-12-02, measured on the 2-core machine).
if(CMAKE_CUDA_COMPILER AND NOT MEMPLAN_SANITIZE)
  set(cuda_trainer_dir ${CMAKE_CURRENT_BINARY_DIR}/cuda_trainer)
  set(cuda_trainer_configs "")
  # NAME MODEL.yaml [memplan compile options, each as --option=value]
  function(memplan_cuda_trainer name yaml)
    string(REPLACE ";" "," opts "${ARGN}")
    set(cfg "${name}:${yaml}")
    if(opts)
      set(cfg "${cfg}:${opts}")
    endif()
    set(cuda_trainer_configs ${cuda_trainer_configs} ${cfg} PARENT_SCOPE)
  endfunction()
  file(GLOB bundled_models ${MEMPLAN_SOURCE_DIR}/models/*.yaml)
  foreach(yaml ${bundled_models})
    get_filename_component(name ${yaml} NAME_WLE) # llama-3.2-1b.yaml: llama-3.2-1b
    memplan_cuda_trainer(${name} ${yaml})
  endforeach()
  # an op with a float attribute: rmsnorm's eps reaches rt_cuda_rmsnorm_* after the dims
  memplan_cuda_trainer(rmsnorm-lm ${MEMPLAN_TEST_DIR}/reference/rmsnorm-lm.yaml)
  # layernorm with eps written and bias: false (b, db NULL in the CUDA kernels)
  memplan_cuda_trainer(layernorm-lm ${MEMPLAN_TEST_DIR}/reference/layernorm-lm.yaml)
  # rope (theta after its five dims), silu and mul
  memplan_cuda_trainer(llama-lm ${MEMPLAN_TEST_DIR}/reference/llama-lm.yaml)
  # fine-tuning: LoRA (scale, dropout on the adapters' input) on a frozen base
  memplan_cuda_trainer(lora-dropout-lm ${MEMPLAN_TEST_DIR}/reference/lora-dropout-lm.yaml)
  # attention's kv_heads and causal reach rt_cuda_attention_* as dims
  memplan_cuda_trainer(gqa-lm ${MEMPLAN_TEST_DIR}/reference/gqa-lm.yaml)
  # gelu's approximate (an enum) reaches rt_cuda_gelu_* as a dim after n
  memplan_cuda_trainer(gelu-exact ${MEMPLAN_TEST_DIR}/reference/gelu-exact.yaml)
  memplan_cuda_trainer(tokens-mix ${MEMPLAN_TEST_DIR}/reference/tokens-mix.yaml)
  # batchnorm2d: mode and key after its two floats, the STATES table (running
  # statistics uploaded and downloaded with the params), recompute at 300K
  memplan_cuda_trainer(bn-mlp ${MEMPLAN_TEST_DIR}/reference/bn-mlp.yaml --budget=300K)
  # pooling (nine dims) and dropout (p, then mode and key; its stored mask)
  memplan_cuda_trainer(pool-dropout ${MEMPLAN_TEST_DIR}/reference/pool-dropout.yaml)
  # a CUDA graph would replay the first step's dropout key: refused before
  # the device is opened (so this runs without a GPU)
  add_test(NAME cuda_graph_refuses_dropout COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1
           "dropout \\(layer drop1\\).*train this model without --cuda-graph"
           ${cuda_trainer_dir}/pool-dropout/build/trainer_cuda --cuda-graph --steps 1)
  set_tests_properties(cuda_graph_refuses_dropout PROPERTIES LABELS "e2e;cuda" FIXTURES_REQUIRED cuda_trainers)
  # generation's KV cache (--gen-context): the DECODE table (rope's floats, attention's cache offsets) in
  # C++, and cuda_generate.cu's decode kernels (trainer.cu's decode_run)
  memplan_cuda_trainer(llama-mini-kv ${MEMPLAN_SOURCE_DIR}/models/llama-mini.yaml --set=B=1 --gen-context=128)
  memplan_cuda_trainer(gpt2-mini-bf16 ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --precision=bf16)
  # the fused classifier loss (rt_cuda_linear_cross_entropy_*), tied and without a bias, and written in YAML with one
  memplan_cuda_trainer(gpt2-mini-fused-loss ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --fused-loss=64)
  memplan_cuda_trainer(fused-lm ${MEMPLAN_TEST_DIR}/reference/fused-lm.yaml)
  # the tied head's gradient deferred (planner/headgrad.h): the fused loss's forward run with loss NULL
  memplan_cuda_trainer(gpt2-mini-head-deferred ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --fused-loss=64
                       --head-grad=deferred)
  # AdamW's moments in bf16 and in 8 bits (u8 codes, f32 scales): rt_cuda_adamw_update_bf16 / _8bit
  memplan_cuda_trainer(gpt2-mini-opt-bf16 ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --opt-state=bf16)
  memplan_cuda_trainer(gpt2-mini-opt-8bit ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --opt-state=8bit)
  memplan_cuda_trainer(gpt2-mini-fp16-mb2 ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --precision=fp16
                       --micro-batch=2)
  # gradient clipping: the norm summed on the device (rt_cuda_grad_sqnorm), the
  # gradients scaled by rt_cuda_unscale_check (fp16's unscaling before it
  # emits the calls gpt2-mini-fp16-mb2 compiles)
  memplan_cuda_trainer(mlp-clip ${MEMPLAN_TEST_DIR}/reference/mlp-clip.yaml)
  # data parallel, last (its CMakeLists.txt adds the MPI targets): trainer_cuda_mpi with NCCL, ZeRO-2
  # with micro-batches (reduce-scatters into accumulating shards on the device)
  memplan_cuda_trainer(gpt2-mini-ranks2-zero2 ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --ranks=2 --zero=2
                       --micro-batch=2)
  add_test(NAME cuda_trainers COMMAND sh ${MEMPLAN_TEST_DIR}/gpu/compile_trainers.sh $<TARGET_FILE:memplan>
                                      ${cuda_trainer_dir} ${cuda_trainer_configs})
  set_tests_properties(cuda_trainers PROPERTIES LABELS "e2e;cuda" TIMEOUT 1800 FIXTURES_SETUP cuda_trainers)
  # A CUDA graph cannot read the gradient norm back each step: refused before
  # the device is opened.
  add_test(NAME cuda_graph_refuses_clip COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1
           "--cuda-graph replays one captured step: not with gradient clipping"
           ${cuda_trainer_dir}/mlp-clip/build/trainer_cuda --cuda-graph --steps 1)
  set_tests_properties(cuda_graph_refuses_clip PROPERTIES LABELS "e2e;cuda" FIXTURES_REQUIRED cuda_trainers)
  # A CUDA graph's captured updates hold one lr: an lr schedule is refused before
  # the device is opened (so this runs without a GPU).
  add_test(NAME cuda_trainer_graph_refuses_schedule COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1
           "--cuda-graph replays a step captured with one lr: not with an lr schedule"
           ${cuda_trainer_dir}/mlp/build/trainer_cuda --cuda-graph --schedule cosine --steps 3)
  set_tests_properties(cuda_trainer_graph_refuses_schedule PROPERTIES LABELS "e2e;cuda" TIMEOUT 30
                       FIXTURES_REQUIRED cuda_trainers)
endif()
