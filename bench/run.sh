#!/usr/bin/env bash
# Load benchmark: one payments-like handler served bare, under idem's IdempotencyLayer, under
# #[idempotent], and (when they build) under the peers `idempotent` 2.x and `axum-idempotent`
# 0.6, measured with wrk over loopback in one interleaved run. Prints the side-by-side table
# (fresh keys / bare, replay / bare, p99 fresh, server CPU µs per fresh request), the server's
# user and kernel time per request with wrk's wakeups per response, every run
# behind it, the load average at start and end, and the commands that reproduce it.
#
# Two configurations, each its own interleaved run and its own tables:
# - `user`, first: keys scoped to the caller, whom a principal resolver reads from the
#   `Authorization` header (the peer `idempotent` scopes by the same header with its scope
#   closure), records in `MemoryStore::default()`, which a run of fresh keys fills to its bound
#   and then evicts from: the configuration a service runs;
# - `global`: one key space, records in a store with room for every key of the run, so that
#   neither the principal nor eviction is in the figures;
# - `redis`: keys scoped as in `user`, records in a Redis server of the run's own (started
#   here, pinned to the servers' core, no persistence for anyone): idem's `RedisStore` beside
#   the peer `idempotent`'s own Redis store (`ValkeyStore`, its Lua claim). The CPU columns
#   add Redis's own time to the server's: a store that makes Redis work harder is not
#   cheaper for doing less in its own process. `axum-idempotent` has no Redis store of its
#   own (its responses live in sessions) and is left out.
# - `steps` (not run by default): scope global and a roomy store as in `global`, and idem's
#   servers run the handler after two local steps (`idem::steps::Steps`) whose work is a
#   constant: what a step costs the runtime (its lease check, its record), beside the bare
#   handler, which runs the plain handler (steps need a record); no peers (neither has steps).
# - `sql` (not run by default): keys scoped as in `user`, records in PostgreSQL
#   (`PostgresStore`) and in MySQL or MariaDB (`MySqlStore`), each in a database of the run's
#   own on the machine's servers (BENCH_DATABASE_URL, default
#   postgres://postgres@127.0.0.1:5432/postgres, and BENCH_MYSQL_URL, default
#   mysql://root@127.0.0.1:3306/test, name the servers), and in SQLite (`SqliteStore`, a file
#   in the run's work directory), beside the memory store and the bare handler; no peers
#   (neither has a SQL store). The CPU columns are the server's alone: the databases' own
#   processes are not counted (SQLite runs in the server's process, and is).
#
# Usage: bench/run.sh [seconds per run, default 10] [rounds, default 3] [connections, default 32]
# Environment: BENCH_PEERS=0 leaves the peers out; BENCH_CONFIGS (default "user global redis") the
# configurations to run, in order; BENCH_PORT (default 3100) is the first of the ports the
# servers listen on (up to six per configuration, the next configuration's ten above).
# BENCH_BASELINE, the release directory of another build of idem-bench (a worktree of an
# earlier commit built with `cargo build --release -p idem-bench`), adds its
# IdempotencyLayer as one more server, labelled BENCH_BASELINE_LABEL (default "baseline"): a
# change measured against what it changed, in the same interleaved run.
#
# Each server is its own process with one tokio worker, pinned to core 0; wrk (one thread)
# runs on core 1, so the two do not steal from each other. The scenarios are interleaved in
# rounds (bare, every server with fresh keys, bare again, every server replaying one key), so
# that a machine whose load drifts slows every server alike; each ratio is taken against the
# bare runs of its own round, and the table shows the median over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-10}
rounds=${2:-3}
connections=${3:-32}
base_port=${BENCH_PORT:-3100}
with_peers=${BENCH_PEERS:-1}
configs=${BENCH_CONFIGS:-user global redis}
baseline=${BENCH_BASELINE:-}
baseline_label=${BENCH_BASELINE_LABEL:-baseline}
if [ -n "$baseline" ] && [ ! -x "$baseline/idem-bench" ]; then
  echo "bench: BENCH_BASELINE=$baseline has no idem-bench; build it there first" >&2
  exit 2
fi

