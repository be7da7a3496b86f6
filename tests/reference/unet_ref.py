"""unet_ref.py: models/unet-mnist.yaml's DDPM U-Net in PyTorch, written from
the architecture with torch.nn's own layers, not from the plan: nn.Conv2d,
nn.GroupNorm, nn.ConvTranspose2d, nn.Upsample, nn.MultiheadAttention (its
packed in-projection is memplan's qkv linear, its out-projection the proj
linear), the timestep MLP over diffusers' sinusoidal embedding
(flip_sin_to_cos, shift 0), and the DDPM forward process with diffusers'
linear beta schedule (torch.linspace of the betas, their cumulative product).

reference.py --module unet_ref runs it instead of plan_torch's plan
interpreter. It shares with memplan only the names (each submodule is named
after its YAML layer, so the state dict's keys are memplan's parameter
names), the batches, the sizes (the plan's dims, read as a config) and the
trainer's random draws: the timesteps t and the noise eps come from the
ddpm_noise op's key (plan_torch.op_key, plan_torch.ddpm_draws: the trainer's
RNG, which no independent model can guess). x_t = sqrt(abar_t) x0 +
sqrt(1 - abar_t) eps is this module's, in float64 as the kernel rounds it
once."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import stateless

import plan_torch

T_STEPS, BETA_START, BETA_END = 1000, 1e-4, 0.02  # unet-mnist.yaml leaves ddpm_noise at its defaults
MAX_PERIOD = 10000.0  # timestep_embedding's default
EPS = 1e-5  # groupnorm's default, nn.GroupNorm's too


def timestep_embedding(t, dim):
    """diffusers' get_timestep_embedding(t, dim, flip_sin_to_cos=True, downscale_freq_shift=0) in float64
    (the kernel's angles are double)."""
    half = dim // 2
    freqs = torch.exp(-math.log(MAX_PERIOD) * torch.arange(half, dtype=torch.float64) / half)
    a = t.double()[:, None] * freqs[None, :]
    return torch.cat([a.cos(), a.sin()], dim=1)


class ResBlock(nn.Module):
    """GroupNorm, SiLU, conv, + the timestep projection per channel, GroupNorm, SiLU, conv (the YAML's
    <p>n1, <p>c1, <p>t, <p>n2, <p>c2); the caller adds its skip."""

    def __init__(self, cin, cout, groups, tdim):
        super().__init__()
        for name, m in (("n1", nn.GroupNorm(groups, cin, EPS)), ("c1", nn.Conv2d(cin, cout, 3, padding=1)),
                        ("t", nn.Linear(tdim, cout)), ("n2", nn.GroupNorm(groups, cout, EPS)),
                        ("c2", nn.Conv2d(cout, cout, 3, padding=1))):
            self.add_module(name, m)

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x))) + self.t(temb)[:, :, None, None]
        return self.c2(F.silu(self.n2(h)))


class UNetRef(nn.Module):
    def __init__(self, dims):
        super().__init__()
        C, C2, G, TD, NH = dims["C"], dims["C2"], dims["G"], dims["TD"], dims["NH"]
        self.td = TD
        self.tfc1, self.tfc2 = nn.Linear(TD, 4 * C), nn.Linear(4 * C, 4 * C)
        self.stem = nn.Conv2d(1, C, 3, padding=1)
        self.d1 = ResBlock(C, C, G, 4 * C)
        self.down1 = nn.Conv2d(C, C, 3, stride=2, padding=1)
        self.d2 = ResBlock(C, C2, G, 4 * C)
        self.d2sc = nn.Conv2d(C, C2, 1)
        self.down2 = nn.Conv2d(C2, C2, 3, stride=2, padding=1)
        self.m = ResBlock(C2, C2, G, 4 * C)
        self.an = nn.GroupNorm(G, C2, EPS)
        self.att = nn.MultiheadAttention(C2, NH, batch_first=True)
        self.up2 = nn.ConvTranspose2d(C2, C2, 4, stride=2, padding=1)
        self.u2 = ResBlock(2 * C2, C2, G, 4 * C)
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.up1c = nn.Conv2d(C2, C, 3, padding=1)
        self.u1 = ResBlock(2 * C, C, G, 4 * C)
        self.on = nn.GroupNorm(G, C, EPS)
        self.pred = nn.Conv2d(C, 1, 3, padding=1)

    def forward(self, x_t, t):
        temb = F.silu(self.tfc2(F.silu(self.tfc1(timestep_embedding(t, self.td).to(x_t.dtype)))))
        stem = self.stem(x_t)
        d1 = self.d1(stem, temb) + stem
        down1 = self.down1(d1)
        d2 = self.d2(down1, temb) + self.d2sc(down1)
        down2 = self.down2(d2)
        mres = self.m(down2, temb) + down2
        B, C2, H, W = mres.shape
        tok = self.an(mres).flatten(2).transpose(1, 2)  # [B, HW, C2]
        att = self.att(tok, tok, tok, need_weights=False)[0]
        mid = att.transpose(1, 2).reshape(B, C2, H, W) + mres
        u2 = self.u2(torch.cat([self.up2(mid), d2], dim=1), temb)
        u1 = self.u1(torch.cat([self.up1c(self.up1(u2)), d1], dim=1), temb)
        return self.pred(F.silu(self.on(u1)))


