"""GPT-2 in plain PyTorch for the `bench train` peer: the architecture of models/gpt (learned
positions, pre-LN blocks with a fused QKV projection, causal attention, tanh GELU MLP, final
LayerNorm, LM head tied to the token embedding), written as GPT-2 training code in eager PyTorch
1.13 writes it (no fused attention kernel exists there), so both sides do the same work. On a GPU
(`bench cuda`, PyTorch 2) fused_attention=True uses F.scaled_dot_product_attention, as Tessera's
model uses its fused attention kernel.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, n_heads, hidden, eps, bias, fused_attention):
        super().__init__()
        self.n_heads = n_heads
        self.fused_attention = fused_attention
        self.ln_1 = nn.LayerNorm(d_model, eps=eps)
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.attn_proj = nn.Linear(d_model, d_model, bias=bias)
        self.ln_2 = nn.LayerNorm(d_model, eps=eps)
        self.c_fc = nn.Linear(d_model, hidden, bias=bias)
        self.mlp_proj = nn.Linear(hidden, d_model, bias=bias)

    def forward(self, x, hidden_mask):
        b, t, c = x.shape  # (B, T, C)
        h = self.n_heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))  # (B, H, T, D)
        if self.fused_attention:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
            probs = scores.masked_fill(hidden_mask[:t, :t], float("-inf")).softmax(-1)
            y = probs @ v
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    """config: the keys of GPTConfig::to_json() (models/gpt/gpt_config.h)."""

    def __init__(self, config, fused_attention=False):
        super().__init__()
        d = config["d_model"]
        hidden = config.get("mlp_hidden") or 4 * d
        eps = config.get("ln_eps", 1e-5)
        bias = config.get("bias", True)
        self.wte = nn.Embedding(config["vocab_size"], d)
        self.wpe = nn.Embedding(config["context_length"], d)
        self.h = nn.ModuleList(
            Block(d, config["n_heads"], hidden, eps, bias, fused_attention)
            for _ in range(config["n_layers"]))
        self.ln_f = nn.LayerNorm(d, eps=eps)
        self.tied = config.get("tie_embeddings", True)
        if not self.tied:
            self.lm_head = nn.Linear(d, config["vocab_size"], bias=False)
        ctx = config["context_length"]
        self.register_buffer("hidden_mask", ~torch.ones(ctx, ctx, dtype=torch.bool).tril(),
                             persistent=False)
        std = config.get("init_std", 0.02)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, std)

    def loss(self, ids, targets):
        """ids, targets (B, T) int64 -> mean next-token cross-entropy."""
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
        for block in self.h:
            x = block(x, self.hidden_mask)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight) if self.tied else self.lm_head(x)  # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
