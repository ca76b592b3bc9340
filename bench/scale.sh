#!/usr/bin/env bash
# Thirty days of keys (issue #30): the shop on PostgreSQL under wrk, first requests (a fresh key
# each) and replays (one stored key, sent again and again), with its records table nearly
# empty, filled to N completed live records, while the sweeper deletes a backlog of expired
# ones, and after that sweep. Prints one row per phase and round: requests per second and p99
# of both, each against the same round's nearly empty table, and the table's size; then the
# table's heap, TOAST, indexes, live and dead tuples at each phase's start and end, and how long
# the fill took.
#
# Usage: bench/scale.sh [records N, default 10000000] [seconds per wrk run, default 20]
#                       [rounds, default 2] [connections, default 16]
# Environment: BENCH_DATABASE_URL, a PostgreSQL server the script may create a database on
# (default postgres://postgres@127.0.0.1:5432/postgres); the database `idem_bench_scale` is
# created for the run and dropped at its end. BENCH_PORT (default 3192) is the shop's port.
# BENCH_SCALE_EXPIRED (default N/10) is the backlog of expired records the sweeper works off.
#
# The phases, in this order, each with a shop of its own (started before the phase's set-up:
# its sweeper sweeps at start, before any backlog is there, and next 5 minutes later):
#   1. nearly empty: the table holds only what the phase's own requests write;
#   2. N records: `fill` writes N completed records, as the store leaves them, in statements
#      of a million (a few seconds each), then VACUUM ANALYZE and CHECKPOINT, all timed;
#   3. while the sweeper sweeps: `fill` adds the backlog (expired in the hour before), VACUUM
#      ANALYZE, CHECKPOINT; `idem-sweep` (bench/src/bin/idem-sweep.rs, the store's paced
#      sweeper in a process of its own) runs at the default pace (busy 0.1) during each round's
#      runs, which count the records it deleted; afterwards it sweeps the rest without load;
#   4. after the sweep: nothing sweeps, whatever the deletions left (dead tuples, their WAL).
# In each phase every round runs first requests, then replays, `seconds` each, so that the
# rounds of a phase interleave the two; a round's ratios are against its own nearly empty
# phase. Before each replay run the script sends the key once with curl and fails unless the
# answer says `Idempotent-Replayed: true`. The shop is pinned to core 0 and wrk to core 1;
# PostgreSQL, the sweeper and the fill run where the kernel puts them.
#
# Counting the rows (a sequential scan) at each phase's start and end takes seconds at 10
# million. The sweeper's deletions are counted by the table's statistics (n_tup_del), which
# needs track_counts (on by default). Takes 8 × rounds × seconds of wrk, plus the fill and the
# rest of the sweep: at full size, on a machine with nothing else running.
set -euo pipefail
cd "$(dirname "$0")/.."

records=${1:-10000000}
duration=${2:-20}
rounds=${3:-2}
connections=${4:-16}
expired=${BENCH_SCALE_EXPIRED:-$((records / 10))}
port=${BENCH_PORT:-3192}
database=idem_bench_scale
# The server, the database, the builds, the pinning and wrk's script of first requests
# (`$lua`): bench/shop-postgres.sh.
# shellcheck source=bench/shop-postgres.sh
source bench/shop-postgres.sh

table=idempotency_records
chunk=1000000 # records a fill statement writes: a few seconds each, progress in between
die() { echo "bench: $*" >&2; exit 1; }
sql() { psql -qAt "$url" -c "$1"; }
now() { date +%s.%N; }
elapsed() { awk -v from="$1" -v to="$(now)" 'BEGIN { printf "%.1f", to - from }'; }

