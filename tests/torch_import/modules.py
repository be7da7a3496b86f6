"""modules.py: the nn.Modules tests/torch_import/check.py imports with
`memplan import-torch tests/torch_import/modules.py:NAME`: written as users
write them (nn layers, a forward), tiny so that each test takes seconds."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d=12, h=16, k=5):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, h)
        self.gate = nn.Linear(h, h)
        self.head = nn.Linear(h, k)

    def forward(self, x):
        r = torch.relu(self.fc1(x))
        return self.head(F.gelu(self.fc2(r)) * torch.sigmoid(self.gate(r)))  # a sigmoid gate


class Block(nn.Module):
    """A ResNet basic block: two 3x3 convs with BatchNorm, a projection shortcut when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class SmallCNN(nn.Module):
    """A small ResNet: conv stem with BatchNorm, max pooling, two residual blocks, global average pooling."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, momentum=0.2),
                                  nn.ReLU(inplace=True))
        self.pool = nn.MaxPool2d(2)
        self.layer1 = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer1(self.pool(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class CausalSelfAttention(nn.Module):
    """nanoGPT's (Karpathy, model.py) manual path: one packed c_attn, split, heads, a causal mask buffer."""

    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLPBlock(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLPBlock(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT (token and position embeddings, pre-norm blocks, a final LayerNorm, the lm_head tied to
    wte), returning the logits; its _init_weights (N(0, 0.02), the residual projections scaled)."""

    def __init__(self, vocab_size=256, block_size=16, n_layer=2, n_head=2, n_embd=16):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd), drop=nn.Dropout(0.0),
            h=nn.ModuleList([GPTBlock(n_embd, n_head, block_size) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, 0.0, 0.02 / (math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 1))
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


class InvertedResidual(nn.Module):
    """MobileNetV2's block (torchvision's structure): 1x1 expansion, 3x3 depthwise, 1x1 linear projection,
    each with BatchNorm, ReLU6 after the first two, the input added back when the shape stays."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2ish(nn.Module):
    """torchvision's MobileNetV2 shrunk: a stride-2 stem, inverted residuals (one with the residual add),
    a 1x1 head conv, pooling by nn.AdaptiveAvgPool2d(2) (an even division: avgpool2d) and then
    F.adaptive_avg_pool2d(x, (1, 1)) as torchvision's forward, dropout 0, a linear classifier."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True)),
            InvertedResidual(8, 8, 1, 2), InvertedResidual(8, 12, 2, 3),
            nn.Sequential(nn.Conv2d(12, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(inplace=True)))
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Linear(16, num_classes))
        for m in self.modules():  # BatchNorm gains of 4: a good share of the activations above ReLU6's clamp
            if isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 4.0)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.pool(self.features(x)), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def ConvNeXtish(c=8, k=5):
    """torchvision's own ConvNeXt shrunk: two stages of one CNBlock each (widths c and 2c). The stem's 4x4 stride-4
    Conv2d and LayerNorm2d (F.layer_norm between permutes), the block's 7x7 depthwise Conv2d, torchvision's
    Permute to NHWC, nn.LayerNorm over C, Linear, GELU, Linear, Permute back, its layer scale (a [C, 1, 1]
    parameter times the block: memplan's layer_scale), StochasticDepth of p 0, the downsampling LayerNorm2d and
    2x2 Conv2d, the head's pooling, LayerNorm2d, Flatten and Linear. Weights that show a wrong axis: norms and
    layer scales not the identity (each channel its own), convolutions and linears at PyTorch's default init
    (ConvNeXt's std 0.02 would keep the blocks near zero)."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    m = ConvNeXt([CNBlockConfig(c, 2 * c, 1), CNBlockConfig(2 * c, None, 1)], stochastic_depth_prob=0.0,
                 num_classes=k)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
            elif isinstance(mod, (nn.Conv2d, nn.Linear)):
                mod.reset_parameters()
            if hasattr(mod, "layer_scale"):
                mod.layer_scale.uniform_(0.5, 1.5)
    return m


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation as MobileNetV3 builds it: adaptive pooling to 1x1, a 1x1 conv down,
    ReLU, a 1x1 conv up, Hardsigmoid, and the input scaled by it (x * s, s [N, C, 1, 1] broadcast)."""

    def __init__(self, c, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)
        self.activation, self.scale_activation = nn.ReLU(), nn.Hardsigmoid()

    def forward(self, x):
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


class MobileNetV3ish(nn.Module):
    """torchvision's MobileNetV3 blocks shrunk: a Hardswish stem, an inverted residual with squeeze-excitation
    (Hardsigmoid gate) and Hardswish, F.hardswish on the head, then MNASNet's x.mean([2, 3]) (keepdim once, as
    a flatten follows) and torch.mean over the planes again, a linear classifier."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16),
                                nn.Hardswish())
        self.se = SqueezeExcitation(16, 8)
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Conv2d(8, 12, 1)
        self.classifier = nn.Linear(24, num_classes)
        for m in self.modules():  # gains of 3 and a wide SE: the hardswish ramp and the gate both in play
            if isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 3.0)
        nn.init.normal_(self.se.fc2.weight, 0.0, 1.0)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.se(self.dw(self.expand(x))))
        x = F.hardswish(self.head(x))
        a = torch.flatten(x.mean([2, 3], keepdim=True), 1)
        b = torch.mean(F.hardsigmoid(x), dim=(-2, -1))
        return self.classifier(torch.cat([a, b], 1))


