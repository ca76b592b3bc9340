#!/usr/bin/env bash
# Memory mode: what the memory store's byte bound holds in real memory. For each response shape
# (body size, extra headers) it runs `idem-memory`, which sends first requests through
# IdempotencyLayer in process until the store has evicted for a while (the default bound of
# 64 MiB, no entry bound in the way), and prints one table: the records kept, their heap and the
# process's resident set growth, per record and against the bound, and the heap blocks each
# record holds (what its eviction frees). A ratio at or under 1.00 means the bound held.
#
# Usage: bench/memory.sh [bound in bytes, default 67108864] [requests, default 150000]
set -euo pipefail
cd "$(dirname "$0")/.."

bound=${1:-67108864}
requests=${2:-150000}
echo "bench: building idem-memory" >&2
cargo build --release -q -p idem-bench --bin idem-memory
bin=target/release/idem-memory

printf '| body | extra headers | records kept | heap / record | resident / record | heap / bound | resident / bound | heap blocks / record |\n'
printf '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for shape in "100 0" "100 1" "100 4" "100 16" "1000 0" "4000 2" "16384 0"; do
  set -- $shape
  line=$("$bin" "$bound" 10000000 "$requests" "$1" "$2")
  field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$line"; }
  printf '| %s | %s | %s | %s B | %s B | %s | %s | %s |\n' "$1" "$2" "$(field records)" \
    "$(field heap_per_record)" "$(field resident_per_record)" "$(field heap_over_bound)" \
    "$(field resident_over_bound)" "$(field blocks_per_record)"
done
