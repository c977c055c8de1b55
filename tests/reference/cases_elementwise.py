"""Reference cases for the element-wise ops of autograd/ops.h (binary with broadcasting, scalar
operands, unary math and activations, where / masked_fill / clamp). Used by gen_fixtures.py."""
import torch
import torch.nn.functional as F

from fixture_lib import In, away_from, bools, f32, nrm, rng, uni

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum,
}


def binary_inputs(op, sa, sb, a_views=(), b_views=()):
    if op == "div":
        # Denominators kept away from zero so f32 rounding stays relative.
        sign = rng.choice([-1.0, 1.0], size=sb)
        return [uni(sa, views=a_views), In(f32(sign * rng.uniform(0.5, 2.0, size=sb)), views=b_views)]
    return [uni(sa, views=a_views), uni(sb, views=b_views)]


def build(fam):
    # Binary ops over the broadcasting patterns.
    shapes = [
        ("same", (3, 4), (3, 4)),
        ("bcast_row", (2, 3, 4), (4,)),
        ("bcast_outer", (3, 1), (1, 4)),
        ("bcast_3d", (2, 1, 4), (3, 1)),
        ("bcast_scalar_tensor", (3, 4), ()),
    ]
    for op, fn in BINARY.items():
        for tag, sa, sb in shapes:
            fam.case(f"{op}_{tag}", op, {}, binary_inputs(op, sa, sb), lambda x, fn=fn: fn(x[0], x[1]))
        # Non-contiguous operands: a transposed a, and a b sliced with step 2.
        fam.case(f"{op}_transposed_a", op, {},
                 binary_inputs(op, (4, 3), (3, 4), a_views=[("transpose", 0, 1)]),
                 lambda x, fn=fn: fn(x[0], x[1]))
        fam.case(f"{op}_strided_b", op, {},
                 binary_inputs(op, (3, 4), (3, 8), b_views=[("slice", 1, 0, 8, 2)]),
                 lambda x, fn=fn: fn(x[0], x[1]))

    # pow: positive bases with a tensor exponent (both get gradients).
    for tag, sa, sb in [("same", (3, 4), (3, 4)), ("bcast", (2, 3, 4), (1, 4))]:
        fam.case(f"pow_{tag}", "pow", {}, [uni(sa, 0.5, 2.0), uni(sb, -1.5, 1.5)],
                 lambda x: torch.pow(x[0], x[1]))
    for e in [2.5, 0.5, -0.5, 2.0]:
        fam.case(f"pow_scalar_{e}", "pow_scalar", {"exponent": e}, [uni((3, 4), 0.5, 2.0)],
                 lambda x, e=e: torch.pow(x[0], e))
    # An integer exponent is defined for negative bases too.
    fam.case("pow_scalar_3_mixed_sign", "pow_scalar", {"exponent": 3.0}, [uni((3, 4))],
             lambda x: torch.pow(x[0], 3.0))

    # Tensor-scalar overloads and the operators.
    scalar_ops = {
        "add_scalar": lambda t, s: t + s, "sub_scalar": lambda t, s: t - s,
        "mul_scalar": lambda t, s: t * s, "div_scalar": lambda t, s: t / s,
        "radd_scalar": lambda t, s: s + t, "rsub_scalar": lambda t, s: s - t,
        "rmul_scalar": lambda t, s: s * t,
    }
    for op, fn in scalar_ops.items():
        fam.case(op, op, {"scalar": -1.75}, [uni((2, 3, 4))], lambda x, fn=fn: fn(x[0], -1.75))
    fam.case("rdiv_scalar", "rdiv_scalar", {"scalar": 1.5}, [uni((3, 4), 0.5, 2.0)],
             lambda x: 1.5 / x[0])
    operators = {"op_add": torch.add, "op_sub": torch.sub, "op_mul": torch.mul}
    for op, fn in operators.items():
        fam.case(op, op, {}, [uni((2, 3)), uni((3,))], lambda x, fn=fn: fn(x[0], x[1]))
    fam.case("op_div", "op_div", {}, [uni((2, 3)), uni((3,), 0.5, 2.0)], lambda x: x[0] / x[1])
    fam.case("op_neg", "op_neg", {}, [uni((2, 3))], lambda x: -x[0])

    # Unary math: (domain, torch fn).
    unary = {
        "neg": ("any", torch.neg), "abs": ("kink0", torch.abs), "exp": ("any", torch.exp),
        "log": ("pos", torch.log), "sqrt": ("pos", torch.sqrt), "rsqrt": ("pos", torch.rsqrt),
        "square": ("any", torch.square), "reciprocal": ("pos", torch.reciprocal),
        "sin": ("wide", torch.sin), "cos": ("wide", torch.cos), "tanh": ("any", torch.tanh),
        "sigmoid": ("wide", torch.sigmoid), "relu": ("kink0", torch.relu),
        "silu": ("wide", F.silu), "sign": ("kink0", torch.sign),
    }

    def unary_input(domain, shape, views=()):
        if domain == "pos":
            return uni(shape, 0.3, 3.0, views=views)
        if domain == "wide":
            return uni(shape, -5.0, 5.0, views=views)
        x = uni(shape, -2.5, 2.5, views=views)
        if domain == "kink0":
            x.values = away_from(x.values, [0.0])
        return x

    for op, (domain, fn) in unary.items():
        fam.case(op, op, {}, [unary_input(domain, (3, 5))], lambda x, fn=fn: fn(x[0]))
        fam.case(f"{op}_transposed", op, {}, [unary_input(domain, (2, 4, 3), [("transpose", 1, 2)])],
                 lambda x, fn=fn: fn(x[0]))
    for approx in ["tanh", "none"]:
        fam.case(f"gelu_{approx}", "gelu", {"approximate": approx}, [uni((4, 6), -4.0, 4.0)],
                 lambda x, a=approx: F.gelu(x[0], approximate=a))
        fam.case(f"gelu_{approx}_transposed", "gelu", {"approximate": approx},
                 [uni((5, 3), -4.0, 4.0, views=[("transpose", 0, 1)])],
                 lambda x, a=approx: F.gelu(x[0], approximate=a))

    # where: cond broadcast against a and b.
    fam.case("where_same", "where", {}, [bools((3, 4)), uni((3, 4)), uni((3, 4))],
             lambda x: torch.where(x[0], x[1], x[2]))
    fam.case("where_bcast", "where", {}, [bools((3, 1)), uni((2, 3, 4)), uni((4,))],
             lambda x: torch.where(x[0], x[1], x[2]))
    fam.case("where_transposed", "where", {},
             [bools((4, 3), ), uni((3, 4), views=[("transpose", 0, 1)]), uni((4, 3))],
             lambda x: torch.where(x[0], x[1], x[2]))

    fam.case("masked_fill_same", "masked_fill", {"value": -3.5}, [uni((3, 4)), bools((3, 4))],
             lambda x: x[0].masked_fill(x[1], -3.5))
    fam.case("masked_fill_bcast", "masked_fill", {"value": 0.25}, [uni((2, 3, 4)), bools((3, 1))],
             lambda x: x[0].masked_fill(x[1], 0.25))

    for tag, lo, hi in [("both", -0.5, 0.7), ("lo", -0.5, None), ("hi", None, 0.7)]:
        x = uni((4, 5), -1.5, 1.5)
        x.values = away_from(x.values, [b for b in (lo, hi) if b is not None], 0.02)
        fam.case(f"clamp_{tag}", "clamp", {"lo": lo, "hi": hi}, [x],
                 lambda x, lo=lo, hi=hi: torch.clamp(x[0], lo, hi))
    x = uni((5, 4), -1.5, 1.5, views=[("transpose", 0, 1)])
    x.values = away_from(x.values, [-0.5, 0.7], 0.02)
    fam.case("clamp_transposed", "clamp", {"lo": -0.5, "hi": 0.7}, [x],
             lambda x: torch.clamp(x[0], -0.5, 0.7))
