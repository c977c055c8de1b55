#!/usr/bin/python3
"""Writes tests/models/vit/fixtures/vit_tiny.json: a 2-layer ViT written the way Hugging Face's
ViTForImageClassification is (vit.embeddings.cls_token / position_embeddings /
patch_embeddings.projection as a Conv2d, vit.encoder.layer.N.layernorm_before /
attention.attention.query ... / layernorm_after, vit.layernorm, classifier), its logits, loss, every
weight's gradient and 20 AdamW steps, in float64 from float32-exact weights. Read by
vit_reference_test.cc, which maps the weights with models/hf from_hf_vit.

Run with Debian's Python (torch 1.13):  /usr/bin/python3 tests/models/vit/gen_vit_fixture.py
Deterministic (fixed seed): rerunning leaves the committed file unchanged.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpt"))
from model_fixture_lib import init_params, write_fixture  # noqa: E402

SEED = 20261203
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "vit_tiny.json")
CONFIG = {"image_size": 8, "patch_size": 4, "in_channels": 3, "num_classes": 5, "n_layers": 2,
          "n_heads": 3, "d_model": 24}
EPS = 1e-12


class SelfAttention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(c, c), nn.Linear(c, c), nn.Linear(c, c)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = (p(x).view(b, t, self.heads, d).transpose(1, 2)
                   for p in (self.query, self.key, self.value))
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, t, c)


class Dense(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.dense = nn.Linear(c_in, c_out)

    def forward(self, x):
        return self.dense(x)


class Attention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.attention, self.output = SelfAttention(c, heads), Dense(c, c)

    def forward(self, x):
        return self.output(self.attention(x))


class Layer(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.layernorm_before = nn.LayerNorm(c, eps=EPS)
        self.attention = Attention(c, heads)
        self.layernorm_after = nn.LayerNorm(c, eps=EPS)
        self.intermediate, self.output = Dense(c, 4 * c), Dense(4 * c, c)

    def forward(self, x):
        x = x + self.attention(self.layernorm_before(x))
        return x + self.output(F.gelu(self.intermediate(self.layernorm_after(x))))


class PatchEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        p = cfg["patch_size"]
        self.projection = nn.Conv2d(cfg["in_channels"], cfg["d_model"], kernel_size=p, stride=p)

    def forward(self, x):
        return self.projection(x).flatten(2).transpose(1, 2)


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        n = (cfg["image_size"] // cfg["patch_size"]) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg["d_model"]))
        self.position_embeddings = nn.Parameter(torch.zeros(1, n + 1, cfg["d_model"]))
        self.patch_embeddings = PatchEmbeddings(cfg)

    def forward(self, x):
        p = self.patch_embeddings(x)
        cls = self.cls_token.expand(p.shape[0], -1, -1)
        return torch.cat([cls, p], dim=1) + self.position_embeddings


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg["d_model"], cfg["n_heads"])
                                   for _ in range(cfg["n_layers"]))


class ViTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings, self.encoder = Embeddings(cfg), Encoder(cfg)
        self.layernorm = nn.LayerNorm(cfg["d_model"], eps=EPS)


class ViTForImageClassification(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.vit = ViTModel(cfg)
        self.classifier = nn.Linear(cfg["d_model"], cfg["num_classes"])

    def forward(self, images):
        x = self.vit.embeddings(images)
        for layer in self.vit.encoder.layer:
            x = layer(x)
        return self.classifier(self.vit.layernorm(x)[:, 0])


def run(model, inputs):
    logits = model(inputs["images"])
    loss = F.cross_entropy(logits, inputs["labels"])
    return {"logits": logits}, {"loss": loss}, loss


def main():
    rng = np.random.default_rng(SEED)
    model = ViTForImageClassification(CONFIG).double()
    init_params(model, rng)
    s, c = CONFIG["image_size"], CONFIG["in_channels"]
    images = np.asarray(rng.standard_normal((3, c, s, s)), dtype=np.float32).astype(np.float64)
    inputs = {"images": torch.tensor(images), "labels": torch.tensor([4, 0, 2])}
    write_fixture(OUT, "vit", CONFIG, model, list(model.state_dict()), inputs, run)


if __name__ == "__main__":
    main()
