# The PyTorch front door (memplan import-torch, tools/torch_import.py; label
# torch_import): nn.Modules of tests/torch_import/modules.py imported, compiled,
# trained 5 steps by the generated CPU trainer and compared with PyTorch training
# the same module from the same weights on the same batches (float64 reference,
# float32 yardstick: tests/torch_import/check.py), then the checkpoint loaded
# back into the module (load_state_dict(strict=True)) and its eval forward
# compared with the trainer's eval. Skipped (77) where torch is absent.
set(ti_dir ${CMAKE_CURRENT_BINARY_DIR}/torch_import)
set(ti_mod ${MEMPLAN_TEST_DIR}/torch_import/modules.py)
function(memplan_torch_import name spec)
  add_test(NAME torch_import_${name}
           COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/torch_import/check.py $<TARGET_FILE:memplan>
                   ${ti_dir}/${name} ${spec} ${ARGN})
  set_tests_properties(torch_import_${name} PROPERTIES LABELS torch_import TIMEOUT 240
                       SKIP_RETURN_CODE 77)
endfunction()
# Linear, ReLU, exact GELU, a sigmoid gate (mul of two tensors); AdamW's defaults
memplan_torch_import(mlp ${ti_mod}:MLP --input x=[B,12]:f32 --input targets=[B]:i32 --dims B=4
                     --loss cross_entropy:targets)
# Conv2d, BatchNorm2d (momentum 0.2 and 0.1: running statistics compared), MaxPool2d, residual adds,
# AdaptiveAvgPool2d((1, 1)), torch.flatten; SGD with momentum and weight decay
# Planted once: the tool writing momentum 0.1 for every BatchNorm (stem has 0.2) printed
#   stem.1.running_var worst error 2.41e-01 (tolerance 8.3e-07) FAIL, eval loss rel err 1.52e-03 FAIL
memplan_torch_import(cnn ${ti_mod}:SmallCNN --input x=[B,3,8,8]:f32 --input targets=[B]:i32 --dims B=4
                     --loss cross_entropy:targets --optimizer sgd:lr=0.05,momentum=0.9,weight_decay=1e-3)
# Bad input, each a clear error with exit status 1 and nothing written: a SPEC that
# does not import, a factory that raises, a tuple without --output, input dims the
# module disagrees with, targets of the wrong dtype or shape, every unsupported node
# listed with its module path and source line, data-dependent control flow, no
# python3, a python3 without torch, a checkpoint of another plan in the load-back
# helper, Swin V2's attention (tests/torch_import/errors.py: 16 runs of python3 with torch, 27 s of CPU). Planted once: the tool creating
# the -o folder before refusing unsupported nodes printed "FAIL: unsupported nodes,
# all of them (exit 1) / wrote .../out7". Planted once: the MultiheadAttention check of need_weights deleted,
# the import refused only the weights' getitem ("getitem at (top level): the attention weights"), and the
# case "nn.MultiheadAttention returning its weights" missed its expected text.
add_test(NAME torch_import_errors
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/torch_import/errors.py $<TARGET_FILE:memplan> ${ti_dir}/errors)
set_tests_properties(torch_import_errors PROPERTIES LABELS torch_import TIMEOUT 300 SKIP_RETURN_CODE 77)
# nanoGPT's GPT as its model.py writes it (tests/torch_import/modules.py:GPT): `b, t = idx.size()`,
# position embeddings of torch.arange, the packed c_attn split into heads with a causal mask buffer
# (matched to memplan's attention op), exact GELU, the lm_head tied to wte; bytes of a source file as
# tokens. Planted once: the attention match writing causal: false printed
# "step 1: loss 5.213152410 vs 5.213305363  rel err 2.93e-05 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(gpt ${ti_mod}:GPT --input idx=[B,T]:i32 --input targets=[B,T]:i32 --dims B=2,T=8
                     --loss cross_entropy:targets --text ${MEMPLAN_SOURCE_DIR}/runtime/memplan_kernels.h)
