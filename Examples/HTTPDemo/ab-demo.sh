#!/bin/bash
# ab-demo.sh SECS ROUNDS LABEL=BINARY:OFFLOAD ...: run-demo.sh's two measurements (idle,
# then under the /heavy flood) for DemoServer binaries built from different commits,
# alternating them round by round, so that two cores meet the same minutes of the
# machine. Build each binary first (swift build -c release --product DemoServer at each
# commit, and copy .build/release/DemoServer away). Writes one JSON line per measurement
# to $OUT (default out/ab-rounds.jsonl) and prints the medians per label. Example:
#   ./ab-demo.sh 10 5 before=/tmp/demo-old:executor after=/tmp/demo-new:executor \
#     task=/tmp/demo-old:task
set -uo pipefail
cd "$(dirname "$0")"
[ $# -ge 3 ] || { sed -n 2,9p "$0"; exit 2; }
secs=$1
rounds=$2
shift 2
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl; }
port=18081
mkdir -p out
out=${OUT:-out/ab-rounds.jsonl}
: >"$out"
interactive() {
  timeout $((secs + 10)) wrk -t1 -c4 -d${secs}s -s latency.lua "http://127.0.0.1:$port/interactive" |
    grep '^LATENCY'
}
emit() { # emit LABEL ROUND CASE LATENCY-LINE HEAVY-RPS
  echo "$4" | sed -E "s/LATENCY p50=([0-9]+) p99=([0-9]+) p999=([0-9]+) requests=([0-9]+) errors=([0-9]+)/{\"variant\": \"$1\", \"round\": $2, \"case\": \"$3\", \"p50_us\": \1, \"p99_us\": \2, \"p999_us\": \3, \"interactive_requests\": \4, \"errors\": \5, \"heavy_rps\": ${5:-0}, \"seconds\": $secs}/"
}
for r in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    label=${spec%%=*}
    rest=${spec#*=}
    bin=${rest%%:*}
    offload=${rest#*:}
    LANEPOOL_DEFAULT_PLACEMENT=none "$bin" --offload "$offload" --port $port >"out/server-$label.log" 2>&1 &
    server=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/interactive" >/dev/null && break; sleep 0.2; done
    wrk -t1 -c4 -d2s "http://127.0.0.1:$port/interactive" >/dev/null # warm-up
    emit "$label" "$r" idle "$(interactive)" 0 | tee -a "$out"
    timeout $((secs + 10)) wrk -t1 -c16 -d$((secs + 2))s "http://127.0.0.1:$port/heavy" >out/ab-heavy.txt &
    flood=$!
    sleep 1
    line=$(interactive)
    wait $flood
    emit "$label" "$r" flood "$line" "$(awk '/Requests\/sec/ {print $2}' out/ab-heavy.txt)" | tee -a "$out"
    kill $server
    wait $server 2>/dev/null
  done
done
echo "nproc $(nproc), kernel $(uname -r); $secs s per measurement, $rounds round(s)"
python3 - "$out" "$secs" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
secs = float(sys.argv[2])
print("| label | idle p50 | idle p99 | flood p50 | flood p99 | interactive req/s idle | under the flood | /heavy req/s |")
print("|---|---|---|---|---|---|---|---|")
for v in dict.fromkeys(r["variant"] for r in rows):
    def m(case, key):
        return statistics.median(r[key] for r in rows if r["variant"] == v and r["case"] == case)
    print(f"| {v} | {m('idle','p50_us')/1000:.2f} ms | {m('idle','p99_us')/1000:.2f} ms | "
          f"{m('flood','p50_us')/1000:.2f} ms | {m('flood','p99_us')/1000:.2f} ms | "
          f"{m('idle','interactive_requests')/secs:.0f} | {m('flood','interactive_requests')/secs:.0f} | "
          f"{m('flood','heavy_rps'):.1f} |")
PY
