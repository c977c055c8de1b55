#!/usr/bin/python3
"""Writes tests/reference/fixtures/*.json: PyTorch reference values and gradients for every
differentiable op of autograd/ops.h, read by the *_reference_test.cc files next to this script.

Run with Debian's Python (it has torch 1.13 and numpy):  /usr/bin/python3 tests/reference/gen_fixtures.py
The output is deterministic (fixed seed), so rerunning it leaves the committed files unchanged.

Precision: every input and every backward weight w is drawn, then rounded to float32, so the values
stored in the JSON are exactly what Tessera sees. PyTorch then computes in float64 from those exact
values; outputs and gradients (of sum(out * w)) are stored rounded to float32. The references are
therefore exact to float32 rounding and the C++ test's tolerance measures Tessera's own f32 error.

Case format (one JSON file per op family, {"family", "seed", "compute", "torch", "cases": [...]}):
  {"name", "op", "params",
   "inputs":  [{"shape", "dtype": f32|i64|i32|bool, "requires_grad",
                "views": [["transpose", d0, d1] | ["slice", dim, start, end, step], ...],
                "values" (flat, row-major)}],
   "weights": [one f32 tensor per output],  "outputs": [...],  "grads": [one per input, or null]}
An input with "views" is stored in its own (contiguous) layout; the test applies the views (with
the differentiable ops) before calling the op, so the op sees a non-contiguous tensor, and the
expected gradient is the one of the stored leaf.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import cases_elementwise  # noqa: E402
import cases_matmul  # noqa: E402
import cases_nn  # noqa: E402
import cases_reduce  # noqa: E402
import cases_shape  # noqa: E402
from fixture_lib import OUT_DIR, Family  # noqa: E402


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    builders = [
        ("elementwise", cases_elementwise.build),
        ("reduce", cases_reduce.build),
        ("shape", cases_shape.build),
        ("matmul", cases_matmul.build),
        ("nn", cases_nn.build),
        ("attention", cases_nn.attention_cases),
    ]
    total_bytes = 0
    for name, build in builders:
        fam = Family(name)
        build(fam)
        path, n = fam.write()
        size = os.path.getsize(path)
        total_bytes += size
        print(f"{os.path.relpath(path)}: {n} cases, {size / 1024:.0f} KiB")
    print(f"total {total_bytes / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
