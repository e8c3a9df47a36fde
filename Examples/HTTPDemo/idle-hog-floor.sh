#!/usr/bin/env bash
# The machine's floor for the fair table's flood row: /interactive on the lanepool variant
# (no /heavy flood at all), alone and beside two busy loops that are not the server's,
# at SCHED_IDLE (the weakest class Linux has) and at nice 19. If the interactive p99 rises
# as much beside them as under the real flood, no band policy of the server's own heavy
# work can do better on this machine.
#   ./idle-hog-floor.sh [seconds per measurement, default 10]; ROUNDS (default 3)
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-10}
rounds=${ROUNDS:-3}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl; }
swift build -c release --product DemoServer >/dev/null
bin=$(swift build -c release --show-bin-path)/DemoServer
port=18081
"$bin" --offload lanepool --port "$port" > out-floor-server.log 2>&1 &
server=$!
hogs=()
trap 'kill $server "${hogs[@]}" 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/interactive" >/dev/null && break; sleep 0.2; done
wrk -t1 -c4 -d2s "http://127.0.0.1:$port/interactive" >/dev/null
measure() { # measure CASE: one LATENCY line, tagged
  timeout $((secs + 10)) wrk -t1 -c4 -d${secs}s -s latency.lua "http://127.0.0.1:$port/interactive" |
    grep '^LATENCY' | sed "s/^LATENCY/$1/"
}
hog() { # hog CMD...: two busy loops under CMD
  hogs=()
  for _ in 1 2; do "$@" sh -c 'while :; do :; done' & hogs+=($!); done
  sleep 1
}
for r in $(seq 1 "$rounds"); do
  measure alone
  hog chrt -i 0; measure sched_idle_hogs; kill "${hogs[@]}"; hogs=(); sleep 1
  hog nice -n 19; measure nice19_hogs; kill "${hogs[@]}"; hogs=(); sleep 1
done | tee out-floor.txt
echo "machine: nproc $(nproc), kernel $(uname -r), $(uname -m); $secs s per measurement, $rounds round(s)"
SECS=$secs python3 - <<'PY'
import re, statistics
rows = {}
for line in open("out-floor.txt"):
    m = re.match(r"(\S+) p50=(\d+) p99=(\d+) p999=(\d+) requests=(\d+)", line)
    if m: rows.setdefault(m[1], []).append([int(x) for x in m.groups()[1:]])
print("| case | p50 | p99 | p99.9 | requests/s |")
print("|---|---|---|---|---|")
for case, v in rows.items():
    med = [statistics.median(x[i] for x in v) for i in range(4)]
    print(f"| {case} | {med[0]/1000:.2f} ms | {med[1]/1000:.2f} ms | {med[2]/1000:.2f} ms | {med[3]/int(__import__('os').environ.get('SECS', '10')):,.0f} |")
PY
