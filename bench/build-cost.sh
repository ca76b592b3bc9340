#!/usr/bin/env bash
# Build cost: what idem adds to the cold build of a service. Two crates outside the workspace, as
# a user's would be: the README's service (idem by path, axum, serde_json, tokio,
# tracing-subscriber, and its src/main.rs as the README prints it), and the same service
# without idem (the handler, the log and the server alone). Each is built from an empty target folder, the two alternated, `rounds` times
# (default 3), in debug and then in release; the registry and its sources are already on the
# machine, so only compiling is timed. Prints each build's seconds, the medians and their ratio.
#
# The machine's load changes what a build takes: run it with nothing else building, and read
# the ratio of one run rather than seconds across runs. The CPU seconds (user and system, of
# cargo and every compiler it runs) change less with the load than the wall seconds, and say
# what the build costs where the wall seconds say what it takes on an idle machine.
#
# Usage: bench/build-cost.sh [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

manifest() { # name, idem line or nothing
  printf '[workspace]\n\n[package]\nname = "%s"\nversion = "0.1.0"\nedition = "2024"\n\n[dependencies]\n%s' "$1" "$2"
  printf 'axum = "0.8"\nserde_json = "1"\n'
  printf 'tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "signal"] }\n'
  printf 'tracing-subscriber = "0.3"\n'
}

mkdir -p "$work/with/src" "$work/without/src"
manifest with "idem = { path = \"$repo/idem\" }
" >"$work/with/Cargo.toml"
manifest without "" >"$work/without/Cargo.toml"
# The README's program, as the test of the README's programs builds it.
sed -n '/<!-- program: server src\/main.rs -->/,/^```$/p' README.md | sed '1,2d;$d' \
  >"$work/with/src/main.rs"
cat >"$work/without/src/main.rs" <<'EOF'
use axum::{Json, Router, http::StatusCode, routing::post};
use serde_json::Value;

async fn create_order(Json(order): Json<Value>) -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(order))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt::init();
    let app = Router::new().route("/orders", post(create_order));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3020").await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
EOF
for crate in with without; do
  # The workspace's lock file: the same versions the repository is tested with.
  cp Cargo.lock "$work/$crate/Cargo.lock"
  cargo fetch -q --manifest-path "$work/$crate/Cargo.toml"
done

build() { # crate, profile flag; prints the wall seconds and the CPU seconds (user + system)
  local TIMEFORMAT='%R %U %S'
  rm -rf "$work/$1/target"
  { time cargo build -q --offline $2 --manifest-path "$work/$1/Cargo.toml" 2>/dev/null; } 2>&1 |
    awk '{print $1, $2 + $3}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for profile in debug release; do
  flag=""; [ "$profile" = release ] && flag="--release"
  : >"$work/with.$profile"; : >"$work/without.$profile"
  for round in $(seq "$rounds"); do
    w=$(build with "$flag"); wo=$(build without "$flag")
    echo "$w" >>"$work/with.$profile"; echo "$wo" >>"$work/without.$profile"
    printf '%s round %s: with idem %.1f s (CPU %.1f s), without %.1f s (CPU %.1f s)\n' \
      "$profile" "$round" $w $wo
  done
  for column in 1 2; do
    what=$([ $column = 1 ] && echo wall || echo CPU)
    mw=$(cut -d' ' -f$column "$work/with.$profile" | median)
    mwo=$(cut -d' ' -f$column "$work/without.$profile" | median)
    printf '%s median %s: with idem %.1f s, without %.1f s, ratio %.2f\n' "$profile" "$what" \
      "$mw" "$mwo" "$(awk -v a="$mw" -v b="$mwo" 'BEGIN {print a / b}')"
  done
done
size() { stat -c %s "$work/$1/target/release/$1" | awk '{printf "%.1f MiB", $1 / 1048576}'; }
echo "release binary: with idem $(size with), without $(size without)"
crates() { # what a crate's build compiles, each once
  cargo tree -q --manifest-path "$work/$1/Cargo.toml" -e normal,build --prefix none |
    sed 's/ (\*)$//' | sort -u | wc -l
}
echo "crates: with idem $(crates with), without $(crates without)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
