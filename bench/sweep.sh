#!/usr/bin/env bash
# Sweeping without a spike: the shop on PostgreSQL under wrk (first requests, a fresh key each),
# with a backlog of expired records in its table, measured with nobody sweeping, with the
# sweeper at its default pace (busy 1/10 of the time) and with the sweeper unpaced (busy all the
# time, as it was before it paced itself). Prints one table row per phase: requests per second,
# p99, and how many expired records the sweeper deleted meanwhile.
#
# Usage: bench/sweep.sh [expired records, default 2000000] [seconds per phase, default 20]
#                       [rounds, default 2] [connections, default 16]
# Environment: BENCH_DATABASE_URL, a PostgreSQL server the script may create a database on
# (default postgres://postgres@127.0.0.1:5432/postgres); the database `idem_bench_sweep` is
# created for the run and dropped at its end. BENCH_PORT (default 3190) is the shop's port.
#
# Each round starts a shop of its own (its first sweep finds the table without a backlog, and
# the next is 5 minutes later, after the round), fills the backlog with one INSERT, then runs
# the phases in the order none, paced, unpaced, none. The unpaced sweeper comes after the
# paced one because the million dead rows it leaves are vacuumed and checkpointed while the
# next phase runs (the last, which shows that aftermath); the backlog is large enough that it
# still has records to delete at the end of its phase. The sweepers are `idem-sweep`
# (bench/src/bin/idem-sweep.rs), `PostgresStore::spawn_sweeper_with` in a process of its own.
# The shop is pinned to core 0 and wrk to core 1; PostgreSQL and the sweeper run where the
# kernel puts them.
set -euo pipefail
cd "$(dirname "$0")/.."

expired=${1:-2000000}
duration=${2:-20}
rounds=${3:-2}
connections=${4:-16}
port=${BENCH_PORT:-3190}
database=idem_bench_sweep
# The server, the database, the builds, the pinning and wrk's script: bench/shop-postgres.sh.
# shellcheck source=bench/shop-postgres.sh
source bench/shop-postgres.sh

sql() { psql -qAt "$url" -c "$1"; }
expired_count() { sql "SELECT count(*) FROM idempotency_records WHERE expires_at <= now()"; }

fill() { # the backlog: completed records that expired an hour ago, with a 170-byte response
  sql "INSERT INTO idempotency_records (key, fingerprint, state, expires_at, response_status,
         response_format, response, created_at, updated_at)
       SELECT sha256(convert_to('expired ' || $1 || ' ' || i, 'UTF8')), '\\x01'::bytea || sha256('x'),
              'completed', now() - interval '1 hour', 201, 1, convert_to(repeat('r', 170), 'UTF8'),
              now() - interval '25 hours', now() - interval '1 hour'
       FROM generate_series(1, $expired) AS i"
  sql "VACUUM ANALYZE idempotency_records"
  sql "CHECKPOINT"
}

run=0
phase() { # round name busy: one wrk run, with the sweeper at `busy` (none: no sweeper)
  local round=$1 name=$2 busy=$3 before after result sweeper=
  run=$((run + 1))
  before=$(expired_count)
  if [ "$busy" != none ]; then
    target/release/idem-sweep "$url" "$busy" >>"$work/sweep.log" 2>&1 &
    sweeper=$!
    pids+=("$sweeper")
  fi
  result=$(BENCH_PREFIX="r$round-$run-$$" "${pin_wrk[@]}" \
    wrk -t1 -c"$connections" -d"${duration}s" -s "$lua" "http://127.0.0.1:$port" | awk '/^RESULT/')
  if [ -n "$sweeper" ]; then
    kill -TERM "$sweeper"
    wait "$sweeper" || true
  fi
  after=$(expired_count)
  read -r rps p99 errors <<<"${result#RESULT }"
  echo "| $round | $name | $rps | $p99 ms | $errors | $((before - after)) |"
}

echo "bench: $rounds round(s): $expired expired records, phases of ${duration}s, $connections connections" >&2
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
rows="$work/rows"
for round in $(seq "$rounds"); do
  IDEM_STORE=$url SHOP_ADDR="127.0.0.1:$port" RUST_LOG=warn "${pin_server[@]}" \
    target/release/shop >"$work/shop-$round.log" 2>&1 &
  shop=$!
  pids+=("$shop")
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.1
  done
  sleep 1 # the shop's first sweep, of a table without a backlog
  echo "bench: round $round: filling $expired expired records" >&2
  fill "$round"
  BENCH_PREFIX="warm-$round-$$" "${pin_wrk[@]}" wrk -t1 -c"$connections" -d2s -s "$lua" \
    "http://127.0.0.1:$port" >/dev/null
  phase "$round" "no sweeper" none >>"$rows"
  phase "$round" "paced sweeper (busy 0.1)" 0.1 >>"$rows"
  phase "$round" "unpaced sweeper (busy 1)" 1 >>"$rows"
  phase "$round" "no sweeper, after the sweeps" none >>"$rows"
  kill "$shop"
  wait "$shop" 2>/dev/null || true
  sql "TRUNCATE idempotency_records, shop_payments CASCADE"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "## The sweeper under load, $started"
echo
echo "The shop on PostgreSQL $(psql -qAt "$url" -c 'SHOW server_version') (autovacuum" \
  "$(psql -qAt "$url" -c 'SHOW autovacuum')), first requests (a fresh key each)," \
  "wrk 1 thread on core 1, $connections connections, ${duration}s per phase; the shop on core 0." \
  "A backlog of $expired expired records at each round's start. Load average (1, 5, 15 min):" \
  "$load_start at the start, $load_end at the end."
echo
echo "| round | phase | first requests/s | p99 | errors | expired records deleted |"
echo "| --- | --- | --- | --- | --- | --- |"
cat "$rows"
echo
echo "Reproduce: bench/sweep.sh $expired $duration $rounds $connections"
