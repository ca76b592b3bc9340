//! [`RedisStore`] against a real Redis: the number of round
//! trips of each operation, the record layout on the server, and records it cannot read.
//!
//! Needs `IDEM_TEST_REDIS_URL` (CI sets `redis://127.0.0.1:6379`); skipped without it.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, Method, StatusCode};
use idem::{
    StoreKey, fingerprint::Fingerprint, fingerprint::FingerprintAlgorithm,
    fingerprint::FingerprintMode, redis::RedisStore, replay::StoredResponse, store::Claim,
    store::ClaimOutcome, store::LeaseToken, store::Store, store::StoreError,
};
use idem_conformance::{fingerprint, new_key};
use idem_tests::redis_fixture::redis_url;
use redis::{AsyncCommands, aio::MultiplexedConnection};

const MINUTE: Duration = Duration::from_secs(60);

fn claim<'a>(key: &'a StoreKey, fingerprint: &'a Fingerprint, token: LeaseToken) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        token,
        lease: MINUTE,
        ttl: MINUTE,
        resumable: None,
    }
}

fn response() -> StoredResponse {
    StoredResponse::new(
        StatusCode::CREATED,
        &HeaderMap::new(),
        &Bytes::from_static(b"{\"id\":1}"),
    )
    .expect("an encodable response")
}

/// A store on a connection of its own, and a second connection to look at the server.
async fn store_and_side_connection(
    url: &str,
) -> (RedisStore<MultiplexedConnection>, MultiplexedConnection) {
    let client = redis::Client::open(url).unwrap();
    let store = idem_tests::redis_fixture::builder()
        .build(client.get_multiplexed_async_connection().await.unwrap());
    let side = client.get_multiplexed_async_connection().await.unwrap();
    (store, side)
}

/// Watches the commands one connection sends, through `MONITOR`.
struct CommandLog {
    lines: std::pin::Pin<Box<dyn futures_util::Stream<Item = String> + Send>>,
    side: MultiplexedConnection,
    /// How the server names the watched connection in MONITOR lines: ` <ip>:<port>]`.
    watched: String,
    markers: u32,
}

impl CommandLog {
    async fn start(url: &str, watched: &mut MultiplexedConnection) -> Self {
        let info: String = redis::cmd("CLIENT")
            .arg("INFO")
            .query_async(watched)
            .await
            .unwrap();
        let address = info
            .split_whitespace()
            .find_map(|field| field.strip_prefix("addr="))
            .expect("CLIENT INFO names the address")
            .to_owned();
        let client = redis::Client::open(url).unwrap();
        let monitor = client.get_async_monitor().await.unwrap();
        Self {
            lines: Box::pin(monitor.into_on_message::<String>()),
            side: client.get_multiplexed_async_connection().await.unwrap(),
            watched: format!(" {address}]"),
            markers: 0,
        }
    }

    /// Sends a marker from the side connection and reads the log up to it. MONITOR lists
    /// commands in the order the server ran them, so every command that ran before the
    /// marker is in the lines read.
    async fn read_to_marker(&mut self) -> Vec<String> {
        self.markers += 1;
        let marker = format!("idem-marker-{:08x}-{}", rand::random::<u32>(), self.markers);
        let _: String = redis::cmd("ECHO")
            .arg(&marker)
            .query_async(&mut self.side)
            .await
            .unwrap();
        let mut lines = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(5), self.lines.next())
                .await
                .expect("MONITOR went quiet")
                .expect("MONITOR ended");
            if line.contains(&marker) {
                return lines;
            }
            lines.push(line);
        }
    }

    /// The commands the watched connection sent while `operation` ran, by name.
    async fn commands_of<T>(&mut self, operation: impl Future<Output = T>) -> (T, Vec<String>) {
        self.read_to_marker().await;
        let output = operation.await;
        let lines = self.read_to_marker().await;
        let commands = lines
            .iter()
            .filter(|line| line.contains(&self.watched))
            .map(|line| {
                // `<time> [<db> <addr>] "<COMMAND>" "<arg>" ...`
                let after = &line[line.find(&self.watched).unwrap() + self.watched.len()..];
                after.split('"').nth(1).unwrap_or_default().to_uppercase()
            })
            .collect();
        (output, commands)
    }
}

