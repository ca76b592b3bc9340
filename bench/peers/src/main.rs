//! The load benchmark's peer servers (see `bench/run.sh`): the handler of idem-bench's
//! `payment` module, answering `POST /payments` under another crate's idempotency middleware,
//! each configured the way its documentation recommends for `Idempotency-Key` requests.
//!
//! `idem-bench-peers PEER [ADDR]`: PEER is `idempotent` (the crate `idempotent` 2.x) or
//! `axum-idempotent` (0.6, on `ruts` sessions); ADDR defaults to 127.0.0.1:3200.
//! `BENCH_WORKERS` sets the number of tokio worker threads (default 1). `BENCH_CONFIG` is the
//! configuration idem's servers run in: `user` (the default) scopes `idempotent`'s keys to the
//! request's `Authorization` header, as idem's principal resolver does; `global` leaves them
//! unscoped. `axum-idempotent` keeps its responses in the caller's session either way.
//!
//! With `BENCH_REDIS_URL=redis://...`, `idempotent` keeps its records in its Redis store
//! (`ValkeyStore`, atomic Lua claims) on that server instead of in memory, as idem-bench's
//! servers do in their `RedisStore` under the same variable (bench/run.sh's `redis`
//! configuration). `axum-idempotent` has no store of its own to put there (its responses live
//! in ruts sessions) and refuses the variable.

use std::{sync::Arc, time::Duration};

use axum::{Router, routing::post};

/// The very handler idem's servers run: one source file, compiled into both.
#[path = "../../src/payment.rs"]
#[allow(dead_code, reason = "the request body is the in-process driver's")]
mod payment;

use payment::{Ledger, PATH, create_payment};

/// How long a stored response replays: idem's default TTL, 24 hours, for every peer.
const TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// `idempotent` 2.x: its tower layer over `store` (its in-memory store, or its Redis store),
/// the key required (as idem requires it), scoped to the caller by its scope closure when
/// `scoped` (as idem's `user` configuration scopes them) and unscoped otherwise, the
/// completed TTL 24 hours (its default).
fn idempotent_router<S>(store: S, scoped: bool) -> Router
where
    S: idempotent::IdempotencyStore + Clone,
{
    let mut layer = idempotent::middleware::IdempotencyLayer::new(store)
        .require_key(true)
        .completed_ttl(TTL);
    if scoped {
        layer = layer.scope(|parts| {
            let credentials = parts.headers.get(axum::http::header::AUTHORIZATION)?;
            credentials.to_str().ok().map(str::to_owned)
        });
    }
    Router::new()
        .route(PATH, post(create_payment))
        .with_state(Ledger::default())
        .layer(layer)
}

/// `idempotent`'s in-memory store, an actor task: built inside the runtime.
fn idempotent_memory(scoped: bool) -> Result<Router, Box<dyn std::error::Error>> {
    let store = idempotent::memory::MemoryStore::builder().try_build()?;
    Ok(idempotent_router(store, scoped))
}

/// `idempotent`'s Redis store on `url`, under a prefix of this process's own (as idem-bench's
/// `RedisStore` has), so that runs never meet each other's keys.
async fn idempotent_redis(url: &str, scoped: bool) -> Result<Router, Box<dyn std::error::Error>> {
    let store = idempotent::valkey::ValkeyStore::with_url(url)
        .prefix(format!("idem-bench-peers-{}", std::process::id()))
        .try_build()
        .await?;
    store.ping().await?;
    println!("idem-bench-peers: records in Redis at {url}");
    Ok(idempotent_router(store, scoped))
}

/// `axum-idempotent` 0.6 as its README sets it up for `Idempotency-Key`: the key header
/// required, responses cached in the `ruts` session of the request, on ruts' moka store, with
/// the cookie manager outermost, the session layer, then the idempotency layer. It caches only
/// for a request that carries a session cookie, and a cached response never outlives the
/// cookie's `Max-Age`, so both are 24 hours. The store has room for every session of a run, as
/// idem's has for every record.
fn axum_idempotent_router() -> Router {
    use axum_idempotent::{IdempotentLayer, IdempotentOptions};
    use ruts::{CookieOptions, SessionLayer, store::moka::MokaStore};

    let store = Arc::new(MokaStore::builder().max_capacity(20_000_000).build());
    let options = IdempotentOptions::default()
        .use_idempotency_key_header(Some("Idempotency-Key"), true)
        .expire_after(TTL.as_secs() as i64);
    let cookie = CookieOptions::build()
        .name("session")
        .max_age(TTL.as_secs())
        .path("/");
    Router::new()
        .route(PATH, post(create_payment))
        .with_state(Ledger::default())
        .layer(IdempotentLayer::<MokaStore>::new(options))
        .layer(SessionLayer::new(store).with_cookie_options(cookie))
        .layer(tower_cookies::CookieManagerLayer::new())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idem-bench-peers: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let peer = args
        .next()
        .ok_or("usage: idem-bench-peers PEER [ADDR]; PEER is `idempotent` or `axum-idempotent`")?;
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3200".to_owned());
    let scoped = match std::env::var("BENCH_CONFIG").as_deref() {
        Ok("user") | Err(_) => true,
        Ok("global") => false,
        Ok(other) => {
            return Err(
                format!("unknown configuration `{other}`; expected `user` or `global`").into(),
            );
        }
    };
    let workers = match std::env::var("BENCH_WORKERS") {
        Ok(workers) => workers.parse()?,
        Err(_) => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let redis_url = std::env::var("BENCH_REDIS_URL").ok();
        let app = match (peer.as_str(), redis_url) {
            ("idempotent", None) => idempotent_memory(scoped)?,
            ("idempotent", Some(url)) => idempotent_redis(&url, scoped).await?,
            ("axum-idempotent", None) => axum_idempotent_router(),
            ("axum-idempotent", Some(_)) => {
                return Err("axum-idempotent keeps its responses in ruts sessions and has no \
                            Redis store to measure: unset BENCH_REDIS_URL"
                    .into());
            }
            (other, _) => {
                return Err(format!(
                    "unknown peer `{other}`; expected `idempotent` or `axum-idempotent`"
                )
                .into());
            }
        };
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|error| {
                format!(
                    "cannot listen on {addr}: {error}; choose another address with the second \
                 argument (idem-bench-peers PEER HOST:PORT), or the ports of bench/run.sh with \
                 BENCH_PORT"
                )
            })?;
        println!("idem-bench-peers {peer} listening on {addr}");
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
