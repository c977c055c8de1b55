"""Reference cases for the neural-network ops of autograd/ops.h: softmax, log_softmax, layer_norm,
embedding, cross_entropy and scaled dot-product attention (dropout is left out: its RNG differs
from PyTorch's). Used by gen_fixtures.py."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from fixture_lib import In, nrm, rng, uni


def softmax_cases(fam):
    for op, fn in {"softmax": F.softmax, "log_softmax": F.log_softmax}.items():
        for tag, shape, dim, scale in [("last", (3, 5), -1, 1.0), ("dim1", (2, 3, 4), 1, 1.0),
                                       ("dim0", (4, 3), 0, 1.0), ("large", (3, 6), -1, 20.0)]:
            fam.case(f"{op}_{tag}", op, {"dim": dim}, [nrm(shape, scale)],
                     lambda x, fn=fn, d=dim: fn(x[0], dim=d))
        fam.case(f"{op}_transposed", op, {"dim": -1}, [nrm((5, 3), views=[("transpose", 0, 1)])],
                 lambda x, fn=fn: fn(x[0], dim=-1))


def layer_norm_cases(fam):
    for tag, shape, eps, has_w, has_b in [("affine", (4, 6), 1e-5, True, True),
                                          ("affine_3d", (2, 3, 8), 1e-5, True, True),
                                          ("plain", (3, 5), 1e-5, False, False),
                                          ("weight_only", (3, 5), 1e-5, True, False),
                                          ("eps_1e-3", (3, 4), 1e-3, True, True)]:
        c = shape[-1]
        inputs = [nrm(shape, 1.5)]
        if has_w:
            inputs.append(uni((c,), 0.5, 1.5))
        if has_b:
            inputs.append(uni((c,), -0.5, 0.5))

        def fn(x, c=c, eps=eps, has_w=has_w, has_b=has_b):
            w = x[1] if has_w else None
            b = x[2 if has_w else 1] if has_b else None
            return F.layer_norm(x[0], (c,), w, b, eps)

        fam.case(f"layer_norm_{tag}", "layer_norm", {"eps": eps, "weight": has_w, "bias": has_b},
                 inputs, fn)
    fam.case("layer_norm_transposed", "layer_norm", {"eps": 1e-5, "weight": True, "bias": True},
             [nrm((6, 4), views=[("transpose", 0, 1)]), uni((6,), 0.5, 1.5), uni((6,), -0.5, 0.5)],
             lambda x: F.layer_norm(x[0], (6,), x[1], x[2], 1e-5))


def embedding_cases(fam):
    ids = In(np.array([[1, 4, 1, 0, 6], [6, 2, 1, 3, 3]]), dtype="i64", requires_grad=False)
    fam.case("embedding_i64", "embedding", {}, [nrm((7, 4)), ids], lambda x: F.embedding(x[1], x[0]))
    ids = In(np.array([2, 2, 0, 4, 2, 1]), dtype="i32", requires_grad=False)
    fam.case("embedding_i32", "embedding", {}, [nrm((5, 3)), ids],
             lambda x: F.embedding(x[1].long(), x[0]))


def cross_entropy_cases(fam):
    def targets(shape, v, ignore=None, n_ignore=0):
        t = rng.integers(0, v, size=shape)
        if ignore is not None:
            flat = t.reshape(-1)
            flat[rng.choice(flat.size, n_ignore, replace=False)] = ignore
        return In(t, dtype="i64", requires_grad=False)

    def ce(x, ignore, smooth, reduction):
        v = x[0].shape[-1]
        out = F.cross_entropy(x[0].reshape(-1, v), x[1].reshape(-1), ignore_index=ignore,
                              label_smoothing=smooth, reduction=reduction)
        return out.reshape(x[1].shape) if reduction == "none" else out

    cases = [
        # tag, logits shape, ignore_index, how many ignored, smoothing, reduction
        ("mean", (6, 5), -100, 0, 0.0, "mean"),
        ("sum", (6, 5), -100, 0, 0.0, "sum"),
        ("none", (6, 5), -100, 0, 0.0, "none"),
        ("ignore_mean", (8, 5), -100, 3, 0.0, "mean"),
        ("ignore_sum", (8, 5), -100, 3, 0.0, "sum"),
        ("ignore_none", (8, 5), -100, 2, 0.0, "none"),
        ("ignore_custom_index", (8, 5), 2, 0, 0.0, "mean"),
        ("smooth_mean", (6, 5), -100, 0, 0.1, "mean"),
        ("smooth_sum", (6, 5), -100, 0, 0.1, "sum"),
        ("smooth_none", (6, 5), -100, 0, 0.1, "none"),
        ("smooth_ignore_mean", (8, 5), -100, 3, 0.1, "mean"),
        ("smooth_ignore_none", (8, 5), -100, 2, 0.1, "none"),
        ("btv_mean", (2, 3, 5), -100, 1, 0.0, "mean"),
        ("btv_none", (2, 3, 5), -100, 0, 0.1, "none"),
    ]
    for tag, shape, ignore, n_ignore, smooth, reduction in cases:
        # A custom ignore_index is a real class id, so targets may hit it without forcing.
        t = targets(shape[:-1], shape[-1], ignore if n_ignore else None, n_ignore)
        if ignore == 2:
            t.values.reshape(-1)[:2] = 2
        fam.case(f"cross_entropy_{tag}", "cross_entropy",
                 {"ignore_index": ignore, "label_smoothing": smooth, "reduction": reduction},
                 [nrm(shape, 2.0), t], lambda x, i=ignore, s=smooth, r=reduction: ce(x, i, s, r))
    fam.case("cross_entropy_transposed_logits", "cross_entropy",
             {"ignore_index": -100, "label_smoothing": 0.0, "reduction": "mean"},
             [nrm((5, 6), 2.0, views=[("transpose", 0, 1)]), targets((6,), 5)],
             lambda x: ce(x, -100, 0.0, "mean"))


def attention_reference(q, k, v, mask, causal, scale):
    """softmax(q k^T * scale + mask) v in float64; a row with no visible key gives zeros (ops.h)."""
    t, s, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, T, S)
    allowed = torch.ones(t, s, dtype=torch.bool)
    if causal:  # the last query sees the last key: query i sees keys j <= i + S - T
        allowed = torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t)
    allowed = allowed.expand(q.shape[0], q.shape[1], t, s)
    if mask is not None:
        allowed = allowed & mask[:, None, None, :]
    # A huge finite negative keeps fully masked rows finite (uniform), zeroed below, so no NaN
    # reaches the gradient.
    p = torch.softmax(scores.masked_fill(~allowed, -1e300), dim=-1)
    p = p * allowed.any(dim=-1, keepdim=True)
    return torch.matmul(p, v)


def attention_cases(fam):
    def mask(b, s, all_false_row=None):
        m = rng.uniform(size=(b, s)) < 0.7
        m[:, -1] = True  # no accidental fully-masked rows
        if all_false_row is not None:
            m[all_false_row] = False
        return In(m, dtype="bool", requires_grad=False)

    cases = [
        # tag, B, H, T, S, D, causal, scale, mask
        ("plain", 2, 2, 4, 4, 3, False, None, None),
        ("causal", 2, 2, 5, 5, 4, True, None, None),
        ("causal_t_lt_s", 1, 2, 3, 5, 4, True, None, None),
        ("padding", 2, 2, 4, 5, 3, False, None, "mask"),
        ("causal_padding", 2, 1, 5, 5, 4, True, None, "mask"),
        ("scale", 1, 2, 4, 4, 8, False, 0.3, None),
        ("fully_masked_batch", 2, 2, 3, 4, 3, False, None, "all_false_1"),
    ]
    for tag, b, h, t, s, d, causal, scale, m in cases:
        inputs = [nrm((b, h, t, d)), nrm((b, h, s, d)), nrm((b, h, s, d))]
        if m == "mask":
            inputs.append(mask(b, s))
        elif m == "all_false_1":
            inputs.append(mask(b, s, all_false_row=1))
        fam.case(f"sdpa_{tag}", "scaled_dot_product_attention",
                 {"causal": causal, "scale": scale, "has_mask": m is not None}, inputs,
                 lambda x, c=causal, sc=scale, hm=m is not None:
                 attention_reference(x[0], x[1], x[2], x[3] if hm else None, c, sc))
    # q, k, v as they come out of a (B, T, H, D) projection: transposed to (B, H, T, D).
    tr = [("transpose", 1, 2)]
    fam.case("sdpa_transposed_qkv_causal", "scaled_dot_product_attention",
             {"causal": True, "scale": None, "has_mask": False},
             [nrm((2, 4, 2, 3), views=tr), nrm((2, 4, 2, 3), views=tr), nrm((2, 4, 2, 3), views=tr)],
             lambda x: attention_reference(x[0], x[1], x[2], None, True, None))


def build(fam):
    softmax_cases(fam)
    layer_norm_cases(fam)
    embedding_cases(fam)
    cross_entropy_cases(fam)
