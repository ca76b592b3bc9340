#!/usr/bin/env bash
# Bytes per record: writes N completed records (100,000 unless given) through PostgresStore,
# MySqlStore, SqliteStore and RedisStore, each a claim and its completion as a service makes
# them, for the benchmark's response and for a 4 KiB one, and prints what each store holds per
# record: on PostgreSQL the table's heap, TOAST and indexes (pg_total_relation_size) as
# written, after VACUUM and after VACUUM FULL; on MySQL the table's data_length and
# index_length as written and after OPTIMIZE TABLE; on SQLite the pages of the table and of its
# indexes (dbstat) and the whole file, as written and after VACUUM (a file of its own: no
# server); on Redis MEMORY USAGE of a record's key and INFO's used_memory before and after.
# Each measurement uses a table or key prefix of its own and removes what it wrote.
#
# Usage: bench/record-size.sh [records, default 100000] [postgres | mysql | sqlite | redis, default all]
# Environment: IDEM_TEST_DATABASE_URL, IDEM_TEST_MYSQL_URL and IDEM_TEST_REDIS_URL name the
# servers (defaults: postgres://postgres@127.0.0.1:5432/test, mysql://root@127.0.0.1:3306/test
# and redis://127.0.0.1:6379).
set -euo pipefail
cd "$(dirname "$0")/.."

export IDEM_RECORD_SIZE_RECORDS=${1:-100000}
export IDEM_TEST_DATABASE_URL=${IDEM_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
export IDEM_TEST_MYSQL_URL=${IDEM_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
export IDEM_TEST_REDIS_URL=${IDEM_TEST_REDIS_URL:-redis://127.0.0.1:6379}

echo "record-size: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
psql "$IDEM_TEST_DATABASE_URL" -Atc 'SHOW server_version' 2>/dev/null | sed 's/^/PostgreSQL /' || true
mysql -N -B -h 127.0.0.1 -u root -e 'SELECT VERSION()' 2>/dev/null | sed 's/^/MySQL /' || true
redis-cli -u "$IDEM_TEST_REDIS_URL" INFO server 2>/dev/null | grep -m1 '^redis_version' | tr -d '\r' || true
# Sizes, not speed: the debug build the tests use will do. One measurement at a time.
filter=()
[ -z "${2:-}" ] || filter=("$2")
cargo test -q -p idem-tests --test record_size -- --ignored --nocapture --test-threads 1 "${filter[@]}" \
  2>&1 | grep -v '^running\|^test \|^$\|test result'
