#!/usr/bin/env python3
"""Draws lanepool-bench's JSON: one plot per workload, or a three-panel overview of one run.

    swift run -c release lanepool-bench --json docs/bench/results.json
    pip install matplotlib
    python3 scripts/plot_bench.py docs/bench/results.json docs/bench/benchmarks.png [--run N]

Panels: W1/W2 throughput per subject; W3 wake latency percentiles per subject (with
the raw condition-variable floor); W4 probe p99 idle vs loaded per subject.

The JSON has one entry per run under "runs" (`--repeat N` makes N); --run picks which
one is drawn (1-based, default 1). A file from before "runs" (the workloads at the top
level, W4's percentiles flat) is read too.

One plot per workload (what docs/benchmarks.md shows):

    python3 scripts/plot_bench.py --per-workload docs/bench/plots docs/bench/results.json docs/bench/w3b.json

writes DIR/<workload>.png for every workload of w1 w2 w3 w3b w3i w4 w5 w7 w8 w9 found in
the files (the first file that has a workload is the one drawn): each bar is the median
over the file's runs, its whisker the min and max, and the title names the machine and
the number of runs.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def w4_p99(r: dict, subject: str, which: str) -> float:
    """W4's p99 (us), `which` "idle" or "loaded": nested now, flat in older files."""
    e = r["w4"][subject]
    return e[which]["p99_us"] if which in e else e[f"{which}_p99_us"]


