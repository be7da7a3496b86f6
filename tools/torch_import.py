#!/usr/bin/python3
"""torch_import.py: a PyTorch nn.Module as a memplan model, and a trainer's
checkpoint back into the module. `memplan import-torch` runs it (docs/pytorch.md
"From PyTorch"); it needs torch (Debian's python3-torch), nothing else.

  torch_import.py import SPEC -o DIR [--kwargs K=V,...] [--input NAME=[dims]:dtype]... [--dims B=2,...]
                  [--loss cross_entropy:TARGETS | mse:TARGETS] [--optimizer adamw:lr=...,...] [--output N]
  torch_import.py load CHECKPOINT DIR/name_map.json -o STATE_DICT.pt

import traces the module with torch.fx.symbolic_trace, runs ShapeProp on
example inputs of the given shapes, and maps every node to a memplan op
(the table OPS below), checking the attributes memplan's op supports. It
writes DIR/model.yaml, DIR/weights.safetensors (the module's parameters and
BatchNorm running statistics under memplan's names, for the trainer's
--load) and DIR/name_map.json (memplan name -> state_dict name, the spec
and kwargs), each atomically, and only when every node maps: otherwise one
error lists every unsupported node with its op, module path and the user's
source line, and nothing is written.

load reads a trainer checkpoint (--save) and the name map, builds the
module again from the recorded spec, and loads the weights with
load_state_dict(strict=True), running statistics included; load_into() is
the same as a function for a module the caller already has.

Exit status: 0 success, 1 user error (the message says which input and
what to do), 2 usage."""
import argparse
import ast
import contextlib
import importlib
import importlib.util
import inspect
import io
import json
import operator
import os
import re
import struct
import sys
import traceback

EXIT_USER, EXIT_USAGE = 1, 2


class UserError(Exception):
    pass


def fail(msg):
    raise UserError(msg)


def need_torch():
    try:
        import torch  # noqa: F401
        import torch.fx  # noqa: F401 pylint: disable=unused-import
    except ImportError as e:
        fail("PyTorch is not installed for %s (%s): install Debian's python3-torch (apt install python3-torch), or "
             "point MEMPLAN_PYTHON at a python3 that has torch" % (sys.executable, e))


# ---------------------------------------------------------------------------
# the module from its spec

def parse_kwargs(text):
    """'num_classes=10,bias=False' -> {'num_classes': 10, 'bias': False}; values are Python literals or strings."""
    out = {}
    for item in split_top(text or ""):
        if "=" not in item:
            fail("--kwargs '%s': expected NAME=VALUE items separated by commas" % item)
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = ast.literal_eval(v.strip())
        except (ValueError, SyntaxError):
            out[k.strip()] = v.strip()
    return out