/// A claim is one command and no script when it claims the key or finds it completed (a
/// replay) or claimed with another body; only a claim that finds the key in flight sends the
/// claim script after it. Completion, renewal and release are one script each.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_sends_the_commands_documented() {
    let Some(url) = redis_url() else { return };
    let (store, _) = store_and_side_connection(&url).await;
    let fp = fingerprint("{\"amount\":100}");

    // Load every script once, as a running service has.
    let warm = new_key();
    let token = LeaseToken::random();
    store.claim(claim(&warm, &fp, token)).await.unwrap();
    store.renew(&warm, token, MINUTE).await.unwrap();
    store.release(&warm, token).await.unwrap();
    store.claim(claim(&warm, &fp, token)).await.unwrap();
    store
        .complete(&warm, token, &response(), MINUTE)
        .await
        .unwrap();

    let mut log = CommandLog::start(&url, &mut store.connection().clone()).await;
    let one = vec!["EVALSHA".to_owned()];
    let set = vec!["SET".to_owned()];
    let (key, holder) = (new_key(), LeaseToken::random());

    let (outcome, commands) = log.commands_of(store.claim(claim(&key, &fp, holder))).await;
    assert_eq!(outcome.unwrap(), ClaimOutcome::Claimed);
    assert_eq!(commands, set, "claim of a fresh key");

    let (outcome, commands) = log
        .commands_of(store.claim(claim(&key, &fp, LeaseToken::random())))
        .await;
    assert_eq!(outcome.unwrap(), ClaimOutcome::InFlight);
    assert_eq!(
        commands,
        ["SET", "EVALSHA"],
        "claim of a key in flight: the script weighs the lease"
    );

    let (outcome, commands) = log.commands_of(store.renew(&key, holder, MINUTE)).await;
    outcome.unwrap();
    assert_eq!(commands, one, "renewal");

    let (outcome, commands) = log
        .commands_of(store.complete(&key, holder, &response(), MINUTE))
        .await;
    outcome.unwrap();
    assert_eq!(commands, one, "completion");

    let (outcome, commands) = log
        .commands_of(store.claim(claim(&key, &fp, LeaseToken::random())))
        .await;
    assert_eq!(outcome.unwrap(), ClaimOutcome::Completed(response()));
    assert_eq!(commands, set, "claim of a completed key (replay)");

    let other = fingerprint("{\"amount\":200}");
    let (outcome, commands) = log
        .commands_of(store.claim(claim(&key, &other, LeaseToken::random())))
        .await;
    assert!(matches!(outcome.unwrap(), ClaimOutcome::Mismatch { .. }));
    assert_eq!(commands, set, "claim with another fingerprint");

    let (released, holder) = (new_key(), LeaseToken::random());
    store.claim(claim(&released, &fp, holder)).await.unwrap();
    let (outcome, commands) = log.commands_of(store.release(&released, holder)).await;
    outcome.unwrap();
    assert_eq!(commands, one, "release");
}

/// A Redis restart forgets the scripts: the next call of a script is refused NOSCRIPT and
/// sent again with the script's source, which caches it, once. On a server of the test's own,
/// since flushing the shared one would disturb the counts above when tests run side by side.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_script_is_loaded_again_once() {
    if redis_url().is_none() {
        return;
    }
    let Some(server) = idem_tests::redis_server::RedisServer::start(&[]).await else {
        return;
    };
    let (store, mut side) = store_and_side_connection(&server.url()).await;
    let fp = fingerprint("{}");
    store
        .claim(claim(&new_key(), &fp, LeaseToken::random()))
        .await
        .unwrap();
    let mut log = CommandLog::start(&server.url(), &mut store.connection().clone()).await;

    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut side)
        .await
        .unwrap();
    for (attempt, expected) in [("first", &["EVALSHA", "EVAL"][..]), ("next", &["EVALSHA"])] {
        let (key, token) = (new_key(), LeaseToken::random());
        store.claim(claim(&key, &fp, token)).await.unwrap();
        let (outcome, commands) = log
            .commands_of(store.complete(&key, token, &response(), MINUTE))
            .await;
        outcome.unwrap();
        assert_eq!(
            commands, expected,
            "the {attempt} completion after SCRIPT FLUSH"
        );
    }
}