def main(src: str, dst: str, run: int) -> None:
    with open(src) as f:
        top = json.load(f)
    if "runs" in top:
        if not 1 <= run <= len(top["runs"]):
            sys.exit(f"--run {run}: the file has runs 1 to {len(top['runs'])}")
        r = dict(top["runs"][run - 1], machine=top["machine"])
        runs_note = f"run {run} of {len(top['runs'])}"
    else:
        r = top
        runs_note = "one run"
    order = ["GCD YY pool", "GCD global queue", "Task(priority:)", "LanePool Swift", "LanePool C fn"]
    colors = ["#9e9e9e", "#bdbdbd", "#8d6e63", "#1e88e5", "#0d47a1"]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    fig.suptitle(f"lanepool-bench, {runs_note}: {r['machine']}", fontsize=11)

    ax = axes[0]
    width = 0.38
    for k, (key, label) in enumerate([("w1", "W1: 1 producer"), ("w2", "W2: 2 producers")]):
        if key not in r:
            continue
        vals = [r[key][s]["median_tasks_per_s"] / 1e6 for s in order]
        xs = [i + (k - 0.5) * width for i in range(len(order))]
        bars = ax.bar(xs, vals, width, label=label, color=colors, alpha=1.0 if k == 0 else 0.55,
                      edgecolor="black", linewidth=0.5)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(order, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("million tasks per second (median of 5)")
    ax.set_title("Throughput, 1M tiny tasks (solid W1, pale W2)")

    ax = axes[1]
    if "w3" in r:
        pcts = [("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")]
        width = 0.26
        # W3 also has the opt-in real-time subject (files from before it do not).
        w3order = order + [s for s in ["LanePool Swift, real-time"] if s in r["w3"]]
        for k, (field, label) in enumerate(pcts):
            vals = [r["w3"][s][field] for s in w3order]
            xs = [i + (k - 1) * width for i in range(len(w3order))]
            ax.bar(xs, vals, width, label=label, color=["#90caf9", "#1e88e5", "#0d47a1"][k])
        if "floor" in r:
            ax.axhline(r["floor"]["cross_core"]["p50_us"], color="red", linestyle="--", linewidth=1,
                       label="cond. variable p50, 2 cores")
        ax.set_yscale("log")
        ax.set_xticks(range(len(w3order)))
        ax.set_xticklabels(w3order, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("submit -> start, microseconds (log)")
        ax.set_title("W3 wake latency, 20,000 samples 20 us apart")
        ax.legend(fontsize=8)

    ax = axes[2]
    if "w4" in r:
        subj = order[:-1] + ["LanePool, no slice"]
        idle = [w4_p99(r, s, "idle") for s in subj]
        loaded = [w4_p99(r, s, "loaded") for s in subj]
        width = 0.38
        ax.bar([i - width / 2 for i in range(len(subj))], idle, width, label="idle p99", color="#90caf9")
        ax.bar([i + width / 2 for i in range(len(subj))], loaded, width, label="background saturated, p99",
               color="#e53935")
        ax.set_yscale("log")
        ax.set_xticks(range(len(subj)))
        ax.set_xticklabels(subj, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("probe submit -> start, microseconds (log)")
        ax.set_title("W4 userInteractive probe behind a saturated background band")
        ax.legend(fontsize=8)

    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")


def pct(e: dict, p: str) -> float:
    """A percentile entry's value in us: p is "p50", "p99" or "p999"."""
    return e[f"{p}_us"]


LAT = [("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")]

# workload -> (title, y label, log scale, [(series label, lambda workload-entry-of-a-subject -> value)],
#              how to find the subjects in the workload's entry)
WORKLOADS = {
    "w1": ("W1: 1 producer, tiny tasks, throughput (higher is better)", "million tasks per second", False,
           [("median of the rounds", lambda e: e["median_tasks_per_s"] / 1e6)], None),
    "w2": ("W2: 2 producers, tiny tasks, throughput (higher is better)", "million tasks per second", False,
           [("median of the rounds", lambda e: e["median_tasks_per_s"] / 1e6)], None),
    "w3": ("W3: wake latency, probes 20 us apart, producer busy-waits (lower is better)",
           "submit -> start, us (log)", True, [(lab, lambda e, p=p: pct(e, p)) for p, lab in LAT], None),
    "w3b": ("W3b: wake latency, producer sleeps between probes (lower is better)",
            "submit -> start, us (log)", True, [(lab, lambda e, p=p: pct(e, p)) for p, lab in LAT], "subjects"),
    "w3i": ("W3i: wake latency at userInteractive, probes 20 us apart (lower is better)",
            "submit -> start, us (log)", True, [(lab, lambda e, p=p: pct(e["latency"], p)) for p, lab in LAT], None),
    "w4": ("W4: userInteractive probe p99, idle and with the background band saturated (lower is better)",
           "submit -> start, us (log)", True,
           [("idle p99", lambda e: e["idle"]["p99_us"]), ("loaded p99", lambda e: e["loaded"]["p99_us"])], None),
    "w5": ("W5: 256 tasks that each sleep 20 ms, wall time (bar) and threads added (label)", "seconds", False,
           [("wall time", lambda e: e["wall_s"])], None),
    "w7": ("W7: idle CPU after a burst, whole process (lower is better)", "% of one core", False,
           [("idle CPU", lambda e: e["idle_cpu_percent"])], None),
    "w8": ("W8: sync round trip, ns per call (lower is better)", "ns per call (log)", True,
           [("idle", lambda e: e["idle_ns_per_call"]), ("contended", lambda e: e["contended_ns_per_call"])], None),
    "w9": ("W9: actor to actor call, ns per call (lower is better)", "ns per call (log)", True,
           [("ns per call", lambda e: e["ns_per_call"])], None),
}


def per_workload(outdir: str, srcs: list) -> None:
    import os
    import statistics

    os.makedirs(outdir, exist_ok=True)
    done = set()
    for src in srcs:
        with open(src) as f:
            top = json.load(f)
        runs = top.get("runs", [top])
        for w, (title, ylabel, log, series, sub) in WORKLOADS.items():
            if w in done or not all(w in r for r in runs):
                continue
            done.add(w)
            entries = [r[w][sub] if sub else r[w] for r in runs]
            subjects = [s for s in entries[0] if all(s in e for e in entries)]
            fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(subjects) + 2), 4.6))
            width = 0.8 / len(series)
            shades = ["#90caf9", "#1e88e5", "#0d47a1"] if len(series) > 1 else ["#1e88e5"]
            for k, (label, get) in enumerate(series):
                vals = [[get(e[s]) for e in entries] for s in subjects]
                med = [statistics.median(v) for v in vals]
                lo = [m - min(v) for m, v in zip(med, vals)]
                hi = [max(v) - m for m, v in zip(med, vals)]
                xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(subjects))]
                ax.bar(xs, med, width, yerr=[lo, hi], capsize=3, label=label, color=shades[k % len(shades)],
                       edgecolor="black", linewidth=0.4)
                if w == "w5":
                    for x, s, m in zip(xs, subjects, med):
                        ax.text(x, m, "+%d threads" % entries[0][s]["extra_threads"], ha="center",
                                va="bottom", fontsize=7)
            if log:
                ax.set_yscale("log")
            ax.set_xticks(range(len(subjects)))
            ax.set_xticklabels(subjects, rotation=20, ha="right", fontsize=8)
            ax.set_ylabel(ylabel)
            ax.set_title(f"{title}\n{top.get('machine', '')}; median of {len(runs)} run(s), whiskers min to max",
                         fontsize=9)
            if len(series) > 1:
                ax.legend(fontsize=8)
            fig.tight_layout()
            dst = os.path.join(outdir, f"{w}.png")
            fig.savefig(dst, dpi=100)
            plt.close(fig)
            print(f"wrote {dst} (from {src})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Draws lanepool-bench's JSON as a PNG.")
    ap.add_argument("src", nargs="*", default=["docs/bench/results.json"])
    ap.add_argument("--run", type=int, default=1, help="which run of a --repeat file (1-based)")
    ap.add_argument("--per-workload", metavar="DIR",
                    help="one PNG per workload into DIR, medians over the runs of the files given")
    a = ap.parse_args()
    if a.per_workload:
        per_workload(a.per_workload, a.src)
    else:
        if len(a.src) > 2:
            ap.error("give SRC [DST] (or --per-workload DIR FILE...)")
        main(a.src[0], a.src[1] if len(a.src) > 1 else "docs/bench/benchmarks.png", a.run)