def split_top(text):
    """Splits at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[(" and 1 or (ch in "])" and -1 or 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p for p in (p.strip() for p in parts) if p]


def build_module(spec, kwargs):
    """The module of SPEC ('package.module:factory' or 'path/file.py:ClassOrFactory') called with kwargs."""
    if ":" not in spec:
        fail("SPEC '%s': expected package.module:factory or path/to/file.py:ClassOrFactory" % spec)
    where, name = spec.rsplit(":", 1)
    try:
        if where.endswith(".py"):
            if not os.path.isfile(where):
                fail("SPEC '%s': no file %s" % (spec, where))
            modname = "memplan_user_" + re.sub(r"\W", "_", os.path.basename(where)[:-3])
            s = importlib.util.spec_from_file_location(modname, where)
            mod = importlib.util.module_from_spec(s)
            sys.modules[modname] = mod
            s.loader.exec_module(mod)
        else:
            mod = importlib.import_module(where)
    except UserError:
        raise
    except Exception as e:  # the user's file or package may raise anything while importing
        fail("SPEC '%s': importing %s failed: %s: %s" % (spec, where, type(e).__name__, e))
    factory = getattr(mod, name, None)
    if factory is None or not callable(factory):
        fail("SPEC '%s': %s has no class or function '%s'" % (spec, where, name))
    import torch
    torch.manual_seed(0)  # the module's initial weights, drawn by its own init, the same on every import
    try:
        m = factory(**kwargs)
    except Exception as e:
        fail("SPEC '%s': %s(%s) raised %s: %s" % (spec, name, ", ".join("%s=%r" % kv for kv in kwargs.items()),
                                                    type(e).__name__, e))
    if not isinstance(m, torch.nn.Module):
        fail("SPEC '%s': %s returned a %s, not a torch.nn.Module" % (spec, name, type(m).__name__))
    return m


# ---------------------------------------------------------------------------
# safetensors (F32), written atomically

def fsync_replace(tmp, path):
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_atomic(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    fsync_replace(tmp, path)


def safetensors_bytes(tensors, metadata):
    import torch
    header, chunks, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(chunks)


def read_safetensors(path):
    """({name: float32 tensor}, metadata) of a trainer checkpoint."""
    import numpy as np
    import torch
    try:
        with open(path, "rb") as f:
            blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (OSError, struct.error, ValueError) as e:
        fail("%s: not a readable safetensors file: %s" % (path, e))
    dts = {"F32": np.float32, "F64": np.float64, "F16": np.float16}
    out, data = {}, blob[8 + n:]
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t.get("dtype") not in dts:
            fail("%s: tensor %s: dtype %s, expected F32" % (path, name, t.get("dtype")))
        b, e = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[b:e], dtype=dts[t["dtype"]]).reshape(t["shape"]).copy())
    return out, header.get("__metadata__", {})


# ---------------------------------------------------------------------------
# the graph, node by node

def fmt_num(v):
    return repr(float(v)) if isinstance(v, float) else str(v)


def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


class Importer:
    def __init__(self, module, inputs, dims, batch_sym):
        self.m = module
        self.inputs, self.dims, self.batch_sym = inputs, dims, batch_sym
        self.layers = []          # [(name, op, {key: value}, [input names])]
        self.value = {}           # fx node -> memplan name (a layer or an input)
        self.unsupported = []     # [(op text, module path, source line, why)]
        self.names = set(n for n, _, _ in inputs)
        self.params = {}          # memplan name -> (state_dict name, tensor)
        self.state = {}           # memplan name -> (state_dict name, tensor): running statistics
        self.owner = {}           # id(parameter) -> memplan layer that owns it (weight sharing)
        self.shared = {}          # memplan name -> memplan name it shares
        self.modules = dict(module.named_modules())
        self.shape_over = {}      # fx node -> memplan's shape where it differs (position_embedding's [B, T, C])
        self.rejected = set()     # nodes refused, and those refused because an input was
        self.absorbed = {}        # fx node -> None (inside a matched pattern) or the pattern's op to emit there
        self.chunks = {}          # fx node of a chunk -> the dim its reshape splits (its getitems select there)
        self.gm = None
        self.bind = {n: n for n, _, _ in inputs}  # forward argument -> --input name

    # -- helpers
    def layer_name(self, text):
        base = re.sub(r"[^A-Za-z0-9_]", "_", text) or "layer"
        if base[0].isdigit():
            base = "l" + base
        name, k = base, 1
        while name in self.names:
            k += 1
            name = "%s_%d" % (base, k)
        self.names.add(name)
        return name

    def emit(self, node, op, keys, ins, name=None):
        name = name or self.layer_name(node.target if node.op == "call_module" else node.name)
        self.layers.append((name, op, keys, ins))
        self.value[node] = name
        return name

    def shape(self, node):
        if node in self.shape_over:
            return self.shape_over[node]
        meta = node.meta.get("tensor_meta")
        return None if meta is None or not hasattr(meta, "shape") else tuple(meta.shape)

    def dim_expr(self, shape):
        """A traced shape as YAML dims: the batch dim by its symbol (so --set B= keeps working)."""
        out = list(shape)
        if self.batch_sym and out and out[0] == self.dims[self.batch_sym]:
            out[0] = self.batch_sym
        return out

    def arg(self, node, a):
        """The memplan name of a tensor argument, or None after recording why not."""
        import torch.fx
        if isinstance(a, torch.fx.Node) and a in self.value:
            return self.value[a]
        if isinstance(a, torch.fx.Node) and a in self.rejected:  # listed already: its users are not
            self.rejected.add(node)
            return None
        self.reject(node, "its input %s is not a tensor memplan computes" % (getattr(a, "name", repr(a))))
        return None

    def reject(self, node, why):
        self.rejected.add(node)
        op = {"call_module": lambda: "%s (%s)" % (type(self.modules.get(node.target)).__name__, node.target),
              "call_function": lambda: "%s" % getattr(node.target, "__name__", str(node.target)),
              "call_method": lambda: "Tensor.%s" % node.target,
              "get_attr": lambda: "get_attr %s" % node.target}.get(node.op, lambda: node.op)()
        path = node.target if node.op == "call_module" else node.meta.get("memplan_path", "")
        self.unsupported.append((op, path, user_line(node.stack_trace), why))

    # -- the graph
    def run(self, gm):
        import torch
        self.gm = gm
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target in (torch.nn.functional.softmax, torch.softmax) or \
                    node.op == "call_method" and node.target == "softmax":
                match_attention(self, node)
            swin_absorb(self, node)
            use = self.param_use(node) if node.op == "get_attr" else None
            if use is not None:
                self.absorbed[node] = None  # read by the op its pattern makes (param_use)
                if use == "class_token":
                    self.absorbed[next(iter(node.users))] = None  # its expand
        match_llama(self)
        for node in gm.graph.nodes:
            if node in self.absorbed:
                if callable(self.absorbed[node]):  # a pattern's op(s), made where its value is (match_llama)
                    self.absorbed[node](node)
                elif self.absorbed[node] is not None:
                    qkv, heads, causal = self.absorbed[node]
                    x = self.arg(node, qkv)
                    if x is not None:
                        self.emit(node, "attention", {"heads": heads, "causal": causal}, [x],
                                  name=self.layer_name(node.meta.get("memplan_path", "") + "_attention"))
                continue
            if node.op == "placeholder":
                if self.bind.get(node.target) is None:
                    self.reject(node, "the module's input '%s' has no --input %s=[dims]:dtype" % (node.target,
                                                                                                 node.target))
                    continue
                self.value[node] = self.bind[node.target]
            elif node.op == "output":
                continue
            elif node.op == "call_module":
                self.call_module(node, self.modules[node.target])
            elif node.op in ("call_function", "call_method"):
                self.call_fn(node)
            elif node.op == "get_attr":
                if self.is_arange(node) and all(u.op == "call_module" and isinstance(self.modules[u.target],
                                                                                    torch.nn.Embedding)
                                                for u in node.users):
                    continue
                if self.shape(node) is not None:
                    self.reject(node, "a parameter or buffer read directly in forward (not through a submodule)")
            else:
                self.reject(node, "unknown fx node kind")
        del torch

    def call_module(self, node, mod):
        import torch.nn as nn
        t = type(mod)
        known = (nn.Linear, nn.Conv2d, nn.BatchNorm2d, nn.BatchNorm1d, nn.LayerNorm, nn.Embedding, nn.Hardtanh,
                 nn.ReLU6, nn.ReLU, nn.Sigmoid, nn.SiLU, nn.GELU, nn.Identity, nn.Dropout, nn.Flatten, nn.Softmax,
                 nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Hardswish, nn.Hardsigmoid)
        if t is nn.MultiheadAttention:
            return self.mha(node, mod)
        if t not in known:  # listed even when its input was refused too
            return self.reject(node, "no memplan op for %s" % t.__name__)
        pos = t is nn.Embedding and node.args and self.is_arange(node.args[0])
        x = None if pos else self.arg(node, node.args[0]) if node.args else None
        if x is None and not pos:
            return
        ins, ish = [x], self.shape(node.args[0])
        if t is nn.Linear:
            name = self.emit(node, "linear", {"out": mod.out_features, "bias": mod.bias is not None}, ins)
            self.own(name, mod, ("weight", "bias"))
        elif t is nn.Conv2d:
            return self.conv2d(node, mod, ins)
        elif t in (nn.BatchNorm2d, nn.BatchNorm1d):
            if not (mod.affine and mod.track_running_stats) or mod.momentum is None:
                return self.reject(node, "batchnorm without affine parameters, running statistics or a momentum")
            if t is nn.BatchNorm1d and len(ish) != 2:
                return self.reject(node, "BatchNorm1d on %s: memplan's batchnorm2d takes [N, C]" % (ish,))
            name = self.emit(node, "batchnorm2d", {"eps": float(mod.eps), "momentum": float(mod.momentum)}, ins)
            self.own(name, mod, ("weight", "bias"))
            for b in ("running_mean", "running_var"):
                self.state["%s.%s" % (name, b)] = (self.sd_name(mod, b), getattr(mod, b))
        elif t is nn.LayerNorm:
            if len(mod.normalized_shape) != 1 or not mod.elementwise_affine:
                return self.reject(node, "LayerNorm over %s dims or without affine parameters: memplan's layernorm "
                                   "normalizes the last dim with a weight" % len(mod.normalized_shape))
            keys = {"eps": float(mod.eps)}
            if getattr(mod, "bias", None) is None:
                keys["bias"] = False
            name = self.emit(node, "layernorm", keys, ins)
            self.own(name, mod, ("weight", "bias"))
        elif t is nn.Embedding and self.is_arange(node.args[0]):
            n = self.shape(node.args[0])[0]
            like = next((nm for nm, s, _ in self.inputs if len(s) >= 2 and self.concrete(s)[1] == n), None)
            if like is None:
                return self.reject(node, "a position embedding of %d positions, and no --input of shape [B, %d, ...]"
                                   % (n, n))
            name = self.emit(node, "position_embedding", {"max": mod.num_embeddings, "dim": mod.embedding_dim},
                             [like])
            self.own(name, mod, ("weight",))
            b = self.concrete(next(s for nm, s, _ in self.inputs if nm == like))[0]
            self.shape_over[node] = (b, n, mod.embedding_dim)
        elif t is nn.Embedding:
            if mod.padding_idx is not None or mod.max_norm is not None:
                return self.reject(node, "Embedding with padding_idx or max_norm")
            name = self.emit(node, "embedding", {"num": mod.num_embeddings, "dim": mod.embedding_dim}, ins)
            self.own(name, mod, ("weight",))
        elif t in (nn.Hardtanh, nn.ReLU6) and (mod.min_val, mod.max_val) == (0.0, 6.0):
            self.emit(node, "relu6", {}, ins)
        elif t in (nn.ReLU, nn.Sigmoid, nn.SiLU, nn.GELU, nn.Identity, nn.Dropout, nn.Flatten, nn.Softmax,
                   nn.Hardswish, nn.Hardsigmoid):
            self.simple(node, {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.SiLU: "silu", nn.GELU: "gelu",
                               nn.Identity: None, nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid",
                               nn.Dropout: "dropout", nn.Flatten: "flatten", nn.Softmax: "softmax"}[t], mod, ins)
        elif t in (nn.MaxPool2d, nn.AvgPool2d):
            self.pool(node, "maxpool2d" if t is nn.MaxPool2d else "avgpool2d", mod.kernel_size, mod.stride,
                      mod.padding, getattr(mod, "dilation", 1), mod.ceil_mode, getattr(mod, "count_include_pad", True),
                      getattr(mod, "divisor_override", None), ins)
        elif t is nn.AdaptiveAvgPool2d:
            self.adaptive(node, mod.output_size, ins)
        else:
            self.reject(node, "no memplan op for %s" % t.__name__)

    def conv2d(self, node, mod, ins):
        """nn.Conv2d: kernel, stride and padding per side (the width's written where it differs: kernel_w, ...)."""
        k, s, p, d = mod.kernel_size, mod.stride, mod.padding, mod.dilation
        why = [w for w, bad in (("padding %r" % (p,), isinstance(p, str)),
                                ("unequal dilations %s" % (d,), d[0] != d[1]),
                                ("padding_mode '%s'" % mod.padding_mode, mod.padding_mode != "zeros")) if bad]
        if why:
            return self.reject(node, "memplan's conv2d takes numeric zero padding and one dilation: not " +
                               ", ".join(why))
        keys = {"out": mod.out_channels, "kernel": k[0], "stride": s[0], "padding": p[0], "dilation": d[0],
                "groups": mod.groups, "bias": mod.bias is not None}
        for key, v in (("kernel", k), ("stride", s), ("padding", p)):
            if v[1] != v[0]:
                keys[key + "_w"] = v[1]
        name = self.emit(node, "conv2d", keys, ins)
        self.own(name, mod, ("weight", "bias"))
        return name

    def concrete(self, shape):
        return [self.dims[d] if isinstance(d, str) else d for d in shape]

    def layer_norm(self, node):
        """F.layer_norm over the last dim with an nn.LayerNorm's own weight and bias (torchvision's LayerNorm2d
        calls it in its forward): memplan's layernorm, the module's parameters its own."""
        import torch
        import torch.fx
        v = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), node.args))
        v.update(node.kwargs)
        w, b = v.get("weight"), v.get("bias")
        pw = self.param_of(w) if isinstance(w, torch.fx.Node) else None
        pb = self.param_of(b) if isinstance(b, torch.fx.Node) else None
        ns = v.get("normalized_shape")
        if pw is None or not isinstance(pw[0], torch.nn.LayerNorm) or pw[1] != "weight" or \
                (b is not None and (pb is None or pb[0] is not pw[0] or pb[1] != "bias")) or \
                not isinstance(ns, (tuple, list)) or len(ns) != 1 or tuple(ns) != tuple(pw[0].normalized_shape):
            return self.reject(node, "F.layer_norm over one dim with an nn.LayerNorm's weight and bias is memplan's "
                               "layernorm; not this one")
        x = self.arg(node, v.get("input"))
        if x is None:
            return None
        keys = {"eps": float(v.get("eps", 1e-5))}
        if b is None:
            keys["bias"] = False
        name = self.emit(node, "layernorm", keys, [x], self.layer_name(self.sd_name(pw[0], "")[:-1] or node.name))
        self.own(name, pw[0], ("weight",) + (("bias",) if b is not None else ()))
        return name

    def chunk(self, node):
        """x.chunk(k, dim) (ShuffleNet's channel split) into k equal pieces: a reshape of dim's n to [k, n / k],
        which moves no data, and a select of each piece a getitem reads (its own layer)."""
        v = dict(zip(("input", "chunks", "dim"), node.args))
        v.update(node.kwargs)
        x = self.arg(node, v.get("input"))
        if x is None:
            return None
        ish, k = self.shape(v["input"]), v.get("chunks")
        d = v.get("dim", 0) % len(ish) if isinstance(v.get("dim", 0), int) else None
        if not isinstance(k, int) or d is None or d == 0 or ish[d] % k:
            return self.reject(node, "chunk(%r, dim=%r) of %s: memplan splits a dim other than the batch in equal "
                               "pieces" % (k, v.get("dim", 0), list(ish)))
        self.chunks[node] = d
        return self.emit(node, "reshape", {"shape": self.dim_expr(list(ish[:d]) + [k, ish[d] // k] +
                                                                  list(ish[d + 1:]))}, [x])

    def permute(self, node):
        """x.permute(dims) as memplan's transposes, one per swap that sorts the dims into place (ConvNeXt's
        channel-last (0, 2, 3, 1) is two; a swap is one transpose)."""
        a = node.args
        dims = list(a[1] if len(a) == 2 and isinstance(a[1], (tuple, list)) else a[1:] or node.kwargs.get("dims"))
        x = self.arg(node, a[0])
        if x is None:
            return None
        n = len(dims)
        dims = [d % n for d in dims]
        cur, swaps = list(range(n)), []
        for i in range(n):  # cur[i]: the input dim now at i; bring dims[i] there
            j = cur.index(dims[i])
            if j != i:
                cur[i], cur[j] = cur[j], cur[i]
                swaps.append((i, j))
        if not swaps:
            self.value[node] = x
            return None
        for k, (i, j) in enumerate(swaps):
            x = self.emit(node, "transpose", {"dim0": i, "dim1": j}, [x],
                          self.layer_name(node.name if k == len(swaps) - 1 else "%s_%d" % (node.name, k)))
        return x

    def mha(self, node, mod):
        """nn.MultiheadAttention as torchvision's ViT calls it, self-attention of batch_first [B, T, C] with no
        mask and need_weights=False: the packed in_proj (q, k, v rows in thirds, heads contiguous in each, as
        memplan's attention reads its [B, T, 3C] input) a linear, attention non-causal (scale 1/sqrt(hd)),
        out_proj a linear. The node's value is the output; its getitem 0 reads it."""
        names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights",
                 "is_causal")
        v = dict(zip(names, node.args))
        v.update(node.kwargs)
        q = v.get("query")
        why = [w for w, bad in (
            ("query, key and value are not one tensor (self-attention)", not (q is v.get("key") is v.get("value"))),
            ("batch_first=False", not mod.batch_first),
            ("need_weights=True (the default: pass need_weights=False)", v.get("need_weights", True)),
            ("a mask", v.get("attn_mask") is not None or v.get("key_padding_mask") is not None or v.get("is_causal")),
            ("attention dropout %g" % mod.dropout, mod.dropout != 0),
            ("separate q, k, v projections (kdim/vdim)", not mod._qkv_same_embed_dim),
            ("add_bias_kv or add_zero_attn", mod.bias_k is not None or mod.add_zero_attn),
            ("in_proj and out_proj disagree on a bias", (mod.in_proj_bias is None) != (mod.out_proj.bias is None)),
        ) if bad]
        if why:
            return self.reject(node, "memplan maps self-attention without masks or dropout: not " + "; ".join(why))
        x = self.arg(node, q)
        if x is None:
            return None
        path, bias = node.target, mod.in_proj_bias is not None
        qkv = self.emit(node, "linear", {"out": 3 * mod.embed_dim, "bias": bias}, [x], self.layer_name(path + ".qkv"))
        self.own(qkv, mod, (("weight", "in_proj_weight"), ("bias", "in_proj_bias")))
        att = self.emit(node, "attention", {"heads": mod.num_heads, "causal": False}, [qkv],
                        self.layer_name(path + ".attention"))
        out = self.emit(node, "linear", {"out": mod.embed_dim, "bias": bias}, [att], self.layer_name(path + ".proj"))
        self.own(out, mod.out_proj, ("weight", "bias"))
        return out

    def param_of(self, node):
        """(module, attribute, tensor) of a get_attr node reading a parameter, else None."""
        import torch
        if node.op != "get_attr":
            return None
        path, _, attr = node.target.rpartition(".")
        mod = self.modules.get(path)
        t = getattr(mod, attr, None) if mod is not None else None
        return (mod, attr, t) if isinstance(t, torch.nn.Parameter) else None

    def param_use(self, node):
        """How a parameter read directly in forward maps, as torchvision's ViT reads them: 'class_token' for a
        [1, 1, C] one expanded to the batch and concatenated first along dim 1 (memplan's class_token), 'position'
        for a [1, T, C] one added to a [B, T, C] tensor (position_embedding + add), 'norm' for the weight and bias
        F.layer_norm reads of an nn.LayerNorm (torchvision's LayerNorm2d); None otherwise."""
        import torch
        import torch.nn.functional as F
        p = self.param_of(node)
        if p is None or len(node.users) != 1:
            return None
        t, u = p[2], next(iter(node.users))
        if t.dim() == 3 and t.shape[:2] == (1, 1) and u.op == "call_method" and u.target == "expand" and \
                len(u.users) == 1:
            c = next(iter(u.users))
            dim = c.args[1] if len(c.args) > 1 else c.kwargs.get("dim", 0)
            if c.op == "call_function" and c.target is torch.cat and len(c.args[0]) == 2 and c.args[0][0] is u and \
                    dim in (1, -2) and self.shape(c.args[0][1]) is not None and len(self.shape(c.args[0][1])) == 3:
                return "class_token"
        if t.dim() == 3 and t.shape[0] == 1 and u.op == "call_function" and u.target in (operator.add, torch.add) \
                and len(u.args) == 2 and not u.kwargs:
            other = u.args[1] if u.args[0] is node else u.args[0]
            osh = self.shape(other) if isinstance(other, torch.fx.Node) else None
            if osh is not None and len(osh) == 3 and tuple(osh[1:]) == tuple(t.shape[1:]):
                return "position"
        if u.op == "call_function" and u.target is F.layer_norm and isinstance(p[0], torch.nn.LayerNorm) and \
                p[1] in ("weight", "bias"):
            return "norm"
        if self.layer_scale_of(node) is not None:
            return "layer_scale"
        return None

    def layer_scale_of(self, node):
        """The tensor x of `gamma * x` (either order), gamma a parameter read in forward broadcasting one factor per
        channel over x [N, C, ...] (ConvNeXt's layer scale, [C, 1, 1]), else None."""
        import torch
        p = self.param_of(node)
        if p is None or len(node.users) != 1:
            return None
        t, u = p[2], next(iter(node.users))
        if u.op != "call_function" or u.target not in (operator.mul, torch.mul) or len(u.args) != 2 or u.kwargs:
            return None
        x = u.args[1] if u.args[0] is node else u.args[0]
        xs = self.shape(x) if isinstance(x, torch.fx.Node) and x is not node else None
        if xs is None or len(xs) < 2 or t.dim() > len(xs) or t.dim() < len(xs) - 1:
            return None
        full = (1,) * (len(xs) - t.dim()) + tuple(t.shape)  # torch's broadcasting aligns the trailing dims
        return x if full[1] == xs[1] and all(v == 1 for i, v in enumerate(full) if i != 1) else None

    def const(self, node):
        """The tensor a get_attr node reads (a buffer, or a constant fx made of a value computed while tracing)."""
        import torch.fx
        if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
            return None
        v = self.gm
        for part in node.target.split("."):
            v = getattr(v, part, None)
        return v

    def is_arange(self, node):
        """torch.arange(0, T) (fx keeps it as a constant: the sizes were numbers while tracing)."""
        import torch
        v = self.const(node)
        return isinstance(v, torch.Tensor) and v.dim() == 1 and not v.is_floating_point() and \
            torch.equal(v, torch.arange(v.numel()))

    def sd_name(self, mod, attr):
        for n, m in self.modules.items():
            if m is mod:
                return (n + "." if n else "") + attr
        return attr

    def own(self, lname, mod, attrs, shape=None):
        """The module's parameters as the layer's: attrs are names, or (memplan's, the module's) pairs; shape,
        memplan's shape where it drops torch's leading 1s (class_token's [C] of [1, 1, C])."""
        for a in attrs:
            a, theirs = (a, a) if isinstance(a, str) else a
            t = getattr(mod, theirs, None)
            if t is None:
                continue
            key = "%s.%s" % (lname, a)
            if id(t) in self.owner:  # shared with an earlier layer: `weight: OTHER.weight`
                self.shared[key] = self.owner[id(t)]
                for i, (n, op, keys, ins) in enumerate(self.layers):
                    if n == lname:
                        keys[a] = self.owner[id(t)]
                continue
            self.owner[id(t)] = key
            self.params[key] = (self.sd_name(mod, theirs), t if shape is None else t.detach().reshape(shape))

    def simple(self, node, op, mod, ins, keys=None):
        """Element-wise and shape ops whose attributes come from a module or a call."""
        import torch.nn as nn
        keys = dict(keys or {})
        if op == "gelu":
            approx = getattr(mod, "approximate", None) if mod is not None else keys.pop("approximate", "none")
            keys["approximate"] = approx or "none"
        if op == "dropout":
            p = mod.p if mod is not None else keys.get("p", 0.5)
            if p == 0:
                op = None
            else:
                keys["p"] = float(p)
        if op == "flatten" and mod is not None:
            keys = {"start": mod.start_dim, "end": mod.end_dim}
        if op == "softmax":
            dim = mod.dim if mod is not None else keys.pop("dim", None)
            if dim not in (-1, len(self.shape(node)) - 1):
                return self.reject(node, "softmax over dim %s: memplan's softmax is over the last dim" % dim)
            keys = {}
        if op is None:  # the identity
            self.value[node] = ins[0]
            return None
        del nn
        return self.emit(node, op, keys, ins)

    def pool(self, node, op, k, s, p, d, ceil, count_pad, divisor, ins):
        def one(v, what):
            v = v if isinstance(v, (tuple, list)) else (v, v)
            if v[0] != v[1]:
                raise ValueError("unequal %s %s" % (what, tuple(v)))
            return v[0]
        try:
            k, s, p, d = one(k, "kernel"), one(s if s is not None else k, "stride"), one(p, "padding"), one(d, "dil")
        except ValueError as e:
            return self.reject(node, "memplan's %s takes square windows: %s" % (op, e))
        why = [w for w, bad in (("dilation %r" % (d,), d != 1), ("count_include_pad=False", not count_pad),
                                ("divisor_override", divisor is not None)) if bad]
        if why:
            return self.reject(node, "memplan's %s takes no %s" % (op, ", ".join(why)))
        keys = {"kernel": k, "stride": s, "padding": p}
        if ceil:
            keys["ceil_mode"] = True
        self.emit(node, op, keys, ins)

    def adaptive(self, node, size, ins):
        """Adaptive average pooling: to 1x1 global_avgpool (+ a reshape keeping torch's 1x1 plane); to a size
        that divides the input's evenly, avgpool2d with the quotient as kernel and stride (the same windows);
        to the input's own size, nothing (VGG's and AlexNet's at their usual image sizes); to any other size
        adaptive_avgpool2d (torch's uneven windows)."""
        size = size if isinstance(size, (tuple, list)) else (size, size)
        H, W = self.shape(node.args[0])[-2:]
        size = tuple(H if o is None else o for o in size[:1]) + tuple(W if o is None else o for o in size[1:])
        if size == (H, W):
            self.value[node] = ins[0]
            return None
        if size == (1, 1):
            g = self.emit(node, "global_avgpool", {}, ins, name=self.layer_name(
                (node.target if node.op == "call_module" else node.name) + "_gap"))
            # torch keeps the 1x1 plane: a reshape that moves no data
            return self.emit(node, "reshape", {"shape": self.dim_expr(self.shape(node))}, [g])
        if H % size[0] or W % size[1] or H // size[0] != W // size[1]:
            return self.emit(node, "adaptive_avgpool2d", {"height": size[0], "width": size[1]}, ins)
        k = H // size[0]
        return self.emit(node, "avgpool2d", {"kernel": k, "stride": k, "padding": 0}, ins)

    def stochastic_depth(self, node):
        """torchvision.ops.stochastic_depth(input, p, mode, training), fx-wrapped: a call inside a StochasticDepth
        module (traced in eval, so its training argument is False) trains with the module's p and mode; a call
        elsewhere with training=False is the identity; p = 0 too."""
        a, kw = node.args, node.kwargs
        v = dict(zip(("input", "p", "mode", "training"), a))
        v.update(kw)
        mod = self.modules.get(node.meta.get("memplan_path", ""))
        if type(mod).__name__ == "StochasticDepth":
            v.update(p=mod.p, mode=mod.mode, training=True)
        x = self.arg(node, v["input"])
        if x is None:
            return None
        if not v.get("training", True) or v["p"] == 0:
            self.value[node] = x
            return None
        if v["mode"] not in ("row", "batch") or not 0 <= v["p"] < 1:
            return self.reject(node, "stochastic_depth with mode %r, p %r: memplan's takes row or batch, p in "
                               "[0, 1)" % (v["mode"], v["p"]))
        return self.emit(node, "stochastic_depth", {"p": float(v["p"]), "mode": v["mode"]}, [x])

    def call_fn(self, node):
        import torch
        import torch.nn.functional as F
        t, a, kw = node.target, node.args, node.kwargs
        if swin_fn(node) is not None:
            return swin_call(self, node)
        if t in ("chunk", torch.chunk):
            return self.chunk(node)
        shp = self.shape(node)
        if shp is None:  # sizes, shapes and other non-tensor values: used only by shape ops, which read ShapeProp
            return
        fn = {operator.add: "add", torch.add: "add", "add": "add", operator.mul: "mul", torch.mul: "mul",
              "mul": "mul", operator.iadd: "add", operator.imul: "mul"}.get(t)
        if fn:
            if len(a) != 2 or kw.get("alpha", 1) != 1:
                return self.reject(node, "%s with alpha or more arguments" % fn)
            pos = next((x for x in a if isinstance(x, torch.fx.Node) and self.absorbed.get(x, 0) is None and
                        self.param_use(x) == "position"), None)
            gamma = next((x for x in a if isinstance(x, torch.fx.Node) and self.absorbed.get(x, 0) is None and
                          self.param_use(x) == "layer_scale"), None)
            if gamma is not None:  # gamma [C, 1, 1] * x [N, C, H, W]: layer_scale, its weight [C]
                x = self.arg(node, self.layer_scale_of(gamma))
                if x is None:
                    return None
                mod, attr, t = self.param_of(gamma)
                name = self.emit(node, "layer_scale", {}, [x], self.layer_name(gamma.target))
                self.own(name, mod, (("weight", attr),), shape=(t.numel(),))
                return name
            if pos is not None:  # x + pos_embedding [1, T, C]: position_embedding [T, C] of x's [B, T], added
                x = self.arg(node, a[1] if a[0] is pos else a[0])
                if x is None:
                    return None
                mod, attr, t = self.param_of(pos)
                pe = self.emit(pos, "position_embedding", {"max": t.shape[1], "dim": t.shape[2]}, [x],
                               self.layer_name(pos.target))
                self.own(pe, mod, (("weight", attr),), shape=tuple(t.shape[1:]))
                return self.emit(node, fn, {}, [x, pe])
            ins = [self.value.get(x) if isinstance(x, torch.fx.Node) else None for x in a]
            if any(x in self.rejected for x in a if isinstance(x, torch.fx.Node)) and \
                    all(isinstance(x, torch.fx.Node) for x in a):  # listed already, unless it has its own fault
                self.rejected.add(node)
                return None
            if None in ins:
                return self.reject(node, "%s with a Python number or an untracked tensor: memplan's %s takes two "
                                   "tensors" % (fn, fn))
            sa, sb = self.shape(a[0]), self.shape(a[1])
            if fn == "mul" and sa != sb and len(sa) == len(sb) >= 3:  # squeeze-excitation: x * s[N, C, 1, 1]
                for x, s, sx, ss in ((ins[0], ins[1], sa, sb), (ins[1], ins[0], sb, sa)):
                    if sx[:2] == ss[:2] and all(v == 1 for v in ss[2:]):
                        return self.emit(node, "scale_channels", {}, [x, s])
            if sa != sb:
                return self.reject(node, "%s of shapes %s and %s: memplan's %s takes equal shapes (no broadcasting%s)"
                                   % (fn, sa, sb, fn, "; scale_channels: x [N, C, ...] times s [N, C, 1, 1]"
                                      if fn == "mul" else ""))
            return self.emit(node, fn, {}, ins)
        if getattr(t, "__name__", "") == "stochastic_depth" and getattr(t, "__module__", "").startswith("torchvision"):
            return self.stochastic_depth(node)
        if t in (F.relu6, F.hardtanh):
            lo, hi = (0.0, 6.0) if t is F.relu6 else (a[1] if len(a) > 1 else kw.get("min_val", -1.0),
                                                      a[2] if len(a) > 2 else kw.get("max_val", 1.0))
            if (lo, hi) != (0.0, 6.0):
                return self.reject(node, "hardtanh(%g, %g): memplan has relu6, hardtanh(0, 6)" % (lo, hi))
            x = self.arg(node, a[0])
            return None if x is None else self.emit(node, "relu6", {}, [x])
        unary = {F.relu: "relu", torch.relu: "relu", "relu": "relu", F.gelu: "gelu", F.silu: "silu",
                 torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", "sigmoid": "sigmoid",
                 F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", "mean": "mean", torch.mean: "mean",
                 torch.flatten: "flatten", "flatten": "flatten", F.softmax: "softmax", torch.softmax: "softmax",
                 "softmax": "softmax", F.dropout: "dropout", "contiguous": None,
                 "view": "reshape", "reshape": "reshape", torch.reshape: "reshape",
                 "transpose": "transpose", torch.transpose: "transpose", F.adaptive_avg_pool2d: "adaptive",
                 F.max_pool2d: "maxpool2d", F.avg_pool2d: "avgpool2d", torch.cat: "concat",
                 operator.getitem: "getitem", F.layer_norm: "unsupported"}
        if t is operator.getitem and a and isinstance(a[0], torch.fx.Node) and a[0].op == "call_module" and \
                isinstance(self.modules[a[0].target], torch.nn.MultiheadAttention):
            x = self.arg(node, a[0])
            if x is not None and a[1] != 0:
                return self.reject(node, "the attention weights (need_weights=False returns None)")
            if x is not None:
                self.value[node] = x
            return None
        if t is operator.getitem and a and a[0] in self.chunks:  # one piece of a chunk: select of its reshape
            x = self.arg(node, a[0])
            return None if x is None else self.emit(node, "select", {"axis": self.chunks[a[0]], "index": a[1]}, [x])
        if t is F.layer_norm:
            return self.layer_norm(node)
        if t in ("permute", torch.permute):
            return self.permute(node)
        op = unary.get(t, "unsupported") if not isinstance(t, str) or t in unary else "unsupported"
        if op == "unsupported":
            return self.reject(node, "no memplan op for it")
        if op == "concat":
            xs = a[0] if a else kw.get("tensors")
            cls = xs[0] if len(xs) == 2 else None
            if cls in self.absorbed and cls.args[0] in self.absorbed:  # cat([class_token.expand(B, -1, -1), x], 1)
                x = self.arg(node, xs[1])
                if x is None:
                    return None
                mod, attr, t = self.param_of(cls.args[0])
                name = self.emit(node, "class_token", {}, [x], self.layer_name(cls.args[0].target))
                self.own(name, mod, (("weight", attr),), shape=(t.shape[2],))
                return name
            ins = [self.arg(node, x) for x in xs]
            if None in ins:
                return None
            if len(ins) == 1:
                self.value[node] = ins[0]
                return None
            # memplan's concat takes 2 to 6 (its kernels' slots): more (DenseNet's features) chain, each
            # concat taking the previous one's result and the next 5
            axis = a[1] if len(a) > 1 else kw.get("dim", 0)
            x, rest = ins[0], ins[1:]
            while rest:
                part, rest = rest[:5], rest[5:]
                x = self.emit(node, "concat", {"axis": axis}, [x] + part,
                              self.layer_name(node.name if not rest else "%s_part" % node.name))
            return x
        x = self.arg(node, a[0]) if a else None
        if x is None:
            return None
        ins, ish = [x], self.shape(a[0])
        if op == "reshape":
            if shp == ish:
                self.value[node] = x
                return None
            return self.emit(node, "reshape", {"shape": self.dim_expr(shp)}, ins)
        if op == "flatten":
            start = a[1] if len(a) > 1 else kw.get("start_dim", 0)
            end = a[2] if len(a) > 2 else kw.get("end_dim", -1)
            if shp == ish:
                self.value[node] = x
                return None
            return self.emit(node, "flatten", {"start": start, "end": end}, ins)
        if op == "transpose":
            d0 = a[1] if len(a) > 1 else kw.get("dim0")
            d1 = a[2] if len(a) > 2 else kw.get("dim1")
            return self.emit(node, "transpose", {"dim0": d0, "dim1": d1}, ins)
        if op == "getitem":
            idx = a[1]
            if not isinstance(idx, tuple):
                idx = (idx,)
            ints = [(i, v) for i, v in enumerate(idx) if isinstance(v, int)]
            rest_ok = all(isinstance(v, slice) and v == slice(None) for v in idx if not isinstance(v, int))
            if len(ints) != 1 or not rest_ok or Ellipsis in idx:
                return self.reject(node, "indexing with %r: memplan has select (one integer index, full slices "
                                   "elsewhere)" % (a[1],))
            return self.emit(node, "select", {"axis": ints[0][0], "index": ints[0][1]}, ins)
        if op == "adaptive":
            return self.adaptive(node, a[1] if len(a) > 1 else kw.get("output_size"), ins)
        if op == "mean":  # over the planes of [N, C, H, W] (MNASNet's x.mean([2, 3])): global_avgpool
            dims = a[1] if len(a) > 1 else kw.get("dim")
            keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
            dims = sorted(d % len(ish) for d in (dims if isinstance(dims, (tuple, list)) else [dims])) \
                if dims is not None and len(ish) else None
            if len(ish) != 4 or dims != [2, 3] or kw.get("dtype") is not None:
                return self.reject(node, "mean over dims %s of a %d-d tensor: memplan averages the planes of "
                                   "[N, C, H, W] (dims 2 and 3: global_avgpool)" % (dims, len(ish)))
            if not keep:
                return self.emit(node, "global_avgpool", {}, ins)
            g = self.emit(node, "global_avgpool", {}, ins, name=self.layer_name(node.name + "_gap"))
            return self.emit(node, "reshape", {"shape": self.dim_expr(shp)}, [g])
        if op in ("maxpool2d", "avgpool2d"):
            names = ["kernel_size", "stride", "padding"] + (["dilation", "ceil_mode"] if op == "maxpool2d" else
                                                            ["ceil_mode", "count_include_pad", "divisor_override"])
            v = dict(zip(names, a[1:]))
            v.update(kw)
            if v.get("return_indices"):
                return self.reject(node, "max pooling that returns indices")
            return self.pool(node, op, v.get("kernel_size"), v.get("stride") or None, v.get("padding", 0),
                             v.get("dilation", 1), v.get("ceil_mode", False), v.get("count_include_pad", True),
                             v.get("divisor_override"), ins)
        keys = {}
        if op == "gelu":
            keys["approximate"] = kw.get("approximate", "none")
        if op == "softmax":
            keys["dim"] = a[1] if len(a) > 1 else kw.get("dim")
        if op == "dropout":
            train = a[2] if len(a) > 2 else kw.get("training", True)
            keys["p"] = (a[1] if len(a) > 1 else kw.get("p", 0.5)) if train else 0
        return self.simple(node, op, None, ins, keys)


