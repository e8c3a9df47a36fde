#!/usr/bin/env bash
# A traced run of the demo: one variant's server (default lanepool; floor: /heavy without
# CPU work) built with LANEPOOL_TRACE, /interactive measured for SECS seconds under the
# /heavy flood. Writes out/trace-VARIANT.json (Chrome trace event JSON: open it in
# ui.perfetto.dev or chrome://tracing as it is), out/slowest-VARIANT.txt (the slowest
# userInteractive task and what each CPU ran while it waited: scripts/trace-slowest) and
# out/trace-VARIANT.png (that window: scripts/trace-plot; needs matplotlib) and
# out/window-VARIANT.json (only that window's events, small enough to keep; opens as the whole).
#   ./trace-demo.sh [seconds, default 3] [lanepool|floor|executor] [flood|idle]
# (idle: no flood; the files are then named VARIANT-idle)
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-3}
v=${2:-lanepool}
load=${3:-flood}
[ "$load" = flood ] || [ "$load" = idle ] || { echo "trace-demo.sh: flood or idle, not '$load'" >&2; exit 2; }
case "$v" in
lanepool | executor) args=(--offload "$v") ;;
floor) args=(--offload lanepool --heavy-us 0 --heavy-sleep-us 360000) ;;
*) echo "trace-demo.sh: unknown variant '$v' (lanepool floor executor)" >&2; exit 2 ;;
esac
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl; }
python3 -c 'import matplotlib' 2>/dev/null || pip install -q matplotlib
build=(swift build -c release -Xcc -DLANEPOOL_TRACE --scratch-path .build-trace)
"${build[@]}" --product DemoServer >/dev/null
bin=$("${build[@]}" --show-bin-path)/DemoServer
port=18082
name=$v
[ "$load" = flood ] || name=$v-idle
mkdir -p out
rm -f out/trace-"$name"-[0-9]*.txt
LANEPOOL_TRACE_FILE="$PWD/out/trace-$name-%p.txt" "$bin" "${args[@]}" --port "$port" > out/trace-server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/interactive" >/dev/null && break; sleep 0.2; done
if [ "$load" = flood ]; then
  timeout $((secs + 10)) wrk -t1 -c16 -d$((secs + 2))s "http://127.0.0.1:$port/heavy" > out/trace-heavy.txt &
  flood=$!
  sleep 1
fi
timeout $((secs + 10)) wrk -t1 -c4 -d${secs}s -s latency.lua "http://127.0.0.1:$port/interactive" | grep '^LATENCY'
[ "$load" = idle ] || wait $flood || true
kill -TERM $server # a graceful stop: the trace is written at exit
wait $server 2>/dev/null || true
trap - EXIT
trace=$(ls out/trace-"$name"-[0-9]*.txt)
../../scripts/trace-export "$trace" -o out/trace-"$name".json
../../scripts/trace-slowest "$trace" --band ui --whole | tee out/slowest-"$name".txt
read -r at ms < <(awk '/^window:/ {print $3, $5}' out/slowest-"$name".txt)
../../scripts/trace-export "$trace" -o out/window-"$name".json --at "$at" --ms "$ms" --check
../../scripts/trace-plot out/trace-"$name".json -o out/trace-"$name".png --at "$at" --ms "$ms" \
  --title "$v, $load: the slowest userInteractive task's window"
