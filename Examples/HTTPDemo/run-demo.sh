#!/usr/bin/env bash
# The fair table: every variant measured idle and under a /heavy flood, in one run, for
# ROUNDS rounds (default 3), on loopback only, bounded in time; medians per variant.
#   ./run-demo.sh [seconds per measurement, default 10] [variant ...]
# Variants (default: all): gcd (DispatchQueue.global), lanepool (LanePool bands,
# lane.run), loops-in (lanepool with SwiftNIO's event loops in the userInitiated band),
# executor (LanePool as the process's default executor, work in Task(priority:)), task
# (the executor variant's code on Swift's own executor: its natural peer); floor (not
# in the default list: lanepool with /heavy doing no CPU work but sleeping 360 ms, about
# what a /heavy request takes under the real flood, so the flood keeps its rate and its
# HTTP and I/O without its CPU work: the tail that wrk, the event loops and loopback set);
# bg-idle and bg-short (lanepool with the background band as SCHED_IDLE, or with the
# 100 us EEVDF slice), executor-idle (executor with the background band as SCHED_IDLE),
# executor-spin (executor with Configuration.interactiveSpin 1 ms: a userInteractive lane
# stays awake 1 ms after its last task), executor-cores (executor with the default pool's
# lanes pinned one per CPU: LANEPOOL_DEFAULT_PLACEMENT=cores), executor-kslice (executor
# with the default band at the kernel's EEVDF slice instead of the table's 300 us),
# executor-s100 (the same at 100 us), executor-bgshort (executor with the background
# band at the 100 us slice), executor-inline and task-inline (executor and task with
# /interactive's work in the handler itself, no Task hop: what the hops cost),
# lanepool-bg1 and gcd-bg1 (lanepool and gcd with /heavy on one background lane, or one
# serial queue: at most one CPU runs /heavy).
# Per round and variant: a fresh server, a warm-up, /interactive alone (idle), then
# /interactive while 16 connections flood /heavy (flood). Writes out/rounds.jsonl (every
# measurement), out/results.json (the medians, the rounds, the machine) and prints the
# table. ROUNDS=1 for a quick look.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-10}
shift || true
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(gcd lanepool loops-in executor task)
rounds=${ROUNDS:-3}
for v in "${variants[@]}"; do
  case "$v" in gcd | lanepool | loops-in | executor | task | floor | bg-idle | bg-short | executor-idle | executor-spin | executor-cores | executor-kslice | executor-s100 | executor-bgshort | executor-inline | task-inline | lanepool-bg1 | gcd-bg1) ;;
  *) echo "run-demo.sh: unknown variant '$v' (gcd lanepool loops-in executor task floor bg-idle bg-short executor-idle executor-spin executor-cores executor-kslice executor-s100 executor-bgshort executor-inline task-inline lanepool-bg1 gcd-bg1)" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl; }
