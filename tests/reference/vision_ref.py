"""vision_ref.py: cnn-mnist and vit-mnist as PyTorch nn.Modules, written
from the architectures (torch.nn layers: Conv2d, BatchNorm2d, LayerNorm,
Linear, a pre-norm ViT block), not from the plan.

reference.py --module vision_ref runs them instead of plan_torch's plan
interpreter. They share only names with memplan: the weights and running
statistics come from the same safetensors file (memplan's names, which are
PyTorch's state_dict layout: conv weights OIHW, linear [out, in]), the
batches are the same, and the sizes are read from the plan's dims the way a
model reads its config. The ViT's attention projection is one packed
matrix [q | k | v], as memplan stores it (torch's nn.MultiheadAttention
packs in_proj_weight the same way).

The module's layers are built once per (plan, dtype) and their tensors are
the harness's: the parameters (leaf tensors the harness's optimizer steps)
and running statistics (updated in place by BatchNorm in training mode) are
assigned into the layers, so the harness's comparisons see them."""
import math

import plan_torch
import torch
import torch.nn.functional as F
from torch import nn

EPS_BN, MOM_BN = 1e-5, 0.1  # BatchNorm2d's defaults (cnn-mnist leaves eps and momentum at theirs)
EPS_LN = 1e-5               # LayerNorm's default (vit-mnist leaves eps at it)


def _bind(module, prefix, w, state):
    """Points module's parameters and buffers at the harness's tensors
    (memplan names: PREFIX.weight, PREFIX.bias, PREFIX.running_mean, ...)."""
    for name in list(module._parameters):
        t = w.get(prefix + "." + name)
        module._parameters[name] = None if t is None else t
    for name in list(module._buffers):
        if name == "num_batches_tracked":
            module._buffers[name] = None
            continue
        module._buffers[name] = state[prefix + "." + name]
    return module


class ConvBN(nn.Module):
    """conv (no bias) -> BatchNorm2d, memplan layers `conv` and `bn`."""

    def __init__(self, cin, cout, k, stride, conv, bn, w, state):
        super().__init__()
        self.conv = _bind(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), conv, w, state)
        self.bn = _bind(nn.BatchNorm2d(cout, eps=EPS_BN, momentum=MOM_BN), bn, w, state)

    def forward(self, x):
        return self.bn(self.conv(x))


class CnnMnist(nn.Module):
    """models/cnn-mnist.yaml: a ResNet-style network (He et al. 2015) for
    28x28 digits: 3x3 stem to 16 channels, two downsampling residual blocks
    (stride-2 3x3, 3x3, a stride-2 1x1 projection shortcut) to 32 and 64,
    global average pooling, a linear classifier."""

    def __init__(self, dims, w, state, relu):
        super().__init__()
        self.relu = relu  # relu(layer name, x): the harness's ReLU (it may force kink branches)
        self.stem = ConvBN(1, 16, 3, 1, "stem", "stembn", w, state)
        self.b1 = nn.ModuleList([ConvBN(16, 32, 3, 2, "b1conv1", "b1bn1", w, state),
                                 ConvBN(32, 32, 3, 1, "b1conv2", "b1bn2", w, state),
                                 ConvBN(16, 32, 1, 2, "b1down", "b1downbn", w, state)])
        self.b2 = nn.ModuleList([ConvBN(32, 64, 3, 2, "b2conv1", "b2bn1", w, state),
                                 ConvBN(64, 64, 3, 1, "b2conv2", "b2bn2", w, state),
                                 ConvBN(32, 64, 1, 2, "b2down", "b2downbn", w, state)])
        self.fc = _bind(nn.Linear(64, dims["K"]), "fc", w, state)

    def block(self, x, b, name):
        y = b[1](self.relu(name + "relu1", b[0](x)))
        return self.relu(name + "relu", y + b[2](x))

    def forward(self, x, targets):
        x = self.relu("stemrelu", self.stem(x))
        x = self.block(x, self.b1, "b1")
        x = self.block(x, self.b2, "b2")
        logits = self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
        return F.cross_entropy(logits, targets)


