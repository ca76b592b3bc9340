# Shared by bench/sweep.sh and bench/churn.sh, sourced after they set `port` and `database`:
# the PostgreSQL server (BENCH_DATABASE_URL) and the run's database on it (created here,
# dropped at exit), the tools, a work directory, the shop and idem-sweep built, the shop and
# wrk pinned to a core each, and wrk's script of first requests (`$lua`).
# shellcheck shell=bash
server=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export PGOPTIONS="-c client_min_messages=warning"
url="${server%/*}/$database"

for tool in wrk curl psql; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench: $tool is not installed; installing it from Debian's packages" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >/dev/null
  fi
done

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  psql -q "$server" -c "DROP DATABASE IF EXISTS $database" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "bench: building the shop and idem-sweep" >&2
cargo build --release -q -p shop -p idem-bench

pin_server=() pin_wrk=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server=(taskset -c 0) pin_wrk=(taskset -c 1)
fi

psql -q "$server" -c "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database" >/dev/null

lua="$work/fresh.lua"
cat >"$lua" <<'LUA'
-- A first request each: a key never sent before, by one of 100 users.
local prefix = os.getenv("BENCH_PREFIX")
local counter = 0
request = function()
  counter = counter + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = prefix .. "-" .. counter,
    ["Authorization"] = "Bearer bench-" .. (counter % 100),
  }
  return wrk.format("POST", "/payments", headers, '{"amount":9800,"currency":"JPY"}')
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.1f %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read
      + summary.errors.write + summary.errors.timeout))
end
LUA
