"""llama_ref.py: llama-mini in PyTorch, written from the equations, not
from the plan: RMSNorm, rotary position embeddings (Hugging Face's
rotate_half convention), grouped-query attention (key/value heads repeated
per group, as HF's repeat_kv does), a SwiGLU feed-forward, no biases.

reference.py --module llama_ref runs it instead of plan_torch's plan
interpreter. It shares only names with memplan: the weights come from the
same safetensors file (memplan's parameter names), the batches are the same,
and the sizes are read from the plan's dims the way a model reads its
config.json. The attention projection is one packed matrix [q | k | v] because
that is how memplan stores it (causal_self_attention's qkv linear).

LoRA (plan.json "lora"): a linear L with adapters L.lora_A, L.lora_B runs
PEFT's lora.Linear forward, base(x) + lora_B(lora_A(dropout(x))) * scaling
with scaling = alpha / rank (dropout 0 here). Adapters hN.attn.q.lora_A,
.lora_B (and k, v) are PEFT's on separate q_proj, k_proj and v_proj: the
packed matrix is cut into the three projections first, each one a
lora.Linear of its own."""
import torch
import torch.nn.functional as F

THETA = 10000.0  # rope base (llama-mini.yaml leaves `theta` at its default)
EPS = 1e-5       # rmsnorm eps (the default)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope(x, theta=THETA):
    """x [B, H, T, hd]: rotated by position (pairs i and i + hd/2)."""
    T, hd = x.shape[-2], x.shape[-1]
    inv = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    return x * ang.cos().to(x.dtype) + rotate_half(x) * ang.sin().to(x.dtype)


class LlamaRef(torch.nn.Module):
    def __init__(self, dims, w, lora=None):
        super().__init__()
        self.d, self.w = dims, w  # w: {memplan parameter name: leaf tensor}, optimized by the caller
        assert not lora or lora["dropout"] == 0, "llama_ref: LoRA dropout is not written here"
        self.scaling = lora["alpha"] / lora["rank"] if lora else None

    def linear(self, x, name, weight=None):
        """F.linear with L.weight (or weight), plus PEFT's LoRA term where L has adapters."""
        y = F.linear(x, self.w[name + ".weight"] if weight is None else weight)
        if name + ".lora_A" in self.w:
            y = y + F.linear(F.linear(x, self.w[name + ".lora_A"]), self.w[name + ".lora_B"]) * self.scaling
        return y

    def attention(self, x, p):
        B, T, _ = x.shape
        NH, KVH = self.d["NH"], self.d["KVH"]
        hd = self.d["C"] // NH
        sizes = [NH * hd, KVH * hd, KVH * hd]
        if p + ".q.lora_A" in self.w:  # q_proj, k_proj, v_proj, each with its own adapter
            wq, wk, wv = self.w[p + ".qkv.weight"].split(sizes, dim=0)
            q, k, v = (self.linear(x, p + "." + n, wn) for n, wn in (("q", wq), ("k", wk), ("v", wv)))
        else:
            q, k, v = self.linear(x, p + ".qkv").split(sizes, dim=-1)
        q = q.view(B, T, NH, hd).transpose(1, 2)
        k = k.view(B, T, KVH, hd).transpose(1, 2)
        v = v.view(B, T, KVH, hd).transpose(1, 2)
        q, k = rope(q), rope(k)
        k = k.repeat_interleave(NH // KVH, dim=1)
        v = v.repeat_interleave(NH // KVH, dim=1)
        att = (q @ k.transpose(-2, -1)) / hd ** 0.5
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * hd)
        return self.linear(y, p + ".proj")

    def forward(self, tokens, targets):
        w = self.w
        x = F.embedding(tokens, w["emb.weight"])
        for i in range(self.d["L"]):
            p = "h%d." % i
            x = x + self.attention(rms_norm(x, w[p + "norm1.weight"]), p + "attn")
            h = rms_norm(x, w[p + "norm2.weight"])
            g = F.silu(self.linear(h, p + "gate")) * self.linear(h, p + "up")
            x = x + self.linear(g, p + "down")
        logits = self.linear(rms_norm(x, w["norm.weight"]), "logits")
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def forward(plan, params, inputs, dtype, sched_key="schedule", relu_mask=None, step=None):
    """reference.py's entry: plan_torch.forward's signature (llama-mini has no
    ReLU, so relu_mask is never asked, nor dropout, so step is not either)."""
    del sched_key, relu_mask, step
    names = {b["id"]: b["name"] for b in plan["buffers"]}
    by_name = {names[i]: t for i, t in inputs.items()}
    w = {names[i]: t for i, t in params.items()}
    return LlamaRef(plan["dims"], w, plan.get("lora"))(by_name["tokens"].long(), by_name["targets"].long())
