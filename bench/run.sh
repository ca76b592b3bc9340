#!/usr/bin/env bash
# Load benchmark: one payments-like handler, plain and with #[idempotent], measured with wrk
# on loopback in one run. Prints requests/s and p99 latency per scenario and the ratios to
# the baseline. Usage: bench/run.sh [seconds per scenario, default 15] [connections, default 32]
#
# On a 2-core machine the server runs on core 0 with one worker thread and wrk on core 1
# (taskset), so the two do not steal from each other; compare ratios within one run.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-15}
connections=${2:-32}
port=${BENCH_PORT:-3100}
url="http://127.0.0.1:$port"

if ! command -v wrk >/dev/null; then
  echo "bench: wrk is not installed; installing it from Debian's packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null
fi

cargo build --release -q -p idem-bench
pin_server=() pin_wrk=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server=(taskset -c 0) pin_wrk=(taskset -c 1)
fi
"${pin_server[@]}" target/release/idem-bench "127.0.0.1:$port" >/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -s -o /dev/null "$url/" && break
  sleep 0.1
done

lua=$(mktemp --suffix=.lua)
trap 'kill $server 2>/dev/null || true; rm -f "$lua"' EXIT
cat >"$lua" <<'LUA'
-- BENCH_PATH and BENCH_KEY (fresh | same | none) choose the scenario.
local path = os.getenv("BENCH_PATH")
local mode = os.getenv("BENCH_KEY")
local body = '{"amount":9800,"currency":"JPY","description":"order 4711, two items"}'
local counter = 0
local prefix = tostring(math.random(1, 1e9))
request = function()
  local headers = { ["Content-Type"] = "application/json" }
  if mode == "fresh" then
    counter = counter + 1
    headers["Idempotency-Key"] = prefix .. "-" .. counter
  elseif mode == "same" then
    headers["Idempotency-Key"] = "one-key-for-every-request"
  end
  return wrk.format("POST", path, headers, body)
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.3f %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests))
end
LUA

run() { # name path keymode
  BENCH_PATH=$2 BENCH_KEY=$3 "${pin_wrk[@]}" wrk -t1 -c"$connections" -d"${duration}s" -s "$lua" "$url" |
    awk -v name="$1" '/^RESULT/ { print name, $2, $3, $4, $5 }'
}

# Warm up, then measure the three scenarios back to back.
BENCH_PATH=/baseline BENCH_KEY=none "${pin_wrk[@]}" wrk -t1 -c"$connections" -d3s -s "$lua" "$url" >/dev/null
results=$(
  run baseline /baseline none
  run fresh-keys /idempotent fresh
  run replays /idempotent same
)

echo "wrk: ${duration}s per scenario, $connections connections, 1 thread; server: 1 worker"
echo "$results" | awk '
  NR == 1 { base = $2 }
  { printf "%-12s %10.0f req/s   p99 %7.2f ms   %5.2fx baseline   (%d requests, %d errors)\n", $1, $2, $3, $2 / base, $5, $4 }'
