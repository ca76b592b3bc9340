//! The instruction-count mode's driver (see `bench/instructions.sh`): sends requests through one
//! of the idem servers in process (`tower::ServiceExt::oneshot`, a current-thread runtime, no
//! network) and prints what its measured loop cost.
//!
//! `idem-instructions PATH STORE REQUESTS [BOUND]`
//!
//! - PATH: `bare` (the handler alone), `layer-first` / `attribute-first` (a fresh key per
//!   request), `layer-replay` / `attribute-replay` (one stored key, replayed), or
//!   `layer-steps-first` / `attribute-steps-first` (a fresh key per request, the handler after
//!   two local steps: `bench/run.sh`'s configuration `steps`, whose keys are always global);
//! - STORE: `roomy` (room for every key) or `full` (bounded at BOUND records, default 4,000,
//!   and filled past its bound before the loop, so each new record evicts one); ignored by
//!   `bare`;
//! - REQUESTS: the length of the measured loop.
//!
//! `BENCH_CONFIG` scopes the idem servers' keys as `idem-bench` does: `user` (the default, the
//! principal read from the `Authorization` header every request carries) or `global`.
//!
//! It prints one line of `name=value` pairs: the loop's allocations per request (counted by the
//! global allocator below), its wall time per request, and the records the store keeps at the
//! end (about BOUND for a full store: the proof that it evicted). Instructions are counted from
//! outside, by callgrind: the script runs two loop lengths and divides the difference, so that
//! start-up, the store's filling and the warm-up cancel out.

use std::{
    alloc::System,
    hint::black_box,
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Body,
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
};
use idem_bench::{
    payment,
    server::{Scoping, Server, bounded_store, roomy_store},
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::runtime::Runtime;
use tower::ServiceExt;

/// Counts every allocation; it adds a few instructions to each, alike in every path.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Requests of the measured kind sent before the loop, so that one-time work (lazy statics,
/// the first growth of buffers and tables) stays out of it.
const WARM_UP: u64 = 500;

const USAGE: &str = "usage: idem-instructions PATH STORE REQUESTS [BOUND]
  PATH:  bare | layer-first | attribute-first | layer-replay | attribute-replay
         | layer-steps-first | attribute-steps-first
  STORE: roomy | full (bounded at BOUND records, default 4000, and filled past it)";

/// What a request of the loop is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A key never seen before: the handler runs and its response is stored.
    First,
    /// The key of a stored response: the response is replayed.
    Replay,
}

#[derive(Debug)]
struct Args {
    server: Server,
    kind: Kind,
    /// The handler runs after two local steps ([`Server::steps_router`]).
    steps: bool,
    full: bool,
    requests: u64,
    bound: u64,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let [path, store, requests, rest @ ..] = args.as_slice() else {
            return Err(USAGE.to_owned());
        };
        let (server, kind, steps) = match path.as_str() {
            "bare" => (Server::Bare, Kind::First, false),
            "layer-first" => (Server::Layer, Kind::First, false),
            "attribute-first" => (Server::Attribute, Kind::First, false),
            "layer-replay" => (Server::Layer, Kind::Replay, false),
            "attribute-replay" => (Server::Attribute, Kind::Replay, false),
            "layer-steps-first" => (Server::Layer, Kind::First, true),
            "attribute-steps-first" => (Server::Attribute, Kind::First, true),
            other => return Err(format!("unknown path `{other}`\n{USAGE}")),
        };
        let full = match store.as_str() {
            "roomy" => false,
            "full" => true,
            other => return Err(format!("unknown store `{other}`\n{USAGE}")),
        };
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("`{text}` is not a number\n{USAGE}"))
        };
        Ok(Self {
            server,
            kind,
            steps,
            full,
            requests: number(requests)?,
            bound: rest.first().map_or(Ok(4_000), |bound| number(bound))?,
        })
    }
}