/// The record is a string under `<prefix>{<hex>}` laid out as the store's docs say, whose
/// lease and expiry follow the server's clock: `max(ttl, lease)` while in flight, `ttl` once
/// completed.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test]
async fn records_are_laid_out_as_documented() {
    let Some(url) = redis_url() else { return };
    let (store, mut side) = store_and_side_connection(&url).await;
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let redis_key = store.redis_key(&key);
    assert_eq!(redis_key, format!("{}{{{}}}", store.prefix(), key.to_hex()));

    let lease = Duration::from_secs(30);
    let ttl = Duration::from_secs(600);
    store
        .claim(Claim {
            lease,
            ttl,
            ..claim(&key, &fp, token)
        })
        .await
        .unwrap();
    let server_now = server_ms(&mut side).await;
    // A fresh claim is one `SET NX`, which cannot read the server's clock: it keeps the
    // lease and the lifetime, and the key's expiry says when it was claimed.
    let fresh = stored(&mut side, &redis_key).await;
    assert_eq!(fresh.len(), 75, "a fresh claim's record: {fresh:02x?}");
    assert_eq!(&fresh[..2], &[2, b'c']);
    assert_eq!(fresh[2..35], fp.to_bytes());
    assert_eq!(fresh[35..51], token.to_bytes());
    assert_eq!(double_at(&fresh, 51), 30_000.0, "the lease, ms");
    assert_eq!(double_at(&fresh, 59), 600_000.0, "the lifetime, ms");
    assert_eq!(&fresh[67..], &[0; 8], "no suspensions, no steps");
    let pttl: i64 = side.pttl(&redis_key).await.unwrap();
    assert!(
        (599_000..=600_000).contains(&pttl),
        "in flight: pttl {pttl}"
    );

    // The first script that writes it in flight puts its times on the server's clock.
    store.renew(&key, token, lease).await.unwrap();
    let renewed = stored(&mut side, &redis_key).await;
    assert_eq!(&renewed[..2], &[2, b'f']);
    assert_eq!(
        renewed[2..51],
        fresh[2..51],
        "the same fingerprint and token"
    );
    let lease_left = double_at(&renewed, 51) - server_now as f64;
    assert!(
        (29_000.0..=31_000.0).contains(&lease_left),
        "lease ends {lease_left} ms from the server's now"
    );
    let since = double_at(&renewed, 59) as i64;
    assert!(
        (-1_000..=1_000).contains(&(server_now - since)),
        "claimed {since}, the server's now {server_now}"
    );
    assert_eq!(&renewed[67..], &[0; 8]);

    store
        .complete(&key, token, &response(), Duration::from_secs(120))
        .await
        .unwrap();
    let done = stored(&mut side, &redis_key).await;
    assert_eq!(&done[..2], &[2, b'd']);
    assert_eq!(done[2..51], fresh[2..51], "the same fingerprint and token");
    assert_eq!(double_at(&done, 51), 120_000.0, "the TTL, ms");
    assert_eq!(done[59..], response().as_bytes().to_vec());
    let pttl: i64 = side.pttl(&redis_key).await.unwrap();
    assert!(
        (119_000..=120_000).contains(&pttl),
        "completed: pttl {pttl}"
    );

    // A renewal keeps the record alive at least one lease, never shortens it.
    let (short, holder) = (new_key(), LeaseToken::random());
    store
        .claim(Claim {
            lease: Duration::from_secs(1),
            ttl: Duration::from_secs(1),
            ..claim(&short, &fp, holder)
        })
        .await
        .unwrap();
    store
        .renew(&short, holder, Duration::from_secs(90))
        .await
        .unwrap();
    let pttl: i64 = side.pttl(store.redis_key(&short)).await.unwrap();
    assert!((89_000..=90_000).contains(&pttl), "renewed: pttl {pttl}");
    store
        .renew(&short, holder, Duration::from_secs(2))
        .await
        .unwrap();
    let pttl: i64 = side.pttl(store.redis_key(&short)).await.unwrap();
    assert!(
        pttl > 80_000,
        "a short renewal shortened the record: pttl {pttl}"
    );
}

/// The server's clock, in ms.
async fn server_ms(side: &mut MultiplexedConnection) -> i64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(side).await.unwrap();
    seconds * 1000 + micros / 1000
}

/// The record's bytes.
async fn stored(side: &mut MultiplexedConnection, record: &str) -> Vec<u8> {
    side.get(record).await.unwrap()
}

/// The big-endian double at `at` of a record.
fn double_at(record: &[u8], at: usize) -> f64 {
    f64::from_be_bytes(record[at..at + 8].try_into().unwrap())
}

/// A record of format 2 in its documented layout: the header of `state` (`b'd'` or
/// `b'f'`), then `rest` (a completed record's time and response, or an in-flight record's
/// times, counts and steps).
fn record(state: u8, fp: &[u8; 33], token: LeaseToken, rest: &[u8]) -> Vec<u8> {
    let mut record = vec![2, state];
    record.extend_from_slice(fp);
    record.extend_from_slice(&token.to_bytes());
    record.extend_from_slice(rest);
    record
}