def module_name(name):
    """The nn.Module parameter a memplan parameter is: <block><n1|c1|t|n2|c2> -> <block>.<part>; the
    attention's linears -> nn.MultiheadAttention's packed projections; the rest as named."""
    layer, kind = name.rsplit(".", 1)
    if layer == "aqkv":
        return "att.in_proj_" + kind
    if layer == "aproj":
        return "att.out_proj." + kind
    for block in ("d1", "d2", "m", "u2", "u1"):
        part = layer[len(block):]
        if layer.startswith(block) and part in ("n1", "c1", "t", "n2", "c2"):
            return "%s.%s.%s" % (block, part, kind)
    return name


_MODELS = {}


def forward(plan, params, inputs, dtype, sched_key="schedule", relu_mask=None, step=None, seed=1337):
    """reference.py's entry: plan_torch.forward's signature (no ReLU, no dropout: relu_mask is never asked).
    The noise of step `step` (1-based) is the trainer's draw from the ddpm_noise layer's key; eval draws
    from key 0 as the trainer's eval does."""
    del relu_mask
    names = {b["id"]: b["name"] for b in plan["buffers"]}
    ddpm = [op for op in plan[sched_key] if op["op"] == "ddpm_noise" and op["phase"] == "forward"]
    assert len(ddpm) == 1 and ddpm[0]["dims"][2] == T_STEPS and np.allclose(ddpm[0]["floats"][:2],
                                                                           [BETA_START, BETA_END]), \
        "unet_ref: the plan's ddpm_noise is not unet-mnist.yaml's (timesteps 1000, betas 1e-4 to 0.02)"
    model = _MODELS.setdefault(id(plan), UNetRef(plan["dims"]))
    w = {module_name(names[i]): p for i, p in params.items()}
    missing = set(dict(model.named_parameters())) ^ set(w)
    assert not missing, "unet_ref: parameters not matched by name: %s" % sorted(missing)
    x0 = next(t for i, t in inputs.items() if names[i] == "x").double()
    B, S = x0.shape[0], x0[0].numel()
    key = plan_torch.op_key(seed, step, 0, ddpm[0]["layer"]) if step is not None and sched_key == "schedule" else 0
    t, eps, _, _ = plan_torch.ddpm_draws(key, B, S, T_STEPS, BETA_START, BETA_END)
    t, eps = torch.from_numpy(t), torch.from_numpy(eps).reshape(x0.shape)
    # diffusers' DDPMScheduler, beta_schedule "linear" (the float32 betas the kernel receives)
    betas = torch.linspace(float(np.float32(BETA_START)), float(np.float32(BETA_END)), T_STEPS, dtype=torch.float64)
    abar = torch.cumprod(1.0 - betas, 0)[t][:, None, None, None]
    x_t = (abar.sqrt() * x0 + (1.0 - abar).sqrt() * eps).to(dtype)
    pred = stateless.functional_call(model, w, (x_t, t.to(dtype)))
    return F.mse_loss(pred, eps.to(dtype))