# The fill: the ONE place in this script that names the table's columns (and writes the
# record format), so that a change of the schema (idem-postgres/migrations) is adjusted
# here alone. It writes `count` completed records as PostgresStore leaves a payment of the
# shop: a 32-byte key (SHA-256, as StoreKey), a fingerprint of tag byte 4 (JcsMembersSha256V1,
# the shop's payments) and a digest, the holder's 16-byte lease token (completion keeps it),
# status 201 and its response in record format v1 (idem-core/src/replay/codec.rs): the shop's
# headers (content-type, location) and a body of the same length, 229 bytes in all, byte for
# byte what the shop stores but for the payment's id and time, so a filled record would replay.
# Completion times are spread evenly (kept 30 days, as a 30-day window holds them): `live`
# records were completed over the 29 days before the fill and expire within 1 to 30 days;
# `expired` ones expired in the hour before. Keys are sorted within a statement, so that each
# walks the primary key's index once instead of at random (the fill's largest cost at scale);
# the index still splits where real keys would. Each statement is a session and a transaction
# of its own, with synchronous_commit off (no fsync a statement) and room to sort in memory.
fill() { # kind count
  local kind=$1 count=$2 oldest newest first last started
  case $kind in
    live) oldest='29 days' newest='0 seconds' ;;
    expired) oldest='30 days 1 hour' newest='30 days' ;;
    *) die "fill: unknown kind $kind" ;;
  esac
  for ((first = 1; first <= count; first += chunk)); do
    last=$((first + chunk - 1 < count ? first + chunk - 1 : count))
    started=$(now)
    {
      cat <<'SQL'
SET synchronous_commit = off;
SET work_mem = '256MB';
-- A header in record format v1: u16 name length, name, u32 value length, value. The
-- functions are STABLE, as convert_to is, so that the planner inlines them where it can.
CREATE FUNCTION pg_temp.header(name text, value text) RETURNS bytea
LANGUAGE sql STABLE AS $fn$
  SELECT int2send(octet_length(name)::int2) || convert_to(name, 'UTF8')
      || int4send(octet_length(value)) || convert_to(value, 'UTF8')
$fn$;
-- A response in record format v1 as the shop's payments store it: version 1, body kept,
-- status 201, two headers in the map's order, u64 body length, body.
CREATE FUNCTION pg_temp.stored_response(location text, body text) RETURNS bytea
LANGUAGE sql STABLE AS $fn$
  SELECT '\x0100'::bytea || int2send(201::int2) || int2send(2::int2)
      || pg_temp.header('content-type', 'application/json')
      || pg_temp.header('location', location)
      || int8send(octet_length(body)::int8) || convert_to(body, 'UTF8')
$fn$;
-- The shop's JSON for a payment (examples/shop/src/model.rs), 129 bytes with a 28-byte id.
CREATE FUNCTION pg_temp.payment(id text, created timestamptz) RETURNS text
LANGUAGE sql STABLE AS $fn$
  SELECT '{"id":"' || id || '","amount":9800,"currency":"JPY","status":"succeeded",'
         || '"amountRefunded":0,"created":' || extract(epoch FROM created)::int8 || '}'
$fn$;
SQL
      cat <<SQL
INSERT INTO $table (key, fingerprint, state, lease_token, expires_at, response_status,
                    response_format, response, created_at, updated_at)
SELECT key, '\\x04'::bytea || sha256(int8send(i)), 'completed', substr(sha256(int8send(-i)), 1, 16),
       completed + interval '30 days', 201, 1,
       pg_temp.stored_response('/payments/' || id, pg_temp.payment(id, completed)),
       completed - interval '4 milliseconds', completed
FROM (SELECT i, 'pay_' || lpad(i::text, 24, '0') AS id, sha256(convert_to('$kind ' || i, 'UTF8')) AS key,
             now() - interval '$oldest' + (interval '$oldest' - interval '$newest') * i / $count AS completed
      FROM generate_series($first, $last) AS i
      ORDER BY key) AS records;
SQL
    } | psql -qAt -v ON_ERROR_STOP=1 "$url" >/dev/null
    echo "bench: $kind records $first to $last of $count: $(elapsed "$started") s" >&2
  done
}

# VACUUM ANALYZE (hint bits, the visibility map, the planner's statistics, as a table some
# days old has them) and CHECKPOINT (the measured phase does not write the fill's pages).
settle() {
  sql "VACUUM ANALYZE $table"
  sql "CHECKPOINT"
}

# Records the sweeper deleted: the table's delete counter (nothing else deletes records here:
# first requests insert, completions update), which the sweeper's connection reports as its
# transactions end and when it closes.
deleted_total() { sql "SELECT n_tup_del FROM pg_stat_user_tables WHERE relid = '$table'::regclass"; }