for tool in wrk curl /usr/bin/time redis-server redis-cli; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench: $tool is not installed; installing it from Debian's packages" >&2
    package=${tool##*/}
    [ "${package#redis-}" = "$package" ] || package=redis-server
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$package" >/dev/null
  fi
done

work=$(mktemp -d)
pids=()
sql_database=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -n "$sql_database" ]; then
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    psql -q "$postgres_server" -c "DROP DATABASE IF EXISTS $sql_database" >/dev/null 2>&1 || true
    mysql -h "$mysql_host" -P "$mysql_port" -u root -e "DROP DATABASE IF EXISTS $sql_database" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The `sql` configuration's databases, one of the run's own on each server: sets
# `postgres_url` and `mysql_url`.
sql_databases() {
  postgres_server=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
  local mysql_server=${BENCH_MYSQL_URL:-mysql://root@127.0.0.1:3306/test} authority
  authority=${mysql_server#mysql://}
  authority=${authority#*@}
  authority=${authority%%/*}
  mysql_host=${authority%:*} mysql_port=${authority##*:}
  sql_database="idem_bench_$$"
  psql -q "$postgres_server" -c "CREATE DATABASE $sql_database" >/dev/null
  mysql -h "$mysql_host" -P "$mysql_port" -u root -e "CREATE DATABASE $sql_database"
  postgres_url="${postgres_server%/*}/$sql_database"
  mysql_url="${mysql_server%/*}/$sql_database"
}


echo "bench: building idem-bench" >&2
cargo build --release -q -p idem-bench
peers_note=""
if [ "$with_peers" != 0 ]; then
  echo "bench: building the peers (bench/peers)" >&2
  if (cd bench/peers && cargo build --release -q --ignore-rust-version --target-dir ../../target) \
    >"$work/peers-build.log" 2>&1; then
    peer_version() { awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/[^0-9.]/, ""); print; exit }' bench/peers/Cargo.lock; }
    idempotent_version=$(peer_version idempotent)
    axum_idempotent_version=$(peer_version axum-idempotent)
  else
    peers_note="the peers were skipped: bench/peers did not build ($(grep -m1 '^error' "$work/peers-build.log" || tail -n1 "$work/peers-build.log"))"
    echo "bench: $peers_note" >&2
    with_peers=0
  fi
else
  peers_note="the peers were left out (BENCH_PEERS=0)"
fi

pin_server=() pin_wrk=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server=(taskset -c 0) pin_wrk=(taskset -c 1)
else
  echo "bench: fewer than 2 cores or no taskset: server and wrk are not pinned" >&2
fi

describe() { # config: what the configuration is, for the tables' heading
  case $1 in
    user) echo "scope user, the principal read from Authorization by a resolver, MemoryStore::default()" ;;
    global) echo "scope global, a store with room for every key of the run" ;;
    redis) echo "scope user as in \`user\`, records in a Redis server of the run's own; CPU is the server's and Redis's" ;;
    steps) echo "scope global and a store with room for every key as in \`global\`, idem's handler after two local steps; the bare handler without them; no peers" ;;
    sql) echo "scope user as in \`user\`, records in PostgreSQL and in MySQL, a database of the run's own on each, in SQLite and in memory; CPU is the server's alone" ;;
    *) echo "unknown" ;;
  esac
}

# Measures every server in one configuration and prints its tables.
bench_config() {
local config=$1 load_start started
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
# name | label in the table | command (the address is appended)
servers=(
  "bare|bare handler|target/release/idem-bench bare"
  "layer|idem \`IdempotencyLayer\`|target/release/idem-bench layer"
  "attribute|idem \`#[idempotent]\`|target/release/idem-bench attribute"
)
[ -z "$baseline" ] || servers+=("baseline|idem \`IdempotencyLayer\`, $baseline_label|$baseline/idem-bench layer")
store_note=""
if [ "$config" = sql ]; then
  sql_databases
  servers=(
    "bare|bare handler|target/release/idem-bench bare"
    "postgres|idem \`IdempotencyLayer\`, \`PostgresStore\`|env BENCH_POSTGRES_URL=$postgres_url target/release/idem-bench layer"
    "mysql|idem \`IdempotencyLayer\`, \`MySqlStore\`|env BENCH_MYSQL_URL=$mysql_url target/release/idem-bench layer"
    "sqlite|idem \`IdempotencyLayer\`, \`SqliteStore\`|env BENCH_SQLITE_URL=sqlite://$work/bench.db target/release/idem-bench layer"
    "memory|idem \`IdempotencyLayer\`, \`MemoryStore\`|target/release/idem-bench layer"
  )
  store_note="PostgreSQL $(psql -tAq "$postgres_url" -c 'SHOW server_version' | cut -d' ' -f1) and $(mysql -N -B -h "$mysql_host" -P "$mysql_port" -u root -e 'SELECT VERSION()'), the machine's servers with their own settings, in databases of the run's own (dropped at its end); SQLite 3.51 (built in by libsqlite3-sys) in a file of the run's own (WAL, synchronous FULL), in the server's process; the CPU figures are the server's alone"
elif [ "$with_peers" != 0 ] && [ "$config" != steps ]; then
  servers+=("idempotent|\`idempotent\` $idempotent_version|target/release/idem-bench-peers idempotent")
  if [ "$config" = redis ]; then
    store_note="idem's servers keep their records in \`RedisStore\`, \`idempotent\` in its \`ValkeyStore\`; \`axum-idempotent\` has no Redis store and is left out"
  else
    servers+=("axum-idempotent|\`axum-idempotent\` $axum_idempotent_version|target/release/idem-bench-peers axum-idempotent")
  fi
fi

# The `redis` configuration: the servers' own Redis, on the servers' core, so that its CPU is
# counted beside theirs and wrk keeps core 1. Nothing persisted, for every store alike.
server_env=(BENCH_WORKERS=1 "BENCH_CONFIG=$config")
# `sql` scopes keys as `user` does; each server's command names its database.
[ "$config" != sql ] || server_env=(BENCH_WORKERS=1 BENCH_CONFIG=user)
redis_pid=""
if [ "$config" = redis ]; then
  redis_port=$((base_port + 90))
  "${pin_server[@]}" redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no \
    --dir "$work" --logfile "$work/redis.log" &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 100); do
    redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
  redis-cli -p "$redis_port" ping | grep -q PONG || { echo "bench: redis-server on $redis_port did not start; see $work/redis.log" >&2; exit 1; }
  server_env=(BENCH_WORKERS=1 BENCH_CONFIG=user "BENCH_REDIS_URL=redis://127.0.0.1:$redis_port")
  redis_version=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
fi

unset pid_of url_of label_of
declare -gA pid_of url_of label_of
names=()
config_pids=()
# Each configuration's servers on ports of their own.
port=$((base_port + 10 * config_number))
for entry in "${servers[@]}"; do
  IFS='|' read -r name label command <<<"$entry"
  addr="127.0.0.1:$port"
  # shellcheck disable=SC2086 # the command is words
  env "${server_env[@]}" "${pin_server[@]}" $command "$addr" >"$work/$config-$name.log" 2>&1 &
  pid=$!
  pids+=("$pid") config_pids+=("$pid")
  pid_of[$name]=$pid url_of[$name]="http://$addr" label_of[$name]=$label
  names+=("$name")
  echo "${server_env[*]} ${pin_server[*]:+${pin_server[*]} }$command $addr" >>"$work/$config-commands"
  port=$((port + 1))
done
for name in "${names[@]}"; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "${url_of[$name]}/" && break
    sleep 0.1
  done
done

body='{"amount":9800,"currency":"JPY","description":"order 4711, two items"}'
# The caller of every request (bench/src/payment.rs): the `user` configuration's principal.
authorization='Bearer client-0001'
replay_key=one-key-for-every-replay
# A ruts session id: 22 characters of unpadded base64url. axum-idempotent caches only for a
# request that carries a session; the other servers ignore the cookie.
replay_session=0000000000000000000000
replay_session=${replay_session%?}A

post() { # url key session: prints the status line and headers
  curl -s -D - -o /dev/null -X POST "$1/payments" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $2" -H "Authorization: $authorization" -H "Cookie: session=$3" -d "$body"
}

# Every server must answer what its scenario claims to measure: 201 for a fresh key, and a
# replay (201 marked replayed) for the same key again. A server that does not is left out.
measured=()
skipped_note=""
for name in "${names[@]}"; do
  key="check-$name-$$" session="1111111111111111111$((RANDOM % 10))$((RANDOM % 10))A"
  first=$(post "${url_of[$name]}" "$key" "$session" | tr -d '\r')
  second=$(post "${url_of[$name]}" "$key" "$session" | tr -d '\r')
  ok=yes
  grep -q '^HTTP/1.1 201' <<<"$first" || ok=no
  if grep -qi '^[a-z-]*replayed: *true' <<<"$first"; then ok=no; fi
  if [ "$name" != bare ]; then
    grep -q '^HTTP/1.1 201' <<<"$second" || ok=no
    grep -qi '^[a-z-]*replayed: *true' <<<"$second" || ok=no
    post "${url_of[$name]}" "$replay_key" "$replay_session" >/dev/null
  fi
  if [ "$ok" = yes ]; then
    measured+=("$name")
  else
    skipped_note+="${label_of[$name]} was left out: it did not answer a fresh key with 201 and its repeat with a replay. "
    echo "bench: ${label_of[$name]} failed its check; first answer: $(head -n1 <<<"$first"), repeat: $(head -n1 <<<"$second")" >&2
  fi
done

lua="$work/scenario.lua"
cat >"$lua" <<'LUA'
-- BENCH_KEY (fresh | same) chooses the scenario; BENCH_PREFIX makes this run's keys its own.
local mode = os.getenv("BENCH_KEY")
local prefix = tonumber(os.getenv("BENCH_PREFIX"))
local body = '{"amount":9800,"currency":"JPY","description":"order 4711, two items"}'
local counter = 0
request = function()
  local key, session
  if mode == "fresh" then
    -- A new operation from a new client: a key and a session (axum-idempotent keeps a
    -- client's responses in its session) never seen before.
    counter = counter + 1
    key = prefix .. "-" .. counter
    session = string.format("%010d%011dA", prefix, counter)
  else
    key = os.getenv("BENCH_REPLAY_KEY")
    session = os.getenv("BENCH_REPLAY_SESSION")
  end
  local headers = {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = key,
    ["Authorization"] = "Bearer client-0001",
    ["Cookie"] = "session=" .. session,
  }
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

cpu_ticks() { # utime and stime of a process, in clock ticks; with Redis's added in `redis`,
  # and Redis's own utime + stime third (0 without Redis)
  local user sys redis_user=0 redis_sys=0
  read -r user sys <<<"$(awk '{ sub(/.*\) /, ""); print $12, $13 }' "/proc/$1/stat")"
  if [ -n "$redis_pid" ]; then
    read -r redis_user redis_sys <<<"$(awk '{ sub(/.*\) /, ""); print $12, $13 }' "/proc/$redis_pid/stat")"
  fi
  echo "$((user + redis_user)) $((sys + redis_sys)) $((redis_user + redis_sys))"
}

run_number=0
measure() { # round phase name seconds keymode
  local round=$1 phase=$2 name=$3 seconds=$4 mode=$5 result user sys redis after_user after_sys
  local after_redis waits
  run_number=$((run_number + 1))
  read -r user sys redis <<<"$(cpu_ticks "${pid_of[$name]}")"
  # GNU time counts wrk's voluntary context switches: each is wrk asleep with nothing to read,
  # woken by the next response, a wakeup that the server's core pays for on loopback.
  result=$(BENCH_KEY=$mode BENCH_PREFIX=$run_number BENCH_REPLAY_KEY=$replay_key \
    BENCH_REPLAY_SESSION=$replay_session "${pin_wrk[@]}" /usr/bin/time -f '%w' -o "$work/wrk-time" \
    wrk -t1 -c"$connections" -d"${seconds}s" -s "$lua" "${url_of[$name]}" | awk '/^RESULT/')
  read -r after_user after_sys after_redis <<<"$(cpu_ticks "${pid_of[$name]}")"
  waits=$(tail -n1 "$work/wrk-time")
  if [ -z "$result" ]; then
    echo "bench: wrk printed no result against $name (${url_of[$name]}); see $work/$config-$name.log" >&2
    exit 1
  fi
  # round phase server req/s p99-ms errors requests cpu-ticks user-ticks sys-ticks wrk-waits
  # redis-ticks (the part of cpu-ticks that was Redis's)
  echo "$round $phase $name ${result#RESULT } $((after_user + after_sys - user - sys))" \
    "$((after_user - user)) $((after_sys - sys)) $waits $((after_redis - redis))"
}

echo "bench: warming up every server" >&2
for name in "${measured[@]}"; do
  measure 0 warm "$name" 2 fresh >/dev/null
done

echo "bench: $rounds round(s) of $(( ${#measured[@]} * 2 )) runs, ${duration}s each" >&2
results="$work/$config-results"
for round in $(seq "$rounds"); do
  measure "$round" fresh bare "$duration" fresh >>"$results"
  for name in "${measured[@]}"; do
    [ "$name" = bare ] || measure "$round" fresh "$name" "$duration" fresh >>"$results"
  done
  measure "$round" replay bare "$duration" fresh >>"$results"
  for name in "${measured[@]}"; do
    [ "$name" = bare ] || measure "$round" replay "$name" "$duration" same >>"$results"
  done
  echo "bench: round $round of $rounds done" >&2
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
# Stopped and waited for, so that no server of this configuration still answers on a port
# when the next one checks its servers.
[ -z "$redis_pid" ] || config_pids+=("$redis_pid")
for pid in "${config_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
for pid in "${config_pids[@]}"; do wait "$pid" 2>/dev/null || true; done

labels="$work/$config-labels"
for name in "${measured[@]}"; do echo "$name ${label_of[$name]}" >>"$labels"; done

echo
echo "## Load benchmark, configuration \`$config\` ($(describe "$config")), $started"
echo
echo "wrk: 1 thread on core 1, $connections connections, ${duration}s per run, $rounds round(s);" \
  "each server: 1 tokio worker on core 0. Load average (1, 5, 15 min): $load_start at the configuration's start, $load_end at its end."
[ -z "$peers_note" ] || echo "Note: $peers_note."
if [ "$config" = sql ]; then
  echo "Stores: $store_note."
elif [ -n "$store_note" ]; then
  echo "Stores: $store_note; Redis $redis_version on 127.0.0.1:$redis_port, pinned with the servers, without persistence. Every CPU figure is the server's and Redis's together."
fi
[ -z "$skipped_note" ] || echo "Note: $skipped_note"
echo
awk -v ticks_per_s="$(getconf CLK_TCK)" -v seconds="$duration" '
  function median(values, n,    i, j, v, sorted) {
    for (i = 1; i <= n; i++) sorted[i] = values[i]
    for (i = 2; i <= n; i++) {
      v = sorted[i]
      for (j = i - 1; j >= 1 && sorted[j] > v; j--) sorted[j + 1] = sorted[j]
      sorted[j + 1] = v
    }
    return n % 2 ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2
  }
  FILENAME ~ /labels$/ { name = $1; $1 = ""; label[name] = substr($0, 2); order[++servers] = name; next }
  {
    round = $1; phase = $2; name = $3
    rps[round, phase, name] = $4; p99[round, phase, name] = $5
    errors[phase, name] += $6; requests[phase, name] += $7; ticks[phase, name] += $8
    user_ticks[phase, name] += $9; sys_ticks[phase, name] += $10; waits[phase, name] += $11
    redis_ticks[phase, name] += $12
    if ($7) { cpu_round[round, phase, name] = $8 / ticks_per_s * 1e6 / $7 }
    share = $8 / ticks_per_s / seconds
    if (min_share == "" || share < min_share) min_share = share
    if (share > max_share) max_share = share
    if (name == "bare") {
      bare_sum[round] += $4; bare_n[round]++
      bare_p99[++bare_runs] = $5; bare_ticks += $8; bare_requests += $7
    }
    if (round > rounds) rounds = round
  }
  function row(name, phase, what,    r, n, ratios, p99s, rates) {
    n = 0
    for (r = 1; r <= rounds; r++) {
      if (!((r, phase, name) in rps)) continue
      n++
      ratios[n] = rps[r, phase, name] / (bare_sum[r] / bare_n[r])
      p99s[n] = p99[r, phase, name]
      rates[n] = rps[r, phase, name]
    }
    if (what == "ratio") return n ? median(ratios, n) : -1
    if (what == "p99") return n ? median(p99s, n) : -1
    if (what == "rate") return n ? median(rates, n) : -1
    if (what == "spread") return n ? sprintf("%.2f–%.2f", least(ratios, n), most(ratios, n)) : "–"
  }
  function least(values, n,    i, v) { v = values[1]; for (i = 2; i <= n; i++) if (values[i] < v) v = values[i]; return v }
  function most(values, n,    i, v) { v = values[1]; for (i = 2; i <= n; i++) if (values[i] > v) v = values[i]; return v }
  # The CPU per request of each round'"'"'s run, as "least–most": how far one run of a server is
  # from another of the same server, the noise a comparison of two servers must clear.
  function cpu_spread(phase, name,    r, n, values) {
    n = 0
    for (r = 1; r <= rounds; r++) if ((r, phase, name) in cpu_round) values[++n] = cpu_round[r, phase, name]
    return n ? sprintf("%.1f–%.1f", least(values, n), most(values, n)) : "–"
  }
  function redis_us(phase, name) {
    return requests[phase, name] ? redis_ticks[phase, name] / ticks_per_s * 1e6 / requests[phase, name] : -1
  }
  # The servers other than the bare handler, fewest CPU µs per request of `phase` first.
  function ranking(phase,    i, j, n, names, v, out) {
    n = 0
    for (i = 1; i <= servers; i++) if (order[i] != "bare") names[++n] = order[i]
    for (i = 2; i <= n; i++) {
      v = names[i]
      for (j = i - 1; j >= 1 && cpu_us(phase, names[j]) > cpu_us(phase, v); j--) names[j + 1] = names[j]
      names[j + 1] = v
    }
    out = ""
    for (i = 1; i <= n; i++) out = out (i > 1 ? " < " : "") label[names[i]] sprintf(" (%.1f)", cpu_us(phase, names[i]))
    return out
  }
  function cpu_us(phase, name) {
    return requests[phase, name] ? ticks[phase, name] / ticks_per_s * 1e6 / requests[phase, name] : -1
  }
  function part_us(part, phase, name) {
    if (!requests[phase, name]) return -1
    return (part == "user" ? user_ticks[phase, name] : sys_ticks[phase, name]) / ticks_per_s * 1e6 / requests[phase, name]
  }
  function waits_per(phase, name) {
    return requests[phase, name] ? waits[phase, name] / requests[phase, name] : -1
  }
  END {
    print "| server | fresh keys / bare | replay / bare | p99 fresh | server CPU µs per fresh request |"
    print "| --- | --- | --- | --- | --- |"
    printf "| %s | 1.00 | – | %.1f ms | %.1f |\n", label["bare"], median(bare_p99, bare_runs),
      bare_ticks / ticks_per_s * 1e6 / bare_requests
    for (i = 1; i <= servers; i++) {
      name = order[i]
      if (name == "bare") continue
      printf "| %s | %.2f (%s) | %.2f (%s) | %.1f ms | %.1f |\n", label[name],
        row(name, "fresh", "ratio"), row(name, "fresh", "spread"),
        row(name, "replay", "ratio"), row(name, "replay", "spread"),
        row(name, "fresh", "p99"), cpu_us("fresh", name)
    }
    print ""
    print "Medians over the rounds, and in brackets the least and the most of the rounds; each ratio is"
    print "against the mean of its round'"'"'s two bare runs (the bare row: every bare run). CPU: the server"
    print "process'"'"'s utime + stime over all its runs of the scenario, divided by the requests wrk"
    print "completed in them."
    print ""
    print "| server | CPU µs per fresh request | each round'"'"'s | of which Redis | CPU µs per replay | each round'"'"'s | of which Redis |"
    print "| --- | --- | --- | --- | --- | --- | --- |"
    for (i = 1; i <= servers; i++) {
      name = order[i]
      if (name == "bare") continue
      printf "| %s | %.1f | %s | %.1f | %.1f | %s | %.1f |\n", label[name],
        cpu_us("fresh", name), cpu_spread("fresh", name), redis_us("fresh", name),
        cpu_us("replay", name), cpu_spread("replay", name), redis_us("replay", name)
    }
    print ""
    print "Ranked by CPU per request, the figure least moved by what else the machine does:"
    print "- fresh keys: " ranking("fresh")
    print "- replays: " ranking("replay")
    print "CPU counts Redis'"'"'s own time too in the `redis` configuration (its column; 0 elsewhere)."
    print ""
    print "| server | fresh req/s | replay req/s | p99 replay | server CPU µs per replay | errors (fresh, replay) |"
    print "| --- | --- | --- | --- | --- | --- |"
    for (i = 1; i <= servers; i++) {
      name = order[i]
      if (name == "bare") continue
      printf "| %s | %.0f | %.0f | %.1f ms | %.1f | %d, %d |\n", label[name], row(name, "fresh", "rate"),
        row(name, "replay", "rate"), row(name, "replay", "p99"), cpu_us("replay", name),
        errors["fresh", name], errors["replay", name]
    }
    print ""
    print "| server | user µs per fresh request | kernel µs | wrk wakeups per response | user µs per replay | kernel µs | wrk wakeups per response |"
    print "| --- | --- | --- | --- | --- | --- | --- |"
    for (i = 1; i <= servers; i++) {
      name = order[i]
      if (name == "bare") {
        # The bare handler runs with fresh keys in both halves of a round.
        printf "| %s | %.1f | %.1f | %.2f | – | – | – |\n", label[name],
          (user_ticks["fresh", name] + user_ticks["replay", name]) / ticks_per_s * 1e6 / bare_requests,
          (sys_ticks["fresh", name] + sys_ticks["replay", name]) / ticks_per_s * 1e6 / bare_requests,
          (waits["fresh", name] + waits["replay", name]) / bare_requests
        continue
      }
      printf "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", label[name],
        part_us("user", "fresh", name), part_us("sys", "fresh", name), waits_per("fresh", name),
        part_us("user", "replay", name), part_us("sys", "replay", name), waits_per("replay", name)
    }
    print ""
    print "User and kernel: the server'"'"'s utime and stime. Wakeups: wrk'"'"'s voluntary context switches per"
    print "response, each a time wrk slept with nothing to read and the next response woke it; on"
    print "loopback the server'"'"'s core delivers that response and pays for the wakeup, in its kernel time."
    printf "\nbare handler: %.0f req/s (the median of its rounds'"'"' means). The servers used %.0f%% to %.0f%% of their\n", median_bare(), min_share * 100, max_share * 100
    if (max_share < 0.9) {
      print "core during their runs: other work on the machine took the rest of core 0, so the throughputs"
      print "say what the machine allowed, and the CPU per request is the steadier figure."
    } else print "core during their runs."
  }
  function median_bare(    r, n, means) {
    n = 0
    for (r = 1; r <= rounds; r++) if (bare_n[r]) means[++n] = bare_sum[r] / bare_n[r]
    return n ? median(means, n) : 0
  }
' "$labels" "$results"

echo
echo "Every run (round, scenario, server, req/s, p99 ms, errors, requests, server CPU ticks of 1/$(getconf CLK_TCK) s," \
  "of which user and kernel, wrk's voluntary context switches, Redis's CPU ticks):"
echo
echo '```text'
cat "$results"
echo '```'
echo
echo "To reproduce: BENCH_CONFIGS=$config bench/run.sh $duration $rounds $connections; it starts each server as"
echo
echo '```sh'
[ -z "$redis_pid" ] || echo "${pin_server[*]:+${pin_server[*]} }redis-server --bind 127.0.0.1 --port $redis_port --save '' --appendonly no"
while read -r command; do
  echo "$command"
done <"$work/$config-commands"
echo '```'
echo
echo "and runs, once per scenario and server, with the Lua script it writes (BENCH_KEY=fresh: a new"
echo "key and session per request; BENCH_KEY=same: the one key replayed):"
echo
echo '```sh'
echo "${pin_wrk[*]:+${pin_wrk[*]} }wrk -t1 -c$connections -d${duration}s -s scenario.lua http://127.0.0.1:PORT"
echo '```'
}

config_number=0
for config in $configs; do
  case $config in
    user | global | redis | steps | sql) ;;
    *) echo "bench: unknown configuration \`$config\`; expected user, global, redis, steps or sql" >&2; exit 2 ;;
  esac
  bench_config "$config"
  config_number=$((config_number + 1))
done
