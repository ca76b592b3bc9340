#!/usr/bin/env bash
# Instruction-count mode: what a request costs in process (tower's oneshot on a current-thread
# runtime, no network), counted by callgrind, whose figures barely move on a busy machine
# where wall time does. For each path (the bare handler; a first request and a replay through
# IdempotencyLayer and through #[idempotent]; the memory store roomy, or at its bound and
# evicting) it runs the driver `idem-instructions` twice under callgrind, with a short and a
# long measured loop, and divides the difference in instructions by the difference in
# requests: start-up, the store's filling and the warm-up cancel out. Prints one table.
#
# Usage: bench/instructions.sh [short loop, default 1000] [long loop, default 6000] [bound, default 4000]
#        bench/instructions.sh --profile [PATH] [STORE] [REQUESTS] [BOUND]
#
# --profile shows where the instructions of one path go: callgrind collects inside the measured
# loop only, and callgrind_annotate lists the top functions, inclusive and then self, in
# instructions per request (defaults: layer-first full 5000 4000). PATH is bare,
# layer-first, attribute-first, layer-replay, attribute-replay, layer-steps-first or
# attribute-steps-first; STORE is roomy or full.
#
# The steps paths are bench/run.sh's configuration `steps`: the handler after two local steps,
# keys always global. Compare them with the first requests of a run with BENCH_CONFIG=global.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  echo "bench: valgrind is not installed; installing it from Debian's packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
fi

echo "bench: building idem-instructions" >&2
cargo build --release -q -p idem-bench --bin idem-instructions
bin=target/release/idem-instructions
out_dir=target/callgrind
mkdir -p "$out_dir"

# Prints callgrind_annotate's lines as instructions per request: "Ir/request  function".
per_request() { # requests
  awk -v n="$1" '
    /^ *[0-9][0-9,]* \( *[0-9.]+%\) / {
      ir = $1; gsub(/,/, "", ir)
      line = $0
      sub(/^ *[0-9,]+ \( *[0-9.]+%\) +/, "", line)
      sub(/^[^:]*:/, "", line)           # the file, "???" without debug info
      sub(/ \[[^]]*\]$/, "", line)       # the object file
      # The frames above the measured loop carry its whole cost and say nothing.
      if (line ~ /^(main|\(below main\)|__libc_start_main|0x[0-9a-f]+$|std::rt::|std::sys::backtrace::|idem_instructions::main$)/) next
      printf "%10.0f  %s\n", ir / n, line
    }'
}

if [ "${1:-}" = --profile ]; then
  path=${2:-layer-first} store=${3:-full} requests=${4:-5000} bound=${5:-4000}
  out="$out_dir/profile-$path-$store.out"
  echo "bench: callgrind over $requests requests of $path ($store store)" >&2
  valgrind --tool=callgrind --toggle-collect='idem_instructions::measured_loop' \
    --callgrind-out-file="$out" "$bin" "$path" "$store" "$requests" "$bound" >/dev/null 2>"$out.log"
  total=$(awk '/^summary:/ { print $2 }' "$out")
  echo "## Where the instructions of $path ($store store) go"
  echo
  echo "$((total / requests)) instructions per request in the measured loop ($requests requests)."
  echo "Inclusive (a function with everything it calls), top 45:"
  echo
  # Through files: a pipe closed early by head would fail the script (pipefail).
  callgrind_annotate --inclusive=yes "$out" >"$out.inclusive"
  callgrind_annotate "$out" >"$out.self"
  per_request "$requests" <"$out.inclusive" >"$out.inclusive.per-request"
  per_request "$requests" <"$out.self" >"$out.self.per-request"
  sed -n 1,45p "$out.inclusive.per-request"
  echo
  echo "Self (a function's own instructions), top 30:"
  echo
  sed -n 1,30p "$out.self.per-request"
  echo
  echo "The whole profile: callgrind_annotate --inclusive=yes $out (or kcachegrind $out)."
  exit 0
fi

short=${1:-1000}
long=${2:-6000}
bound=${3:-4000}
[ "$long" -gt "$short" ] || { echo "bench: the long loop must be longer than the short one" >&2; exit 1; }

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

rows=(
  "bare roomy"
  "layer-first roomy"
  "layer-first full"
  "attribute-first roomy"
  "attribute-first full"
  "layer-replay roomy"
  "layer-replay full"
  "attribute-replay roomy"
  "attribute-replay full"
  "layer-steps-first roomy"
  "attribute-steps-first roomy"
)