shop=
shop_started=
start_shop() { # phase: a shop of its own, up and past its first sweep
  IDEM_STORE=$url SHOP_ADDR="127.0.0.1:$port" RUST_LOG=warn "${pin_server[@]}" \
    target/release/shop >>"$work/shop.log" 2>&1 &
  shop=$!
  pids+=("$shop")
  shop_started=$(now)
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.1
  done
  curl -s -o /dev/null "http://127.0.0.1:$port/healthz" || die "the shop did not start (phase $1): $(tail -5 "$work/shop.log")"
  sleep 1 # its first sweep, before any backlog
}
stop_shop() {
  kill "$shop"
  wait "$shop" 2>/dev/null || true
}

# The replayed request: one key, stored once through HTTP before the first phase.
replay_key="scale-replay-$$"
replay_lua="$work/replay.lua"
cat >"$replay_lua" <<'LUA'
-- The same request every time: a replay of the key the script stored first.
wrk.method = "POST"
wrk.path = "/payments"
wrk.body = '{"amount":9800,"currency":"JPY"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Idempotency-Key"] = os.getenv("BENCH_REPLAY_KEY")
wrk.headers["Authorization"] = "Bearer bench-replay"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.1f %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read
      + summary.errors.write + summary.errors.timeout))
end
LUA
send_replay_key() { # prints the answer's status line and headers
  curl -s -D - -o /dev/null "http://127.0.0.1:$port/payments" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $replay_key" -H 'Authorization: Bearer bench-replay' \
    -d '{"amount":9800,"currency":"JPY"}' | tr -d '\r'
}
store_replay_key() {
  send_replay_key | grep -q '^HTTP/1.1 201' || die "the first request of the replayed key was not answered 201"
}
check_replay() { # a replay is measured only if the shop answers it as one
  local answer
  answer=$(send_replay_key)
  grep -qi '^idempotent-replayed: true$' <<<"$answer" ||
    die "the replayed key was not answered as a replay (Idempotent-Replayed: true); the answer: $answer"
}

