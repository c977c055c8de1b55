"""Compares the per-step losses of two metrics files (JSON lines): same steps, relative difference
at most TOL; with --grad-norms their gradient norms too (the runs must record them: grad_clip > 0).
Usage: compare_losses.py A.jsonl B.jsonl TOL [--grad-norms]"""
import json
import sys


def per_step(path, key):
    out = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if not record.get("eval") and key in record:
                out[record["step"]] = record[key]
    return out


def compare(key, what, digits):
    a, b = per_step(sys.argv[1], key), per_step(sys.argv[2], key)
    if sorted(a) != sorted(b) or not a:
        sys.exit(f"{what}: steps differ: {sorted(a)} vs {sorted(b)}")
    worst = max(abs(a[s] - b[s]) / max(abs(a[s]), 1e-12) for s in a)
    text = (f"{what} {a[min(a)]:.{digits}f} -> {a[max(a)]:.{digits}f}, "
            f"worst relative difference {worst:.2e}")
    if worst > tol:
        sys.exit(f"{text}: relative difference {worst:.2e} > {tol}")
    return len(a), text


tol = float(sys.argv[3])
steps, text = compare("loss", "losses", 6)
if "--grad-norms" in sys.argv[4:]:
    text += "; " + compare("grad_norm", "gradient norms", 4)[1]
print(f"{steps} steps, {text}")
