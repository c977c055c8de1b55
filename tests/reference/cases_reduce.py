"""Reference cases for the reductions of autograd/ops.h: sum, mean, amax, amin, var, std, norm
(over all dims, chosen dims, negative dims, keepdim) and sum_to. Used by gen_fixtures.py."""
import torch

from fixture_lib import uni


def dims_arg(dims, ndim):
    # An empty list means every dim (ops.h); PyTorch wants them spelled out for amax/amin.
    return list(range(ndim)) if not dims else dims


def build(fam):
    layouts = [
        ("all", (3, 4), [], False),
        ("dim1", (3, 4), [1], False),
        ("dim0_keep", (3, 4), [0], True),
        ("neg_dim", (2, 3, 4), [-1], False),
        ("dims02_keep", (2, 3, 4), [0, 2], True),
        ("dims_neg12", (2, 3, 4), [-2, -1], False),
        ("all_keep", (2, 3, 4), [], True),
    ]
    simple = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}
    for op, fn in simple.items():
        for tag, shape, dims, keep in layouts:
            fam.case(f"{op}_{tag}", op, {"dims": dims, "keepdim": keep}, [uni(shape)],
                     lambda x, fn=fn, d=dims, k=keep: fn(x[0], dims_arg(d, x[0].dim()), keepdim=k))
        # A transposed (non-contiguous) input reduced over its inner dim.
        fam.case(f"{op}_transposed", op, {"dims": [1], "keepdim": False},
                 [uni((5, 3), views=[("transpose", 0, 1)])],
                 lambda x, fn=fn: fn(x[0], [1], keepdim=False))

    for op, fn in {"var": torch.var, "std": torch.std}.items():
        for tag, shape, dims, keep in layouts[:5]:
            for corr in [1, 0]:
                fam.case(f"{op}_{tag}_c{corr}", op, {"dims": dims, "correction": corr, "keepdim": keep},
                         [uni(shape)],
                         lambda x, fn=fn, d=dims, k=keep, c=corr:
                         fn(x[0], dims_arg(d, x[0].dim()), correction=c, keepdim=k))
        fam.case(f"{op}_transposed", op, {"dims": [-1], "correction": 1, "keepdim": True},
                 [uni((6, 2, 3), views=[("transpose", 0, 2)])],
                 lambda x, fn=fn: fn(x[0], [-1], correction=1, keepdim=True))

    norm_cases = [
        ("p2_all", 2.0, (3, 4), [], False),
        ("p2_dim1_keep", 2.0, (3, 4), [1], True),
        ("p1_dim0", 1.0, (3, 4), [0], False),
        ("p3_neg_dim", 3.0, (2, 3, 4), [-1], False),
        ("pinf_all", "inf", (3, 4), [], False),
        ("pinf_dim1", "inf", (2, 3, 4), [1], False),
    ]
    for tag, p, shape, dims, keep in norm_cases:
        x = uni(shape)
        fam.case(f"norm_{tag}", "norm", {"p": p, "dims": dims, "keepdim": keep}, [x],
                 lambda x, p=p, d=dims, k=keep: torch.linalg.vector_norm(
                     x[0], float(p), dim=(d if d else None), keepdim=k))
    fam.case("norm_p2_transposed", "norm", {"p": 2.0, "dims": [0], "keepdim": False},
             [uni((4, 3), views=[("transpose", 0, 1)])],
             lambda x: torch.linalg.vector_norm(x[0], 2.0, dim=[0]))

    for tag, shape, target in [("lead", (2, 3, 4), [3, 4]), ("ones", (2, 3, 4), [2, 1, 4]),
                               ("scalar", (3, 4), []), ("row", (3, 4), [1, 4])]:
        fam.case(f"sum_to_{tag}", "sum_to", {"shape": target}, [uni(shape)],
                 lambda x, t=target: x[0].sum_to_size(t) if t else x[0].sum())
