#!/usr/bin/env python3
"""PyTorch's side of `bench adam`: torch.optim.AdamW(foreach=True) steps on parameters of the
given shapes (f32, CPU), timed like Tessera's side: untimed warm-up steps, then the median of the
timed ones.

Usage: adam_torch_peer.py --train-spec FILE --threads N   (the flag the bench's peer client passes)
FILE: {"cases": [{"id", "shapes": [[d0, d1, ...], ...]}], "warmup", "steps", "lr", "betas",
       "eps", "weight_decay"}
Prints one JSON object on stdout: {"torch_version", "threads", "blas", "results": [{"id",
"seconds"}]} or {"error": "..."}.
"""
import argparse
import json
import statistics
import sys
import time


def time_case(torch, case, spec):
    gen = torch.Generator().manual_seed(1234)
    params = [torch.randn(*shape, generator=gen).requires_grad_() for shape in case["shapes"]]
    for p in params:
        p.grad = torch.randn(*p.shape, generator=gen)
    opt = torch.optim.AdamW(params, lr=spec["lr"], betas=tuple(spec["betas"]), eps=spec["eps"],
                            weight_decay=spec["weight_decay"], foreach=True)
    for _ in range(spec["warmup"]):
        opt.step()
    times = []
    for _ in range(spec["steps"]):
        start = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-spec", required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer"
        print(json.dumps({"error": f"PyTorch is not importable by {sys.executable}: {e}"}))
        return
    torch.set_num_threads(args.threads)
    with open(args.train_spec) as f:
        spec = json.load(f)
    results = [{"id": c["id"], "seconds": time_case(torch, c, spec)} for c in spec["cases"]]
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "blas": "n/a (element-wise)", "results": results}))


if __name__ == "__main__":
    main()