# torchvision's MobileNetV2 structure shrunk (tests/torch_import/modules.py:MobileNetV2ish): ReLU6,
# depthwise convs (groups = channels), the inverted residual's add, nn.AdaptiveAvgPool2d(2) of a 4x4 map
# (avgpool2d, kernel 2) and F.adaptive_avg_pool2d(x, (1, 1)); AdamW with weight decay. BatchNorm gains of
# 4 put activations above ReLU6's clamp: planted once, the tool writing relu for nn.ReLU6 printed
# "step 1: loss 1.978691220 vs 1.868951355  rel err 5.87e-02 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(mobilenet ${ti_mod}:MobileNetV2ish --input x=[B,3,16,16]:f32 --input targets=[B]:i32
                     --dims B=4 --loss cross_entropy:targets --optimizer adamw:lr=3e-3,weight_decay=0.05)
# torchvision's own VisionTransformer, shrunk by its kwargs (32x32 images, 8x8 patches, 2 layers of width 32,
# 2 heads): the class token read in forward (get_attr, expand, torch.cat: class_token), the position
# embedding added (get_attr: position_embedding + add), nn.MultiheadAttention (batch_first, need_weights=False:
# its packed in_proj a linear, attention non-causal, out_proj a linear), x[:, 0]; AdamW with weight decay
# (the class token, memplan's [C], not decayed). torchvision zero-initializes the head: step 1's loss is log 10
# whatever the body computes, the steps after are not. Planted once: the MultiheadAttention mapped with
# causal: true printed "step 2: loss 2.338437800 vs 2.318633505  rel err 8.54e-03 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(vit torchvision.models.vision_transformer:VisionTransformer
                     --kwargs image_size=32,patch_size=8,num_layers=2,num_heads=2,hidden_dim=32,mlp_dim=64,num_classes=10
                     --input x=[B,3,32,32]:f32 --input targets=[B]:i32 --dims B=2 --loss cross_entropy:targets
                     --optimizer adamw:lr=3e-3,weight_decay=0.05)
# torchvision's resnet18(num_classes=10) at 32x32, batch 2: its stem (7x7 stride 2, max pooling with padding),
# basic blocks with downsampling shortcuts, BatchNorm's running statistics back into the module. 64x64, not
# 32x32: there layer4's BatchNorms see 2 values each and float32 is 1.7e-3 off float64 before any step. 3 steps:
# batch 2 is chaotic, by step 4 the float32 yardstick is 1.3e-2 off. Planted once: the stem's max pooling
# written without its padding printed "step 1: loss 2.403323410 vs 2.403483052  rel err 6.64e-05 (tolerance
# 4.4e-06)  FAIL".
memplan_torch_import(resnet18 torchvision.models:resnet18 --kwargs num_classes=10 --input x=[B,3,64,64]:f32
                     --input targets=[B]:i32 --dims B=2 --loss cross_entropy:targets
                     --optimizer sgd:lr=0.01,momentum=0.9,weight_decay=1e-4 --steps 3)
# torchvision's own SwinTransformer, shrunk by its kwargs (20x20 images, 4x4 patches, 2 stages of 2 blocks,
# widths 16 and 32, 3x3 windows): shifted_window_attention (the 5x5 map padded to 6x6 and cut back: pad; linear
# + window_attention + linear; the odd blocks shifted by 1, the second stage's 3x3 map one window, unshifted as
# torchvision does), _patch_merging_pad (the odd map padded, reshape, two transposes, reshape), the relative
# position bias tables trained and loaded back; stochastic depth 0 (memplan's draws are its own).
# Measured: per-step loss errors 2e-8 to 1.1e-7 (tolerances 2.4e-7 to 1.2e-6); 64 s on two cores shared with
# other builds, mostly the trainer's build (14 s of CPU). Planted once: the patch merging's channel blocks in
# the order x0 x2 x1 x3 (one transpose fewer) printed
#   "step 1: loss 2.302654740 vs 2.325766038  rel err 9.94e-03 (tolerance 2.4e-07)  FAIL";
# the shift kept on the second stage's single window (torchvision drops it) printed
#   "step 1: loss 2.325469970 vs 2.325766038  rel err 1.27e-04 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(swin torchvision.models.swin_transformer:SwinTransformer
                     --kwargs patch_size=[4,4],embed_dim=16,depths=[2,2],num_heads=[2,4],window_size=[3,3],stochastic_depth_prob=0.0,num_classes=10
                     --input x=[B,3,20,20]:f32 --input targets=[B]:i32 --dims B=2 --loss cross_entropy:targets
                     --optimizer adamw:lr=3e-3,weight_decay=0.05)