class Block(nn.Module):
    """A pre-norm transformer encoder block (ViT): x + attn(ln1(x)), then
    x + mlp(ln2(x)) with an exact-GELU MLP."""

    def __init__(self, C, NH, Fdim, p, w, state):
        super().__init__()
        self.NH = NH
        self.ln1 = _bind(nn.LayerNorm(C, eps=EPS_LN), p + "ln1", w, state)
        self.qkv = _bind(nn.Linear(C, 3 * C), p + "qkv", w, state)
        self.proj = _bind(nn.Linear(C, C), p + "proj", w, state)
        self.ln2 = _bind(nn.LayerNorm(C, eps=EPS_LN), p + "ln2", w, state)
        self.fc = _bind(nn.Linear(C, Fdim), p + "fc", w, state)
        self.fc2 = _bind(nn.Linear(Fdim, C), p + "fc2", w, state)

    def forward(self, x, drop):
        B, T, C = x.shape
        hd = C // self.NH
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.NH, hd).permute(2, 0, 3, 1, 4)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hd)).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(drop(F.gelu(self.fc(self.ln2(x)))))


class VitMnist(nn.Module):
    """models/vit-mnist.yaml: ViT (Dosovitskiy et al. 2020) on 28x28 digits:
    PxP patches by a strided conv, a class token, learned position
    embeddings, L pre-norm blocks, the class token's final LayerNorm into a
    linear head."""

    def __init__(self, dims, w, state):
        super().__init__()
        C, P = dims["C"], dims["P"]
        self.patch = _bind(nn.Conv2d(1, C, P, stride=P), "patch", w, state)
        self.cls, self.pos = w["cls.weight"], w["pos.weight"]
        self.blocks = nn.ModuleList([Block(C, dims["NH"], dims["F"], "h%d." % i, w, state) for i in range(dims["L"])])
        self.ln = _bind(nn.LayerNorm(C, eps=EPS_LN), "ln", w, state)
        self.head = _bind(nn.Linear(C, dims["K"]), "head", w, state)

    def forward(self, x, targets, drop=lambda i, t: t):
        t = self.patch(x).flatten(2).transpose(1, 2)                       # [B, N, C]
        t = torch.cat([self.cls.view(1, 1, -1).expand(t.shape[0], 1, -1), t], 1)
        t = t + self.pos[:t.shape[1]]
        for i, blk in enumerate(self.blocks):
            t = blk(t, lambda u, i=i: drop(i, u))
        return F.cross_entropy(self.head(self.ln(t)[:, 0]), targets)


def forward(plan, params, inputs, dtype, sched_key="schedule", relu_mask=None, state=None, step=None, seed=1337):
    """reference.py's entry (plan_torch.forward's signature). Dropout draws
    memplan's masks (plan_torch.dropout_mask: the trainer's counter-based
    hash of its key), the one thing that cannot come from torch."""
    names = {b["id"]: b["name"] for b in plan["buffers"]}
    by_name = {names[i]: t for i, t in inputs.items()}
    w = {names[i]: t for i, t in params.items()}
    st = {names[i]: t for i, t in (state or {}).items()}
    x, y = by_name["x"].to(dtype), by_name["targets"].long()
    pos = {op["layer"]: i for i, op in enumerate(plan[sched_key]) if op["phase"] == "forward"}

    def relu(layer, u):
        return F.relu(u) if relu_mask is None else u * relu_mask(pos[layer], u.detach())

    train = sched_key == "schedule"
    if plan["model"] == "cnn-mnist":
        m = CnnMnist(plan["dims"], w, st, relu)
    elif plan["model"] == "vit-mnist":
        m = VitMnist(plan["dims"], w, st)
        ops = {op["layer"]: op for op in plan[sched_key] if op["op"] == "dropout" and op["phase"] == "forward"}

        def drop(i, u):
            if not train or step is None:
                return u
            return plan_torch._dropout(u, ops["h%d.drop" % i], step, seed)

        m.train(train)
        return m(x, y, drop)
    else:
        raise ValueError("vision_ref: no module for model %s" % plan["model"])
    m.train(train)
    return m(x, y)
