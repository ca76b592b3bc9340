#!/usr/bin/env bash
# The cost of waiting for a replica: the payments-like handler under idem's IdempotencyLayer,
# its records in Redis, once asynchronous and once waiting for one replica after each claim
# and completion (`Durability::replicas(1, 100 ms)`: `WAIT 1 100`), measured with wrk over
# loopback in one interleaved run. Prints requests per second and p99 for first requests and
# replays, the server CPU per request, the WAITs the primary counted per first request, the
# load average at start and end, every run behind the table, and the commands that reproduce
# it.
#
# Usage: bench/redis-wait.sh [seconds per run, default 10] [rounds, default 3] [connections, default 32]
# Environment: BENCH_PORT (default 3200) is the first of the four ports used (a primary, its
# replica, two servers).
#
# The script starts a Redis primary and its replica of its own (nothing on disk, in a
# temporary directory), and two `idem-bench layer` servers on it, each its own process with one
# tokio worker pinned to core 0; wrk (one thread) runs on core 1. The two Redis processes are
# not pinned: on two cores they share the machine with the servers and wrk, as a replica on
# the same host would. Rounds interleave the scenarios (asynchronous first requests, waiting
# first requests, asynchronous replays, waiting replays), so that a machine whose load drifts
# slows both stores alike; the table shows the median over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-10}
rounds=${2:-3}
connections=${3:-32}
base_port=${BENCH_PORT:-3200}

for tool in wrk curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench: $tool is not installed; installing it from Debian's packages" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >/dev/null
  fi
done
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not on PATH" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

echo "bench: building idem-bench" >&2
cargo build --release -q -p idem-bench

primary=$base_port replica=$((base_port + 1))
mkdir -p "$work/primary" "$work/replica"
redis() { # port dir extra...: a redis-server of this run's own, in the foreground
  local port=$1 dir=$2
  shift 2
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
    --repl-diskless-sync-delay 0 --daemonize no "$@" >"$dir/log" 2>&1 &
  pids+=("$!")
}
redis "$primary" "$work/primary"
redis "$replica" "$work/replica" --replicaof 127.0.0.1 "$primary"
# The replica is in sync once it acknowledges a write (after a sync, a primary streams to a
# replica only from its first acknowledgement on).
for _ in $(seq 300); do
  acked=$(printf 'SET probe 1\nWAIT 1 100\n' | redis-cli -p "$primary" 2>/dev/null | tail -n1 || true)
  [ "$acked" = 1 ] && break
  sleep 0.1
done
[ "$acked" = 1 ] || { echo "bench: the replica did not come in sync" >&2; exit 1; }

pin_server=() pin_wrk=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server=(taskset -c 0) pin_wrk=(taskset -c 1)
else
  echo "bench: fewer than 2 cores or no taskset: servers and wrk are not pinned" >&2
fi

# name | label | replicas to wait for
servers=("async|asynchronous (\`Durability::Async\`)|0" "wait|waits for 1 replica (\`WAIT 1 100\`)|1")
declare -A pid_of url_of label_of
port=$((base_port + 2))
for entry in "${servers[@]}"; do
  IFS='|' read -r name label replicas <<<"$entry"
  addr="127.0.0.1:$port"
  BENCH_WORKERS=1 BENCH_CONFIG=global BENCH_REDIS_URL="redis://127.0.0.1:$primary" BENCH_REDIS_WAIT_REPLICAS=$replicas \
    BENCH_REDIS_WAIT_TIMEOUT_MS=100 "${pin_server[@]}" target/release/idem-bench layer "$addr" \
    >"$work/$name.log" 2>&1 &
  pid_of[$name]=$!
  pids+=("$!")
  url_of[$name]="http://$addr" label_of[$name]=$label
  echo "BENCH_WORKERS=1 BENCH_CONFIG=global BENCH_REDIS_URL=redis://127.0.0.1:PRIMARY BENCH_REDIS_WAIT_REPLICAS=$replicas BENCH_REDIS_WAIT_TIMEOUT_MS=100 ${pin_server[*]:+${pin_server[*]} }target/release/idem-bench layer 127.0.0.1:PORT" >>"$work/commands"
  port=$((port + 1))
done

body='{"amount":9800,"currency":"JPY","description":"order 4711, two items"}'
replay_key=one-key-for-every-replay
post() { # url key: prints the status line and headers
  curl -s -D - -o /dev/null -X POST "$1/payments" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $2" -d "$body"
}
for name in async wait; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "${url_of[$name]}/" && break
    sleep 0.1
  done
  first=$(post "${url_of[$name]}" "check-$name-$$" | tr -d '\r')
  again=$(post "${url_of[$name]}" "check-$name-$$" | tr -d '\r')
  if ! grep -q '^HTTP/1.1 201' <<<"$first" || ! grep -qi '^idempotent-replayed: *true' <<<"$again"; then
    echo "bench: ${label_of[$name]} did not answer a fresh key with 201 and its repeat with a replay; see $work/$name.log" >&2
    exit 1
  fi
  post "${url_of[$name]}" "$replay_key" >/dev/null
done