total_ir() { awk '/^summary:/ { print $2 }' "$1"; }
# SHA-256's compression function, inclusive: idem-protocol's (`sha256::portable::compress`,
# never inlined) or, in the commits before idem had its own SHA-256, sha2's (`compress256`).
sha_ir() {
  callgrind_annotate --inclusive=yes "$1" |
    awk '/idem_protocol::sha256::(portable::)?compress|sha2::sha256::(compress256|soft::[a-z_:]*compress)/ { ir = $1; gsub(/,/, "", ir); if (ir + 0 > max) max = ir + 0 }
         END { print max + 0 }'
}
field() { # name file: the value of name=value in the driver's output
  tr ' ' '\n' <"$2" | awk -F= -v name="$1" '$1 == name { print $2 }'
}

figures="$out_dir/figures"
: >"$figures"
for row in "${rows[@]}"; do
  read -r path store <<<"$row"
  for n in "$short" "$long"; do
    out="$out_dir/$path-$store-$n.out"
    echo "bench: callgrind, $path ($store store), $n requests" >&2
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$path" "$store" "$n" "$bound" \
      >"$out.stdout" 2>"$out.log"
  done
  a="$out_dir/$path-$store-$short.out" b="$out_dir/$path-$store-$long.out"
  native=()
  for _ in 1 2 3; do
    "$bin" "$path" "$store" "$long" "$bound" >"$out_dir/native.stdout"
    native+=("$(field ns_per_request "$out_dir/native.stdout")")
  done
  native_median=$(printf '%s\n' "${native[@]}" | sort -n | sed -n 2p)
  echo "$path $store $(total_ir "$a") $(total_ir "$b") $(sha_ir "$a") $(sha_ir "$b")" \
    "$(field allocations "$a.stdout") $(field allocations "$b.stdout") $native_median" \
    "$(field records "$b.stdout")" >>"$figures"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "## Instructions per request, $started"
echo
echo "callgrind ($(valgrind --version)), requests $short and $long, store bound $bound records," \
  "keys ${BENCH_CONFIG:-user} (the steps paths: global);" \
  "load average (1, 5, 15 min): $load_start at start, $load_end at end."
echo
awk -v d="$((long - short))" '
  {
    path = $1; store = $2
    ir = ($4 - $3) / d; sha = ($6 - $5) / d; allocs = ($8 - $7) / d; ns = $9
    if (path == "bare") { bare_ir = ir; bare_sha = sha; bare_allocs = allocs; bare_ns = ns }
    rows[++n] = sprintf("%s|%s (%d)|%.0f|%.0f|%.2f|%.0f", path, store, $10, ir, sha, allocs, ns)
  }
  function added(value, base, format) { return sprintf(format, value - base) }
  END {
    print "| path | store (records) | instructions / request | added to bare | of which SHA-256 compress | added outside SHA-256 | allocations / request | added | native ns / request |"
    print "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for (i = 1; i <= n; i++) {
      split(rows[i], f, "|")
      if (f[1] == "bare") {
        printf "| %s | – | %s | – | %s | – | %s | – | %s |\n", f[1], f[3], f[4], f[5], f[6]
      } else {
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3],
          added(f[3], bare_ir, "%+.0f"), f[4], added(f[3] - f[4], bare_ir - bare_sha, "%+.0f"),
          f[5], added(f[5], bare_allocs, "%+.2f"), f[6]
      }
    }
  }
' "$figures"
echo
echo "Store: roomy (room for every key) or full (bounded at $bound records and filled past it, so"
echo "every new record evicts one), with the records it kept after the long loop."
echo "Instructions and allocations: (long loop - short loop) / $((long - short)) requests. Native ns:"
echo "the median of three runs of the long loop without valgrind (wall time: noisy on a busy machine)."
echo "Callgrind runs the portable SHA-256 (no SHA extensions under valgrind)."
echo
echo "To reproduce: bench/instructions.sh $short $long $bound; each figure comes from"
echo
echo '```sh'
echo "valgrind --tool=callgrind $bin PATH STORE $short $bound"
echo "valgrind --tool=callgrind $bin PATH STORE $long $bound"
echo '```'
echo
echo "Where the instructions go: bench/instructions.sh --profile layer-first full"
