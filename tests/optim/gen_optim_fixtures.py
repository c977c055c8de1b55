"""Writes tests/optim/fixtures/optim.json: parameter trajectories of Tessera's optimizers' references.

Run with Debian's Python, which has torch 1.13:  /usr/bin/python3 tests/optim/gen_optim_fixtures.py

Each case holds float32-exact starting parameters, a fixed sequence of gradients (5 steps; a null
gradient means "this parameter has no grad this step" and is skipped, keeping its step count) and
the parameters after every step. The optimizer configuration is the JSON that
tessera::optim::make_optimizer reads; "groups" gives each parameter group's indices and its lr /
weight_decay overrides; a step's "lr", when present, is set on every group before that step.

References:
  sgd, adam, adamw: torch.optim.SGD / Adam / AdamW themselves, in float32 (amsgrad=False,
    maximize=False, foreach=False).
  lamb, lars: PyTorch 1.13 has neither, so the updates are written out below in float64 numpy,
    exactly the variants documented in optim/lamb.h and optim/lars.h:
    LAMB:  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  u = (m/bc1) / (sqrt(v/bc2) + eps) + wd p
           r = ||p|| / ||u|| if both > 0 else 1;  p -= lr r u
    LARS:  d = g + wd p;  q = eta ||p|| / ||d|| if both > 0 else 1;  d *= q
           buf = d (first step) else momentum buf + d;  d = nesterov ? d + momentum buf : buf
           p -= lr d;   with exclude_1d, 1-D params skip both the decay and q.
"""
import json
import os

import numpy as np
import torch

SEED = 20261130
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "optim.json")
STEPS = 5
SHAPES = [(4, 3), (3,), (2, 2, 2)]

rng = np.random.default_rng(SEED)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def make_inputs(shapes, zero_params=(), null_grads=(), grad_scale=1.0):
    """Starting params and per-step grads; null_grads holds (step, param) pairs with no grad."""
    params = [f32(rng.standard_normal(s)) for s in shapes]
    for i in zero_params:
        params[i] = np.zeros(shapes[i])
    grads = []
    for k in range(STEPS):
        step = []
        for i, s in enumerate(shapes):
            step.append(None if (k, i) in null_grads else f32(rng.standard_normal(s) * grad_scale))
        grads.append(step)
    return params, grads


# ---------------------------------------------------------------- torch references (float32)
def run_torch(kind, config, groups, params, grads, lrs):
    ts = [torch.tensor(p, dtype=torch.float32, requires_grad=True) for p in params]
    opts = {k: v for k, v in config.items() if k != "type"}
    if "betas" in opts:
        opts["betas"] = tuple(opts["betas"])
    torch_groups = []
    for g in groups:
        d = {"params": [ts[i] for i in g["params"]]}
        d.update({k: v for k, v in g.items() if k != "params"})
        torch_groups.append(d)
    if kind == "sgd":
        opt = torch.optim.SGD(torch_groups, foreach=False, **opts)
    elif kind == "adam":
        opt = torch.optim.Adam(torch_groups, foreach=False, **opts)
    else:
        opt = torch.optim.AdamW(torch_groups, foreach=False, **opts)
    out = []
    for k in range(STEPS):
        if lrs is not None:
            for g in opt.param_groups:
                g["lr"] = lrs[k]
        for t, g in zip(ts, grads[k]):
            t.grad = None if g is None else torch.tensor(g, dtype=torch.float32)
        opt.step()
        out.append([t.detach().numpy().astype(np.float64).copy() for t in ts])
    return out


# ---------------------------------------------------------------- float64 references
def group_options(config, groups, i):
    for g in groups:
        if i in g["params"]:
            o = dict(config)
            o.update({k: v for k, v in g.items() if k != "params"})
            return o
    raise ValueError("param %d in no group" % i)


def run_lamb(config, groups, params, grads, lrs):
    p = [x.copy() for x in params]
    m = [np.zeros_like(x) for x in params]
    v = [np.zeros_like(x) for x in params]
    t = [0] * len(params)
    out = []
    for k in range(STEPS):
        for i in range(len(p)):
            g = grads[k][i]
            if g is None:
                continue
            o = group_options(config, groups, i)
            lr = lrs[k] if lrs is not None else o.get("lr", 1e-3)
            b1, b2 = o.get("betas", [0.9, 0.999])
            eps, wd = o.get("eps", 1e-6), o.get("weight_decay", 1e-2)
            t[i] += 1
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            bc1, bc2 = (1 - b1 ** t[i], 1 - b2 ** t[i]) if o.get("bias_correction", True) else (1.0, 1.0)
            u = (m[i] / bc1) / (np.sqrt(v[i] / bc2) + eps) + wd * p[i]
            wn, un = np.linalg.norm(p[i]), np.linalg.norm(u)
            r = wn / un if wn > 0 and un > 0 else 1.0
            p[i] = p[i] - lr * r * u
        out.append([x.copy() for x in p])
    return out