# ConvNeXt's channel-last norms (tests/torch_import/modules.py:ConvNeXtish, torchvision's Permute and
# LayerNorm2d): permute to NHWC, nn.LayerNorm over C and back (each permute memplan's transposes, one per
# swap), and F.layer_norm with an nn.LayerNorm's weight and bias. Planted once: the permute to channel-last
# swapping H and W too (one transpose more) printed
#   "step 1: loss 1.806458350 vs 1.833892844  rel err 1.50e-02 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(convnext_norm ${ti_mod}:ConvNeXtish --input x=[B,3,8,8]:f32 --input targets=[B]:i32
                     --dims B=4 --loss cross_entropy:targets --optimizer adamw:lr=3e-3,weight_decay=0.05)
# torchvision's DenseNet shrunk by its kwargs (one dense block of 8 layers, growth 4): each layer's
# torch.cat of all the features before it, up to 9 tensors, more than memplan's concat takes (6): the
# import chains concats, each of the previous result and the next 5. SGD: with AdamW (lr 3e-3) float32 drifted
# 4e-5 from float64 by step 2, its eval loss 1.8e-4 (tolerance 3e-4: too near). Planted once: the chained
# concats taking the previous result last printed
#   "step 1: loss 2.193628550 vs 2.068921976  rel err 6.03e-02 (tolerance 3.2e-07)  FAIL".
memplan_torch_import(densenet torchvision.models.densenet:DenseNet
                     --kwargs "growth_rate=4,block_config=(8,),num_init_features=8,bn_size=2,num_classes=10"
                     --input x=[B,3,16,16]:f32 --input targets=[B]:i32 --dims B=4 --loss cross_entropy:targets
                     --optimizer sgd:lr=0.05,momentum=0.9,weight_decay=1e-4)
# torchvision's MobileNetV3 blocks shrunk (tests/torch_import/modules.py:MobileNetV3ish): nn.Hardswish and
# F.hardswish (hardswish), squeeze-excitation as torchvision.ops.SqueezeExcitation (a Hardsigmoid gate of
# [N, C, 1, 1] times the [N, C, H, W] input: scale_channels), x.mean([2, 3], keepdim=True) and
# torch.mean(dim=(-2, -1)) (global_avgpool, + a reshape for keepdim), torch.cat of the two. Measured per-step
# loss errors 1e-8 to 6e-8, eval 3e-8. Planted once: the tool writing sigmoid for nn.Hardsigmoid printed
# "step 1: loss 2.355980870 vs 2.354033423  rel err 8.27e-04 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(mobilenet_v3 ${ti_mod}:MobileNetV3ish --input x=[B,3,16,16]:f32 --input targets=[B]:i32
                     --dims B=4 --loss cross_entropy:targets --optimizer adamw:lr=3e-3,weight_decay=0.05)
# torchvision's own mobilenet_v3_small (no weights, num_classes 10, classifier dropout 0) at 32x32, batch 2,
# 3 AdamW steps in step with torchvision: Hardswish, squeeze-excitation (scale_channels), Hardsigmoid, its
# BatchNorms on 1x1 maps. About 35 s of CPU (the trainer's build and torch's float64 run). Step 1 is held to
# 2.4e-7; the float32 yardstick drifts fast after it (batch-2 statistics on 1x1 maps: tolerances 1.7e-2 and
# 7e-2 at steps 2 and 3). Skipped (77) without torchvision. Planted once: the tool writing silu for
# nn.Hardswish printed "step 1: loss 2.314620970 vs 2.323891454  rel err 3.99e-03 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(tv_mobilenet_v3_small torchvision.models:mobilenet_v3_small --kwargs num_classes=10,dropout=0.0
                     --input x=[B,3,32,32]:f32 --input targets=[B]:i32 --dims B=2 --loss cross_entropy:targets
                     --steps 3 --floor-ulps 32)
# (--floor-ulps 32: step 1's error was 6.4e-7, 10.7 float32 ulps, under OPENBLAS_CORETYPE=Prescott, and
# 2.3e-8 under Zen and Haswell; 32 ulps (1.9e-6) is 3x the largest, and the planted silu gave 3.99e-3)
# VGG's, AlexNet's and SqueezeNet's pooling at small images (tests/torch_import/modules.py:VGGish):
# nn.MaxPool2d(3, 2, ceil_mode=True) of 10x10 (maxpool2d ceil_mode: 5x5, the floor's 4x4),
# nn.AdaptiveAvgPool2d((3, 3)) of 5x5 and F.adaptive_avg_pool2d to 2x7 (adaptive_avgpool2d: uneven windows, and
# more columns than inputs).
# Measured per-step loss errors 1e-8 to 3e-8. Planted once: the tool writing adaptive_avgpool2d's height and width
# swapped (2x7 as 7x2: the same features' count) printed
#   "step 1: loss 2.379491570 vs 2.384639696  rel err 2.16e-03 (tolerance 2.4e-07)  FAIL".
memplan_torch_import(vggish ${ti_mod}:VGGish --input x=[B,3,10,10]:f32 --input targets=[B]:i32 --dims B=4
                     --loss cross_entropy:targets --optimizer adamw:lr=3e-3,weight_decay=0.05)
