#!/usr/bin/python3
"""Writes tests/models/gpt/fixtures/gpt2_small.json: a 2-layer GPT-2 written the way Hugging Face's
GPT2LMHeadModel is (names transformer.wte / transformer.h.N.attn.c_attn / ..., Conv1D weights
stored (in, out), the causal-mask buffer h.N.attn.bias), its logits, loss, every weight's gradient
and 20 AdamW steps, in float64 from float32-exact weights. Read by gpt_reference_test.cc, which maps
the weights with models/hf from_hf_gpt2.

Run with Debian's Python (torch 1.13):  /usr/bin/python3 tests/models/gpt/gen_gpt_fixture.py
Deterministic (fixed seed): rerunning leaves the committed file unchanged.
"""
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from model_fixture_lib import init_params, write_fixture

SEED = 20261201
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gpt2_small.json")
CONFIG = {"vocab_size": 40, "context_length": 12, "n_layers": 2, "n_heads": 3, "d_model": 24}


class Conv1D(nn.Module):
    """HF's Conv1D: a linear layer whose weight is stored (in, out): y = x @ W + b."""
    conv1d = True

    def __init__(self, n_out, n_in):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Attention(nn.Module):
    def __init__(self, c, heads, ctx):
        super().__init__()
        self.c_attn, self.c_proj, self.heads = Conv1D(3 * c, c), Conv1D(c, c), heads
        self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = q @ k.transpose(-2, -1) / math.sqrt(d)
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class GPT2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(4 * c, c), Conv1D(c, 4 * c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, c, heads, ctx):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c), GPT2Attention(c, heads, ctx)
        self.ln_2, self.mlp = nn.LayerNorm(c), GPT2MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["d_model"]
        self.wte = nn.Embedding(cfg["vocab_size"], c)
        self.wpe = nn.Embedding(cfg["context_length"], c)
        self.h = nn.ModuleList(GPT2Block(c, cfg["n_heads"], cfg["context_length"])
                               for _ in range(cfg["n_layers"]))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, ids):
        return self.lm_head(self.transformer(ids))


def run(model, inputs):
    logits = model(inputs["ids"])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), inputs["targets"].reshape(-1))
    return {"logits": logits}, {"loss": loss}, loss


def main():
    rng = np.random.default_rng(SEED)
    torch.manual_seed(SEED)
    model = GPT2LMHeadModel(CONFIG).double()
    init_params(model, rng)
    b, t, v = 2, CONFIG["context_length"], CONFIG["vocab_size"]
    ids = torch.tensor(rng.integers(0, v, size=(b, t + 1)), dtype=torch.int64)
    inputs = {"ids": ids[:, :-1].contiguous(), "targets": ids[:, 1:].contiguous()}
    # HF's files leave out the tied lm_head.weight; the causal-mask buffers are kept (old GPT-2
    # files have them) so the mapping must skip them.
    names = [n for n in model.state_dict() if n != "lm_head.weight"]
    write_fixture(OUT, "gpt2", CONFIG, model, names, inputs, run)


if __name__ == "__main__":
    main()
