#!/usr/bin/python3
"""PyTorch (eager) peer for `bench kernels`, `bench train` and `bench cuda`: same work, same shapes.

--serve (bench kernels): one JSON list of cases ({"id", "op", "dims"}) per line of stdin, each
answered by one line on stdout, until stdin closes, so the bench can alternate the two sides case by
case; each op is timed with the same protocol as the C++ side (warm-up, then the median of
repetitions).
--train-spec FILE (bench train): {"config": GPTConfig JSON, "shapes": [{"id", "batch", "seq"}],
"warmup", "steps", "lr", "weight_decay"}; per shape a fresh GPT (torch_gpt.py) and AdamW, warm-up
steps, then the median of `steps` timed steps (forward, backward, AdamW step), and the process's
peak RSS during that shape.
--cuda-spec FILE --device N (bench cuda): one section of GPU cases (GEMMs, flash attention, the GPT
training step) on cuda:N; see torch_cuda_peer.py.
Prints one JSON object on stdout (--serve: one line per request): {"torch_version", "threads",
"blas"[, "device"], "results": [{"id", "seconds"[, "peak_rss_bytes" | "peak_device_bytes"]}]} or
{"error": "..."}.
Run it with Debian's /usr/bin/python3 (the one that sees python3-torch); the bench sets
OPENBLAS_CORETYPE to the kernel family of the host's ISA (OpenBLAS 0.3.21's own detection falls back
to SSE3 kernels on CPUs newer than itself), and "blas" names the family OpenBLAS reports it runs.
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
    """Which BLAS library this process mapped (torch 1.13 from Debian links libblas.so.3), and for
    OpenBLAS the kernel family it runs: "openblas-openmp (SkylakeX)"."""
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return "unknown"
    text = "\n".join(lines)
    for name in ("openblas-openmp", "openblas-pthread", "openblas-serial", "openblas", "mkl",
                 "blis", "atlas"):
        if name in text:
            if name.startswith("openblas"):
                return f"{name} ({openblas_core(lines, name)})"
            return name
    if "libblas.so" in text:
        return "reference (netlib)"
    return "unknown"


def openblas_core(maps_lines, name):
    """openblas_get_corename() of the mapped OpenBLAS ("unknown kernels" when not callable)."""
    import ctypes

    for line in maps_lines:
        path = line.split()[-1] if line.split() else ""
        if name in path and path.startswith("/"):
            try:
                get = ctypes.CDLL(path).openblas_get_corename
                get.restype = ctypes.c_char_p
                return get().decode()
            except (OSError, AttributeError):
                continue
    return "unknown kernels"


def reset_peak_rss():
    """Sets the kernel's peak-RSS mark (VmHWM) to the current RSS; False where Linux refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes():
    """VmHWM of this process in bytes (0 when /proc is unreadable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def time_train_steps(torch, spec):
    """One result per shape: median seconds of a GPT training step and the peak RSS meanwhile."""
    import gc

    from torch_gpt import GPT

    results = []
    for shape in spec["shapes"]:
        torch.manual_seed(0)
        gc.collect()
        reset_peak_rss()
        model = GPT(spec["config"])
        opt = torch.optim.AdamW(model.parameters(), lr=spec.get("lr", 1e-4),
                                weight_decay=spec.get("weight_decay", 0.01))
        vocab = spec["config"]["vocab_size"]
        ids = torch.randint(0, vocab, (shape["batch"], shape["seq"] + 1))
        x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()  # (B, T) each

        def step():
            opt.zero_grad(set_to_none=True)
            model.loss(x, y).backward()
            opt.step()

        steps = spec.get("steps", 5)
        seconds = median_seconds(step, spec.get("warmup", 2), 0.0, steps, steps)
        results.append({"id": shape["id"], "seconds": seconds, "peak_rss_bytes": peak_rss_bytes()})
        del model, opt, step
    return results


def make_case(torch, op, dims):
    """Builds inputs once and returns the callable to time for one case."""
    F = torch.nn.functional
    aten = torch.ops.aten
    randn = torch.randn
    if op == "linear":
        m, k, n = dims
        x, w, b = randn(m, k), randn(n, k), randn(n)
        return lambda: F.linear(x, w, b)
    if op == "linear_bwd":
        # What a linear's backward computes, each result in its parameter's layout.
        m, k, n = dims
        x, w, gy = randn(m, k), randn(n, k), randn(m, n)

        def backward():
            torch.mm(gy, w)
            torch.mm(gy.t(), x)
            gy.sum(0)

        return backward
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


def time_cases(torch, cases, args):
    """One result per kernel case: median seconds per call, gradients off."""
    results = []
    with torch.no_grad():
        for case in cases:
            fn = make_case(torch, case["op"], case["dims"])
            seconds = median_seconds(fn, args.warmup, args.min_seconds, args.min_reps,
                                     args.max_reps)
            results.append({"id": case["id"], "seconds": seconds})
            del fn
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group(required=True)
    modes.add_argument("--train-spec", help="JSON file: GPT config and shapes (bench train)")
    modes.add_argument("--cuda-spec", help="JSON file: one section of GPU cases (bench cuda)")
    modes.add_argument("--serve", action="store_true",
                       help="answer one case list per stdin line (bench kernels)")
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (--cuda-spec)")
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
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.cuda_spec:
        from torch_cuda_peer import run_cuda_spec

        with open(args.cuda_spec) as f:
            answer = run_cuda_spec(torch, json.load(f), args.device)
        if "error" not in answer:
            answer.update({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                           "blas": "cuBLAS"})
        print(json.dumps(answer))
        return 0

    def answer_with(results):
        return json.dumps({
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
            "blas": loaded_blas(),
            "results": results,
        })

    if args.serve:
        for line in sys.stdin:
            try:
                reply = answer_with(time_cases(torch, json.loads(line), args))
            except Exception as e:  # a bad request is answered, and the next one served
                reply = json.dumps({"error": f"{type(e).__name__}: {e}"})
            print(reply, flush=True)
        return 0
    with open(args.train_spec) as f:
        print(answer_with(time_train_steps(torch, json.load(f))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