def run_lars(config, groups, params, grads, lrs):
    p = [x.copy() for x in params]
    buf = [None] * len(params)
    out = []
    for k in range(STEPS):
        for i in range(len(p)):
            g = grads[k][i]
            if g is None:
                continue
            o = group_options(config, groups, i)
            lr = lrs[k] if lrs is not None else o.get("lr", 0.1)
            mom, wd = o.get("momentum", 0.9), o.get("weight_decay", 0.0)
            eta, nesterov = o.get("trust_coefficient", 1e-3), o.get("nesterov", False)
            adapt = not (o.get("exclude_1d", False) and p[i].ndim <= 1)
            d = g + (wd * p[i] if adapt else 0.0)
            if adapt:
                wn, dn = np.linalg.norm(p[i]), np.linalg.norm(d)
                d = d * (eta * wn / dn if wn > 0 and dn > 0 else 1.0)
            if mom != 0:
                buf[i] = d.copy() if buf[i] is None else mom * buf[i] + d
                d = d + mom * buf[i] if nesterov else buf[i]
            p[i] = p[i] - lr * d
        out.append([x.copy() for x in p])
    return out


# ---------------------------------------------------------------- cases
def tensor_json(a):
    return {"shape": list(a.shape), "values": [float(x) for x in a.reshape(-1)]}


def case(name, config, groups=None, lrs=None, **input_kw):
    params, grads = make_inputs(SHAPES, **input_kw)
    if groups is None:
        groups = [{"params": list(range(len(SHAPES)))}]
    kind = config["type"]
    if kind in ("sgd", "adam", "adamw"):
        after = run_torch(kind, config, groups, params, grads, lrs)
    elif kind == "lamb":
        after = run_lamb(config, groups, params, grads, lrs)
    else:
        after = run_lars(config, groups, params, grads, lrs)
    steps = []
    for k in range(STEPS):
        s = {"grads": [None if g is None else tensor_json(g) for g in grads[k]],
             "expected": [tensor_json(a) for a in after[k]]}
        if lrs is not None:
            s["lr"] = lrs[k]
        steps.append(s)
    return {"name": name, "optimizer": config, "groups": groups,
            "params": [tensor_json(p) for p in params], "steps": steps}


def main():
    two_groups = [{"params": [0, 2], "weight_decay": 0.05}, {"params": [1], "weight_decay": 0.0, "lr": 0.02}]
    lrs = [0.01, 0.02, 0.015, 0.005, 0.001]
    cases = [
        case("sgd_plain", {"type": "sgd", "lr": 0.1}),
        case("sgd_momentum_dampening_wd",
             {"type": "sgd", "lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
        case("sgd_nesterov_wd", {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True,
                                 "weight_decay": 1e-3}),
        case("sgd_groups_null_grad", {"type": "sgd", "lr": 0.1, "momentum": 0.8}, groups=two_groups,
             null_grads={(0, 1), (2, 0)}),
        case("adam_default", {"type": "adam"}),
        case("adam_coupled_wd", {"type": "adam", "lr": 0.01, "betas": [0.8, 0.99], "weight_decay": 0.1}),
        case("adamw_groups_null_grad", {"type": "adamw", "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-6,
                                        "weight_decay": 0.1}, groups=two_groups, null_grads={(0, 2), (3, 1)}),
        case("adamw_lr_per_step", {"type": "adamw", "weight_decay": 0.01}, lrs=lrs),
        case("lamb_wd", {"type": "lamb", "lr": 0.01, "weight_decay": 0.01}),
        case("lamb_groups_no_bias_correction_zero_param",
             {"type": "lamb", "lr": 0.02, "betas": [0.85, 0.98], "eps": 1e-5, "bias_correction": False},
             groups=two_groups, zero_params=(1,), null_grads={(1, 0)}),
        case("lars_wd", {"type": "lars", "lr": 0.5, "momentum": 0.9, "weight_decay": 1e-4,
                         "trust_coefficient": 1e-3}),
        case("lars_nesterov_exclude_1d_zero_param",
             {"type": "lars", "lr": 1.0, "momentum": 0.9, "weight_decay": 1e-3, "trust_coefficient": 0.01,
              "nesterov": True, "exclude_1d": True}, zero_params=(2,), lrs=[1.0, 0.8, 0.6, 0.4, 0.2]),
        case("lars_no_momentum", {"type": "lars", "lr": 2.0, "momentum": 0.0, "weight_decay": 5e-4,
                                  "trust_coefficient": 0.02}),
    ]
    doc = {"family": "optim",
           "compute": "sgd/adam/adamw: torch 1.13 optimizers in float32; lamb/lars: float64 numpy "
                      "(see gen_optim_fixtures.py)",
           "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d cases)" % (OUT, len(cases)))


if __name__ == "__main__":
    main()
