"""PyTorch on the GPU for `bench cuda` (torch_peer.py --cuda-spec FILE --device N): the same cases
as Tessera, on the same GPU, with the same timing protocol (tools/bench/cuda_bench.cc).

The spec is one section (tools/bench/cuda_cases.cc, cuda_spec_json):
  gemm:      cases {"id", "dtype", "m", "k", "n", "calls"}: torch.matmul(a, b, out=c).
  attention: cases {"id", "pass": "fwd" | "fwd_bwd", "b", "h", "t", "d", "causal", "calls"}:
             F.scaled_dot_product_attention on the flash backend, bf16.
  train:     cases {"id", "precision": "f32" | "bf16", "batch", "seq"} with "config", "steps", "lr",
             "weight_decay": torch_gpt.py's GPT on the GPU with fused attention and AdamW; bf16
             through autocast over f32 weights.
Kernel cases: the median over "reps" of CUDA-event time around "calls" back-to-back calls, per
call, after "warmup" calls. Training: the median wall time of "steps" steps, synchronised after
each, after "warmup" steps, and torch.cuda.max_memory_allocated over the case.
TF32 stays off, as in Tessera, so f32 means f32 on both sides.
"""

import statistics
import sys


def guarded(case, fn):
    """fn() -> result dict; a case that raises (out of memory, no flash kernel for a shape) gives
    seconds 0, which the bench shows as missing, and its error on stderr (the bench's log)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - any failure of one case must not lose the others
        print(f"[torch_cuda_peer] case {case['id']} failed: {type(e).__name__}: {e}",
              file=sys.stderr)
        return {"id": case["id"], "seconds": 0.0}


def event_seconds(torch, fn, warmup, reps, calls):
    """Median seconds per call: events around `calls` calls, `reps` times, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e-3 / calls


def torch_dtype(torch, name):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def gemm_case(torch, case, dev):
    dtype = torch_dtype(torch, case["dtype"])
    a = torch.randn(case["m"], case["k"], device=dev, dtype=dtype)  # (M, K)
    b = torch.randn(case["k"], case["n"], device=dev, dtype=dtype)  # (K, N)
    out = torch.empty(case["m"], case["n"], device=dev, dtype=dtype)  # (M, N)
    return lambda: torch.matmul(a, b, out=out)


def attention_case(torch, case, dev):
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shape = (case["b"], case["h"], case["t"], case["d"])  # (B, H, T, D)
    q, k, v, grad_out = (torch.randn(*shape, device=dev, dtype=torch.bfloat16) for _ in range(4))
    causal = case.get("causal", True)
    if case["pass"] == "fwd":
        def forward():
            with torch.no_grad(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return forward
    for t in (q, k, v):
        t.requires_grad_(True)

    def forward_backward():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        # torch.autograd.grad skips accumulating into .grad, as Tessera's kernels overwrite theirs.
        torch.autograd.grad(out, (q, k, v), grad_out)
    return forward_backward


def time_kernels(torch, spec, dev):
    make = gemm_case if spec["section"] == "gemm" else attention_case
    results = []
    for case in spec["cases"]:
        def run(case=case):
            fn = make(torch, case, dev)
            seconds = event_seconds(torch, fn, spec["warmup"], spec["reps"], case.get("calls", 1))
            return {"id": case["id"], "seconds": seconds}
        results.append(guarded(case, run))
        torch.cuda.empty_cache()
    return results


def time_train(torch, spec, dev):
    import gc
    import time

    from torch_gpt import GPT

    def train_case(case):
        torch.manual_seed(0)
        torch.cuda.reset_peak_memory_stats(dev)
        model = GPT(spec["config"], fused_attention=True).to(dev)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=spec.get("lr", 1e-4),
                                weight_decay=spec.get("weight_decay", 0.01))
        vocab = spec["config"]["vocab_size"]
        ids = torch.randint(0, vocab, (case["batch"], case["seq"] + 1), device=dev)
        x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()  # (B, T) each
        bf16 = case["precision"] == "bf16"

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=bf16):
                loss = model.loss(x, y)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()

        for _ in range(spec.get("warmup", 2)):
            step()
        times = []
        for _ in range(spec.get("steps", 5)):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return {"id": case["id"], "seconds": statistics.median(times),
                "peak_device_bytes": torch.cuda.max_memory_allocated(dev)}

    results = []
    for case in spec["cases"]:
        results.append(guarded(case, lambda case=case: train_case(case)))
        gc.collect()  # the case's model and optimizer go before the next one is built
        torch.cuda.empty_cache()
    return results


def run_cuda_spec(torch, spec, device):
    """Returns the answer object's fields: device name and one result per case."""
    if not torch.cuda.is_available():
        return {"error": f"PyTorch {torch.__version__} sees no CUDA GPU"}
    dev = torch.device("cuda", device)
    torch.cuda.set_device(dev)
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # PyTorch >= 2.9
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
    section = spec["section"]
    if section in ("gemm", "attention"):
        results = time_kernels(torch, spec, dev)
    elif section == "train":
        results = time_train(torch, spec, dev)
    else:
        return {"error": f"[torch_cuda_peer] expected the section gemm, attention or train, "
                         f"got '{section}'"}
    return {"device": torch.cuda.get_device_name(dev), "results": results}
