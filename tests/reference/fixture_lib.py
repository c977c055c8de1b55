"""Shared machinery of gen_fixtures.py: seeded float32-exact inputs, the PyTorch run of one case
(forward in float64, backward of sum(out * w)) and the JSON writer. See gen_fixtures.py for the
fixture format and the precision policy."""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

SEED = 20261129
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

rng = np.random.default_rng(SEED)


# ---------------------------------------------------------------- inputs
class In:
    """One op input: values as stored (already float32-exact for floats) plus views to apply."""

    def __init__(self, values, dtype="f32", requires_grad=None, views=()):
        self.values = np.asarray(values)
        self.dtype = dtype
        self.requires_grad = (dtype == "f32") if requires_grad is None else requires_grad
        self.views = [list(v) for v in views]


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def uni(shape, lo=-2.0, hi=2.0, **kw):
    return In(f32(rng.uniform(lo, hi, size=shape)), **kw)


def nrm(shape, scale=1.0, **kw):
    return In(f32(rng.standard_normal(size=shape) * scale), **kw)


def ints(shape, low, high, dtype="i64"):
    return In(rng.integers(low, high, size=shape), dtype=dtype, requires_grad=False)


def bools(shape, p_true=0.5):
    return In(rng.uniform(size=shape) < p_true, dtype="bool", requires_grad=False)


def away_from(values, points, gap=0.05):
    """Moves values within `gap` of a kink (relu/abs at 0, clamp bounds) away from it."""
    v = values.copy()
    for p in points:
        near = np.abs(v - p) < gap
        v[near] = p + np.where(v[near] >= p, gap, -gap)
    return f32(v)


TORCH_DTYPE = {"f32": torch.float64, "i64": torch.int64, "i32": torch.int32, "bool": torch.bool}


def apply_views(t, views):
    for v in views:
        if v[0] == "transpose":
            t = t.transpose(v[1], v[2])
        elif v[0] == "slice":
            _, dim, start, end, step = v
            index = [slice(None)] * t.dim()
            index[dim] = slice(start, end, step)
            t = t[tuple(index)]
        else:
            raise ValueError(v[0])
    return t


# ---------------------------------------------------------------- JSON writing
def fmt_value(v, dtype):
    if dtype == "f32":
        x = np.float32(v)
        assert np.isfinite(x), "non-finite value in a fixture"
        # The shortest string that reads back as the same float32.
        if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e6):
            return np.format_float_scientific(x, unique=True, trim="-")
        return np.format_float_positional(x, unique=True, trim="-")
    if dtype == "bool":
        return "true" if bool(v) else "false"
    return str(int(v))


def tensor_json(values, dtype, requires_grad=None, views=None):
    values = np.asarray(values)
    flat = ", ".join(fmt_value(v, dtype) for v in values.reshape(-1))
    parts = ['"shape": %s' % json.dumps([int(s) for s in values.shape]), '"dtype": "%s"' % dtype]
    if requires_grad is not None:
        parts.append('"requires_grad": %s' % ("true" if requires_grad else "false"))
    if views:
        parts.append('"views": %s' % json.dumps(views))
    parts.append('"values": [%s]' % flat)
    return "{" + ", ".join(parts) + "}"


# ---------------------------------------------------------------- cases
class Family:
    def __init__(self, name):
        self.name = name
        self.cases = []
        self.names = set()

    def case(self, name, op, params, inputs, fn):
        """Runs fn(list of torch inputs after views) -> tensor or list of tensors in float64,
        backward of sum(out * w), and records everything."""
        assert name not in self.names, name
        self.names.add(name)
        leaves, args = [], []
        for x in inputs:
            t = torch.tensor(x.values, dtype=TORCH_DTYPE[x.dtype])
            if x.requires_grad:
                t.requires_grad_(True)
            leaves.append(t)
            args.append(apply_views(t, x.views))
        out = fn(args)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        ws = [f32(rng.standard_normal(size=tuple(o.shape))) for o in outs]
        total = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, ws))
        grad_leaves = [t for t, x in zip(leaves, inputs) if x.requires_grad]
        grads = torch.autograd.grad(total, grad_leaves, allow_unused=True)
        grads = iter(grads)
        grad_json = []
        for t, x in zip(leaves, inputs):
            if not x.requires_grad:
                grad_json.append("null")
                continue
            g = next(grads)
            g = torch.zeros_like(t) if g is None else g
            grad_json.append(tensor_json(g.detach().numpy(), "f32"))
        lines = [
            '"name": %s' % json.dumps(name),
            '"op": %s' % json.dumps(op),
            '"params": %s' % json.dumps(params),
            '"inputs": [%s]' % ", ".join(
                tensor_json(x.values, x.dtype, x.requires_grad, x.views) for x in inputs),
            '"weights": [%s]' % ", ".join(tensor_json(w, "f32") for w in ws),
            '"outputs": [%s]' % ", ".join(tensor_json(o.detach().numpy(), "f32") for o in outs),
            '"grads": [%s]' % ", ".join(grad_json),
        ]
        self.cases.append("{\n  " + ",\n  ".join(lines) + "\n}")

    def write(self):
        path = os.path.join(OUT_DIR, self.name + ".json")
        header = ('{"family": "%s", "seed": %d, "compute": "float64 from float32 inputs, stored as '
                  'float32", "torch": "%s",\n"cases": [\n' % (self.name, SEED, torch.__version__))
        with open(path, "w") as f:
            f.write(header + ",\n".join(self.cases) + "\n]}\n")
        return path, len(self.cases)