wrk_run() { # fresh|replay prefix: prints requests per second, p99 in ms, errors
  local script=$lua result
  [ "$1" = replay ] && script=$replay_lua
  result=$(BENCH_PREFIX="$2" BENCH_REPLAY_KEY="$replay_key" "${pin_wrk[@]}" \
    wrk -t1 -c"$connections" -d"${duration}s" -s "$script" "http://127.0.0.1:$port" | awk '/^RESULT/')
  [ -n "$result" ] || die "wrk printed no result ($1)"
  echo "${result#RESULT }"
}
warm_up() { # a fresh shop: 2 s of first requests, unmeasured
  BENCH_PREFIX="warm-$1-$$" "${pin_wrk[@]}" wrk -t1 -c"$connections" -d2s -s "$lua" \
    "http://127.0.0.1:$port" >/dev/null
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
ratio() { awk -v x="$1" -v base="$2" 'BEGIN { if (base > 0) printf " (%.2f×)", x / base }'; }

backlog_in=0 # expired records added; those the sweeper has not deleted are `waiting`
deleted_base=0
waiting() {
  if [ "$backlog_in" -eq 0 ]; then echo 0; else echo $((backlog_in - ($(deleted_total) - deleted_base))); fi
}

# The table's size, one row of the sizes table: rows counted, expired rows waiting, the
# statistics' live and dead tuples, heap, TOAST, indexes, all, and all per live record.
sizes_table="$work/sizes"
snapshot() { # phase at
  local rows waiting_now sizes heap toast indexes total live dead
  sleep 1 # the shop's connections report their counts at most once a second
  rows=$(sql "SELECT count(*) FROM $table")
  waiting_now=$(waiting)
  sizes=$(psql -qAt -F ' ' "$url" -c "
    SELECT pg_relation_size(c.oid), pg_relation_size(c.reltoastrelid), pg_indexes_size(c.oid),
           pg_total_relation_size(c.oid), s.n_live_tup, s.n_dead_tup
    FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = '$table'::regclass")
  read -r heap toast indexes total live dead <<<"$sizes"
  echo "| $1 | $2 | $rows | $waiting_now | $live | $dead | $(mib "$heap") | $(mib "$toast") |" \
    "$(mib "$indexes") | $(mib "$total") | $((total / (rows > waiting_now ? rows - waiting_now : 1))) |" >>"$sizes_table"
  last_rows=$rows last_waiting=$waiting_now last_total=$total
}

# One phase: every round runs first requests, then replays; with `sweep`, idem-sweep at the
# default pace runs during the round's runs and the row says how many records it deleted a
# second. Rows go to $rows; the first phase's figures are each round's base.
rows="$work/rows"
runs=0
declare -A base_fresh base_fresh_p99 base_replay base_replay_p99
measure() { # phase sweep|none
  local phase=$1 sweep=$2 round fresh_rps fresh_p99 fresh_err replay_rps replay_p99 replay_err
  local records_col sweeper before started seconds rate='' result
  records_col=$last_rows
  [ "$last_waiting" -gt 0 ] && records_col="$((last_rows - last_waiting)) + $last_waiting expired"
  for round in $(seq "$rounds"); do
    if [ "$sweep" = sweep ]; then
      before=$(deleted_total) started=$(now)
      target/release/idem-sweep "$url" 0.1 >>"$work/sweep.log" 2>&1 &
      sweeper=$!
      pids+=("$sweeper")
    fi
    runs=$((runs + 1)) # every run's keys its own: a key of an earlier run would be a replay
    result=$(wrk_run fresh "r$round-$runs-$$")
    read -r fresh_rps fresh_p99 fresh_err <<<"$result"
    check_replay
    result=$(wrk_run replay "")
    read -r replay_rps replay_p99 replay_err <<<"$result"
    if [ "$sweep" = sweep ]; then
      kill -TERM "$sweeper"
      wait "$sweeper" || true
      seconds=$(elapsed "$started")
      sleep 1 # its connection's last counts
      rate=$(awk -v n="$(($(deleted_total) - before))" -v s="$seconds" 'BEGIN { printf "%.0f", n / s }')
      notes+=("Round $round, $phase: the sweeper deleted $rate expired records a second, $(ratio "$rate" "$fresh_rps" | tr -d ' ()') the first requests' rate (which a 30-day window at steady load expires a second).")
      if [ "$(waiting)" -le 0 ]; then
        rate="≥ $rate"
        notes+=("Round $round, $phase: the backlog ran out during the round, so the sweeper idled part of it (its rate is a lower bound); raise BENCH_SCALE_EXPIRED.")
      fi
    fi
    [ "$((fresh_err + replay_err))" -eq 0 ] ||
      notes+=("Round $round, $phase: $((fresh_err + replay_err)) requests failed (wrk's errors: statuses 400 and above, timeouts, connection errors); that row is not to be trusted.")
    if [ -z "${base_fresh[$round]:-}" ]; then
      base_fresh[$round]=$fresh_rps base_fresh_p99[$round]=$fresh_p99
      base_replay[$round]=$replay_rps base_replay_p99[$round]=$replay_p99
    fi
    printf '| %s | %s | %s | %.0f%s | %s ms%s | %.0f%s | %s ms%s | %s | %s | %s | %s |\n' \
      "$round" "$phase" "$records_col" \
      "$fresh_rps" "$(ratio "$fresh_rps" "${base_fresh[$round]}")" \
      "$fresh_p99" "$(ratio "$fresh_p99" "${base_fresh_p99[$round]}")" \
      "$replay_rps" "$(ratio "$replay_rps" "${base_replay[$round]}")" \
      "$replay_p99" "$(ratio "$replay_p99" "${base_replay_p99[$round]}")" \
      "$((fresh_err + replay_err))" "$(mib "$last_total")" "$rate" "$(cut -d' ' -f1 /proc/loadavg)" >>"$rows"
  done
}

# The rest of the backlog, without load, at the same pace: "after the sweep" means it is gone.
finish_sweep() {
  local started limit=$((SECONDS + 1800)) sweeper left
  left=$(waiting)
  [ "$left" -gt 0 ] || return 0
  started=$(now)
  target/release/idem-sweep "$url" 0.1 >>"$work/sweep.log" 2>&1 &
  sweeper=$!
  pids+=("$sweeper")
  while [ "$(waiting)" -gt 0 ] && [ "$SECONDS" -lt "$limit" ]; do sleep 2; done
  kill -TERM "$sweeper"
  wait "$sweeper" || true
  sleep 1
  notes+=("The sweeper swept the rest of the backlog ($left records) without load in $(elapsed "$started") s; $(waiting) were left.")
}

[ "$(sql 'SHOW track_counts')" = on ] || die "track_counts is off: the sweeper's deletions cannot be counted"
echo "bench: $records records, a backlog of $expired expired; $rounds round(s) of ${duration}s runs, $connections connections" >&2
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
notes=()
last_rows=0 last_waiting=0 last_total=0

echo "bench: phase nearly empty" >&2
start_shop "nearly empty"
store_replay_key
check_replay
warm_up empty
snapshot "nearly empty" start
measure "nearly empty" none
snapshot "nearly empty" end
stop_shop

echo "bench: filling $records records" >&2
fill_started=$(now)
fill live "$records"
fill_time=$(elapsed "$fill_started")
settle_started=$(now)
settle
notes+=("Filling $records records took $fill_time s (INSERT), then $(elapsed "$settle_started") s (VACUUM ANALYZE, CHECKPOINT).")
echo "bench: phase $records records" >&2
start_shop "$records records"
warm_up filled
snapshot "$records records" start
measure "$records records" none
snapshot "$records records" end
stop_shop

echo "bench: adding $expired expired records" >&2
start_shop "sweep"
deleted_base=$(deleted_total)
backlog_started=$(now)
fill expired "$expired"
backlog_in=$expired
settle
notes+=("Adding the backlog of $expired expired records took $(elapsed "$backlog_started") s with VACUUM ANALYZE and CHECKPOINT.")
echo "bench: phase while the sweeper sweeps" >&2
warm_up sweep
snapshot "while the sweeper sweeps" start
measure "while the sweeper sweeps" sweep
snapshot "while the sweeper sweeps" end
if awk -v s="$(elapsed "$shop_started")" 'BEGIN { exit !(s > 295) }'; then
  notes+=("The sweeping phase ended more than 5 minutes after its shop started: the shop's own sweeper may have swept during it too.")
fi
stop_shop
echo "bench: sweeping the rest of the backlog" >&2
finish_sweep

echo "bench: phase after the sweep" >&2
start_shop "after the sweep"
warm_up after
snapshot "after the sweep" start
measure "after the sweep" none
snapshot "after the sweep" end
stop_shop
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

setting() { sql "SHOW $1"; }
echo
echo "## Thirty days of keys, $started"
echo
echo "The shop on PostgreSQL $(setting server_version) (shared_buffers $(setting shared_buffers)," \
  "autovacuum $(setting autovacuum), max_wal_size $(setting max_wal_size), checkpoint_timeout" \
  "$(setting checkpoint_timeout), fsync $(setting fsync), synchronous_commit" \
  "$(setting synchronous_commit)), a shop of its own a phase on core 0; wrk 1 thread on core 1," \
  "$connections connections, ${duration}s a run; each round runs first requests (a fresh key" \
  "each), then replays (one key). A backlog of $expired expired records for the sweeper" \
  "(\`idem-sweep\`, busy 0.1). Load average (1, 5, 15 min): $load_start at the start," \
  "$load_end at the end."
echo
echo "| round | phase | records at the start | first requests/s | first p99 | replays/s | replay p99 | errors | table and indexes | expired records deleted/s | load after |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
sort -s -t'|' -k2,2n "$rows"
echo
echo "Ratios are against the round's nearly empty phase; \"load after\" is the 1-minute load average"
echo "after the round's runs (on a shared machine, a row with a load well above the others' says more"
echo "about the machine than about the table). The table's size at each phase's start and end"
echo "(records counted; expired ones the sweeper has yet to delete; the statistics' live and dead tuples):"
echo
echo "| phase | at | records | expired waiting | live tuples | dead tuples | heap | TOAST | indexes | all | bytes per live record |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
cat "$sizes_table"
echo
for note in "${notes[@]}"; do echo "- $note"; done
echo
echo "Reproduce: BENCH_SCALE_EXPIRED=$expired bench/scale.sh $records $duration $rounds $connections"