/// Sends requests to one router and checks each answer is what the path claims to measure.
struct Client {
    app: Router,
    server: Server,
    next_key: u64,
}

impl Client {
    /// One request of the loop's kind.
    async fn send(&mut self, kind: Kind) {
        match kind {
            Kind::First => {
                self.next_key += 1;
                let key = key("fresh", self.next_key);
                self.exchange(key, false).await;
            }
            Kind::Replay => {
                let replayed = self.server != Server::Bare;
                self.exchange(key("again", 0), replayed).await;
            }
        }
    }

    /// The first request with the replays' key: it runs the handler and stores the answer.
    async fn store_replayed_response(&mut self) {
        self.exchange(key("again", 0), false).await;
    }

    /// Sends one request with `key`, reads the whole answer, and checks it is a 201 that is
    /// (or is not) a replay: a path that answered otherwise would measure something else.
    async fn exchange(&mut self, key: HeaderValue, expect_replayed: bool) {
        let request = Request::builder()
            .method(Method::POST)
            .uri(payment::PATH)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, payment::BODY.len())
            .header("idempotency-key", key)
            .header(header::AUTHORIZATION, payment::AUTHORIZATION)
            .body(Body::from(payment::BODY))
            .expect("a valid request");
        let response = self
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("a router never fails");
        let status = response.status();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the body is in memory");
        black_box(body);
        assert_eq!(
            status,
            StatusCode::CREATED,
            "{} answered {status}",
            self.server
        );
        assert_eq!(
            replayed, expect_replayed,
            "{}: expected replayed: {expect_replayed}, got {replayed}",
            self.server
        );
    }
}

/// A key built the same way for every path (a fresh one and the replays' one alike), of a fixed
/// width, so that every key costs the same to build, hash and compare.
fn key(prefix: &str, number: u64) -> HeaderValue {
    HeaderValue::try_from(format!("{prefix}-{number:012}")).expect("a key is a valid header value")
}

/// The loop callgrind's two runs differ by; kept out of line so a profile shows it as one
/// function.
#[inline(never)]
fn measured_loop(runtime: &Runtime, client: &mut Client, kind: Kind, requests: u64) {
    runtime.block_on(async {
        for _ in 0..requests {
            client.send(kind).await;
        }
    });
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = if args.full {
        bounded_store(args.bound)
    } else {
        roomy_store()
    };
    let records = store.clone();
    let scoping: Scoping = match std::env::var("BENCH_CONFIG") {
        Ok(name) => name.parse()?,
        Err(_) => Scoping::User,
    };
    let app = if args.steps {
        args.server.steps_router(store)
    } else {
        args.server.router(scoping, store)
    };
    let mut client = Client {
        app,
        server: args.server,
        next_key: 0,
    };
    runtime.block_on(async {
        if args.full && args.server != Server::Bare {
            // Past the bound by half again: the store is in its steady state of evicting.
            for _ in 0..args.bound + args.bound / 2 {
                client.send(Kind::First).await;
            }
        }
        if args.kind == Kind::Replay && args.server != Server::Bare {
            client.store_replayed_response().await;
        }
        for _ in 0..WARM_UP {
            client.send(args.kind).await;
        }
    });

    let allocations = Region::new(ALLOCATOR);
    let start = Instant::now();
    measured_loop(&runtime, &mut client, args.kind, args.requests);
    let elapsed = start.elapsed();
    let allocated = allocations.change();

    let per_request = |total: f64| total / args.requests.max(1) as f64;
    // The records kept at the end: a full store holds about its bound, so it has evicted.
    println!(
        "requests={} allocations={} allocations_per_request={:.2} bytes_per_request={:.0} ns_per_request={:.0} records={}",
        args.requests,
        allocated.allocations,
        per_request(allocated.allocations as f64),
        per_request(allocated.bytes_allocated as f64),
        per_request(duration_ns(elapsed)),
        records.completed_records(),
    );
    Ok(())
}

fn duration_ns(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e9
}
