#!/usr/bin/python3
"""Writes tests/models/nn/fixtures/nn_modules.json: PyTorch reference outputs and gradients of the
models/nn layers (Linear, LayerNorm, Embedding, attention, MLP, blocks, patch embedding, heads),
read by layers_reference_test.cc.

Run with Debian's Python (torch 1.13):  /usr/bin/python3 tests/models/nn/gen_nn_fixtures.py
Deterministic (fixed seed): rerunning leaves the committed file unchanged.

Each case builds a torch module whose parameter names equal Tessera's, sets every parameter to
seeded values rounded to float32, runs it in float64 on float32-exact inputs and backpropagates
sum(out * w) for a seeded float32-exact w. The file uses the case format of tests/testing/fixtures.h
(loaded with load_fixture_file):
  params: the layer's configuration plus "n_inputs" (how many leading inputs feed forward) and
          "param_names" (one per remaining input: the parameter's state_dict name)
  inputs: the forward inputs (f32 leaves requiring grad, i64 ids, bool masks), then the parameters
  grads:  one per input: d(sum(out * w)) / d(input) for floats, null for ids and masks
The test loads the parameters by name with load_state_dict, so names are checked too. A patch
embedding's Conv2d weight (D, C, P, P) is stored reshaped to (D, C * P * P), the layout Tessera's
PatchEmbedding documents.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 20261130
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn_modules.json")
rng = np.random.default_rng(SEED)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def normal(shape, scale=1.0, shift=0.0):
    return f32(shift + scale * rng.standard_normal(size=shape))


# ---------------------------------------------------------------- reference modules (float64)
class Attention(nn.Module):
    """GPT-2's attention: fused c_attn (q | k | v), heads by views, c_proj."""

    def __init__(self, c, heads, causal, bias=True):
        super().__init__()
        self.c_attn = nn.Linear(c, 3 * c, bias=bias)
        self.c_proj = nn.Linear(c, c, bias=bias)
        self.heads, self.causal = heads, causal

    def forward(self, x, mask=None):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = q @ k.transpose(-2, -1) / math.sqrt(d)
        if self.causal:
            keep = torch.tril(torch.ones(t, t, dtype=torch.bool))
            att = att.masked_fill(~keep, float("-inf"))
        if mask is not None:
            att = att.masked_fill(~mask[:, None, None, :], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, c, hidden, gelu):
        super().__init__()
        self.c_fc = nn.Linear(c, hidden)
        self.c_proj = nn.Linear(hidden, c)
        self.gelu = gelu

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.gelu))


class Block(nn.Module):
    def __init__(self, c, heads, causal, pre_ln, gelu):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c)
        self.attn = Attention(c, heads, causal)
        self.ln_2 = nn.LayerNorm(c)
        self.mlp = MLP(c, 4 * c, gelu)
        self.pre_ln = pre_ln

    def forward(self, x, mask=None):
        if self.pre_ln:
            x = x + self.attn(self.ln_1(x), mask)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, mask))
        return self.ln_2(x + self.mlp(x))