/// A completed record of `response`'s bytes, stored with a TTL of a minute.
fn completed_record(fp: &[u8; 33], response: &[u8]) -> Vec<u8> {
    let mut rest = 60_000f64.to_be_bytes().to_vec();
    rest.extend_from_slice(response);
    record(b'd', fp, LeaseToken::random(), &rest)
}

fn assert_corrupt<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::Corrupt(_))),
        "{what}: expected Corrupt, got {result:?}"
    );
}

/// A record the store cannot read is an error to every call, and is left as it is.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test]
async fn unreadable_records_are_corrupt_and_left_alone() {
    let Some(url) = redis_url() else { return };
    let (store, mut side) = store_and_side_connection(&url).await;
    let fp = fingerprint("{}");
    let token = LeaseToken::random();

    // Another type at the key: a hash, as records of format 1 were.
    let key = new_key();
    let () = side
        .hset(store.redis_key(&key), "state", "done")
        .await
        .unwrap();
    let outcome = store.claim(claim(&key, &fp, token)).await;
    match &outcome {
        Err(StoreError::Corrupt(why)) => assert!(why.to_string().contains("hash"), "{why}"),
        other => panic!("a hash at the key: expected Corrupt, got {other:?}"),
    }
    assert_corrupt(store.release(&key, token).await, "release of a hash");
    let kept: String = side.hget(store.redis_key(&key), "state").await.unwrap();
    assert_eq!(kept, "done");

    // A string that is not a record.
    let key = new_key();
    let () = side
        .set(store.redis_key(&key), "not a record")
        .await
        .unwrap();
    assert_corrupt(
        store.claim(claim(&key, &fp, token)).await,
        "a string at the key",
    );
    assert_corrupt(store.release(&key, token).await, "release of a string");
    let kept: String = side.get(store.redis_key(&key)).await.unwrap();
    assert_eq!(kept, "not a record");

    // A format version this build does not know.
    let key = new_key();
    let mut future = completed_record(&fp.to_bytes(), response().as_bytes());
    future[0] = 3;
    let () = side.set(store.redis_key(&key), &future).await.unwrap();
    let outcome = store.claim(claim(&key, &fp, token)).await;
    match &outcome {
        Err(StoreError::Corrupt(why)) => {
            assert!(why.to_string().contains("version \"3\""), "{why}")
        }
        other => panic!("a version 3 record: expected Corrupt, got {other:?}"),
    }
    assert_corrupt(
        store.complete(&key, token, &response(), MINUTE).await,
        "completion of a version 3 record",
    );
    assert_corrupt(
        store.renew(&key, token, MINUTE).await,
        "renewal of a version 3 record",
    );
    assert_eq!(
        stored(&mut side, &store.redis_key(&key)).await,
        future,
        "the unknown record was overwritten"
    );

    // A record cut short of its header, completed and in flight.
    for state in [b'd', b'f'] {
        let key = new_key();
        let short = record(state, &fp.to_bytes(), token, &[0; 4]);
        let () = side.set(store.redis_key(&key), &short).await.unwrap();
        assert_corrupt(
            store.claim(claim(&key, &fp, token)).await,
            &format!("a record of state {} cut short", state as char),
        );
        assert_corrupt(
            store.release(&key, token).await,
            "release of a short record",
        );
    }

    // A record in a state this build does not know, whole otherwise: no completion writes
    // over it.
    let key = new_key();
    let mut rest = 0f64.to_be_bytes().repeat(2);
    rest.extend_from_slice(&[0; 8]);
    let unknown = record(b'x', &fp.to_bytes(), token, &rest);
    let () = side.set(store.redis_key(&key), &unknown).await.unwrap();
    assert_corrupt(
        store.complete(&key, token, &response(), MINUTE).await,
        "completion of a record in an unknown state",
    );
    assert_eq!(stored(&mut side, &store.redis_key(&key)).await, unknown);

    // A completed record whose response does not decode: cut short, claiming 65,535 headers
    // (which once panicked the claim), or of an unknown format version.
    for response in [
        vec![0x01, 0x00, 0x00],
        vec![0x01, 0x00, 0x00, 0xc8, 0xff, 0xff],
        vec![0x02, 0x00, 0x00, 0xc8, 0x00, 0x00],
    ] {
        let key = new_key();
        let garbled = completed_record(&fp.to_bytes(), &response);
        let () = side.set(store.redis_key(&key), &garbled).await.unwrap();
        assert_corrupt(
            store.claim(claim(&key, &fp, token)).await,
            &format!("an undecodable response {response:02x?}"),
        );
    }

    // An in-flight record whose steps do not add up to its count of them.
    let key = new_key();
    let mut rest = 0f64.to_be_bytes().repeat(2);
    rest.extend_from_slice(&0u32.to_be_bytes());
    rest.extend_from_slice(&2u32.to_be_bytes());
    rest.extend_from_slice(&[0, 0, 0, 9, 1]);
    let broken = record(b'f', &fp.to_bytes(), token, &rest);
    let () = side.set(store.redis_key(&key), &broken).await.unwrap();
    assert_corrupt(
        store.claim(claim(&key, &fp, LeaseToken::random())).await,
        "steps that do not add up",
    );
    assert_corrupt(
        store.release(&key, token).await,
        "release of a broken record",
    );
    assert_eq!(stored(&mut side, &store.redis_key(&key)).await, broken);
}

