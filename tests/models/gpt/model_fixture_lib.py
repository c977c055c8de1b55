"""Shared by the model fixture generators (gen_gpt_fixture.py, ../bert/gen_bert_fixture.py,
../vit/gen_vit_fixture.py): seeded float32-exact weights, the JSON writer, the float64 AdamW run.

The fixture format (read by model_fixture.h):
  {"model": str, "compute": str, "config": {...},
   "hf_params": [{"name", "shape", "dtype", "values"}, ...]   weights in Hugging Face naming/layout
   "inputs": {name: tensor}, "outputs": {name: tensor}, "losses": {name: number},
   "loss": number                                             the scalar the gradients are of
   "hf_grads": [{"name", ...tensor}, ...]                     d loss / d each hf_param
   "adamw": {"lr", "betas", "eps", "weight_decay", "losses": [loss before each of 20 steps]}}
"""
import json
import math

import numpy as np
import torch
import torch.nn as nn

ADAMW = {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
ADAMW_STEPS = 20


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


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


def tensor_json(values, dtype="f32", name=None):
    values = np.asarray(values)
    parts = []
    if name is not None:
        parts.append('"name": %s' % json.dumps(name))
    parts += ['"shape": %s' % json.dumps([int(s) for s in values.shape]), '"dtype": "%s"' % dtype]
    parts.append('"values": [%s]' % ", ".join(fmt(v, dtype) for v in values.reshape(-1)))
    return "{" + ", ".join(parts) + "}"


def dtype_of(t):
    return {torch.float64: "f32", torch.int64: "i64", torch.bool: "bool"}[t.dtype]


def init_params(module, rng, skip=()):
    """Seeded float32-exact values, scaled so activations stay O(1): norm gains near 1, biases
    small, embeddings N(0, 0.5), matrices N(0, 1 / fan_in). `fan_in_dim` of a Conv1D is 0."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name in skip:
                continue
            leaf = name.rsplit(".", 1)[-1]
            owner = module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module
            if isinstance(owner, nn.LayerNorm):
                v = 1.0 + 0.2 * rng.standard_normal(p.shape) if leaf == "weight" else \
                    0.1 * rng.standard_normal(p.shape)
            elif isinstance(owner, nn.Embedding) or p.dim() == 3:  # tables, cls/position tokens
                v = 0.5 * rng.standard_normal(p.shape)
            elif leaf == "bias" or p.dim() == 1:
                v = 0.1 * rng.standard_normal(p.shape)
            else:
                fan_in = p.shape[0] if getattr(owner, "conv1d", False) else int(np.prod(p.shape[1:]))
                v = rng.standard_normal(p.shape) / math.sqrt(fan_in)
            p.copy_(torch.tensor(f32(v)))


def write_fixture(path, model_name, config, module, state_names, inputs, run):
    """module: a float64 torch model in HF naming; state_names: the HF names to export (the tied
    decoder left out, as HF files do); run(module, inputs) -> (outputs dict, losses dict, loss).
    Also runs 20 AdamW steps on the same batch from the same weights."""
    state = dict(module.state_dict(keep_vars=True))
    params = {n: p for n, p in module.named_parameters()}
    init_values = {n: state[n].detach().clone() for n in state_names}

    outputs, losses, loss = run(module, inputs)
    loss.backward()
    hf_params, hf_grads = [], []
    for n in state_names:
        hf_params.append(tensor_json(init_values[n].numpy(), dtype_of(init_values[n]), n))
        if n in params:
            g = params[n].grad
            hf_grads.append(tensor_json(g.numpy() if g is not None else np.zeros(params[n].shape),
                                        "f32", n))

    opt = torch.optim.AdamW(module.parameters(), lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    train_losses = []
    for _ in range(ADAMW_STEPS):
        opt.zero_grad()
        _, _, l = run(module, inputs)
        train_losses.append(float(l))
        l.backward()
        opt.step()

    lines = [
        '"model": %s' % json.dumps(model_name),
        '"compute": "float64 torch reference (Hugging Face naming and layout), float32-exact inputs"',
        '"config": %s' % json.dumps(config),
        '"hf_params": [\n%s\n]' % ",\n".join(hf_params),
        '"inputs": {%s}' % ", ".join('"%s": %s' % (k, tensor_json(v.numpy(), dtype_of(v)))
                                       for k, v in inputs.items()),
        '"outputs": {%s}' % ",\n".join('"%s": %s' % (k, tensor_json(v.detach().numpy()))
                                        for k, v in outputs.items()),
        '"losses": %s' % json.dumps({k: float(v) for k, v in losses.items()}),
        '"loss": %s' % json.dumps(float(loss)),
        '"hf_grads": [\n%s\n]' % ",\n".join(hf_grads),
        '"adamw": %s' % json.dumps(dict(ADAMW, losses=train_losses)),
    ]
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    print("wrote", path, "loss", float(loss), "losses after 20 AdamW steps", train_losses[-1])