# torchvision's own squeezenet1_1 (num_classes 10, dropout 0) at 33x33, batch 2, 3 SGD steps: three max poolings
# with ceil_mode, each rounding up (16 to 8, 8 to 4, 4 to 2; at 32x32 or 224x224 every division is exact and
# ceil_mode changes nothing), the Fire modules' torch.cat, the classifier's 1x1 conv and adaptive pooling to
# 1x1. Skipped (77) without torchvision. Measured per-step loss errors 2e-8 to 3e-8. Planted once: the tool
# dropping ceil_mode (the adaptive pooling to 1x1 hides the sizes) printed
#   "step 1: loss 2.349635360 vs 2.352481918  rel err 1.21e-03 (tolerance 3.2e-07)  FAIL".
memplan_torch_import(tv_squeezenet1_1 torchvision.models:squeezenet1_1 --kwargs num_classes=10,dropout=0.0
                     --input x=[B,3,33,33]:f32 --input targets=[B]:i32 --dims B=2 --loss cross_entropy:targets
                     --optimizer sgd:lr=0.01,momentum=0.9 --steps 3)
# torchvision's own shufflenet_v2_x0_5 (num_classes 10) at 64x64, batch 4, 2 SGD steps: x.chunk(2, dim=1) (a
# reshape of C to [2, C / 2] and a select per piece), the channel shuffle (view to [B, 2, C / 2, H, W],
# transpose(1, 2), view back), depthwise convolutions, x.mean([2, 3]). Skipped (77) without torchvision.
# Batch 4, SGD lr 1e-3: at batch 2 (lr 1e-2) the float32 yardstick itself drifted, step 2 2.0e-4 off against a
# tolerance of 1.7e-4. 2 steps: step 3 was 9.9e-6 off under OPENBLAS_CORETYPE=Prescott against 9.0e-6 (6.0e-6
# vs 2.0e-5 under Zen). Measured, Zen / Prescott: step 1 1.19e-6 / 3.1e-7 (tolerances 5.0e-6 / 6.0e-6), step 2
# 2.1e-6 / 4.7e-6 (2.9e-5 / 3.5e-5), eval 7.1e-8 / 3.3e-8 (3.1e-7): at least 4x under. Planted once: the tool
# selecting the other piece of each chunk printed
#   "step 1: loss 2.329739810 vs 2.438093388  rel err 4.44e-02 (tolerance 5.0e-06)  FAIL".
memplan_torch_import(tv_shufflenet_v2_x0_5 torchvision.models:shufflenet_v2_x0_5 --kwargs num_classes=10
                     --input x=[B,3,64,64]:f32 --input targets=[B]:i32 --dims B=4 --loss cross_entropy:targets
                     --optimizer sgd:lr=0.001,momentum=0.9 --steps 2)
# The issue's list, measured once, not tests (check.py by hand, the arguments below): torchvision's own
# mobilenet_v2 (--kwargs num_classes=10,dropout=0.0) and resnet50 (num_classes=10) at 64x64, batch 2, SGD lr 1e-3,
# 3 steps. Step 1: mobilenet_v2 8.7e-7 off float64 (tolerance 2.6e-5), resnet50 5.6e-6 (tolerance 9.2e-5); after
# it torch's own float32 drifts (BatchNorms of batch 2 on 2x2 maps: mobilenet_v2's step 3 tolerance 0.41, resnet50
# 10% off by step 2), so later steps test nothing, and each run took 109 and 60 CPU seconds: too heavy for the
# default run for what it adds to torch_import_mobilenet, torch_import_tv_mobilenet_v3_small and
# torch_import_resnet18. Both loaded back strictly, the module's eval forward equal to the trainer's eval loss
# (2.368959232 vs 2.368959190; 2.475332244 vs 2.475332260).