class PatchEmbedding(nn.Module):
    def __init__(self, cin, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(cin, dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ClassificationHead(nn.Module):
    def __init__(self, c, classes, pooling, norm):
        super().__init__()
        if norm:
            self.norm = nn.LayerNorm(c)
        self.head = nn.Linear(c, classes)
        self.pooling, self.use_norm = pooling, norm

    def forward(self, x):
        if self.pooling == "cls":
            x = x[:, 0]
        elif self.pooling == "mean":
            x = x.mean(dim=1)
        if self.use_norm:
            x = self.norm(x)
        return self.head(x)


# ---------------------------------------------------------------- JSON
def fmt(v, dtype):
    if dtype == "f32":
        x = np.float32(v)
        assert np.isfinite(x)
        if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e6):
            return np.format_float_scientific(x, unique=True, trim="-")
        return np.format_float_positional(x, unique=True, trim="-")
    if dtype == "bool":
        return "true" if bool(v) else "false"
    return str(int(v))


def tensor_json(values, dtype, requires_grad=None):
    values = np.asarray(values)
    parts = ['"shape": %s' % json.dumps([int(s) for s in values.shape]), '"dtype": "%s"' % dtype]
    if requires_grad is not None:
        parts.append('"requires_grad": %s' % ("true" if requires_grad else "false"))
    parts.append('"values": [%s]' % ", ".join(fmt(v, dtype) for v in values.reshape(-1)))
    return "{" + ", ".join(parts) + "}"


def dtype_of(t):
    return {torch.float64: "f32", torch.int64: "i64", torch.bool: "bool"}[t.dtype]


# ---------------------------------------------------------------- cases
CASES = []


def init_params(module):
    """Seeded float32-exact values for every parameter, scaled so activations stay O(1):
    LayerNorm weights near 1, biases small, matrices ~ N(0, 1 / fan_in)."""
    exported = {}
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            owner = module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module
            if isinstance(owner, nn.LayerNorm):
                v = normal(p.shape, 0.2, 1.0) if leaf == "weight" else normal(p.shape, 0.1)
            elif isinstance(owner, nn.Embedding):
                v = normal(p.shape)
            elif leaf == "bias":
                v = normal(p.shape, 0.1)
            else:
                fan_in = int(np.prod(p.shape[1:]))
                v = normal(p.shape, 1.0 / math.sqrt(fan_in))
            p.copy_(torch.tensor(v))
            exported[name] = v
    return exported


def case(name, op, params, module, inputs, export_shape=None):
    """inputs: numpy arrays (float ones get gradients). export_shape: {param name: shape to store}."""
    module = module.double()
    values = init_params(module)
    leaves = []
    for x in inputs:
        t = torch.tensor(x)
        if t.dtype == torch.float64:
            t.requires_grad_(True)
        leaves.append(t)
    out = module(*leaves)
    w = normal(tuple(out.shape))
    (out * torch.tensor(w)).sum().backward()

    names = [n for n, _ in module.named_parameters()]
    stored = []
    for n, p in module.named_parameters():
        shape = (export_shape or {}).get(n, tuple(p.shape))
        stored.append((values[n].reshape(shape), p.grad.detach().numpy().reshape(shape)))
    in_json = [tensor_json(t.detach().numpy(), dtype_of(t), t.requires_grad) for t in leaves]
    in_json += [tensor_json(v, "f32", True) for v, _ in stored]
    grads = [tensor_json(t.grad.numpy(), "f32") if t.requires_grad else "null" for t in leaves]
    grads += [tensor_json(g, "f32") for _, g in stored]
    params = dict(params, n_inputs=len(inputs), param_names=names)
    lines = [
        '"name": %s' % json.dumps(name),
        '"op": %s' % json.dumps(op),
        '"params": %s' % json.dumps(params),
        '"inputs": [%s]' % ", ".join(in_json),
        '"weights": [%s]' % tensor_json(w, "f32"),
        '"outputs": [%s]' % tensor_json(out.detach().numpy(), "f32"),
        '"grads": [%s]' % ", ".join(grads),
    ]
    CASES.append("{\n  " + ",\n  ".join(lines) + "\n}")


def padding_mask(b, t):
    m = rng.uniform(size=(b, t)) < 0.7
    m[:, 0] = True  # every row keeps at least one key
    m[0, -1] = False  # at least one padded key
    return m


def build():
    case("linear_bias", "linear", {"in": 6, "out": 5, "bias": True}, nn.Linear(6, 5), [normal((2, 3, 6))])
    case("linear_no_bias", "linear", {"in": 6, "out": 4, "bias": False}, nn.Linear(6, 4, bias=False),
         [normal((4, 6))])
    case("layer_norm", "layer_norm", {"dim": 8, "eps": 1e-5}, nn.LayerNorm(8), [normal((2, 3, 8), 2.0, 0.5)])
    case("layer_norm_eps", "layer_norm", {"dim": 5, "eps": 1e-3}, nn.LayerNorm(5, eps=1e-3),
         [normal((4, 5))])
    # Repeated ids: the weight gradient must accumulate over them.
    ids = np.array([[1, 3, 3, 0, 9], [9, 2, 3, 7, 7]], dtype=np.int64)
    case("embedding", "embedding", {"num": 10, "dim": 4}, nn.Embedding(10, 4), [ids])

    b, t, c, h = 2, 5, 8, 2
    case("attention_causal", "attention", {"d_model": c, "n_heads": h, "causal": True},
         Attention(c, h, True), [normal((b, t, c))])
    case("attention_padding", "attention", {"d_model": c, "n_heads": h, "causal": False},
         Attention(c, h, False), [normal((b, t, c)), padding_mask(b, t)])
    case("attention_4_heads", "attention", {"d_model": 12, "n_heads": 4, "causal": True},
         Attention(12, 4, True), [normal((1, 6, 12))])
    case("mlp_tanh", "mlp", {"d_model": c, "hidden": 4 * c, "gelu": "tanh"}, MLP(c, 4 * c, "tanh"),
         [normal((b, t, c))])
    case("mlp_erf", "mlp", {"d_model": c, "hidden": 12, "gelu": "none"}, MLP(c, 12, "none"),
         [normal((b, t, c))])
    case("block_pre_ln_causal", "block",
         {"d_model": c, "n_heads": h, "causal": True, "pre_ln": True, "gelu": "tanh"},
         Block(c, h, True, True, "tanh"), [normal((b, t, c))])
    case("block_post_ln_padding", "block",
         {"d_model": c, "n_heads": h, "causal": False, "pre_ln": False, "gelu": "none"},
         Block(c, h, False, False, "none"), [normal((b, t, c)), padding_mask(b, t)])
    case("block_pre_ln_padding", "block",
         {"d_model": c, "n_heads": h, "causal": False, "pre_ln": True, "gelu": "none"},
         Block(c, h, False, True, "none"), [normal((b, t, c)), padding_mask(b, t)])

    for tag, cin, hh, ww, p, d in [("square", 3, 8, 8, 4, 6), ("wide", 2, 4, 6, 2, 5)]:
        case(f"patch_embedding_{tag}", "patch_embedding",
             {"in_channels": cin, "height": hh, "width": ww, "patch": p, "dim": d},
             PatchEmbedding(cin, d, p), [normal((2, cin, hh, ww))],
             export_shape={"proj.weight": (d, cin * p * p)})

    for pooling, norm in [("cls", True), ("mean", True), ("none", False)]:
        case(f"classification_head_{pooling}", "classification_head",
             {"d_model": c, "classes": 3, "pooling": pooling, "norm": norm},
             ClassificationHead(c, 3, pooling, norm), [normal((b, t, c))])


def main():
    torch.set_num_threads(1)
    build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    header = ('{"family": "nn_modules", "seed": %d, "compute": "float64 from float32 inputs and '
              'parameters, stored as float32", "torch": "%s",\n"cases": [\n' % (SEED, torch.__version__))
    with open(OUT, "w") as f:
        f.write(header + ",\n".join(CASES) + "\n]}\n")
    print(f"{os.path.relpath(OUT)}: {len(CASES)} cases, {os.path.getsize(OUT) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
