#!/usr/bin/python3
"""PyTorch (eager, CPU) peer for `bench kernels`: times the same ops on the same shapes.

Reads a JSON list of cases ({"id", "op", "dims"}) written by the C++ bench, times each op with the
same protocol (warm-up, then the median of repetitions) and prints one JSON object on stdout:
{"torch_version", "threads", "blas", "results": [{"id", "seconds"}]} or {"error": "..."}.
Run it with Debian's /usr/bin/python3 (the one that sees python3-torch) and with
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset so OpenBLAS picks its best kernels for this CPU.
"""

import argparse
import json
import math
import statistics
import sys
import time


def median_seconds(fn, warmup, min_seconds, min_reps, max_reps):
    """Median wall time of fn() after `warmup` untimed calls (the protocol of timer.h)."""
    for _ in range(warmup):
        fn()
    times = []
    spent = 0.0
    while len(times) < max_reps and (len(times) < min_reps or spent < min_seconds):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        spent += elapsed
    return statistics.median(times)


def loaded_blas():
    """Which BLAS library this process mapped (torch 1.13 from Debian links libblas.so.3)."""
    try:
        with open("/proc/self/maps") as maps:
            text = maps.read()
    except OSError:
        return "unknown"
    for name in ("openblas-openmp", "openblas-pthread", "openblas-serial", "openblas", "mkl",
                 "blis", "atlas"):
        if name in text:
            return name
    if "libblas.so" in text:
        return "reference (netlib)"
    return "unknown"


def make_case(torch, op, dims):
    """Builds inputs once and returns the callable to time for one case."""
    F = torch.nn.functional
    aten = torch.ops.aten
    randn = torch.randn
    if op == "linear":
        m, k, n = dims
        x, w, b = randn(m, k), randn(n, k), randn(n)
        return lambda: F.linear(x, w, b)
    if op in ("layer_norm", "layer_norm_bwd"):
        n, c = dims
        x, w, b = randn(n, c), randn(c), randn(c)
        if op == "layer_norm":
            return lambda: F.layer_norm(x, (c,), w, b, 1e-5)
        _, mean, rstd = aten.native_layer_norm(x, [c], w, b, 1e-5)
        gy = randn(n, c)
        return lambda: aten.native_layer_norm_backward(gy, x, [c], mean, rstd, w, b,
                                                       [True, True, True])
    if op in ("softmax", "softmax_bwd"):
        rows, cols = dims
        x = randn(rows, cols)
        if op == "softmax":
            return lambda: torch.softmax(x, -1)
        y = torch.softmax(x, -1)
        gy = randn(rows, cols)
        return lambda: torch._softmax_backward_data(gy, y, -1, x.dtype)
    if op in ("gelu_tanh", "gelu_tanh_bwd"):
        n, c = dims
        x = randn(n, c)
        if op == "gelu_tanh":
            return lambda: F.gelu(x, approximate="tanh")
        gy = randn(n, c)
        return lambda: aten.gelu_backward(gy, x, approximate="tanh")
    if op in ("attention", "attention_fwd_bwd"):
        # Eager attention as GPT-2 code writes it: softmax(Q K^T * scale, causal mask) V.
        b, h, t, d = dims
        scale = 1.0 / math.sqrt(d)
        hidden = ~torch.ones(t, t, dtype=torch.bool).tril()
        q, k, v = randn(b, h, t, d), randn(b, h, t, d), randn(b, h, t, d)

        def forward(q, k, v):
            scores = (q @ k.transpose(-2, -1)) * scale
            scores = scores.masked_fill(hidden, float("-inf"))
            return torch.softmax(scores, -1) @ v

        if op == "attention":
            return lambda: forward(q, k, v)
        for leaf in (q, k, v):
            leaf.requires_grad_(True)
        grad_out = randn(b, h, t, d)

        def forward_backward():
            with torch.enable_grad():
                for leaf in (q, k, v):
                    leaf.grad = None
                forward(q, k, v).backward(grad_out)

        return forward_backward
    raise ValueError(f"[torch_peer] expected a known op, got '{op}'")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="JSON file: list of {id, op, dims}")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--min-seconds", type=float, default=0.4)
    parser.add_argument("--min-reps", type=int, default=5)
    parser.add_argument("--max-reps", type=int, default=1000)
    args = parser.parse_args()

    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"PyTorch is not importable by {sys.executable}: {e}"}))
        return 0
    with open(args.spec) as f:
        cases = json.load(f)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = []
    with torch.no_grad():
        for case in cases:
            fn = make_case(torch, case["op"], case["dims"])
            seconds = median_seconds(fn, args.warmup, args.min_seconds, args.min_reps,
                                     args.max_reps)
            results.append({"id": case["id"], "seconds": seconds})
            del fn
    print(json.dumps({
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "blas": loaded_blas(),
        "results": results,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
