#!/usr/bin/python3
"""Draws a training run's loss and throughput curves from the metrics file `tessera train` writes
(logging.metrics: one JSON object per line; step records have "loss" and "throughput", evaluation
records have "eval": true and their metrics) into one PNG.

Usage: tools/plot_metrics.py METRICS.jsonl [-o OUT.png] [--title TEXT]
Needs Debian's python3-matplotlib (tools/setup.sh installs it), hence /usr/bin/python3.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    steps, evals = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not JSON: {e}")
            (evals if record.get("eval") else steps).append(record)
    if not steps:
        sys.exit(f"{path}: no step records")
    # A resumed run appends: keep the last record of each step.
    by_step = {r["step"]: r for r in steps}
    return [by_step[s] for s in sorted(by_step)], evals


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics")
    parser.add_argument("-o", "--output", help="PNG path (default: METRICS with .png)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    out = args.output or (args.metrics.rsplit(".", 1)[0] + ".png")
    steps, evals = read(args.metrics)

    x = [r["step"] for r in steps]
    fig, (ax_loss, ax_rate) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    ax_loss.plot(x, [r["loss"] for r in steps], label="train loss", linewidth=1)
    for key, label in (("val_loss", "validation loss"), ("mlm_loss", "validation MLM loss")):
        points = [(r["step"], r[key]) for r in evals if key in r]
        if points:
            ax_loss.plot(*zip(*points), "o-", label=label)
    ax_loss.set_ylabel("loss (nats)")
    ax_loss.grid(alpha=0.3)
    ax_loss.legend()
    unit = steps[0].get("unit", "tok")
    ax_rate.plot(x, [r["throughput"] for r in steps], linewidth=1, color="tab:green")
    ax_rate.set_ylabel(f"{unit}/s")
    ax_rate.set_xlabel("step")
    ax_rate.grid(alpha=0.3)
    fig.suptitle(args.title or args.metrics)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}: {len(steps)} steps, {len(evals)} evaluations")


if __name__ == "__main__":
    main()