def trace(module, examples):
    """torch.fx.symbolic_trace with the user's stack trace on every node, the
    module path it was created in (node.meta["memplan_path"]), and the real
    value of every node computed alongside from `examples` ({input name:
    tensor}), so that sizes are numbers: `b, t = idx.size()` and `x.shape`
    trace (the YAML gets the traced shapes, the batch dim by its symbol).
    Control flow on tensor values still cannot trace."""
    import torch
    import torch.fx
    from torch.fx.node import map_aggregate

    class Real(torch.fx.Proxy):
        def __getattr__(self, k):
            if k in ("shape", "device", "dtype", "ndim") and self.node in self.tracer.real:
                return getattr(self.tracer.real[self.node], k)
            return super().__getattr__(k)

        def __iter__(self):  # a tuple (split, chunk): its items, as many as the real value has
            r = self.tracer.real.get(self.node)
            if isinstance(r, (tuple, list)):
                return iter([self[i] for i in range(len(r))])
            return super().__iter__()

    class Tracer(torch.fx.Tracer):
        def __init__(self):
            super().__init__()
            self.record_stack_traces = True
            self.path, self.real = [""], {}

        def proxy(self, node):
            return Real(node, self)

        def call_module(self, m, forward, args, kwargs):
            self.path.append(self.path_of_module(m))
            try:
                return super().call_module(m, forward, args, kwargs)
            finally:
                self.path.pop()

        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            node.meta["memplan_path"] = self.path[-1]
            return node

        def create_proxy(self, kind, target, args, kwargs, *rest, **kw):
            p = super().create_proxy(kind, target, args, kwargs, *rest, **kw)
            if kind == "output":
                return p

            def real(a):
                if isinstance(a, torch.fx.Proxy):
                    a = a.node
                if isinstance(a, torch.fx.Node):
                    if a not in self.real:
                        raise KeyError(a.name)
                    return self.real[a]
                return a
            try:
                ra, rk = map_aggregate(args, real), map_aggregate(kwargs, real)
            except KeyError:
                return p
            if kind == "placeholder":
                if target not in examples:
                    fail("forward takes '%s': give it with --input %s=[dims]:dtype" % (target, target))
                v = examples[target]
            else:
                # the real value with nn.Module's own __getattr__ and __call__ (tracing patches them)
                patched = torch.nn.Module.__getattr__, torch.nn.Module.__call__
                torch.nn.Module.__getattr__, torch.nn.Module.__call__ = plain
                try:
                    with torch.no_grad():
                        if kind == "get_attr":
                            v = self.root
                            for part in target.split("."):
                                v = getattr(v, part)
                        else:
                            v = (target(*ra, **rk) if kind == "call_function" else
                                 getattr(ra[0], target)(*ra[1:], **rk) if kind == "call_method" else
                                 self.root.get_submodule(target)(*ra, **rk))
                except Exception as e:
                    fail("forward fails on inputs of shapes %s at %s: %s: %s (do the --input dims match the "
                         "module?)\n    %s" % (", ".join("%s %s" % (n, list(x.shape)) for n, x in examples.items()),
                                                p.node.name, type(e).__name__, str(e).splitlines()[0] if str(e) else "",
                                                user_line(p.node.stack_trace)))
                finally:
                    torch.nn.Module.__getattr__, torch.nn.Module.__call__ = patched
            if kind == "call_method" and target in ("size", "dim"):
                self.graph.erase_node(p.node)  # a number, known
                return v
            self.real[p.node] = v
            return p

    plain = torch.nn.Module.__getattr__, torch.nn.Module.__call__
    t = Tracer()
    was = module.training
    module.eval()  # the real values: eval leaves BatchNorm's running statistics alone
    try:
        graph = t.trace(module)
    finally:
        module.train(was)
    return torch.fx.GraphModule(t.root, graph, type(module).__name__)


