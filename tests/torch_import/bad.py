"""bad.py: modules the PyTorch front door must refuse with a clear error
(tests/torch_import/errors.py); the line numbers below are in its expected messages."""
import torch
from torch import nn


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gate = nn.ELU()

    def forward(self, x):
        y = self.gate(self.fc(x))
        return torch.tanh(y) * 2.0


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -self.fc(x)


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc(x)
        return y, torch.relu(y)


def raises():
    raise ValueError("no weights for this size")


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        y, _ = self.att(x, x, x)  # need_weights=True, the default: the weights memplan does not compute
        return y


class Pieces(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=1)  # 3 channels: pieces of 2 and 1
        return torch.flatten(torch.nn.functional.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False), 1)


def scaled_rope_llama():
    """tests/torch_import/modules.py's Llama with layer 0's RoPE tables of Llama 3.1's scaling in spirit (its
    lower frequencies, the second half, divided by 8): not cos and sin of t theta^(-2i/hd) for any theta, which memplan's rope turns."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import modules
    m = modules.Llama()
    r = m.layers[0].self_attn.rotary_emb
    hd = r.cos_cached.shape[-1]
    f = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
    f[hd // 4:] /= 8
    a = torch.arange(r.cos_cached.shape[-2]).float()[:, None] * torch.cat([f, f])[None, :]
    r.cos_cached.copy_(a.cos()[None, None])
    r.sin_cached.copy_(a.sin()[None, None])
    return m