/// A stored fingerprint of an algorithm this build does not know is still a mismatch, and
/// says the algorithm is unknown.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test]
async fn a_fingerprint_of_an_unknown_algorithm_is_a_mismatch_without_algorithm() {
    let Some(url) = redis_url() else { return };
    let (store, mut side) = store_and_side_connection(&url).await;
    let key = new_key();
    let mut unknown = [7u8; 33];
    unknown[0] = 0xee;
    let stored = completed_record(&unknown, response().as_bytes());
    let () = side.set(store.redis_key(&key), &stored).await.unwrap();
    let fp = fingerprint("{}");
    assert_eq!(
        store
            .claim(claim(&key, &fp, LeaseToken::random()))
            .await
            .unwrap(),
        ClaimOutcome::Mismatch {
            stored_algorithm: None
        }
    );

    // And a known one is named.
    let (key, token) = (new_key(), LeaseToken::random());
    let raw = Fingerprint::compute(
        &Method::POST,
        "/payments",
        &HeaderMap::new(),
        b"x",
        FingerprintMode::Raw,
    );
    store.claim(claim(&key, &raw, token)).await.unwrap();
    assert_eq!(
        store
            .claim(claim(&key, &fp, LeaseToken::random()))
            .await
            .unwrap(),
        ClaimOutcome::Mismatch {
            stored_algorithm: Some(FingerprintAlgorithm::RawSha256V1)
        }
    );
}

/// Two stores with different prefixes on one Redis do not see each other's records.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test]
async fn prefixes_keep_stores_apart() {
    let Some(url) = redis_url() else { return };
    let (one, two) = (
        idem_tests::redis_fixture::connect(&url).await,
        idem_tests::redis_fixture::connect(&url).await,
    );
    let (key, fp) = (new_key(), fingerprint("{}"));
    assert_eq!(
        one.claim(claim(&key, &fp, LeaseToken::random()))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        two.claim(claim(&key, &fp, LeaseToken::random()))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
}

/// A Redis that is not there is an error at connect time, not a store that answers "absent".
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test]
async fn connecting_to_nothing_fails() {
    let Some(_) = redis_url() else { return };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let started = std::time::Instant::now();
    let result = RedisStore::builder()
        .connection_timeout(Duration::from_millis(200))
        .connect(format!("redis://127.0.0.1:{port}"))
        .await;
    assert!(result.is_err());
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Recorded steps that do not decode make the claim that would resume them a `Corrupt` error,
/// every time: never a panic, never a run that would do the steps again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
async fn recorded_steps_that_do_not_decode_are_a_store_error() {
    let Some(url) = redis_url() else {
        return;
    };
    let store = idem_tests::redis_fixture::connect(&url).await;
    let mut side = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    assert_eq!(
        store.claim(claim(&key, &fp, token)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let step = idem::store::operation::RecordedStep::new("bank", Bytes::from_static(b"{}"));
    store.record_step(&key, token, 0, &step).await.unwrap();
    store.suspend(&key, token, None).await.unwrap();
    // The one step's bytes become two that no step decodes from (a step of version 7), in a
    // framing that still adds up.
    let mut record = stored(&mut side, &store.redis_key(&key)).await;
    record.truncate(75);
    record.extend_from_slice(&2u32.to_be_bytes());
    record.extend_from_slice(&[7, 0]);
    let () = redis::cmd("SET")
        .arg(store.redis_key(&key))
        .arg(record)
        .arg("KEEPTTL")
        .query_async(&mut side)
        .await
        .unwrap();
    for attempt in ["first", "second"] {
        let answer = store.claim(claim(&key, &fp, LeaseToken::random())).await;
        assert!(
            matches!(answer, Err(StoreError::Corrupt(_))),
            "{attempt} claim: {answer:?}"
        );
    }
}
