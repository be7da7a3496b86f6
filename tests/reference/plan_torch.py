"""plan_torch.py: runs a memplan plan.json with PyTorch eager ops, generically:
the forward schedule interpreted op by op, autograd for the backward, and
torch.optim.AdamW / SGD with the plan's hyperparameters and param groups
(weight decay only where the plan says so: rank >= 2 parameters), and the
plan's lr schedule as a LambdaLR (make_scheduler). Also
reproduces the generated trainer's batches exactly (memplan_trainer.h):
sequential token windows, --npy DIR's sample windows, or the synthetic "blobs"
data set."""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1


def load_plan(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------
# inputs and batches (the same rules as codegen/emitc.c and memplan_trainer.c)

def classify_inputs(plan, sched_key, sched_set):
    """[(buffer, kind)] of one schedule's inputs, tokens first."""
    bufs = plan["buffers"]
    kinds = {}
    for b in bufs:
        if b["role"] != "input" or b["schedule"] != sched_set:
            continue
        for op in plan[sched_key]:
            if op["phase"] == "forward" and b["id"] in op["inputs"]:
                slot = op["inputs"].index(b["id"])
                if op["op"] == "embedding" and slot == 0:
                    kinds[b["id"]] = ("tokens", op["dims"][2])
                elif op["op"] == "cross_entropy" and slot == 1:
                    kinds[b["id"]] = ("labels", op["dims"][1])
                elif op["op"] == "linear_cross_entropy" and slot == 3:  # inputs x W b targets
                    kinds[b["id"]] = ("labels", op["dims"][1])
                elif op["op"] == "mse" and slot == 1:
                    kinds[b["id"]] = ("values", 0)
                else:
                    kinds[b["id"]] = ("features", 0)
                break
    has_tokens = any(k == "tokens" for k, _ in kinds.values())
    out = []
    for bid, (k, n) in kinds.items():
        if k == "labels" and has_tokens:
            k = "next"
        out.append((bufs[bid], k, n))
    out.sort(key=lambda e: e[1] != "tokens")
    return out


def read_tokens(path, is_text):
    with open(path, "rb") as f:
        blob = f.read()
    if is_text:
        return np.frombuffer(blob, dtype=np.uint8).astype(np.int64)
    header = np.frombuffer(blob[:1024], dtype="<i4")
    assert header[0] == 20240520 and header[1] == 1
    return np.frombuffer(blob[1024:1024 + 2 * int(header[2])], dtype="<u2").astype(np.int64)


def _mix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _key3(tag, a, b):
    return _mix64(_mix64(_mix64(tag) ^ a) ^ b)


def _unit24(h):
    return (h >> 40) * 2.0 ** -24


def shuffle_perm(n, seed, epoch):
    """The trainer's permutation of n windows (token data) or samples (--npy)
    in epoch `epoch` (memplan_trainer.h): a Fisher-Yates from key3(4, seed,
    epoch), j = mix64(key + i) mod (i + 1) for i = n-1 down to 1."""
    p = list(range(n))
    key = _key3(4, seed, epoch)
    for i in range(n - 1, 0, -1):
        j = _mix64((key + i) & MASK) % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


class Batches:
    """The trainer's training batches, in its order: shuffled each epoch from
    `seed` (the trainer's --seed, 1337 by default), or in order with
    seed=None (the trainer's --no-shuffle); with eval=True its eval batches
    (memplan_trainer.c's evaluate(): blobs from sample 2^40 on, token windows
    from the start of the stream, never shuffled). Plans without
    micro-batches: a step's window is one batch."""

    def __init__(self, plan, tokens=None, eval=False, npy=None, seed=None):
        self.inputs = classify_inputs(plan, "eval_schedule" if eval else "schedule", "eval" if eval else "train")
        self.sample0 = 1 << 40 if eval else 0
        self.tokens, self.pos, self.step = tokens, 0, 0
        self.seed = None if eval else seed
        self.perm, self.epoch = None, -1
        if self.seed is not None and (plan.get("totals", {}).get("accumulation_steps") or 1) > 1:
            raise NotImplementedError("Batches: a shuffled order of micro-batched plans (a step's window holds "
                                      "its micro-batches) is not reproduced here")
        self.classes = next((n for _, k, n in self.inputs if k == "labels"), 10)
        # --npy DIR: DIR/train/<input>.npy (DIR/test with eval), axis 0 the sample
        self.npy = None if npy is None else {
            b["id"]: np.load(os.path.join(npy, "test" if eval else "train", b["name"] + ".npy")) for b, _, _ in self.inputs}

    def order(self, n, epoch):
        """Epoch `epoch`'s order of n items: the permutation, or 0..n-1."""
        if self.seed is None:
            return np.arange(n)
        if self.epoch != epoch:
            self.perm, self.epoch = np.array(shuffle_perm(n, self.seed, epoch)), epoch
        return self.perm

    def next(self):
        self.step += 1
        out = {}
        if self.npy is not None:  # windows of B samples of the epoch's order (N = S // B a pass)
            w = self.inputs[0][0]["shape"][0]
            n = len(next(iter(self.npy.values())))
            e, i = divmod(self.step - 1, n // w)
            rows = self.order(n, e)[i * w:(i + 1) * w]
            for b, _, _ in self.inputs:
                out[b["id"]] = torch.from_numpy(np.ascontiguousarray(self.npy[b["id"]][rows])).reshape(b["shape"])
            return out
        if self.tokens is not None and self.seed is not None:  # window order[i] of epoch e, N windows a pass
            b0 = self.inputs[0][0]
            w = int(np.prod(b0["shape"]))
            n = (len(self.tokens) - 1) // w
            e, i = divmod(self.step - 1, n)
            p = self.order(n, e)[i] * w
            win = self.tokens[p:p + w + 1]
            for b, k, _ in self.inputs:
                out[b["id"]] = torch.from_numpy(win[1:] if k == "next" else win[:-1]).reshape(b["shape"])
            return out
        if self.tokens is not None:
            b0 = self.inputs[0][0]
            w = int(np.prod(b0["shape"]))
            if self.pos + w + 1 > len(self.tokens):
                self.pos = 0
            win = self.tokens[self.pos:self.pos + w + 1]
            for b, k, _ in self.inputs:
                out[b["id"]] = torch.from_numpy(win[1:] if k == "next" else win[:-1]).reshape(b["shape"])
            self.pos += w
            return out
        for b, k, _ in self.inputs:  # blobs: never shuffled
            rows = b["shape"][0] if b["shape"] else 1
            cols = int(np.prod(b["shape"])) // rows
            s0 = self.sample0 + (self.step - 1) * rows
            a = np.zeros((rows, cols), dtype=np.float32 if k != "labels" else np.int64)
            for r in range(rows):
                s = s0 + r
                y = _key3(1, s, 0) % self.classes
                for j in range(cols):
                    if k == "labels":
                        a[r, j] = y
                        continue
                    c = 2.0 * _unit24(_key3(2, y, j)) - 1.0
                    a[r, j] = c / 16.0 + (2.0 * _unit24(_key3(3, s, j)) - 1.0) if k == "features" else c
            t = torch.from_numpy(a).reshape(b["shape"])
            out[b["id"]] = t
        return out


# ---------------------------------------------------------------------------
# parameters, forward, optimizer

def init_params(plan, seed=0):
    """{name: float32 numpy array}, drawn with torch from the plan's init
    specs: the parameters and the running state (zeros or ones, no draws)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for b in plan["buffers"]:
        if b["role"] not in ("param", "state"):
            continue
        t = torch.empty(b["shape"], dtype=torch.float32)
        kind, s = b["init"]["kind"], b["init"]["scale"]
        if kind == "normal":
            t.normal_(0.0, s, generator=g)
        elif kind == "uniform":
            t.uniform_(-s, s, generator=g)
        elif kind == "ones":
            t.fill_(1.0)
        else:
            t.zero_()
        out[b["name"]] = t.numpy()
    return out


def make_params(plan, weights, dtype):
    """{buffer id: leaf tensor} from {name: array}; frozen ones (plan.json
    "frozen": true) get no gradient."""
    return {b["id"]: torch.tensor(weights[b["name"]], dtype=dtype, requires_grad=not b.get("frozen", False))
            for b in plan["buffers"] if b["role"] == "param"}


def make_state(plan, weights, dtype):
    """{buffer id: tensor} of the running state (role "state": batchnorm's
    running statistics), which forward updates in place when training."""
    return {b["id"]: torch.tensor(weights[b["name"]], dtype=dtype)
            for b in plan["buffers"] if b["role"] == "state"}


def _split_qkv(qkv, B, T, C, NH, KVH):
    """q [B, NH, T, hs] and k, v [B, NH, T, hs] from the packed
    q (NH heads) | k (KVH) | v (KVH) layout, each kv head repeated for its
    NH / KVH query heads (HF Llama's repeat_kv)."""
    hs = C // NH
    q, k, v = qkv.view(B, T, NH + 2 * KVH, hs).transpose(1, 2).split([NH, KVH, KVH], dim=1)
    return q, k.repeat_interleave(NH // KVH, dim=1), v.repeat_interleave(NH // KVH, dim=1)


def _attention(qkv, B, T, C, NH, KVH, causal):
    q, k, v = _split_qkv(qkv, B, T, C, NH, KVH)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
    if causal:
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
    return (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)


def _window_attention(qkv, table, B, H, W, C, NH, ws, shift):
    """torchvision's shifted_window_attention (0.14) between its qkv and proj linears, transcribed: the
    cyclic shift, the window partition, its relative_position_index built from relative coordinates, the
    mask from its h and w slices, softmax attention with both added, the windows merged, the shift undone."""
    x = qkv.reshape(B, H, W, 3 * C)
    if shift:
        x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
    nw, n = (H // ws) * (W // ws), ws * ws
    x = x.view(B, H // ws, ws, W // ws, ws, 3 * C).permute(0, 1, 3, 2, 4, 5).reshape(B * nw, n, 3 * C)
    q, k, v = x.reshape(B * nw, n, 3, NH, C // NH).permute(2, 0, 3, 1, 4)
    attn = (q * (C // NH) ** -0.5).matmul(k.transpose(-2, -1))
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += ws - 1
    rel[:, :, 1] += ws - 1
    rel[:, :, 0] *= 2 * ws - 1
    bias = table[rel.sum(-1).flatten()].view(n, n, -1).permute(2, 0, 1).unsqueeze(0)
    attn = attn + bias
    if shift:
        mask = x.new_zeros((H, W))
        count = 0
        for h in ((0, -ws), (-ws, -shift), (-shift, None)):
            for w in ((0, -ws), (-ws, -shift), (-shift, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        mask = mask.view(H // ws, ws, W // ws, ws).permute(0, 2, 1, 3).reshape(nw, n)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        attn = (attn.view(B, nw, NH, n, n) + mask.unsqueeze(1).unsqueeze(0)).view(-1, NH, n, n)
    y = attn.softmax(-1).matmul(v).transpose(1, 2).reshape(B * nw, n, C)
    y = y.view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
    return torch.roll(y, shifts=(shift, shift), dims=(1, 2)) if shift else y

def _cross_attention(q, kv, B, Tq, Tk, C, NH):
    """torch's scaled dot-product attention of q [B, Tq, C] to kv [B, Tk, 2C]
    (k | v), no mask: diffusers' Attention with encoder_hidden_states."""
    hs = C // NH
    q = q.reshape(B, Tq, NH, hs).transpose(1, 2)
    k, v = kv.reshape(B, Tk, 2, NH, hs).permute(2, 0, 3, 1, 4)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    return (att.softmax(-1) @ v).transpose(1, 2).reshape(B, Tq, C)

def _rope(x, B, T, H, KV, hd, theta, factor=0.0, low=0.0, high=0.0, orig=0.0):
    """Hugging Face Llama's rotary embedding of the q and k parts of a packed
    qkv [B, T, (H + 2 KV) hd], written out: angles t theta^(-2i/hd) (with
    factor > 0, Llama 3's scaling as HF's _compute_llama3_parameters) and their
    cos and sin in float64, then in x's dtype (the kernels round them to float)."""
    x = x.reshape(B, T, H + 2 * KV, hd)
    q, k, v = x[:, :, :H], x[:, :, H:H + KV], x[:, :, H + KV:]
    i = torch.arange(hd // 2, dtype=torch.float64)
    inv = theta ** (-2.0 * i / hd)
    if factor > 0:
        wl = 2 * math.pi / inv
        inv_l = torch.where(wl > orig / low, inv / factor, inv)
        smooth = (orig / wl - low) / (high - low)
        medium = ~(wl < orig / high) * ~(wl > orig / low)
        inv = torch.where(medium, (1 - smooth) * inv_l / factor + smooth * inv_l, inv_l)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv
    ang = torch.cat([ang, ang], -1)[None, :, None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)

    def rotate_half(u):
        return torch.cat([-u[..., hd // 2:], u[..., :hd // 2]], -1)

    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    return torch.cat([q, k, v], 2).reshape(B, T, (H + 2 * KV) * hd)


def _fnv1a(s):
    """64-bit FNV-1a of a layer name (codegen/emitc.c's layer_hash)."""
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK
    return h


def op_key(seed, step, mb, layer):
    """memplan_trainer.h's tr_op_key: the random key of an op with mode_arg."""
    return _mix64(_mix64(_mix64(seed) ^ step) ^ (((mb << 32) ^ _fnv1a(layer)) & MASK))


def dropout_mask(key, n, p):
    """memplan_kernels.h's dropout: element i is kept when the top 24 bits of
    mix64(key ^ i) reach ceil(p 2^24), p the float32 the kernels receive."""
    th = math.ceil(float(np.float32(p)) * 2.0 ** 24)
    with np.errstate(over="ignore"):
        z = np.uint64(key) ^ np.arange(n, dtype=np.uint64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z >> np.uint64(40)) >= np.uint64(th))


def _mix64_np(z):
    """_mix64 over a uint64 array."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def ddpm_draws(key, B, S, T, b0, b1):
    """memplan_kernels.h's ddpm_noise draws from the op's key, in float64: t [B] (ints), eps [B, S], and
    sqrt(abar_t), sqrt(1 - abar_t) [B] with the linear beta schedule of the float32 beta_start and beta_end."""
    t = np.array([(_mix64(_mix64(key ^ 0x74696D65) ^ b) >> 11) % T for b in range(B)], dtype=np.int64)
    j = np.arange(B * S, dtype=np.uint64) // np.uint64(2) * np.uint64(2)
    u = [((_mix64_np(np.uint64(key) ^ (j + np.uint64(k))) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
         for k in (0, 1)]
    r, th = np.sqrt(-2.0 * np.log(u[0])), 2.0 * math.pi * u[1]
    eps = np.where(np.arange(B * S) % 2 == 1, r * np.sin(th), r * np.cos(th)).reshape(B, S)
    b0, b1 = float(np.float32(b0)), float(np.float32(b1))
    abar = np.cumprod(1.0 - (b0 + (b1 - b0) * np.arange(T, dtype=np.float64) / max(T - 1, 1)))[t]
    return t, eps, np.sqrt(abar), np.sqrt(1.0 - abar)


def _timestep_embedding(t, D, flip, shift, max_period, dtype):
    """diffusers' get_timestep_embedding (scale 1), the angles in float64 as the kernels."""
    h = D // 2
    a = t.double()[:, None] * torch.exp(-math.log(max_period) * torch.arange(h, dtype=torch.float64) / (h - shift))
    emb = torch.cat([a.cos(), a.sin()] if flip else [a.sin(), a.cos()], 1)
    return F.pad(emb, (0, D % 2)).to(dtype)


def _dropout(x, op, step, seed, mb=0):
    """x * noise, noise = 1 / (1 - p) where kept and 0 elsewhere (torch's
    dropout, with memplan's mask of this step's key)."""
    p = op["floats"][0]
    keep = dropout_mask(op_key(seed, step, mb, op["layer"]), x.numel(), p).reshape(x.shape)
    scale = torch.tensor(1.0 / (1.0 - float(np.float32(p))), dtype=torch.float64).to(x.dtype)
    return x * (keep.to(x.dtype) * scale)


def forward(plan, params, inputs, dtype, sched_key="schedule", relu_mask=None, state=None, step=None, seed=1337,
            out=None):
    """Interprets the forward ops of a schedule; returns the loss tensor (or
    buffer `out`'s, e.g. the logits for generation).
    relu_mask(op position, input) -> bool mask, when given, decides which
    elements each relu passes (the reference test forces the branches that
    float32 rounding may take at its kink). state (make_state) holds the
    running statistics: the training schedule updates them, eval reads them.
    step (1-based) and seed make dropout's keys as the trainer's (--seed,
    default 1337); without a step (or in the eval schedule) dropout is the
    identity."""
    env = dict(params)
    env.update(state or {})
    for bid, t in inputs.items():
        env[bid] = t.to(dtype) if t.is_floating_point() else t.long()
    bufs = plan["buffers"]
    for pos, op in enumerate(plan[sched_key]):
        if op["phase"] != "forward":
            continue
        a = [env[i] if i >= 0 else None for i in op["inputs"]]
        d, k, o = op["dims"], op["op"], op["outputs"][0]
        shape = bufs[o]["shape"]
        if k == "linear":
            y = F.linear(a[0].reshape(d[0], d[1]), a[1], a[2])
        elif k == "matmul":
            y = torch.bmm(a[0].reshape(d[0], d[1], d[2]), a[1].reshape(d[0], d[2], d[3]))
        elif k == "add":  # the same numel; an in-place reshape's buffer may keep its source's shape (unet-mnist)
            y = a[0] + a[1].reshape(a[0].shape)
        elif k == "mul":
            y = a[0] * a[1]
        elif k == "relu":
            y = F.relu(a[0]) if relu_mask is None else a[0] * relu_mask(pos, a[0].detach())
        elif k == "relu6":
            y = F.relu6(a[0])
        elif k == "sigmoid":
            y = torch.sigmoid(a[0])
        elif k == "hardswish":
            y = F.hardswish(a[0])
        elif k == "hardsigmoid":
            y = F.hardsigmoid(a[0])
        elif k == "scale_channels":  # x [N, C, ...] times s [N, C] (or [N, C, 1, 1]), broadcast
            x = a[0]
            y = x * a[1].reshape(x.shape[:2] + (1,) * (x.dim() - 2))
        elif k == "layer_scale":  # x [N, C, ...] times weight [C] (ConvNeXt's [C, 1, 1] layer scale)
            x = a[0]
            y = x * a[1].reshape((1, -1) + (1,) * (x.dim() - 2))
        elif k == "gelu":
            y = F.gelu(a[0], approximate="tanh" if d[1] else "none")  # dims: n, approximate
        elif k == "silu":
            y = F.silu(a[0])
        elif k == "scale":  # LoRA's alpha / rank
            y = a[0] * op["floats"][0]
        elif k == "layernorm":
            y = F.layer_norm(a[0], (d[1],), a[1], a[2], eps=op["floats"][0])  # a[2] None: bias: false
        elif k == "rmsnorm":
            x = a[0]
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + op["floats"][0]) * a[1]
        elif k == "softmax":
            y = a[0].softmax(-1)
        elif k == "attention":
            y = _attention(a[0], *d[:6])
        elif k == "window_attention":  # dims: B H W C NH ws shift; inputs qkv table
            y = _window_attention(a[0], a[1], *d[:7])
        elif k == "cross_attention":  # dims: B Tq Tk C NH
            y = _cross_attention(a[0], a[1], *d[:5])
        elif k == "embedding":
            y = F.embedding(a[0], a[1])
        elif k == "position_embedding":
            y = a[0][:d[1]].unsqueeze(0).expand(d[0], d[1], d[2])
        elif k == "rope":
            y = _rope(a[0], *d[:5], *op["floats"][:5])
        elif k == "flatten":  # dims: n; the shape is the output buffer's
            y = a[0]
        elif k == "reshape":
            y = a[0]
        elif k == "transpose":  # x as [A, P, M, Q, Z], P and Q swapped
            y = a[0].reshape(d[:5]).transpose(1, 3)
        elif k == "concat":  # inputs [O, n_k, In], absent slots None
            y = torch.cat([t.reshape(d[0], n, d[1]) for t, n in zip(a, d[2:8]) if t is not None], 1)
        elif k == "class_token":  # x [B, N, C], weight [C]
            y = torch.cat([a[1].expand(d[0], 1, d[2]), a[0].reshape(d[0], d[1], d[2])], 1)
        elif k == "pad":  # x as [O, N, In] to [O, Nout, In]: F.pad at the axis's end (negative: a crop)
            y = F.pad(a[0].reshape(d[0], d[1], d[2]), (0, 0, 0, d[3] - d[1]))
        elif k == "select":  # x as [O, N, In]; dims O N In index
            y = a[0].reshape(d[0], d[1], d[2]).select(1, d[3])
        elif k == "cross_entropy":
            y = F.cross_entropy(a[0].reshape(d[0], d[1]), a[1].reshape(-1))
        elif k == "linear_cross_entropy":  # dims N V K R; inputs x W b targets; unchunked in torch
            y = F.cross_entropy(F.linear(a[0].reshape(d[0], d[2]), a[1], a[2]), a[3].reshape(-1))
        elif k == "mse":
            y = F.mse_loss(a[0], a[1])
        elif k == "conv2d":  # dims: N C H W O Ho Wo kh kw sh sw ph pw dilation groups; a[2] None: bias: false
            y = F.conv2d(a[0].reshape(d[0], d[1], d[2], d[3]), a[1], a[2], stride=(d[9], d[10]),
                         padding=(d[11], d[12]), dilation=d[13], groups=d[14])
        elif k == "batchnorm2d":  # dims N C S (S = H W); floats eps, momentum; inputs x w b rmean rvar
            y = F.batch_norm(a[0].reshape(d[0], d[1], d[2]), a[3], a[4], a[1], a[2],
                             training=sched_key == "schedule", momentum=op["floats"][1], eps=op["floats"][0])
        elif k == "maxpool2d":  # dims: N C H W Ho Wo k s p; ceil_mode where the sizes are not the floor's
            y = F.max_pool2d(a[0], d[6], d[7], d[8], ceil_mode=(d[4], d[5]) != tuple(
                (n + 2 * d[8] - d[6]) // d[7] + 1 for n in (d[2], d[3])))
        elif k == "adaptive_avgpool2d":  # dims: N C H W Ho Wo
            y = F.adaptive_avg_pool2d(a[0], (d[4], d[5]))
        elif k == "avgpool2d":  # count_include_pad=True, as the kernels; ceil_mode as maxpool2d's
            y = F.avg_pool2d(a[0], d[6], d[7], d[8], ceil_mode=(d[4], d[5]) != tuple(
                (n + 2 * d[8] - d[6]) // d[7] + 1 for n in (d[2], d[3])))
        elif k == "global_avgpool":
            y = a[0].mean((2, 3))
        elif k == "dropout":
            y = a[0] if step is None or sched_key != "schedule" else _dropout(a[0], op, step, seed)
        elif k == "stochastic_depth":  # dims: N S batch; the trainer's draw per row (row 0's for the batch)
            x = a[0]
            if step is not None and sched_key == "schedule":
                p = op["floats"][0]
                keep = dropout_mask(op_key(seed, step, 0, op["layer"]), d[0], p)
                keep = keep[:1].expand(d[0]) if d[2] else keep
                scale = torch.tensor(1.0 / (1.0 - float(np.float32(p))), dtype=torch.float64).to(x.dtype)
                x = x * (keep.to(x.dtype) * scale).reshape((d[0],) + (1,) * (x.dim() - 1))
            y = x
        elif k == "groupnorm":  # dims N C S G; floats eps; weight and bias None without affine
            y = F.group_norm(a[0].reshape(d[0], d[1], d[2]), d[3], a[1], a[2], eps=op["floats"][0])
        elif k == "add_channels":  # dims NC S
            y = a[0].reshape(d[0], d[1]) + a[1].reshape(d[0], 1)
        elif k == "upsample":  # dims NC H W scale
            y = F.interpolate(a[0].reshape(d[0], 1, d[1], d[2]), scale_factor=d[3], mode="nearest")
        elif k == "timestep_embedding":  # dims B D flip; floats downscale_freq_shift, max_period
            y = _timestep_embedding(a[0], d[1], d[2], *op["floats"][:2], a[0].dtype)
        elif k == "conv_transpose2d":  # dims N C H W O Ho Wo k stride padding; output_padding from Ho
            opad = d[5] - ((d[2] - 1) * d[8] - 2 * d[9] + d[7])
            y = F.conv_transpose2d(a[0].reshape(d[:4]), a[1], a[2], stride=d[8], padding=d[9], output_padding=opad)
        elif k == "ddpm_noise":  # dims B S T; floats beta_start, beta_end; eval draws from key 0
            key = op_key(seed, step, 0, op["layer"]) if step is not None and sched_key == "schedule" else 0
            t, eps, sa, sn = ddpm_draws(key, d[0], d[1], d[2], *op["floats"][:2])
            x0 = a[0].reshape(d[0], d[1])
            eps = torch.from_numpy(eps).to(x0.dtype)
            y = torch.from_numpy(sa).to(x0.dtype)[:, None] * x0 + torch.from_numpy(sn).to(x0.dtype)[:, None] * eps
            env[op["outputs"][1]] = eps.reshape(bufs[op["outputs"][1]]["shape"])
            env[op["outputs"][2]] = torch.from_numpy(t).to(x0.dtype)
        else:
            raise ValueError("plan_torch: no torch version of op %s" % k)
        env[o] = y.reshape(shape)
    return env[out if out is not None else plan["loss_buffer" if sched_key == "schedule" else "eval_loss_buffer"]]


def make_optimizer(plan, params, lr):
    o = plan["optimizer"]
    trained = [b for b in plan["buffers"] if b["role"] == "param" and not b.get("frozen", False)]
    decay = [params[b["id"]] for b in trained if b["weight_decay"]]
    rest = [params[b["id"]] for b in trained if not b["weight_decay"]]
    groups = [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": rest, "weight_decay": 0.0}]
    if o["type"] == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=tuple(o["betas"]), eps=o["eps"])
    if o["type"] == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=o["momentum"], nesterov=o["nesterov"])
    raise ValueError("plan_torch: no torch version of optimizer %s" % o["type"])


def clip_of(plan, clip=None):
    """The max norm of gradient clipping: the plan's optimizer.clip_grad_norm
    (0 when absent: no clipping), or the trainer's --clip when given."""
    return clip if clip is not None else plan["optimizer"].get("clip_grad_norm", 0.0)


def clip_grad_norm(params, max_norm):
    """The trainer's gradient clipping: torch.nn.utils.clip_grad_norm_ over
    every parameter (the global L2 norm; scale max_norm / (norm + 1e-6) when
    below 1). Returns the norm before clipping; max_norm 0 only measures it."""
    grads = [p.grad for p in params.values() if p.grad is not None]
    if not max_norm:
        return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
    return float(torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm))


def schedule_of(plan, schedule=None, warmup=None, final_fraction=None):
    """(kind, warmup, final_fraction) of the plan's optimizer, each overridden
    when given (the trainer's --schedule, --warmup, --final-fraction); a plan
    without them (written before schedules) trains at a constant lr."""
    o = plan["optimizer"]
    return (schedule if schedule is not None else o.get("schedule", "constant"),
            warmup if warmup is not None else o.get("warmup", 0),
            final_fraction if final_fraction is not None else o.get("final_fraction", 0.0))


def lr_factor(sched, t, steps):
    """lr(t) / lr at step t = 1..steps: memplan_trainer.h's formula."""
    kind, w, f = sched
    if t <= w:
        return t / w
    if kind == "constant":
        return 1.0
    p = (t - w - 1) / (steps - w - 1) if steps - w - 1 > 0 else 1.0
    if kind == "cosine":
        return f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * p))
    if kind == "linear":
        return f + (1.0 - f) * (1.0 - p)
    raise ValueError("plan_torch: unknown lr schedule %s" % kind)


def make_scheduler(opt, sched, steps):
    """LambdaLR giving step k (0-based, stepped after each opt.step()) lr(k + 1)."""
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda k: lr_factor(sched, k + 1, steps))
