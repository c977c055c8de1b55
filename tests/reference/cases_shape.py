"""Reference cases for the differentiable shape ops of autograd/ops.h: reshape, view, flatten,
permute, transpose, slice, narrow, select, expand, squeeze, unsqueeze, contiguous, cat, stack, split,
chunk, gather, index_select. Used by gen_fixtures.py."""
import numpy as np
import torch

from fixture_lib import In, rng, uni

T01 = [("transpose", 0, 1)]


def build(fam):
    c = fam.case
    c("reshape", "reshape", {"shape": [4, 6]}, [uni((2, 3, 4))], lambda x: x[0].reshape(4, 6))
    c("reshape_infer", "reshape", {"shape": [-1, 3]}, [uni((2, 3, 2))], lambda x: x[0].reshape(-1, 3))
    # A transposed input cannot be viewed: reshape must copy.
    c("reshape_transposed", "reshape", {"shape": [12]}, [uni((4, 3), views=T01)],
      lambda x: x[0].reshape(12))
    c("view", "view", {"shape": [3, 2, 4]}, [uni((6, 4))], lambda x: x[0].view(3, 2, 4))
    c("flatten_all", "flatten", {"start": 0, "end": -1}, [uni((2, 3, 4))], lambda x: x[0].flatten())
    c("flatten_inner", "flatten", {"start": 1, "end": 2}, [uni((2, 3, 4))],
      lambda x: x[0].flatten(1, 2))
    c("permute", "permute", {"dims": [2, 0, 1]}, [uni((2, 3, 4))], lambda x: x[0].permute(2, 0, 1))
    c("permute_neg", "permute", {"dims": [-1, 1, 0]}, [uni((2, 3, 4))],
      lambda x: x[0].permute(2, 1, 0))
    c("transpose", "transpose", {"d0": 0, "d1": 2}, [uni((2, 3, 4))], lambda x: x[0].transpose(0, 2))
    c("transpose_neg", "transpose", {"d0": -1, "d1": -2}, [uni((2, 3, 4))],
      lambda x: x[0].transpose(-1, -2))
    c("slice", "slice", {"dim": 1, "start": 1, "end": 4, "step": 1}, [uni((3, 5))],
      lambda x: x[0][:, 1:4])
    c("slice_step", "slice", {"dim": 0, "start": 1, "end": 7, "step": 2}, [uni((7, 3))],
      lambda x: x[0][1:7:2])
    c("slice_transposed", "slice", {"dim": 1, "start": 0, "end": 3, "step": 2}, [uni((4, 3), views=T01)],
      lambda x: x[0][:, 0:3:2])
    c("narrow", "narrow", {"dim": -1, "start": 2, "length": 3}, [uni((2, 3, 6))],
      lambda x: x[0].narrow(-1, 2, 3))
    c("select", "select", {"dim": 1, "index": 2}, [uni((2, 4, 3))], lambda x: x[0].select(1, 2))
    c("select_neg_dim", "select", {"dim": -1, "index": 0}, [uni((3, 4))], lambda x: x[0].select(-1, 0))
    c("expand", "expand", {"shape": [3, 4]}, [uni((3, 1))], lambda x: x[0].expand(3, 4))
    c("expand_new_dim", "expand", {"shape": [2, 3, 4]}, [uni((3, 1))], lambda x: x[0].expand(2, 3, 4))
    c("squeeze", "squeeze", {"dim": 1}, [uni((3, 1, 4))], lambda x: x[0].squeeze(1))
    c("unsqueeze", "unsqueeze", {"dim": -1}, [uni((3, 4))], lambda x: x[0].unsqueeze(-1))
    c("unsqueeze_front", "unsqueeze", {"dim": 0}, [uni((3, 4))], lambda x: x[0].unsqueeze(0))
    c("contiguous_transposed", "contiguous", {}, [uni((4, 3), views=T01)],
      lambda x: x[0].contiguous())

    c("cat_dim0", "cat", {"dim": 0}, [uni((2, 3)), uni((1, 3)), uni((3, 3))],
      lambda x: torch.cat(x, 0))
    c("cat_dim_neg1", "cat", {"dim": -1}, [uni((2, 3, 1)), uni((2, 3, 4))], lambda x: torch.cat(x, -1))
    c("cat_transposed", "cat", {"dim": 1}, [uni((3, 2), views=T01), uni((2, 4))],
      lambda x: torch.cat(x, 1))
    c("stack_dim0", "stack", {"dim": 0}, [uni((2, 3)), uni((2, 3)), uni((2, 3))],
      lambda x: torch.stack(x, 0))
    c("stack_dim_last", "stack", {"dim": -1}, [uni((2, 3)), uni((3, 2), views=T01)],
      lambda x: torch.stack(x, -1))
    c("split_even", "split", {"split_size": 2, "dim": 1}, [uni((3, 6))],
      lambda x: torch.split(x[0], 2, 1))
    c("split_uneven", "split", {"split_size": 2, "dim": 0}, [uni((5, 3))],
      lambda x: torch.split(x[0], 2, 0))
    c("chunk", "chunk", {"chunks": 3, "dim": -1}, [uni((2, 7))], lambda x: torch.chunk(x[0], 3, -1))

    # gather: repeated indices accumulate into the gradient.
    idx = In(rng.integers(0, 4, size=(3, 5)), dtype="i64", requires_grad=False)
    c("gather_dim1", "gather", {"dim": 1}, [uni((3, 4)), idx], lambda x: torch.gather(x[0], 1, x[1]))
    idx = In(rng.integers(0, 3, size=(2, 3, 2)), dtype="i64", requires_grad=False)
    c("gather_dim0", "gather", {"dim": 0}, [uni((3, 3, 2)), idx], lambda x: torch.gather(x[0], 0, x[1]))
    idx = In(rng.integers(0, 4, size=(3, 2)), dtype="i64", requires_grad=False)
    c("gather_transposed", "gather", {"dim": 1}, [uni((4, 3), views=T01), idx],
      lambda x: torch.gather(x[0], 1, x[1]))
    ids = In(np.array([2, 0, 2, 3, 1]), dtype="i64", requires_grad=False)
    c("index_select_dim0", "index_select", {"dim": 0}, [uni((4, 3)), ids],
      lambda x: torch.index_select(x[0], 0, x[1]))
    ids = In(np.array([1, 1, 0]), dtype="i32", requires_grad=False)
    c("index_select_dim_neg1_i32", "index_select", {"dim": -1}, [uni((2, 3, 2)), ids],
      lambda x: torch.index_select(x[0], -1, x[1]))