def match_attention(imp, sm):
    """softmax(q kᵀ · scale [masked causal]) v with q, k, v the heads of one packed [B, T, 3C] tensor split
    in three, back to [B, T, C]: nanoGPT's attention, memplan's `attention` op on the packed tensor. The
    matched nodes are absorbed (imp.absorbed), the last one becomes the op. Anything else is left alone and
    its nodes are refused one by one."""
    import math
    import operator as op
    import torch
    import torch.nn.functional as F
    is_fn, is_meth, only_user = _is_fn, _is_meth, _only_user
    inner = set()
    # after: dropout (p = 0 or eval-only), then @ v
    a = only_user(sm)
    while a is not None and a.op == "call_module" and isinstance(imp.modules[a.target], torch.nn.Dropout) and \
            imp.modules[a.target].p == 0:
        inner.add(a)
        a = only_user(a)
    if a is None or not (is_fn(a, op.matmul, torch.matmul) and a.args[0] in inner | {sm}):
        return
    av, v = a, a.args[1]
    # before: masked_fill with a lower-triangular buffer, a scale, q @ kᵀ
    x, causal = sm.args[0], False
    if is_meth(x, "masked_fill"):
        # the mask: a constant (buffers are read while tracing) or buffer == 0; it must fill the upper triangle
        mask, fill = x.args[1], None
        if imp.const(mask) is not None:
            fill, parts = imp.const(mask).bool(), {mask}
        elif is_fn(mask, op.eq) and mask.args[1] == 0 and imp.const(mask.args[0]) is not None:
            fill, parts = imp.const(mask.args[0]) == 0, {mask, mask.args[0]}
        if fill is None or x.args[2] != float("-inf"):
            return
        n = fill.shape[-1]
        if fill.shape[-2] != n or not torch.equal(fill.reshape(n, n), torch.ones(n, n).triu(1).bool()):
            return
        inner |= {x} | parts
        causal, x = True, x.args[0]
    scale = None
    if is_fn(x, op.mul, op.truediv) and isinstance(x.args[1], (int, float)):
        scale = x.args[1] if x.target is op.mul else 1.0 / x.args[1]
        inner.add(x)
        x = x.args[0]
    qk = _scores(x, inner)
    if qk is None:
        return
    q, k = qk

    def head(n):
        """(split node, index, heads) of transpose(view(getitem(split(qkv), i), [B, T, H, hd]), 1, 2)."""
        if not (is_meth(n, "transpose") and tuple(sorted(n.args[1:])) == (1, 2)):
            return None
        w = n.args[0]
        if not (is_meth(w, "view", "reshape") and len(imp.shape(w)) == 4):
            return None
        g = w.args[0]
        if not (is_fn(g, op.getitem) and is_meth(g.args[0], "split") or is_fn(g, op.getitem) and
                is_fn(g.args[0], torch.split)):
            return None
        inner.update((n, w, g))
        return g.args[0], g.args[1], imp.shape(w)[2]
    hq, hk, hv = head(q), head(k), head(v)
    if None in (hq, hk, hv) or not (hq[0] is hk[0] is hv[0]) or (hq[1], hk[1], hv[1]) != (0, 1, 2):
        return
    split, heads = hq[0], hq[2]
    qkv = split.args[0]
    B, T, C3 = imp.shape(qkv)
    if len(imp.shape(qkv)) != 3 or C3 % 3 or hq[2] != hk[2] or hk[2] != hv[2]:
        return
    hd = C3 // 3 // heads
    if scale is None or abs(scale - 1.0 / math.sqrt(hd)) > 1e-6 / math.sqrt(hd):
        return
    inner.add(split)
    y = _heads_back(imp, av, inner, (B, T, C3 // 3))
    if y is None:
        return
    inner.add(sm)
    for n in inner:  # nothing inside may be read from outside
        if any(u not in inner and u is not y for u in n.users):
            return
    for n in inner:
        imp.absorbed[n] = None
    imp.absorbed[y] = (qkv, heads, causal)
    del F


# ---------------------------------------------------------------------------
# Llama written in torch ops (Hugging Face's modeling_llama eager path): RMSNorm, RoPE, grouped-query attention
# (_is_fn, _is_meth and _only_user: match_attention's too)

def _is_fn(n, *fns):
    return n.op == "call_function" and n.target in fns


def _is_meth(n, *names):
    return n.op == "call_method" and n.target in names


def _only_user(n):
    return next(iter(n.users)) if len(n.users) == 1 else None


def _number_operand(n):
    """(the tensor operand, the number) of a binary call with one Python number, else (None, None)."""
    import torch.fx
    a = n.args
    if len(a) != 2 or n.kwargs:
        return None, None
    if isinstance(a[0], torch.fx.Node) and isinstance(a[1], (int, float)) and not isinstance(a[1], bool):
        return a[0], a[1]
    if isinstance(a[1], torch.fx.Node) and isinstance(a[0], (int, float)) and not isinstance(a[0], bool):
        return a[1], a[0]
    return None, None


def _skip_cast(n):
    """x of x.float(), x.to(torch.float32), x.type_as(y) (identities for a float32 module), else n."""
    import torch
    if _is_meth(n, "float") and len(n.args) == 1 or _is_meth(n, "type_as") or \
            _is_meth(n, "to") and len(n.args) == 2 and n.args[1] == torch.float32 and not n.kwargs:
        return n.args[0]
    return n


def _scores(x, inner):
    """(q, k) of x = q @ k.transpose(-2, -1) (or (2, 3)), its nodes added to inner; else None."""
    import operator as op
    import torch
    if not _is_fn(x, op.matmul, torch.matmul):
        return None
    q, kt = x.args
    if not (_is_meth(kt, "transpose") and tuple(sorted(kt.args[1:])) in ((-2, -1), (2, 3))):
        return None
    inner |= {x, kt}
    return q, kt.args[0]


def _heads_back(imp, av, inner, shape):
    """The node of attention's heads [B, H, T, hd] (av) back to [B, T, H hd] = shape: transpose(1, 2),
    contiguous(), view or reshape (match_attention's and match_gqa's end), its nodes but the last added to
    inner; else None."""
    y = _only_user(av)
    if y is None or not (_is_meth(y, "transpose") and tuple(sorted(y.args[1:])) == (1, 2)):
        return None
    inner |= {av, y}
    y = _only_user(y)
    if y is not None and _is_meth(y, "contiguous"):
        inner.add(y)
        y = _only_user(y)
    if y is None or not _is_meth(y, "view", "reshape") or tuple(imp.shape(y)) != tuple(shape):
        return None
    return y


def match_llama(imp):
    """The Llama patterns, absorbed (imp.absorbed) as match_attention's are, their last node made the op:
    RMSNorm (match_rmsnorm) and attention with RoPE and grouped-query heads (match_gqa); then the constants
    (RoPE's cos and sin tables, the causal mask) only matched nodes read."""
    import torch
    for node in list(imp.gm.graph.nodes):
        if node in imp.absorbed:
            continue
        if _is_fn(node, torch.rsqrt) or _is_meth(node, "rsqrt"):
            match_rmsnorm(imp, node)
        elif _is_fn(node, torch.nn.functional.softmax, torch.softmax) or _is_meth(node, "softmax"):
            match_gqa(imp, node)
    for node in imp.gm.graph.nodes:
        if node.op == "get_attr" and node not in imp.absorbed and imp.param_of(node) is None and node.users and \
                all(imp.absorbed.get(u, 0) is None for u in node.users):
            imp.absorbed[node] = None


def match_rmsnorm(imp, rs):
    """Hugging Face's LlamaRMSNorm and Meta's RMSNorm: w * (x * rsqrt(mean(x^2, -1, keepdim) + eps)), either
    order of each product, x.pow(2) or x * x, casts to float32 and back (identities here) around it; w an
    nn.Parameter [C] of the module: memplan's rmsnorm (eps, the weight)."""
    import operator as op
    import torch
    inner = {rs}
    s, eps = _number_operand(rs.args[0]) if _is_fn(rs.args[0], op.add, torch.add) else (None, None)
    if s is None or not (_is_meth(s, "mean") or _is_fn(s, torch.mean)):
        return
    inner |= {rs.args[0], s}
    dim = s.args[1] if len(s.args) > 1 else s.kwargs.get("dim")
    dim = dim[0] if isinstance(dim, (tuple, list)) and len(dim) == 1 else dim
    sq = s.args[0]
    shape = imp.shape(sq)
    if shape is None or dim not in (-1, len(shape) - 1) or not (s.args[2:3] == (True,) or s.kwargs.get("keepdim")):
        return
    if (_is_meth(sq, "pow") or _is_fn(sq, torch.pow, op.pow)) and sq.args[1:] == (2,):
        x = sq.args[0]
    elif _is_fn(sq, op.mul, torch.mul) and len(sq.args) == 2 and sq.args[0] is sq.args[1]:
        x = sq.args[0]
    else:
        return
    inner.add(sq)
    n = _only_user(rs)
    if n is None or not _is_fn(n, op.mul, torch.mul) or set(n.args) != {x, rs}:
        return
    inner.add(n)
    while _only_user(n) is not None and _skip_cast(_only_user(n)) is n:
        n = _only_user(n)
        inner.add(n)
    out = _only_user(n)
    if out is None or not _is_fn(out, op.mul, torch.mul) or len(out.args) != 2 or n not in out.args:
        return
    w = out.args[1] if out.args[0] is n else out.args[0]
    p = imp.param_of(w) if isinstance(w, torch.fx.Node) else None
    if p is None or p[2].dim() != 1 or p[2].shape[0] != shape[-1] or len(w.users) != 1:
        return
    base = _skip_cast(x)
    if base is not x and all(u in inner for u in x.users):
        inner.add(x)
        x = base
    for m in inner:  # nothing inside may be read from outside
        if any(u not in inner and u is not out for u in m.users):
            return
    for m in inner | {w}:
        imp.absorbed[m] = None
    mod, attr, _ = p

    def make(node):
        xin = imp.arg(node, x)
        if xin is None:
            return
        name = imp.emit(node, "rmsnorm", {"eps": float(eps)}, [xin],
                        imp.layer_name(imp.sd_name(mod, "")[:-1] or node.name))
        imp.own(name, mod, (("weight", attr),))
    imp.absorbed[out] = make


def _heads(imp, n, inner):
    """(source [B, T, H hd], H, hd) of transpose(view(source, B, T, H, hd), 1, 2), else None."""
    if not (_is_meth(n, "transpose") and tuple(sorted(n.args[1:])) == (1, 2)):
        return None
    w = n.args[0]
    ws = imp.shape(w)
    if not (_is_meth(w, "view", "reshape") and ws is not None and len(ws) == 4):
        return None
    src = w.args[0]
    ss = imp.shape(src)
    if ss is None or tuple(ss) != (ws[0], ws[1], ws[2] * ws[3]):
        return None
    inner |= {n, w}
    return src, ws[2], ws[3]


def _repeat(imp, n, inner):
    """(x, n_rep) of Hugging Face's repeat_kv (x[:, :, None].expand(B, KVH, n_rep, T, hd).reshape(B, KVH n_rep,
    T, hd)) or of torch.repeat_interleave(x, n_rep, dim=1); (n, 1) otherwise."""
    import operator as op
    import torch
    if _is_meth(n, "reshape", "view") and _is_meth(n.args[0], "expand") and _is_fn(n.args[0].args[0], op.getitem):
        e, g = n.args[0], n.args[0].args[0]
        x, idx = g.args
        sx, se, sn = imp.shape(x), imp.shape(e), imp.shape(n)
        full = slice(None)
        if idx == (full, full, None, full, full) and sx is not None and len(sx) == 4 and \
                tuple(se) == (sx[0], sx[1], se[2], sx[2], sx[3]) and tuple(sn) == (sx[0], sx[1] * se[2], sx[2], sx[3]):
            inner |= {n, e, g}
            return x, se[2]
    if _is_fn(n, torch.repeat_interleave) or _is_meth(n, "repeat_interleave"):
        v = dict(zip(("input", "repeats", "dim"), n.args))
        v.update(n.kwargs)
        if isinstance(v.get("repeats"), int) and v.get("dim") == 1 and len(imp.shape(n)) == 4:
            inner.add(n)
            return v["input"], v["repeats"]
    return n, 1


def _rope(imp, n, inner):
    """(x, cos table, sin table, nodes) of Hugging Face's apply_rotary_pos_emb for one of q, k: (x * cos) +
    (rotate_half(x) * sin), rotate_half(x) = cat((-x[..., h:], x[..., :h]), dim=-1), h = hd / 2, with cos and
    sin constants (buffers sliced to T while tracing); else None."""
    import operator as op
    import torch
    if not (_is_fn(n, op.add, torch.add) and len(n.args) == 2 and not n.kwargs):
        return None
    for m1, m2 in (n.args, n.args[::-1]):
        if not all(isinstance(m, torch.fx.Node) and _is_fn(m, op.mul, torch.mul) and len(m.args) == 2
                   for m in (m1, m2)):
            continue
        for x, c in (m1.args, m1.args[::-1]):
            for r, s in (m2.args, m2.args[::-1]):
                C, S = imp.const(c), imp.const(s)
                if C is None or S is None or not _is_fn(r, torch.cat):
                    continue
                parts = r.args[0] if r.args else r.kwargs.get("tensors")
                dim = r.args[1] if len(r.args) > 1 else r.kwargs.get("dim", 0)
                xs = imp.shape(x)
                if xs is None or len(parts) != 2 or dim not in (-1, len(xs) - 1) or not _is_fn(parts[0], op.neg):
                    continue
                hi, lo, h = parts[0].args[0], parts[1], xs[-1] // 2
                ok = all(_is_fn(g, op.getitem) and g.args[0] is x and isinstance(g.args[1], tuple) and
                         all(i is Ellipsis or i == slice(None) for i in g.args[1][:-1]) and
                         (g.args[1][0] is Ellipsis or len(g.args[1]) == len(xs)) for g in (hi, lo))
                if ok and hi.args[1][-1] in (slice(h, None), slice(h, xs[-1])) and \
                        lo.args[1][-1] in (slice(None, h), slice(0, h)):
                    inner |= {n, m1, m2, r, parts[0], hi, lo}
                    return x, C, S
    return None


def rope_theta(C, S, T, hd):
    """theta of RoPE tables cos, sin [..., T, hd] (leading dims 1) as Hugging Face's: at position t the pair
    (i, i + hd/2) turned by t theta^(-2i/hd); (theta, None), or (None, why) when the tables are not such."""
    import math
    import torch
    if C.shape != S.shape or C.dim() < 2 or any(d != 1 for d in C.shape[:-2]) or tuple(C.shape[-2:]) != (T, hd):
        return None, "cos and sin tables of shape %s and %s, not [..., T, hd] = [..., %d, %d] broadcast over the " \
            "batch and heads" % (list(C.shape), list(S.shape), T, hd)
    if T < 2 or hd < 4:
        return None, "RoPE's theta is read from position 1 of the tables: give T >= 2 (and heads of 4 or more dims)"
    C, S = C.reshape(T, hd).double(), S.reshape(T, hd).double()
    ang = torch.atan2(S[1, :hd // 2], C[1, :hd // 2])  # theta^(-2i/hd), i = 0 .. hd/2 - 1
    if not bool((ang[1:] > 0).all()) or abs(float(ang[0]) - 1) > 1e-5:
        return None, "the tables at position 1 are not cos and sin of theta^(-2i/hd) (a first frequency of 1)"
    i = torch.arange(1, hd // 2, dtype=torch.float64)
    theta = float(torch.exp(-torch.log(ang[1:]) * hd / (2 * i)).mean())
    if abs(theta - round(theta)) <= 1e-4 * theta:
        theta = float(round(theta))
    f = theta ** (-2 * torch.arange(hd // 2, dtype=torch.float64) / hd)
    a = torch.arange(T, dtype=torch.float64)[:, None] * torch.cat([f, f])[None, :]
    err = max(float((C - a.cos()).abs().max()), float((S - a.sin()).abs().max()))
    tol = 1e-6 + 2e-7 * T  # float32 tables: their angles t f rounded (6e-8 relative), then cos and sin
    if not err <= tol:
        return None, "cos and sin tables %.2e off Llama's RoPE of the nearest theta %g at positions 0..%d (tolerance " \
            "%.1e): memplan's rope turns position t by t theta^(-2i/hd), pairs (i, i + hd/2), no scaling read " \
            "from tables" % (err, theta, T - 1, tol)
    del math
    return theta, None


def match_gqa(imp, sm):
    """Hugging Face's LlamaAttention (eager): q, k, v from separate projections, each viewed to heads and
    transposed, RoPE on q and k (_rope), k and v repeated to the query heads (_repeat), q @ kᵀ / sqrt(hd)
    plus the causal mask (a constant: 0 on and below the diagonal, -inf or less than -1e9 above, the same for
    every batch row and head), softmax over the last dim (dtype float32, .to(q.dtype) after it: identities), @ v, transpose(1, 2), contiguous, view/reshape to [B, T, H hd]: memplan's concat of q, k, v
    (its attention's packed input), rope (theta read from the tables, rope_theta) and attention with
    kv_heads. Anything else is left alone and its nodes refused one by one."""
    import math
    import operator as op
    import torch
    inner = {sm}
    if sm.args[1:] not in ((-1,), ()) or sm.kwargs.get("dim", -1) not in (-1, 3) or \
            sm.kwargs.get("dtype") not in (None, torch.float32):
        return
    a, prev = _only_user(sm), sm
    while a is not None and (a.op == "call_module" and isinstance(imp.modules[a.target], torch.nn.Dropout) and
                             imp.modules[a.target].p == 0 or _skip_cast(a) is prev):  # .to(q.dtype)
        inner.add(a)
        a, prev = _only_user(a), a
    if a is None or not (_is_fn(a, op.matmul, torch.matmul) and (a.args[0] in inner)):
        return
    av, vr = a, a.args[1]
    x, causal = sm.args[0], False
    if _is_fn(x, op.add, torch.add) and len(x.args) == 2:
        for s, m in (x.args, x.args[::-1]):
            M = imp.const(m)
            if M is not None and M.dim() >= 2 and M.shape[-1] == M.shape[-2]:
                t = M.shape[-1]
                M = M.reshape(-1, t, t).double()  # one mask for every batch row and head ([B, 1, T, T])
                if not bool((M == M[0]).all()):
                    continue
                M = M[0]
                up = torch.ones(t, t).triu(1).bool()
                if bool((M[~up] == 0).all()) and bool((M[up] <= -1e9).all()):
                    inner.add(x)
                    causal, x = True, s
                    break
    xx, scale = _number_operand(x) if _is_fn(x, op.mul, op.truediv) else (None, None)
    if xx is None or x.target is op.truediv and x.args[0] is not xx:
        return
    scale = scale if x.target is op.mul else 1.0 / scale
    inner.add(x)
    x = xx
    qk = _scores(x, inner)
    if qk is None:
        return
    qr, kr0 = qk
    kr, nk = _repeat(imp, kr0, inner)
    vv, nv = _repeat(imp, vr, inner)
    rq, rk = _rope(imp, qr, inner), _rope(imp, kr, inner)
    hq = _heads(imp, rq[0] if rq else qr, inner)
    hk = _heads(imp, rk[0] if rk else kr, inner)
    hv = _heads(imp, vv, inner)
    if None in (hq, hk, hv) or (rq is None) != (rk is None) or nk != nv or hq[2] != hk[2] or hk[2] != hv[2] or \
            hk[1] != hv[1] or hk[1] * nk != hq[1]:
        return
    heads, kvh, hd = hq[1], hk[1], hq[2]
    if abs(scale - 1.0 / math.sqrt(hd)) > 1e-6 / math.sqrt(hd):
        return
    B, T = imp.shape(hq[0])[:2]
    y = _heads_back(imp, av, inner, (B, T, heads * hd))
    if y is None:
        return
    inner.add(sm)
    for n in inner:  # nothing inside may be read from outside
        if any(u not in inner and u is not y for u in n.users):
            return
    theta, why = None, None
    if rq is not None:
        tq, wq = rope_theta(rq[1], rq[2], T, hd)
        tk, wk = rope_theta(rk[1], rk[2], T, hd)
        theta, why = tq, wq or wk or (None if tq == tk else "q's RoPE tables (theta %g) are not k's (%g)" % (tq, tk))
    for n in inner:
        imp.absorbed[n] = None
    path = y.meta.get("memplan_path", "") or y.name

    def make(node):
        if why:
            return imp.reject(node, "RoPE not matched: " + why)
        ins = [imp.arg(node, h[0]) for h in (hq, hk, hv)]
        if None in ins:
            return
        qkv = imp.emit(node, "concat", {"axis": 2}, ins, imp.layer_name(path + "_qkv"))
        if theta is not None:
            qkv = imp.emit(node, "rope", {"heads": heads, "kv_heads": kvh, "theta": theta}, [qkv],
                           imp.layer_name(path + "_rope"))
        imp.emit(node, "attention", {"heads": heads, "kv_heads": kvh, "causal": causal}, [qkv],
                 imp.layer_name(path + "_attention"))
    imp.absorbed[y] = make
    del math


# Swin (torchvision.models.swin_transformer): fx keeps its three helpers whole (torch.fx.wrap), one node each

def swin_fn(node):
    """'attention', 'bias' or 'merge' for a call of torchvision's shifted_window_attention,
    _get_relative_position_bias or _patch_merging_pad, else None."""
    if node.op != "call_function":
        return None
    mod, name = getattr(node.target, "__module__", ""), getattr(node.target, "__name__", "")
    if mod != "torchvision.models.swin_transformer":
        return None
    return {"shifted_window_attention": "attention", "_get_relative_position_bias": "bias",
            "_patch_merging_pad": "merge"}.get(name)


def swin_absorb(imp, node):
    """The parameters and buffers the attention's node reads (qkv and proj weights and biases, the bias table
    and its index) and the bias node itself are read by the ops swin_call makes, not tensors of their own."""
    import torch.fx
    if swin_fn(node) not in ("attention", "bias"):
        return
    for x in list(node.args) + list(node.kwargs.values()):
        if isinstance(x, torch.fx.Node) and (x.op == "get_attr" or swin_fn(x) == "bias"):
            imp.absorbed[x] = None


def swin_call(imp, node):
    """torchvision's Swin helpers as memplan ops:
    - shifted_window_attention: pads to whole windows (pad, where the map is not), linear (qkv) + window_attention
      (the roll, the windows, the relative position bias and the shift mask inside it; its table the module's
      relative_position_bias_table) + linear (proj), the padding cut off (pad with a negative `after`);
    - _patch_merging_pad of [B, H, W, C] (odd H or W padded by one): reshape [B, H/2, 2, W/2, 2, C], transposes
      to [B, H/2, W/2, 2 (w), 2 (h), C] and a reshape to [B, H/2, W/2, 4C] (x0 x1 x2 x3 of its torch.cat)."""
    import torch
    kind = swin_fn(node)
    ish = imp.shape(node.args[0])
    if kind == "merge":
        x = imp.arg(node, node.args[0])
        if x is None:
            return None
        if len(ish) != 4:
            return imp.reject(node, "patch merging of %s: memplan merges [B, H, W, C]" % (list(ish),))
        x = swin_pad(imp, node, x, ish[1] % 2, ish[2] % 2, node.name + "_pad")  # torchvision pads odd H, W by one
        B, H, W, C = ish[0], ish[1] + ish[1] % 2, ish[2] + ish[2] % 2, ish[3]
        y = imp.emit(node, "reshape", {"shape": imp.dim_expr([B, H // 2, 2, W // 2, 2, C])}, [x],
                     imp.layer_name(node.name + "_split"))
        y = imp.emit(node, "transpose", {"dim0": 2, "dim1": 3}, [y], imp.layer_name(node.name + "_t0"))
        y = imp.emit(node, "transpose", {"dim0": 3, "dim1": 4}, [y], imp.layer_name(node.name + "_t1"))
        return imp.emit(node, "reshape", {"shape": imp.dim_expr([B, H // 2, W // 2, 4 * C])}, [y])
    if kind == "bias":
        return imp.arg(node, node.args[0]) and imp.reject(node, "a relative position bias read other than by "
                                                          "shifted_window_attention")
    names = ("input", "qkv_weight", "proj_weight", "relative_position_bias", "window_size", "num_heads", "shift_size",
             "attention_dropout", "dropout", "qkv_bias", "proj_bias", "logit_scale")
    v = dict(zip(names, node.args))
    v.update(node.kwargs)
    ws, heads, shift = list(v["window_size"]), v["num_heads"], list(v.get("shift_size") or [0, 0])
    rb = v["relative_position_bias"]
    if ish is None or len(ish) != 4 or not isinstance(rb, torch.fx.Node):
        return imp.reject(node, "shifted_window_attention of %s: memplan maps it on [B, H, W, C] with a relative "
                          "position bias it computes" % (list(ish) if ish else "a value it does not compute"))
    B, H, W, C = ish
    pad_b, pad_r = -H % ws[0], -W % ws[1]  # torchvision pads the map to whole windows, and cuts them off after
    shift = [0 if w >= n else s for w, n, s in zip(ws, (H + pad_b, W + pad_r), shift)]  # one window: no shift
    table = imp.param_of(rb.args[0]) if swin_fn(rb) == "bias" else None
    qkv, proj = imp.param_of(v["qkv_weight"]), imp.param_of(v["proj_weight"])
    why = [w for w, bad in (
        ("Swin V2's cosine attention (logit_scale) and its continuous position bias", v.get("logit_scale") is not None),
        ("a relative position bias other than a parameter table read by _get_relative_position_bias",
         table is None and v.get("logit_scale") is None),
        ("a non-square window %s" % ws, ws[0] != ws[1]),
        ("unequal shifts %s" % shift, shift[0] != shift[1]),
        ("attention dropout %g" % v.get("attention_dropout", 0.0), v.get("attention_dropout", 0.0)),
        ("qkv and proj weights not nn.Linear's", qkv is None or proj is None or
         not isinstance(qkv[0], torch.nn.Linear) or not isinstance(proj[0], torch.nn.Linear)),
    ) if bad]
    if not why:
        idx = imp.const(rb.args[1])
        n = ws[0] * ws[0]
        j, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
        want = ((j // ws[0] - k // ws[0] + ws[0] - 1) * (2 * ws[0] - 1) + j % ws[0] - k % ws[0] + ws[0] - 1)
        if idx is None or not torch.equal(idx.reshape(-1).long(), want.reshape(-1)):
            why.append("a relative_position_index other than torchvision's")
    if why:  # listed even when its input was refused too
        return imp.reject(node, "memplan's window_attention maps torchvision's Swin V1 attention: not " +
                          "; ".join(why))
    x = imp.arg(node, node.args[0])
    if x is None:
        return None
    path = node.meta.get("memplan_path", "") or node.name
    x = swin_pad(imp, node, x, pad_b, pad_r, path + ".pad")
    q = imp.emit(node, "linear", {"out": 3 * C, "bias": qkv[0].bias is not None}, [x], imp.layer_name(path + ".qkv"))
    imp.own(q, qkv[0], ("weight", "bias"))
    att = imp.emit(node, "window_attention", {"heads": heads, "window": ws[0], "shift": shift[0]}, [q],
                   imp.layer_name(path + ".window_attention"))
    imp.own(att, table[0], (("table", "relative_position_bias_table"),))
    y = imp.emit(node, "linear", {"out": C, "bias": proj[0].bias is not None}, [att], imp.layer_name(path + ".proj"))
    imp.own(y, proj[0], ("weight", "bias"))
    p = v.get("dropout", 0.0)
    if p:
        y = imp.emit(node, "dropout", {"p": float(p)}, [y], imp.layer_name(path + ".dropout"))
    y = swin_pad(imp, node, y, -pad_b, -pad_r, path + ".crop")
    imp.value[node] = y
    return y


def swin_pad(imp, node, x, h, w, name):
    """x [B, H, W, C] with h rows and w columns of zeros after (F.pad's), or cut off when negative: a pad op per
    axis that changes."""
    for axis, n in ((1, h), (2, w)):
        if n:
            x = imp.emit(node, "pad", {"axis": axis, "after": n}, [x],
                         imp.layer_name("%s_%s" % (name, "hw"[axis - 1])))
    return x


def user_line(stack):
    """The user's innermost source line in fx's stack trace of a node: 'file:line: code'. Torch versions
    record the frames in either order; the tracer's own are inner to this tool's trace() call, so the user's
    innermost frame is the one farthest from it on the side where torch's frames are."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', stack or "")
    me = os.path.abspath(__file__)
    mine = [i for i, f in enumerate(frames) if os.path.abspath(f[0]) == me and f[2] == "trace"]
    if frames and mine:
        i = mine[0]
        left, right = frames[:i], frames[i + 1:]
        inner = right if any("/torch/" in f[0] for f in right) else left[::-1]
        user = [f for f in inner if "/torch/" not in f[0] and os.path.abspath(f[0]) != me]
        if user:
            f = user[-1]
            return "%s:%s: %s" % (f[0], f[1], f[3].strip())
    return "(no source line: fx recorded no stack trace)"


# ---------------------------------------------------------------------------
# import

INPUT_RE = re.compile(r"^([A-Za-z_]\w*)=\[([^\]]*)\](?::(f32|i32))?$")


def parse_inputs(items, dims):
    out = []
    for it in items:
        m = INPUT_RE.match(it.replace(" ", ""))
        if not m:
            fail("--input '%s': expected NAME=[d0,d1,...]:f32|i32, dims numbers or --dims symbols" % it)
        shape = []
        for d in m.group(2).split(","):
            if re.fullmatch(r"\d+", d) and int(d) > 0:
                shape.append(int(d))
            elif d in dims:
                shape.append(d)
            else:
                fail("--input '%s': dim '%s' is neither a positive number nor a symbol given by --dims" % (it, d))
        out.append((m.group(1), shape, m.group(3) or "f32"))
    return out


def parse_optimizer(text):
    if not text:
        return {"type": "adamw", "lr": 1e-3}
    kind, _, rest = text.partition(":")
    if kind not in ("adamw", "sgd"):
        fail("--optimizer '%s': expected adamw:KEY=VALUE,... or sgd:KEY=VALUE,..." % text)
    allowed = {"adamw": ("lr", "betas", "eps", "weight_decay", "schedule", "warmup", "final_fraction"),
               "sgd": ("lr", "momentum", "weight_decay", "nesterov", "schedule", "warmup", "final_fraction")}[kind]
    o = {"type": kind}
    for k, v in parse_kwargs(rest).items():
        if k not in allowed:
            fail("--optimizer '%s': %s takes %s, not '%s'" % (text, kind, ", ".join(allowed), k))
        o[k] = list(v) if isinstance(v, tuple) else v
    return o


def do_import(a):
    need_torch()
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp
    dims = {}
    for item in split_top(a.dims or ""):
        k, _, v = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", k) or not re.fullmatch(r"\d+", v) or int(v) <= 0:
            fail("--dims '%s': expected NAME=POSITIVE_INTEGER items separated by commas" % item)
        dims[k] = int(v)
    inputs = parse_inputs(a.input or [], dims)
    if not inputs:
        fail("give the module's inputs: --input NAME=[dims]:dtype for each argument of forward")
    loss, targets = None, None
    if a.loss:
        loss, _, targets = a.loss.partition(":")
        if loss not in ("cross_entropy", "mse") or not targets:
            fail("--loss '%s': expected cross_entropy:TARGETS or mse:TARGETS (TARGETS: an --input)" % a.loss)
    else:
        fail("--loss cross_entropy:TARGETS or mse:TARGETS: memplan trains a module that returns logits or values")
    by_name = {n: (s, d) for n, s, d in inputs}
    if targets not in by_name:
        fail("--loss %s: '%s' is not an --input" % (a.loss, targets))
    opt = parse_optimizer(a.optimizer)
    module = build_module(a.spec, parse_kwargs(a.kwargs))

    def concrete(shape):
        return [dims[d] if isinstance(d, str) else d for d in shape]
    batch_sym = inputs[0][1][0] if isinstance(inputs[0][1][0], str) else None
    examples = {}
    gen = torch.Generator().manual_seed(0)
    for n, s, d in inputs:
        examples[n] = (torch.zeros(concrete(s), dtype=torch.long) if d == "i32" else
                       torch.randn(concrete(s), generator=gen))
    # forward's arguments: the --inputs of their names, else the --inputs other than the targets in order
    # (nn.Sequential's forward calls its argument `input`)
    given = [n for n, _, _ in inputs if n != targets]
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = given
    bind = {p: p for p in params} if all(p in by_name for p in params) else dict(zip(params, given))
    if len(params) != len(given) and not all(p in by_name for p in params):
        fail("%s: forward takes %s (%d argument(s)); the --inputs other than the targets are %s"
             % (a.spec, ", ".join(params) or "nothing", len(params), ", ".join(given) or "none"))
    try:
        gm = trace(module, {p: examples[n] for p, n in bind.items()})
    except UserError as e:
        fail("%s: %s" % (a.spec, e))
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f for f in tb if "/torch/" not in f.filename and os.path.abspath(f.filename) !=
                  os.path.abspath(__file__)]
        where = ("%s:%d: %s" % (frames[-1].filename, frames[-1].lineno, frames[-1].line)) if frames else "?"
        fail("%s: torch.fx cannot trace the module (data-dependent control flow or an untraceable call); "
             "memplan imports a graph whose ops do not depend on the input values:\n  %s: %s\n    at %s"
             % (a.spec, type(e).__name__, str(e).splitlines()[0] if str(e) else "", where))
    fwd_inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    was = module.training
    module.eval()  # ShapeProp runs forward: eval leaves BatchNorm's running statistics alone
    printed = io.StringIO()  # ShapeProp prints a failing node's traceback itself: its last line is the cause
    try:
        with torch.no_grad(), contextlib.redirect_stderr(printed):
            ShapeProp(gm).propagate(*[examples[bind.get(n.target, n.target)] for n in fwd_inputs])
    except Exception as e:
        cause = (printed.getvalue().strip().splitlines() or [""])[-1] or "%s: %s" % (type(e).__name__, e)
        fail("%s: the traced graph fails on inputs of shapes %s: %s (do the --input dims match the module?)"
             % (a.spec, ", ".join("%s %s" % (n, list(x.shape)) for n, x in examples.items()), cause))
    finally:
        module.train(was)
    imp = Importer(module, inputs, dims, batch_sym)
    imp.bind = bind
    imp.run(gm)
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    result = out_node.args[0]
    if isinstance(result, (tuple, list)):
        if a.output is None:
            fail("%s: forward returns a %s of %d values: say which one the loss reads with --output INDEX"
                 % (a.spec, type(result).__name__, len(result)))
        if not 0 <= a.output < len(result):
            fail("--output %d: forward returns %d values (0..%d)" % (a.output, len(result), len(result) - 1))
        result = result[a.output]
    if imp.unsupported:
        lines = ["  %s at %s: %s\n    %s" % (op, path or "(top level)", why, src) for op, path, why, src in
                 [(u[0], u[1], u[3], u[2]) for u in imp.unsupported]]
        fail("%s: %d node(s) have no memplan op; nothing written:\n%s" % (a.spec, len(lines), "\n".join(lines)))
    if result not in imp.value:
        fail("%s: forward's result is not a tensor memplan computes" % a.spec)
    pred = imp.value[result]
    pshape = imp.shape(result)
    tshape, tdt = concrete(by_name[targets][0]), by_name[targets][1]
    if loss == "cross_entropy":
        if tdt != "i32":
            fail("--input %s: cross_entropy's targets are class indices: give dtype i32, not %s" % (targets, tdt))
        if list(pshape[:-1]) != tshape:
            fail("--input %s=%s: cross_entropy's targets must have the logits' shape without the class dim, %s"
                 % (targets, tshape, list(pshape[:-1])))
    else:
        if tdt != "f32":
            fail("--input %s: mse's targets are values: give dtype f32, not %s" % (targets, tdt))
        if list(pshape) != tshape:
            fail("--input %s=%s: mse's targets must have the output's shape %s" % (targets, tshape, list(pshape)))
    lname = imp.layer_name("loss")
    imp.layers.append((lname, loss, {}, [pred, targets]))
    model = a.name or re.sub(r"[^A-Za-z0-9_-]", "-", a.spec.rsplit(":", 1)[1]).lower()
    write_outputs(a, module, imp, inputs, dims, opt, model)


def write_outputs(a, module, imp, inputs, dims, opt, model):
    lines = ["# imported by memplan import-torch from %s%s" % (a.spec, " --kwargs " + a.kwargs if a.kwargs else ""),
             "model: %s" % model]
    if dims:
        lines.append("dims: {%s}" % ", ".join("%s: %d" % kv for kv in dims.items()))
    lines.append("inputs:")
    for n, s, d in inputs:
        lines.append("  %s: {shape: %s, dtype: %s}" % (n, yaml_value(s), d))
    lines.append("optimizer: {%s}" % ", ".join("%s: %s" % (k, yaml_value(v)) for k, v in opt.items()))
    lines.append("layers:")
    prev = None
    for name, op, keys, ins in imp.layers:
        items = ["name: %s" % name, "op: %s" % op]
        if len(ins) == 1 and ins[0] != prev:
            items.append("input: %s" % ins[0])
        elif len(ins) > 1:
            items.append("inputs: %s" % yaml_value(ins))
        items += ["%s: %s" % (k, yaml_value(v)) for k, v in keys.items()]
        lines.append("  - {%s}" % ", ".join(items))
        prev = name
    tensors = {k: t for k, (_, t) in imp.params.items()}
    tensors.update({k: t for k, (_, t) in imp.state.items()})
    nmap = {"spec": a.spec, "kwargs": a.kwargs or "", "model": model,
            "names": {k: sd for k, (sd, _) in list(imp.params.items()) + list(imp.state.items())},
            "shapes": {k: list(t.shape) for k, t in tensors.items()}}
    os.makedirs(a.o, exist_ok=True)
    files = [("model.yaml", ("\n".join(lines) + "\n").encode()),
             ("weights.safetensors", safetensors_bytes(tensors, {"format": "pt", "model": model})),
             ("name_map.json", (json.dumps(nmap, indent=1) + "\n").encode())]
    tmps = []
    try:
        for fname, data in files:
            tmp = os.path.join(a.o, ".%s.tmp.%d" % (fname, os.getpid()))
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            tmps.append((tmp, os.path.join(a.o, fname)))
    except OSError as e:
        for tmp, _ in tmps:
            os.unlink(tmp)
        fail("%s: cannot write: %s" % (a.o, e))
    for tmp, path in tmps:
        os.replace(tmp, path)
    print("memplan import-torch: %s -> %s/model.yaml (%d layers), weights.safetensors (%d tensors), name_map.json"
          % (a.spec, a.o, len(imp.layers), len(tensors)))


# ---------------------------------------------------------------------------
# load back

def load_into(module, checkpoint, name_map):
    """Loads a trainer checkpoint (memplan names) into `module` by the name map
    (a dict or DIR/name_map.json), with load_state_dict(strict=True).
    BatchNorm's num_batches_tracked, which memplan does not keep, advances by
    the checkpoint's step count."""
    import torch
    if isinstance(name_map, str):
        with open(name_map) as f:
            name_map = json.load(f)
    got, meta = read_safetensors(checkpoint)
    if meta.get("model") not in (None, name_map["model"]):
        fail("%s: a checkpoint of model '%s', not of '%s' (the name map's): load the checkpoint of the plan "
             "imported from %s" % (checkpoint, meta.get("model"), name_map["model"], name_map["spec"]))
    names = name_map["names"]
    missing = sorted(set(names) - set(got))
    # the optimizer's state (fc.weight.adam_m, ...) rides along in a checkpoint: not the module's
    extra = sorted(n for n in set(got) - set(names) if n.rsplit(".", 1)[0] not in names)
    wrong = sorted(n for n in set(names) & set(got) if list(got[n].shape) != name_map["shapes"][n])
    if missing or extra or wrong:
        fail("%s: not a checkpoint of the plan imported from %s: %s" % (checkpoint, name_map["spec"], "; ".join(
            s for s in ("missing " + ", ".join(missing[:5]) if missing else "",
                        "not in the plan " + ", ".join(extra[:5]) if extra else "",
                        "other shapes " + ", ".join("%s %s (plan %s)" % (n, list(got[n].shape), name_map["shapes"][n])
                                                    for n in wrong[:5]) if wrong else "") if s)))
    sd = module.state_dict()
    new = dict(sd)
    alias = {}  # a tensor two modules share (a tied lm_head) is in the state_dict under each name
    for k, v in sd.items():
        alias.setdefault((v.data_ptr(), tuple(v.shape)), []).append(k)
    for n, torch_name in names.items():
        t = sd[torch_name]
        for k in alias[(t.data_ptr(), tuple(t.shape))]:
            new[k] = got[n].to(t.dtype).reshape(t.shape)  # class_token: memplan [C], torch [1, 1, C]
    steps = int(meta.get("step", "0") or 0)
    for k, v in sd.items():
        if k.endswith("num_batches_tracked"):
            new[k] = v + steps
    module.load_state_dict(new, strict=True)
    del torch
    return module


def do_load(a):
    need_torch()
    import torch
    try:
        with open(a.name_map) as f:
            nmap = json.load(f)
        nmap["names"], nmap["spec"], nmap["model"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail("%s: not a name map written by memplan import-torch: %s" % (a.name_map, e))
    module = build_module(nmap["spec"], parse_kwargs(nmap["kwargs"]))
    load_into(module, a.checkpoint, nmap)
    tmp = "%s.tmp.%d" % (a.o, os.getpid())
    torch.save(module.state_dict(), tmp)
    fsync_replace(tmp, a.o)
    print("memplan: %s loaded into %s (strict); state_dict saved to %s" % (a.checkpoint, nmap["spec"], a.o))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="memplan import-torch", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    im = sub.add_parser("import")
    im.add_argument("spec")
    im.add_argument("-o", required=True, metavar="DIR")
    im.add_argument("--kwargs")
    im.add_argument("--input", action="append")
    im.add_argument("--dims")
    im.add_argument("--loss")
    im.add_argument("--optimizer")
    im.add_argument("--output", type=int)
    im.add_argument("--name", help="the model's name (default: the factory's)")
    ld = sub.add_parser("load")
    ld.add_argument("checkpoint")
    ld.add_argument("name_map")
    ld.add_argument("-o", required=True, metavar="STATE_DICT.pt")
    a = ap.parse_args(argv)
    try:
        (do_import if a.cmd == "import" else do_load)(a)
    except UserError as e:
        print("memplan import-torch: error: %s" % e, file=sys.stderr)
        return EXIT_USER
    return 0


if __name__ == "__main__":
    sys.exit(main())
