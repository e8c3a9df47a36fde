#!/usr/bin/env python3
"""Draws docs/demo/server-demo.png from one or more runs of Examples/HTTPDemo/run-demo.sh.

    Examples/HTTPDemo/run-demo.sh && cp Examples/HTTPDemo/out/results.json docs/demo/run1.json
    pip install matplotlib
    python3 scripts/plot_demo.py docs/demo/server-demo.png docs/demo/run1.json docs/demo/run2.json
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(dst: str, sources: list) -> None:
    runs = []
    for src in sources:
        with open(src) as f:
            runs.append(json.load(f))
    variants = [("gcd", "DispatchQueue.global(qos:)"), ("lanepool", "LanePool bands")]
    pcts = [("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")]
    groups = [(f"run {n + 1} {label}", r, p) for n, r in enumerate(runs) for p, label in pcts]
    fig, ax = plt.subplots(figsize=(4 + 2.2 * len(groups) / 1.5, 4.8))
    width = 0.38
    for k, (key, label) in enumerate(variants):
        vals = [r[key][p] / 1000 for _, r, p in groups]
        xs = [i + (k - 0.5) * width for i in range(len(groups))]
        bars = ax.bar(xs, vals, width, label=label, color=["#9e9e9e", "#1e88e5"][k])
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g for g, _, _ in groups], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("GET /interactive latency, ms (log)")
    ax.set_title("GET /interactive while GET /heavy is flooded (wrk, loopback, nproc 2)", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
