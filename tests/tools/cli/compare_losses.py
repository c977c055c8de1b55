"""Compares the per-step losses of two metrics files (JSON lines): same steps, relative difference
at most TOL. Usage: compare_losses.py A.jsonl B.jsonl TOL"""
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if not record.get("eval"):
                out[record["step"]] = record["loss"]
    return out


a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if sorted(a) != sorted(b) or not a:
    sys.exit(f"steps differ: {sorted(a)} vs {sorted(b)}")
worst = max(abs(a[s] - b[s]) / max(abs(a[s]), 1e-12) for s in a)
print(f"{len(a)} steps, losses {a[min(a)]:.6f} -> {a[max(a)]:.6f}, worst relative difference {worst:.2e}")
sys.exit(0 if worst <= tol else f"relative difference {worst:.2e} > {tol}")
