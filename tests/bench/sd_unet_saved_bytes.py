#!/usr/bin/python3
"""sd_unet_saved_bytes.py: the bytes PyTorch eager keeps for backward in one
noise-prediction training forward of Stable Diffusion 1.5's U-Net, against
memplan's keep-everything plan of models/sd-unet.yaml (CTest label bench;
issue 29's goal: memplan's keep-all activations no more than PyTorch's).

PyTorch side: the U-Net written here in torch.nn as diffusers'
UNet2DConditionModel builds it for runwayml/stable-diffusion-v1-5 (diffusers
is not installed): ResnetBlock2D (GroupNorm 32, SiLU, conv, time_emb_proj
of SiLU(temb) added per channel, conv, 1x1 shortcut where the channels
change), Transformer2DModel (GroupNorm eps 1e-6, 1x1 proj_in, a
BasicTransformerBlock: LayerNorm, self-attention, LayerNorm, cross-attention
to the 77x768 context, LayerNorm, GEGLU feed-forward; 1x1 proj_out, the
residual), attention as diffusers' AttnProcessor runs it in torch 1.13
(head_to_batch_dim, baddbmm, softmax, bmm: the probabilities are saved),
Downsample2D (3x3 conv, stride 2), Upsample2D (nearest x2 then a 3x3 conv),
the sinusoidal timestep embedding (flip_sin_to_cos, shift 0) and its MLP.
The DDPM forward process makes x_t from the latents and the noise (no
gradient), the loss is MSE against the noise. One forward runs under
torch.autograd.graph.saved_tensors_hooks on the meta device (shapes only),
each saved storage counted once (tests/bench/torch_saved_bytes.py's
method); a small U-Net of the same code (channels 32..128, context 64)
first checks that meta saves what CPU saves, storage by storage. The
parameter count must equal memplan's (plan.json's param_count: 859,520,964).

memplan side: `memplan compile models/sd-unet.yaml -o DIR` (keep
everything, the whole batch): the activation and input bytes live across
the forward/backward boundary, and the arena.

  /usr/bin/python3 tests/bench/sd_unet_saved_bytes.py --memplan build/bin/memplan \\
      --models models --workdir /tmp/sd_saved

Fails (exit 1) when the parameter count differs, when meta and CPU disagree,
or when memplan keeps more than PyTorch saves; skips (77) without torch.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_saved_bytes import compile_plan, count_saved, gib, plan_saved_bytes  # noqa: E402


def build_unet(torch):
    nn, F = torch.nn, torch.nn.functional

    class Resnet(nn.Module):
        def __init__(self, cin, cout, temb, dev):
            super().__init__()
            self.norm1 = nn.GroupNorm(32, cin, eps=1e-5, device=dev)
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, device=dev)
            self.time_emb_proj = nn.Linear(temb, cout, device=dev)
            self.norm2 = nn.GroupNorm(32, cout, eps=1e-5, device=dev)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, device=dev)
            self.conv_shortcut = nn.Conv2d(cin, cout, 1, device=dev) if cin != cout else None

        def forward(self, x, temb):
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
            h = self.conv2(F.silu(self.norm2(h)))  # dropout 0
            return (self.conv_shortcut(x) if self.conv_shortcut is not None else x) + h

    class Attention(nn.Module):
        def __init__(self, c, ctx, heads, dev):
            super().__init__()
            self.heads, self.scale = heads, (c // heads) ** -0.5
            self.to_q = nn.Linear(c, c, bias=False, device=dev)
            self.to_k = nn.Linear(ctx, c, bias=False, device=dev)
            self.to_v = nn.Linear(ctx, c, bias=False, device=dev)
            self.to_out = nn.Linear(c, c, device=dev)

        def split(self, t):  # diffusers' head_to_batch_dim
            b, n, c = t.shape
            return t.reshape(b, n, self.heads, c // self.heads).permute(0, 2, 1, 3).reshape(b * self.heads, n, -1)

        def forward(self, x, context=None):
            context = x if context is None else context
            q, k, v = self.split(self.to_q(x)), self.split(self.to_k(context)), self.split(self.to_v(context))
            empty = torch.empty(q.shape[0], q.shape[1], k.shape[1], dtype=q.dtype, device=q.device)
            probs = torch.baddbmm(empty, q, k.transpose(-1, -2), beta=0, alpha=self.scale).softmax(-1)
            o = torch.bmm(probs, v)
            b = o.shape[0] // self.heads
            o = o.reshape(b, self.heads, o.shape[1], -1).permute(0, 2, 1, 3).reshape(b, o.shape[1], -1)
            return self.to_out(o)  # to_out[1]: dropout 0

    class Transformer(nn.Module):
        def __init__(self, c, ctx, heads, dev):
            super().__init__()
            self.norm = nn.GroupNorm(32, c, eps=1e-6, device=dev)
            self.proj_in = nn.Conv2d(c, c, 1, device=dev)
            self.norm1 = nn.LayerNorm(c, device=dev)
            self.attn1 = Attention(c, c, heads, dev)
            self.norm2 = nn.LayerNorm(c, device=dev)
            self.attn2 = Attention(c, ctx, heads, dev)
            self.norm3 = nn.LayerNorm(c, device=dev)
            self.ff_proj = nn.Linear(c, 8 * c, device=dev)  # GEGLU: 2 x 4c
            self.ff_out = nn.Linear(4 * c, c, device=dev)
            self.proj_out = nn.Conv2d(c, c, 1, device=dev)

        def forward(self, x, context):
            b, c, hh, ww = x.shape
            h = self.proj_in(self.norm(x)).permute(0, 2, 3, 1).reshape(b, hh * ww, c)
            h = self.attn1(self.norm1(h)) + h
            h = self.attn2(self.norm2(h), context) + h
            a, gate = self.ff_proj(self.norm3(h)).chunk(2, dim=-1)
            h = self.ff_out(a * F.gelu(gate)) + h
            h = h.reshape(b, hh, ww, c).permute(0, 3, 1, 2).contiguous()
            return self.proj_out(h) + x

    class UNet(nn.Module):
        def __init__(self, ch=(320, 640, 1280, 1280), ctx=768, heads=8, dev="meta"):
            super().__init__()
            self.c0, temb = ch[0], 4 * ch[0]
            self.lin1, self.lin2 = nn.Linear(ch[0], temb, device=dev), nn.Linear(temb, temb, device=dev)
            self.conv_in = nn.Conv2d(4, ch[0], 3, padding=1, device=dev)
            self.down, skip_ch, cin = nn.ModuleList(), [ch[0]], ch[0]
            for i, c in enumerate(ch):
                blk = nn.Module()
                blk.res = nn.ModuleList([Resnet(cin if j == 0 else c, c, temb, dev) for j in range(2)])
                blk.attn = nn.ModuleList([Transformer(c, ctx, heads, dev) for _ in range(2)] if i < 3 else [])
                blk.ds = nn.Conv2d(c, c, 3, stride=2, padding=1, device=dev) if i < 3 else None
                skip_ch += [c, c] + ([c] if i < 3 else [])
                self.down.append(blk)
                cin = c
            self.mid_res1, self.mid_attn = Resnet(cin, cin, temb, dev), Transformer(cin, ctx, heads, dev)
            self.mid_res2 = Resnet(cin, cin, temb, dev)
            self.up = nn.ModuleList()
            for i, c in enumerate(reversed(ch)):
                blk = nn.Module()
                blk.res = nn.ModuleList()
                for _ in range(3):
                    blk.res.append(Resnet(cin + skip_ch.pop(), c, temb, dev))
                    cin = c
                blk.attn = nn.ModuleList([Transformer(c, ctx, heads, dev) for _ in range(3)] if i > 0 else [])
                blk.us = nn.Conv2d(c, c, 3, padding=1, device=dev) if i < 3 else None
                self.up.append(blk)
            self.norm_out = nn.GroupNorm(32, ch[0], eps=1e-5, device=dev)
            self.conv_out = nn.Conv2d(ch[0], 4, 3, padding=1, device=dev)

        def forward(self, x, t, context):
            half = self.c0 // 2  # get_timestep_embedding(t, c0, flip_sin_to_cos=True, downscale_freq_shift=0)
            freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=x.device) / half)
            e = t[:, None].float() * freqs[None]
            temb = self.lin2(F.silu(self.lin1(torch.cat([torch.cos(e), torch.sin(e)], dim=-1))))
            h = self.conv_in(x)
            skips = [h]
            for blk in self.down:
                for j, r in enumerate(blk.res):
                    h = r(h, temb)
                    if len(blk.attn):
                        h = blk.attn[j](h, context)
                    skips.append(h)
                if blk.ds is not None:
                    h = blk.ds(h)
                    skips.append(h)
            h = self.mid_res2(self.mid_attn(self.mid_res1(h, temb), context), temb)
            for blk in self.up:
                for j, r in enumerate(blk.res):
                    h = r(torch.cat([h, skips.pop()], dim=1), temb)
                    if len(blk.attn):
                        h = blk.attn[j](h, context)
                if blk.us is not None:
                    h = blk.us(F.interpolate(h, scale_factor=2.0, mode="nearest"))
            return self.conv_out(F.silu(self.norm_out(h)))

    return UNet


def saved_bytes(torch, model, batch, size, ctx_len, ctx_dim, device):
    """{'activation', 'input', 'param'} bytes of the storages autograd saves in
    one noise-prediction training forward, each storage once, and the list."""
    model = model.train()
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(batch, 4, size, size, generator=g).to(device)
    noise = torch.randn(batch, 4, size, size, generator=g).to(device)
    context = torch.randn(batch, ctx_len, ctx_dim, generator=g).to(device)
    t = torch.randint(0, 1000, (batch,), generator=g).to(device)
    abar = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 1000), 0).to(device)[t][:, None, None, None]
    xt = abar.sqrt() * x0 + (1 - abar).sqrt() * noise  # the DDPM forward process: data, no gradient
    kinds = {p.storage()._cdata: "param" for p in model.parameters()}
    for d in (xt, noise, context, t):
        kinds[d.storage()._cdata] = "input"
    return count_saved(torch, kinds, lambda: torch.nn.functional.mse_loss(model(xt, t, context), noise),
                       ("activation", "input", "param"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--models", required=True, help="the models/ folder")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("-v", "--verbose", action="store_true", help="list every saved storage")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("sd_unet_saved_bytes: %s has no torch; skipping" % sys.executable)
        return 77
    UNet = build_unet(torch)
    os.makedirs(a.workdir, exist_ok=True)
    fail = []
    plan, err = compile_plan(a.memplan, os.path.join(a.models, "sd-unet.yaml"), os.path.join(a.workdir, "keepall"),
                             None)
    if plan is None:
        sys.exit("sd_unet_saved_bytes: memplan compile sd-unet.yaml failed: %s" % err)
    B = plan["dims"]["B"]
    # meta must save what CPU saves: a small U-Net of the same code, batch 2, 16x16 latents
    torch.manual_seed(0)
    small = dict(ch=(32, 64, 128, 128), ctx=64, heads=8)
    cpu, cpu_list = saved_bytes(torch, UNet(dev="cpu", **small), 2, 16, 77, 64, "cpu")
    meta, meta_list = saved_bytes(torch, UNet(dev="meta", **small), 2, 16, 77, 64, "meta")
    if cpu_list != meta_list:
        fail.append("meta saves %s, CPU %s (small U-Net, batch 2)" % (meta, cpu))
    model = UNet(dev="meta")
    nparams = sum(p.numel() for p in model.parameters())
    if nparams != plan["totals"]["param_count"]:
        fail.append("torch has %d parameters, memplan %d" % (nparams, plan["totals"]["param_count"]))
    sv, lst = saved_bytes(torch, model, B, 64, 77, 768, "meta")
    if a.verbose:
        for e in lst:
            print("   ", e)
    mine = plan_saved_bytes(plan)
    torch_saved = sv["activation"] + sv["input"]
    print("sd_unet_saved_bytes: torch %s, batch %d, 4x64x64 latents, context 77x768, fp32; "
          "saved tensors counted on the meta device" % (torch.__version__, B))
    print("  parameters: torch %s, memplan %s; %d storages saved" %
          (format(nparams, ","), format(plan["totals"]["param_count"], ","), len(lst)))
    print("  PyTorch eager saves for backward: activations %s, inputs %s (and %s of parameters)" %
          (gib(sv["activation"]), gib(sv["input"]), gib(sv["param"])))
    print("  memplan keep-all: saved across forward/backward %s; arena %s" %
          (gib(mine), gib(plan["totals"]["arena_bytes"])))
    print("  ratio memplan / PyTorch: %.3f" % (mine / torch_saved))
    # softmax's saved output [B heads, Tq, Tk] (Tk: Tq or the context's 77), which memory-efficient attention
    # (xformers, torch 2's scaled_dot_product_attention) does not keep: the comparison against those
    probs = sum(n for k, _, sh, n in lst if k == "activation" and len(sh) == 3 and sh[0] == B * 8 and
                sh[2] in (sh[1], 77))
    print("  of PyTorch's, attention probabilities %s; without them (memory-efficient attention) %s: ratio %.3f" %
          (gib(probs), gib(torch_saved - probs), mine / (torch_saved - probs)))
    if mine > torch_saved:
        fail.append("memplan keeps %d bytes for backward, PyTorch %d" % (mine, torch_saved))
    for f in fail:
        print("sd_unet_saved_bytes: FAIL " + f)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
