#!/usr/bin/env bash
# Build cost: what idem adds to the cold build of a service. Two crates outside the workspace, as
# a user's would be: the README's service (idem by path, axum, serde_json, tokio,
# tracing-subscriber, and its src/main.rs as the README prints it), and the same service
# without idem (the handler, the log and the server alone). Each is built from an empty target folder, the two alternated, `rounds` times
# (default 3), in debug and then in release; the registry and its sources are already on the
# machine, so only compiling is timed. Prints each build's seconds, the medians and their ratio.
#
# The machine's load changes what a build takes: run it with nothing else building, and read
# the ratio of one run rather than seconds across runs.
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

build() { # crate, profile flag; prints seconds
  local start end
  rm -rf "$work/$1/target"
  start=$(date +%s.%N)
  cargo build -q --offline $2 --manifest-path "$work/$1/Cargo.toml"
  end=$(date +%s.%N)
  awk -v end="$end" -v start="$start" 'BEGIN {print end - start}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for profile in debug release; do
  flag=""; [ "$profile" = release ] && flag="--release"
  : >"$work/with.$profile"; : >"$work/without.$profile"
  for round in $(seq "$rounds"); do
    w=$(build with "$flag"); wo=$(build without "$flag")
    echo "$w" >>"$work/with.$profile"; echo "$wo" >>"$work/without.$profile"
    printf '%s round %s: with idem %.1f s, without %.1f s\n' "$profile" "$round" "$w" "$wo"
  done
  mw=$(median <"$work/with.$profile"); mwo=$(median <"$work/without.$profile")
  printf '%s median: with idem %.1f s, without %.1f s, ratio %.2f\n' "$profile" "$mw" "$mwo" \
    "$(awk -v a="$mw" -v b="$mwo" 'BEGIN {print a / b}')"
done
size() { stat -c %s "$work/$1/target/release/$1" | awk '{printf "%.1f MiB", $1 / 1048576}'; }
echo "release binary: with idem $(size with), without $(size without)"
echo "crates: with idem $(cargo tree -q --manifest-path "$work/with/Cargo.toml" -e normal,build --prefix none | sort -u | wc -l), without $(cargo tree -q --manifest-path "$work/without/Cargo.toml" -e normal,build --prefix none | sort -u | wc -l)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
