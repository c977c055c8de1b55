#!/usr/bin/python3
"""Writes tests/models/bert/fixtures/bert_tiny.json: a 2-layer BERT written the way Hugging Face's
BERT is (bert.embeddings.*, bert.encoder.layer.N.attention.self.query / key / value, ...output.
LayerNorm, bert.pooler.dense, cls.predictions.* with the decoder tied to the word embeddings,
classifier.*), with a padding mask, its MLM and classification logits and losses, every weight's
gradient of (MLM loss + classification loss) and 20 AdamW steps, in float64 from float32-exact
weights. Read by bert_reference_test.cc, which maps the weights with models/hf from_hf_bert.

Run with Debian's Python (torch 1.13):  /usr/bin/python3 tests/models/bert/gen_bert_fixture.py
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

SEED = 20261202
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "bert_tiny.json")
CONFIG = {"vocab_size": 50, "max_positions": 16, "type_vocab_size": 2, "n_layers": 2,
          "n_heads": 3, "d_model": 24, "mlp_hidden": 96, "dropout": 0.0, "attn_dropout": 0.0,
          "num_labels": 3}
EPS = 1e-12


class SelfAttention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(c, c), nn.Linear(c, c), nn.Linear(c, c)
        self.heads = heads

    def forward(self, x, mask):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = (p(x).view(b, t, self.heads, d).transpose(1, 2)
                   for p in (self.query, self.key, self.value))
        att = q @ k.transpose(-2, -1) / math.sqrt(d)
        att = att.masked_fill(~mask[:, None, None, :], float("-inf"))
        return (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)


class DenseNorm(nn.Module):
    """BertSelfOutput / BertOutput: LayerNorm(dense(x) + residual)."""

    def __init__(self, c_in, c):
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(c_in, c), nn.LayerNorm(c, eps=EPS)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.self, self.output = SelfAttention(c, heads), DenseNorm(c, c)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.dense = nn.Linear(c, hidden)

    def forward(self, x):
        return F.gelu(self.dense(x))


class Layer(nn.Module):
    def __init__(self, c, heads, hidden):
        super().__init__()
        self.attention = Attention(c, heads)
        self.intermediate, self.output = Intermediate(c, hidden), DenseNorm(hidden, c)

    def forward(self, x, mask):
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg["d_model"], cfg["n_heads"], cfg["mlp_hidden"])
                                   for _ in range(cfg["n_layers"]))

    def forward(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["d_model"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], c)
        self.position_embeddings = nn.Embedding(cfg["max_positions"], c)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], c)
        self.LayerNorm = nn.LayerNorm(c, eps=EPS)
        self.register_buffer("position_ids", torch.arange(cfg["max_positions"]).view(1, -1))

    def forward(self, ids, types):
        pos = self.position_ids[:, :ids.shape[1]]
        return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(pos) +
                              self.token_type_embeddings(types))


class Pooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c, c)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))


class BertModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings, self.encoder = Embeddings(cfg), Encoder(cfg)
        self.pooler = Pooler(cfg["d_model"])


class Transform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(c, c), nn.LayerNorm(c, eps=EPS)

    def forward(self, h):
        return self.LayerNorm(F.gelu(self.dense(h)))


class Predictions(nn.Module):
    def __init__(self, cfg, word):
        super().__init__()
        self.transform = Transform(cfg["d_model"])
        self.decoder = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)
        self.decoder.weight = word  # tied
        self.bias = nn.Parameter(torch.zeros(cfg["vocab_size"]))

    def forward(self, h):
        return self.decoder(self.transform(h)) + self.bias


class ClsHeads(nn.Module):
    def __init__(self, cfg, word):
        super().__init__()
        self.predictions = Predictions(cfg, word)


class BertForMLMAndClassification(nn.Module):
    """BertForMaskedLM's and BertForSequenceClassification's parts in one module (HF names)."""

    def __init__(self, cfg):
        super().__init__()
        self.bert = BertModel(cfg)
        self.cls = ClsHeads(cfg, self.bert.embeddings.word_embeddings.weight)
        self.classifier = nn.Linear(cfg["d_model"], cfg["num_labels"])


def run(model, inputs):
    h = model.bert.embeddings(inputs["ids"], inputs["token_type_ids"])
    h = model.bert.encoder(h, inputs["attention_mask"])
    mlm = model.cls.predictions(h)
    cls = model.classifier(model.bert.pooler(h))
    mlm_loss = F.cross_entropy(mlm.reshape(-1, mlm.shape[-1]), inputs["mlm_labels"].reshape(-1))
    cls_loss = F.cross_entropy(cls, inputs["class_labels"])
    return ({"mlm_logits": mlm, "class_logits": cls},
            {"mlm_loss": mlm_loss, "classification_loss": cls_loss}, mlm_loss + cls_loss)


def main():
    rng = np.random.default_rng(SEED)
    model = BertForMLMAndClassification(CONFIG).double()
    init_params(model, rng)
    b, t, v = 2, 10, CONFIG["vocab_size"]
    ids = rng.integers(0, v, size=(b, t))
    types = np.zeros((b, t), dtype=np.int64)
    types[:, 6:] = 1
    mask = np.ones((b, t), dtype=bool)
    mask[1, 7:] = False  # row 1: three padding tokens
    labels = np.full((b, t), -100)
    for r, c in [(0, 1), (0, 4), (0, 8), (1, 2), (1, 5)]:
        labels[r, c] = rng.integers(0, v)
    inputs = {"ids": torch.tensor(ids), "token_type_ids": torch.tensor(types),
              "attention_mask": torch.tensor(mask), "mlm_labels": torch.tensor(labels),
              "class_labels": torch.tensor([2, 0])}
    names = [n for n in model.state_dict() if n != "cls.predictions.decoder.weight"]
    write_fixture(OUT, "bert", CONFIG, model, names, inputs, run)


if __name__ == "__main__":
    main()