swift build -c release --product DemoServer
bin=$(swift build -c release --show-bin-path)/DemoServer
port=18080
mkdir -p out
: > out/rounds.jsonl
interactive() { # /interactive for $secs s, 4 connections: wrk's LATENCY line
  timeout $((secs + 10)) wrk -t1 -c4 -d${secs}s -s latency.lua "http://127.0.0.1:$port/interactive" |
    grep '^LATENCY'
}
emit() { # emit VARIANT ROUND CASE LATENCY-LINE HEAVY-RPS: one JSON line
  echo "$4" | sed -E "s/LATENCY p50=([0-9]+) p99=([0-9]+) p999=([0-9]+) requests=([0-9]+) errors=([0-9]+)/{\"variant\": \"$1\", \"round\": $2, \"case\": \"$3\", \"p50_us\": \1, \"p99_us\": \2, \"p999_us\": \3, \"interactive_requests\": \4, \"errors\": \5, \"heavy_rps\": ${5:-0}, \"seconds\": $secs}/"
}
for r in $(seq 1 "$rounds"); do
  for v in "${variants[@]}"; do
    case "$v" in
    loops-in) args=(--offload lanepool --loops-band userInitiated) ;;
    floor) args=(--offload lanepool --heavy-us 0 --heavy-sleep-us 360000) ;;
    bg-idle) args=(--offload lanepool --background idle) ;;
    bg-short) args=(--offload lanepool --background short) ;;
    executor-idle) args=(--offload executor --background idle) ;;
    executor-spin) args=(--offload executor --interactive-spin-us 1000) ;;
    executor-cores) args=(--offload executor) ;;
    executor-kslice) args=(--offload executor --default-slice-us 0) ;;
    executor-s100) args=(--offload executor --default-slice-us 100) ;;
    executor-bgshort) args=(--offload executor --background short) ;;
    executor-inline) args=(--offload executor --interactive-inline) ;;
    task-inline) args=(--offload task --interactive-inline) ;;
    lanepool-bg1) args=(--offload lanepool --heavy-one-lane) ;;
    gcd-bg1) args=(--offload gcd --heavy-one-lane) ;;
    *) args=(--offload "$v") ;;
    esac
    placement=none
    [ "$v" = executor-cores ] && placement=cores
    LANEPOOL_DEFAULT_PLACEMENT=$placement "$bin" "${args[@]}" --port "$port" > "out/server-$v.log" 2>&1 &
    server=$!
    trap 'kill $server 2>/dev/null || true' EXIT
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/interactive" >/dev/null && break; sleep 0.2; done
    wrk -t1 -c4 -d2s "http://127.0.0.1:$port/interactive" >/dev/null # warm-up
    emit "$v" "$r" idle "$(interactive)" 0 | tee -a out/rounds.jsonl
    # Flood the heavy endpoint for the whole measurement.
    timeout $((secs + 10)) wrk -t1 -c16 -d$((secs + 2))s "http://127.0.0.1:$port/heavy" > "out/heavy-$v.txt" &
    flood=$!
    sleep 1
    line=$(interactive)
    wait $flood || true
    emit "$v" "$r" flood "$line" "$(awk '/Requests\/sec/ {print $2}' "out/heavy-$v.txt")" | tee -a out/rounds.jsonl
    kill $server
    wait $server 2>/dev/null || true
    trap - EXIT
  done
done
machine="nproc $(nproc), kernel $(uname -r), $(uname -m); $secs s per measurement, $rounds round(s)"
python3 - "$machine" <<'PY'
import json, statistics, sys
machine = sys.argv[1]
rows = [json.loads(l) for l in open("out/rounds.jsonl")]
variants = list(dict.fromkeys(r["variant"] for r in rows))
def med(v, case, key):
    return statistics.median(r[key] for r in rows if r["variant"] == v and r["case"] == case)
medians = {v: {f"{case}_{k}": med(v, case, k) for case in ("idle", "flood")
               for k in ("p50_us", "p99_us", "interactive_requests", "heavy_rps")} for v in variants}
lowest_idle = min(m["idle_p99_us"] for m in medians.values())
print(f"\nmedians of {max(r['round'] for r in rows)} round(s); machine: {machine}")
print("| variant | idle p50 | idle p99 | flood p50 | flood p99 | flood / idle p99 | flood p99 / lowest idle p99 | interactive req/s idle | under flood | /heavy req/s |")
print("|---|---|---|---|---|---|---|---|---|---|")
secs = rows[0]["seconds"]
for v in variants:
    m = medians[v]
    print(f"| {v} | {m['idle_p50_us']/1000:.2f} ms | {m['idle_p99_us']/1000:.2f} ms | {m['flood_p50_us']/1000:.2f} ms | "
          f"{m['flood_p99_us']/1000:.2f} ms | {m['flood_p99_us']/m['idle_p99_us']:.1f}x | {m['flood_p99_us']/lowest_idle:.1f}x | "
          f"{m['idle_interactive_requests']/secs:.0f} | {m['flood_interactive_requests']/secs:.0f} | {m['flood_heavy_rps']:.1f} |")
json.dump({"machine": machine, "medians": medians, "lowest_idle_p99_us": lowest_idle, "rounds": rows},
          open("out/results.json", "w"), indent=1)
print("out/results.json, out/rounds.jsonl")
PY