class VGGish(nn.Module):
    """VGG's and AlexNet's pooling where the image is small: a max pooling with ceil_mode (SqueezeNet's and
    GoogLeNet's) over an odd size, then nn.AdaptiveAvgPool2d((3, 3)) of a 5x5 map (windows 0-1, 1-3, 3-4:
    uneven, overlapping) as VGG's 7x7 of a smaller map, F.adaptive_avg_pool2d to 2x7 (rows 0-2 and 2-4; more
    columns than there are: windows of one and two), and a linear classifier."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, 2, ceil_mode=True),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.avgpool = nn.AdaptiveAvgPool2d((3, 3))
        self.classifier = nn.Linear(8 * 3 * 3 + 8 * 2 * 7, num_classes)

    def forward(self, x):
        x = self.features(x)  # [B, 8, 5, 5] of 10x10: ceil_mode's 5 (floor: 4)
        a = torch.flatten(self.avgpool(x), 1)
        b = torch.flatten(F.adaptive_avg_pool2d(x, (2, 7)), 1)
        return self.classifier(torch.cat([a, b], 1))


class RMSNorm(nn.Module):
    """Hugging Face's LlamaRMSNorm: x * rsqrt(mean(x^2) + eps), times its weight."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class RotaryEmbedding(nn.Module):
    """Hugging Face's LlamaRotaryEmbedding (transformers 4.28): cos and sin of t * base^(-2i/dim), each
    frequency twice (cat(freqs, freqs): rotate_half's pairs i, i + dim/2), precomputed as buffers."""

    def __init__(self, dim, max_position_embeddings=64, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_position_embeddings, dtype=inv_freq.dtype)
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:, :, :seq_len, ...], self.sin_cached[:, :, :seq_len, ...]


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    """Hugging Face's repeat_kv: each key/value head n_rep times, [B, KVH, T, hd] -> [B, KVH * n_rep, T, hd]."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    """Hugging Face's LlamaAttention's eager path (torch 1.13 has no scaled_dot_product_attention): separate
    q, k, v projections without biases, heads transposed, RoPE by rotate_half, grouped-query heads by
    repeat_kv (or torch.repeat_interleave), scores scaled by 1/sqrt(hd) plus the causal mask, softmax, o_proj."""

    def __init__(self, dim, n_heads, n_kv_heads, max_pos, theta, interleave=False, upcast=False):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.interleave, self.upcast = interleave, upcast
        self.q_proj = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim, max_pos, theta)

    def forward(self, hidden_states, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.n_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, seq_len=q_len)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        n_rep = self.n_heads // self.n_kv_heads
        if self.interleave:  # the other way Llama ports write it
            k, v = torch.repeat_interleave(k, n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask
        if self.upcast:  # transformers 4.28's softmax in float32 and back
            attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        else:
            attn_weights = F.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, v)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, self.n_heads * self.head_dim)
        return self.o_proj(attn_output)


class LlamaMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU


class LlamaDecoderLayer(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, hidden, max_pos, theta, eps, interleave, upcast):
        super().__init__()
        self.self_attn = LlamaAttention(dim, n_heads, n_kv_heads, max_pos, theta, interleave, upcast)
        self.mlp = LlamaMLP(dim, hidden)
        self.input_layernorm = RMSNorm(dim, eps)
        self.post_attention_layernorm = RMSNorm(dim, eps)

    def forward(self, x, mask):
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """Hugging Face's LlamaForCausalLM (modeling_llama.py, transformers 4.28) written small: token embedding,
    pre-norm decoder layers (RMSNorm, RoPE, grouped-query attention, SwiGLU), a final RMSNorm, an untied
    lm_head; the causal mask made in forward as _make_causal_mask does (-inf above the diagonal, added to the
    scores). Weights drawn so that a wrong piece shows from step 1: the layers' projections N(0, 0.15), not
    Hugging Face's 0.02 (attention far from uniform: RoPE, the mask and the head grouping matter), the
    embedding and lm_head N(0, 0.02), RMSNorm weights U(0.5, 1.5), not ones."""

    def __init__(self, vocab_size=256, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden=172, max_pos=64,
                 rope_theta=10000.0, eps=1e-5, interleave=False, upcast=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList([LlamaDecoderLayer(dim, n_heads, n_kv_heads, hidden, max_pos, rope_theta, eps,
                                                       interleave, upcast) for _ in range(n_layers)])
        self.upcast = upcast
        self.norm = RMSNorm(dim, eps)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.15 if name.startswith("layers.") else 0.02)
                else:
                    p.uniform_(0.5, 1.5)

    def forward(self, input_ids):
        bsz, seq_len = input_ids.size()
        mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)[None, None, :, :]
        if self.upcast:  # as transformers 4.28's _make_causal_mask: finfo.min, [B, 1, T, T]
            mask = torch.full((seq_len, seq_len), torch.finfo(torch.float32).min).triu(1)
            mask = mask[None, None, :, :].expand(bsz, 1, seq_len, seq_len)
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, mask)
        return self.lm_head(self.norm(x))


class Inceptionish(nn.Module):
    """inception_v3's non-square kernels from torchvision's own InceptionC: its 1x7 and 7x1 convolutions (padding
    (0, 3) and (3, 0)), BasicConv2d (Conv2d without bias, BatchNorm2d eps 0.001, ReLU), the branch's
    F.avg_pool2d(3, stride 1, padding 1) and torch.cat of the four branches (768 channels), after a 3x3 stem."""

    def __init__(self, k=5):
        from torchvision.models.inception import BasicConv2d, InceptionC
        super().__init__()
        self.stem = BasicConv2d(3, 8, kernel_size=3, padding=1)
        self.mixed = InceptionC(8, channels_7x7=4)
        self.fc = nn.Linear(768, k)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.mixed(self.stem(x)), (1, 1))
        return self.fc(torch.flatten(x, 1))
