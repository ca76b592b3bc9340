#!/usr/bin/env bash
# A steady churn: the shop on PostgreSQL takes first requests from wrk for a while, its records
# kept for a short TTL, while the sweeper at its default pace deletes them as they expire. Every
# 30 s the script prints the table's rows, dead rows, autovacuum runs and size
# (pg_total_relation_size): once a TTL has passed, as many records expire as arrive, and the
# size should level off instead of growing with the records written.
#
# Usage: bench/churn.sh [minutes, default 8] [TTL in seconds, default 60, at least the lease's
#                       60] [connections, default 16]
# Environment: BENCH_DATABASE_URL, a PostgreSQL server the script may create a database on
# (default postgres://postgres@127.0.0.1:5432/postgres); the database `idem_bench_churn` is
# created for the run and dropped at its end. BENCH_PORT (default 3191) is the shop's port.
#
# The shop runs with SHOP_MAX_TTL_MS at the TTL and sweeps every 5 minutes at the default pace
# (its own sweeper); `idem-sweep` (bench/src/bin/idem-sweep.rs) sweeps every second beside it,
# at the same pace, so that records are deleted within about a second of expiring.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-8}
ttl=${2:-60}
connections=${3:-16}
port=${BENCH_PORT:-3191}
database=idem_bench_churn
# The server, the database, the builds, the pinning and wrk's script: bench/shop-postgres.sh.
# shellcheck source=bench/shop-postgres.sh
source bench/shop-postgres.sh

IDEM_STORE=$url SHOP_ADDR="127.0.0.1:$port" SHOP_MAX_TTL_MS=$((ttl * 1000)) RUST_LOG=warn \
  "${pin_server[@]}" target/release/shop >"$work/shop.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
  sleep 0.1
done
target/release/idem-sweep "$url" 0.1 >"$work/sweep.log" 2>&1 &
pids+=("$!")

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench: ${minutes} minutes of first requests, records kept ${ttl}s" >&2
BENCH_PREFIX="churn-$$" "${pin_wrk[@]}" wrk -t1 -c"$connections" -d"${minutes}m" -s "$lua" \
  "http://127.0.0.1:$port" >"$work/wrk.out" &
wrk_pid=$!
pids+=("$wrk_pid")

sample() { # elapsed seconds: one row of the table
  psql -qAt -F ' | ' "$url" -c "
    SELECT $1, s.n_live_tup, s.n_dead_tup, s.autovacuum_count,
           round(pg_total_relation_size('idempotency_records') / 1048576.0, 1),
           round(pg_relation_size('idempotency_records') / 1048576.0, 1),
           round(pg_indexes_size('idempotency_records') / 1048576.0, 1)
    FROM pg_stat_user_tables s WHERE s.relname = 'idempotency_records'"
}

rows="$work/rows"
elapsed=0
while kill -0 "$wrk_pid" 2>/dev/null; do
  echo "| $(sample "$elapsed") |" >>"$rows"
  sleep 30
  elapsed=$((elapsed + 30))
done
wait "$wrk_pid" || true
read -r rps p99 errors <<<"$(awk '/^RESULT/ { print $2, $3, $4 }' "$work/wrk.out")"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "## A steady churn, $started"
echo
echo "The shop on PostgreSQL $(psql -qAt "$url" -c 'SHOW server_version') (autovacuum" \
  "$(psql -qAt "$url" -c 'SHOW autovacuum')), first requests for" \
  "$minutes minutes (wrk 1 thread on core 1, $connections connections; the shop on core 0)," \
  "records kept ${ttl}s, the sweeper at the default pace. $rps requests a second, p99 $p99 ms," \
  "$errors errors. Load average (1, 5, 15 min): $load_start at the start, $load_end at the end."
echo
echo "| seconds | rows (estimate) | dead rows | autovacuum runs | table and indexes (MiB) | heap (MiB) | indexes (MiB) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
cat "$rows"
echo
# Flat or growing: the size over the run once two TTLs have passed (records expiring as fast as
# they arrive), its first and last sample against its least and most.
awk -F ' [|] ' -v from=$((2 * ttl)) '
  { seconds = $1; sub(/^[|] /, "", seconds); size = $5 }
  seconds + 0 >= from {
    if (first == "") first = size
    last = size
    if (least == "" || size + 0 < least + 0) least = size
    if (size + 0 > most + 0) most = size
  }
  END {
    if (first == "") { print "The run ended before two TTLs passed: no steady state to judge."; exit }
    printf "From %d s on (two TTLs), the table and its indexes took %s to %s MiB: %s MiB at the first sample, %s at the last.\n", from, least, most, first, last
  }' "$rows"
echo
echo "Reproduce: bench/churn.sh $minutes $ttl $connections"