lua="$work/scenario.lua"
cat >"$lua" <<'LUA'
-- BENCH_KEY (fresh | same) chooses the scenario; BENCH_PREFIX makes this run's keys its own.
local mode = os.getenv("BENCH_KEY")
local prefix = tonumber(os.getenv("BENCH_PREFIX"))
local body = '{"amount":9800,"currency":"JPY","description":"order 4711, two items"}'
local counter = 0
request = function()
  local key
  if mode == "fresh" then
    counter = counter + 1
    key = prefix .. "-" .. counter
  else
    key = os.getenv("BENCH_REPLAY_KEY")
  end
  local headers = { ["Content-Type"] = "application/json", ["Idempotency-Key"] = key }
  return wrk.format("POST", "/payments", headers, body)
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.3f %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests))
end
LUA

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
wait_calls() { redis-cli -p "$primary" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_wait:/ { print $3 } END { }' | head -n1; }

run_number=0
measure() { # round scenario name seconds keymode
  local round=$1 scenario=$2 name=$3 seconds=$4 mode=$5 before after waits_before waits_after result
  run_number=$((run_number + 1))
  before=$(cpu_ticks "${pid_of[$name]}")
  waits_before=$(wait_calls); waits_before=${waits_before:-0}
  result=$(BENCH_KEY=$mode BENCH_PREFIX=$run_number BENCH_REPLAY_KEY=$replay_key "${pin_wrk[@]}" \
    wrk -t1 -c"$connections" -d"${seconds}s" -s "$lua" "${url_of[$name]}" | awk '/^RESULT/')
  after=$(cpu_ticks "${pid_of[$name]}")
  waits_after=$(wait_calls); waits_after=${waits_after:-0}
  [ -n "$result" ] || { echo "bench: wrk printed no result against $name" >&2; exit 1; }
  # round scenario server req/s p99-ms errors requests cpu-ticks waits
  echo "$round $scenario $name ${result#RESULT } $((after - before)) $((waits_after - waits_before))"
}

echo "bench: warming up both servers" >&2
for name in async wait; do measure 0 warm "$name" 2 fresh >/dev/null; done

echo "bench: $rounds round(s) of 4 runs, ${duration}s each" >&2
results="$work/results"
for round in $(seq "$rounds"); do
  for scenario in fresh replay; do
    mode=fresh; [ "$scenario" = replay ] && mode=same
    for name in async wait; do measure "$round" "$scenario" "$name" "$duration" "$mode" >>"$results"; done
  done
  echo "bench: round $round of $rounds done" >&2
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "## The cost of waiting for a replica, $started"
echo
echo "wrk: 1 thread on core 1, $connections connections, ${duration}s per run, $rounds round(s); each server:" \
  "1 tokio worker on core 0; a Redis primary and its replica on the same machine, unpinned." \
  "Load average (1, 5, 15 min): $load_start at start, $load_end at end."
echo
awk -v ticks_per_s="$(getconf CLK_TCK)" '
  function median(values, n,    i, j, v, sorted) {
    for (i = 1; i <= n; i++) sorted[i] = values[i]
    for (i = 2; i <= n; i++) {
      v = sorted[i]
      for (j = i - 1; j >= 1 && sorted[j] > v; j--) sorted[j + 1] = sorted[j]
      sorted[j + 1] = v
    }
    return n % 2 ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2
  }
  {
    key = $2 "," $3; n[key]++
    rps[key, n[key]] = $4; p99[key, n[key]] = $5
    errors[key] += $6; requests[key] += $7; ticks[key] += $8; waits[key] += $9
  }
  function med(what, key,    i, values) {
    for (i = 1; i <= n[key]; i++) values[i] = (what == "rps") ? rps[key, i] : p99[key, i]
    return median(values, n[key])
  }
  END {
    print "| store | first requests / s | p99 first | replays / s | p99 replay | server CPU µs per first request | WAITs per first request | errors |"
    print "| --- | --- | --- | --- | --- | --- | --- | --- |"
    label["async"] = "asynchronous (`Durability::Async`)"
    label["wait"] = "waits for 1 replica (`WAIT 1 100`)"
    for (s = 1; s <= 2; s++) {
      name = (s == 1) ? "async" : "wait"
      printf "| %s | %.0f | %.1f ms | %.0f | %.1f ms | %.1f | %.2f | %d |\n", label[name],
        med("rps", "fresh," name), med("p99", "fresh," name), med("rps", "replay," name),
        med("p99", "replay," name), ticks["fresh," name] / ticks_per_s * 1e6 / requests["fresh," name],
        waits["fresh," name] / requests["fresh," name], errors["fresh," name] + errors["replay," name]
    }
    printf "\nWaiting for the replica: %.2f× the first requests per second, p99 %.2f×; replays %.2f×.\n",
      med("rps", "fresh,wait") / med("rps", "fresh,async"), med("p99", "fresh,wait") / med("p99", "fresh,async"),
      med("rps", "replay,wait") / med("rps", "replay,async")
  }
' "$results"
echo
echo "Every run (round, scenario, server, req/s, p99 ms, errors, requests, server CPU ticks of 1/$(getconf CLK_TCK) s, WAITs the primary counted):"
echo
echo '```text'
cat "$results"
echo '```'
echo
echo "To reproduce: bench/redis-wait.sh $duration $rounds $connections; it starts a primary and a replica"
echo "(redis-server --save \"\" --appendonly no --repl-diskless-sync-delay 0, the replica with --replicaof),"
echo "then each server as"
echo
echo '```sh'
cat "$work/commands"
echo '```'
echo
echo "and runs wrk against each (BENCH_KEY=fresh: a new key per request; BENCH_KEY=same: one key replayed):"
echo
echo '```sh'
echo "${pin_wrk[*]:+${pin_wrk[*]} }wrk -t1 -c$connections -d${duration}s -s scenario.lua http://127.0.0.1:PORT"
echo '```'
