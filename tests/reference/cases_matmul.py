"""Reference cases for matmul (2-D, batched, broadcast batch dims, 1-D operands, transposed
operands) and linear (with and without bias, batched input). Used by gen_fixtures.py."""
import torch
import torch.nn.functional as F

from fixture_lib import uni


def build(fam):
    mm = lambda x: torch.matmul(x[0], x[1])
    shapes = [
        ("2d", (3, 4), (4, 5)),
        ("batched", (2, 3, 4), (2, 4, 5)),
        ("bcast_rhs_2d", (2, 3, 4), (4, 5)),
        ("bcast_lhs_2d", (3, 4), (2, 4, 5)),
        ("bcast_batch", (2, 1, 3, 4), (3, 4, 2)),
        ("vec_mat", (4,), (4, 3)),
        ("mat_vec", (3, 4), (4,)),
        ("dot", (5,), (5,)),
        ("vec_batched", (4,), (2, 4, 3)),
        ("batched_vec", (2, 3, 4), (4,)),
        ("k1", (3, 1), (1, 4)),
    ]
    for tag, sa, sb in shapes:
        fam.case(f"matmul_{tag}", "matmul", {}, [uni(sa), uni(sb)], mm)
    # x @ W^T with W stored (N, K): the usual non-contiguous right operand.
    fam.case("matmul_transposed_b", "matmul", {}, [uni((3, 4)), uni((5, 4), views=[("transpose", 0, 1)])],
             mm)
    fam.case("matmul_transposed_a_batched", "matmul", {},
             [uni((2, 4, 3), views=[("transpose", 1, 2)]), uni((2, 4, 5))], mm)
    fam.case("matmul_sliced", "matmul", {}, [uni((3, 8), views=[("slice", 1, 0, 8, 2)]), uni((4, 2))], mm)

    fam.case("linear_bias", "linear", {}, [uni((3, 4)), uni((5, 4)), uni((5,))],
             lambda x: F.linear(x[0], x[1], x[2]))
    fam.case("linear_no_bias", "linear", {}, [uni((3, 4)), uni((5, 4))],
             lambda x: F.linear(x[0], x[1]))
    fam.case("linear_batched", "linear", {}, [uni((2, 3, 4)), uni((6, 4)), uni((6,))],
             lambda x: F.linear(x[0], x[1], x[2]))
    fam.case("linear_transposed_x", "linear", {},
             [uni((4, 3), views=[("transpose", 0, 1)]), uni((2, 4)), uni((2,))],
             lambda x: F.linear(x[0], x[1], x[2]))
