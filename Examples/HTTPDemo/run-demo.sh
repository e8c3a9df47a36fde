#!/usr/bin/env bash
# Floods /heavy and measures /interactive, for the LanePool, GCD and executor offloads and
# LanePool with SwiftNIO's event loops in the userInitiated band (loops-in), on loopback
# only, bounded in time. Writes out/results.json (and logs) beside this script.
#   ./run-demo.sh [seconds per measurement, default 15] [variant ...]
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-15}
shift || true
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(gcd lanepool executor loops-in)
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
swift build -c release --product DemoServer
bin=$(swift build -c release --show-bin-path)/DemoServer
port=18080
mkdir -p out
echo "{" > out/results.json
first=1
for offload in "${variants[@]}"; do
  case "$offload" in
  loops-in) args=(--offload lanepool --loops-band userInitiated) ;;
  *) args=(--offload "$offload") ;;
  esac
  "$bin" "${args[@]}" --port "$port" > "out/server-$offload.log" 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null || true' EXIT
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/interactive" >/dev/null && break; sleep 0.2; done
  # Warm up, then flood the heavy endpoint for the whole measurement.
  wrk -t1 -c4 -d2s "http://127.0.0.1:$port/interactive" >/dev/null
  timeout $((secs + 10)) wrk -t1 -c16 -d$((secs + 2))s "http://127.0.0.1:$port/heavy" > "out/heavy-$offload.txt" &
  flood=$!
  sleep 1
  out=$(timeout $((secs + 10)) wrk -t1 -c4 -d${secs}s -s latency.lua "http://127.0.0.1:$port/interactive")
  wait $flood || true
  heavy_rps=$(awk '/Requests\/sec/ {print $2}' "out/heavy-$offload.txt")
  line=$(echo "$out" | grep '^LATENCY')
  echo "$offload: $line heavy_rps=$heavy_rps"
  p50=$(echo "$line" | sed -E 's/.*p50=([0-9]+).*/\1/')
  p99=$(echo "$line" | sed -E 's/.*p99=([0-9]+).*/\1/')
  p999=$(echo "$line" | sed -E 's/.*p999=([0-9]+).*/\1/')
  reqs=$(echo "$line" | sed -E 's/.*requests=([0-9]+).*/\1/')
  [ $first -eq 1 ] || echo "," >> out/results.json
  first=0
  printf '  "%s": {"p50_us": %s, "p99_us": %s, "p999_us": %s, "interactive_requests": %s, "heavy_rps": %s}\n' \
    "$offload" "$p50" "$p99" "$p999" "$reqs" "${heavy_rps:-0}" >> out/results.json
  kill $server
  wait $server 2>/dev/null || true
  trap - EXIT
done
echo "}" >> out/results.json
echo "machine: nproc $(nproc), kernel $(uname -r); $secs s per measurement" | tee out/machine.txt
cat out/results.json
