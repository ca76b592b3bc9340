//! A service on `SqliteStore` over real HTTP, its handler writing in the request's transaction
//! (`Tx`): the seven cases of docs/contract.md, what commits and what rolls back, one run per
//! key under a thousand simultaneous requests, two stores on one file, and the faults SQLite
//! answers with (a file locked past the busy timeout, a read-only file, a full disk, a record
//! that does not decode), and a file of the first migration upgraded while a service uses it. Each test on a
//! file in a directory of its own; SQLite needs no service, so these always run.
//!
//! Two processes on one file, and processes killed with SIGKILL, are the shop's tests
//! (`examples/shop/tests/abandoned_transfers_sqlite.rs`).

use std::{sync::Arc, time::Duration};

use axum::http::{Method, StatusCode};
use idem::{
    Idempotency, IdempotencyKey, Policy, Scope, StoreKey,
    sqlite::{SqliteStore, TableName, migration_files},
    store::Store,
};
use idem_tests::{
    Answer, Served, eventually, key,
    sqlite_fixture::{Payments, Scratch, Step, admin_pool, count, store_on},
};
use serde_json::json;
use sqlx::{Connection, Executor, SqlitePool, sqlite::SqliteConnectOptions};
use tokio::{sync::Notify, task::JoinSet};

/// Long enough for anything the runtime does in the background to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// The busy timeout of the tests' stores: short, so that the locked file's test is quick.
const BUSY: Duration = Duration::from_millis(500);

/// A payment service on a fresh file, served; the directory is removed at the end.
struct Setup {
    admin: SqlitePool,
    payments: Payments,
    store: SqliteStore,
    served: Served,
    http: reqwest::Client,
    scratch: Scratch,
}

impl Setup {
    async fn new(test: &str) -> Self {
        Self::with_policy(test, Policy::new().scope(Scope::Global)).await
    }

    async fn with_policy(test: &str, policy: Policy) -> Self {
        let scratch = Scratch::new(test);
        let file = scratch.file("app.db");
        let store = store_on(&file, BUSY).await;
        let admin = admin_pool(&file).await;
        let payments = Payments::create(&admin, "payments").await;
        Self {
            served: Served::start(payments.router_with(runtime(&store), policy)).await,
            http: reqwest::Client::new(),
            admin,
            payments,
            store,
            scratch,
        }
    }

    async fn pay(&self, key: &str) -> Answer {
        self.pay_at(&self.served, key).await
    }

    async fn pay_at(&self, served: &Served, key: &str) -> Answer {
        Answer::of(
            self.http
                .post(served.url("/payments"))
                .header("idempotency-key", key)
                .json(&json!({ "amount": 9800 })),
        )
        .await
    }

    async fn rows(&self) -> i64 {
        count(&self.admin, "payments").await
    }

    /// The state of `key`'s record.
    async fn state(&self, key: &str) -> Option<String> {
        sqlx::query_scalar("SELECT state FROM idempotency_records WHERE store_key = ?1")
            .bind(store_key(key).as_bytes().to_vec())
            .fetch_optional(&self.admin)
            .await
            .unwrap()
    }
}

/// The runtime on `store`, waiting for the store as long as the tests may take.
fn runtime(store: &SqliteStore) -> Idempotency {
    Idempotency::builder(store.clone())
        .store_timeout(PATIENCE)
        .build()
}

/// The store key of the test service's `key`.
fn store_key(key: &str) -> StoreKey {
    StoreKey::new(
        &Scope::Global,
        None,
        &Method::POST,
        "/payments",
        &IdempotencyKey::new(key).unwrap(),
    )
}

/// Retries `key` until it is answered 201, for at most [`PATIENCE`].
async fn pay_until_created(setup: &Setup, key: &str) -> Answer {
    let mut last = None;
    let created = eventually(PATIENCE, async || {
        let answer = setup.pay(key).await;
        let done = answer.status == StatusCode::CREATED;
        last = Some(answer);
        done
    })
    .await;
    let answer = last.expect("at least one answer");
    assert!(created, "{key} was never answered 201: {answer:?}");
    answer
}

/// Cases 1 and 2: the same key and body twice is one payment, the second answer replayed; the
/// same key with another body is 422, and no new payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_1_and_2_a_repeated_key_replays_and_another_body_is_422() {
    let setup = Setup::new(module_path!()).await;
    let key = key();
    let first = setup.pay(&key).await;
    first.created();
    assert!(!first.replayed());
    let second = setup.pay(&key).await;
    assert!(second.replayed(), "{second:?}");
    assert_eq!(second.body, first.body);
    let reused = Answer::of(
        setup
            .http
            .post(setup.served.url("/payments"))
            .header("idempotency-key", &key)
            .json(&json!({ "amount": 1200 })),
    )
    .await;
    reused.refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
}

/// Cases 3 and 5: while the first request runs (its client gave up), the same key is 409
/// with `Retry-After`, never a wait for the file's write lock the first one holds; once it
/// ends, the retry gets its result. One payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_3_and_5_in_flight_is_409_then_the_retry_gets_the_first_result() {
    let setup = Setup::new(module_path!()).await;
    let (written, proceed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    setup.payments.then(Step::Wait {
        written: Arc::clone(&written),
        proceed: Arc::clone(&proceed),
    });
    let key = key();
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(setup.served.url("/payments"))
        .header("idempotency-key", &key)
        .json(&json!({ "amount": 9800 }))
        .send();
    let (gave_up, ()) = tokio::join!(gave_up, written.notified());
    assert!(gave_up.unwrap_err().is_timeout());
    let conflict = tokio::time::timeout(Duration::from_secs(5), setup.pay(&key))
        .await
        .expect("a 409 does not wait for the writer");
    conflict.refusal(StatusCode::CONFLICT, "request-in-flight");
    assert!(conflict.header("retry-after").is_some());
    proceed.notify_one();
    let answer = pay_until_created(&setup, &key).await;
    assert!(answer.replayed(), "the first request's result: {answer:?}");
    assert_eq!(answer.json()["execution"], 1);
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
}

/// Case 4: no key is 400, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_4_no_key_is_400() {
    let setup = Setup::new(module_path!()).await;
    let answer = Answer::of(
        setup
            .http
            .post(setup.served.url("/payments"))
            .json(&json!({ "amount": 9800 })),
    )
    .await;
    answer.refusal(StatusCode::BAD_REQUEST, "key-missing");
    assert_eq!(setup.payments.executions(), 0);
    assert_eq!(setup.rows().await, 0);
}

/// Cases 6 and 7: a key after its TTL (300 ms, on SQLite's clock) is a new request; a 500
/// rolls its row back and releases the key, and the retry runs again and is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_6_and_7_after_the_ttl_and_after_a_500_the_key_runs_again() {
    let policy = Policy::new()
        .scope(Scope::Global)
        .ttl(Duration::from_millis(300))
        .lease(Duration::from_millis(300));
    let setup = Setup::with_policy(module_path!(), policy).await;
    let key = key();
    setup.pay(&key).await.created();
    assert!(setup.pay(&key).await.replayed(), "within the TTL");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = setup.pay(&key).await;
    assert!(!after.replayed(), "after the TTL: a new request");
    assert_eq!(after.json()["execution"], 2);

    let key = idem_tests::key();
    setup.payments.then(Step::Fail);
    assert_eq!(setup.pay(&key).await.status, 500);
    assert_eq!(setup.rows().await, 2, "the failed run's row rolled back");
    let retried = setup.pay(&key).await;
    assert!(!retried.replayed(), "the 500 released the key");
    assert_eq!(retried.created()["execution"], 4);
    assert!(setup.pay(&key).await.replayed(), "its success is stored");
    assert_eq!(setup.rows().await, 3);
}

/// A payment's row and its record commit together: while the handler has written its row and
/// not yet answered, neither the row nor a completed record is visible to another
/// connection; after, both are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_row_commits_with_its_record() {
    let setup = Setup::new(module_path!()).await;
    let (written, proceed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    setup.payments.then(Step::Wait {
        written: Arc::clone(&written),
        proceed: Arc::clone(&proceed),
    });
    let key = key();
    let paying = {
        let (http, url, key) = (
            setup.http.clone(),
            setup.served.url("/payments"),
            key.clone(),
        );
        tokio::spawn(async move {
            Answer::of(
                http.post(url)
                    .header("idempotency-key", key)
                    .json(&json!({ "amount": 9800 })),
            )
            .await
        })
    };
    written.notified().await;
    assert_eq!(setup.rows().await, 0, "written, not committed");
    assert_eq!(setup.state(&key).await.as_deref(), Some("in_flight"));
    proceed.notify_one();
    paying.await.unwrap().created();
    assert_eq!(setup.rows().await, 1);
    assert_eq!(setup.state(&key).await.as_deref(), Some("completed"));
}

/// A thousand requests with one key at once: the handler runs once, one answer is its 201,
/// every other one a 409 or the replay of that 201, and none waited past the busy timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_simultaneous_requests_with_one_key_run_the_handler_once() {
    let setup = Arc::new(Setup::new(module_path!()).await);
    let _ = rlimit::increase_nofile_limit(8192);
    let key = key();
    let start = Arc::new(tokio::sync::Barrier::new(1000));
    let mut sent = JoinSet::new();
    for _ in 0..1000 {
        let (setup, key, start) = (Arc::clone(&setup), key.clone(), Arc::clone(&start));
        sent.spawn(async move {
            start.wait().await;
            setup.pay(&key).await
        });
    }
    let answers = sent.join_all().await;
    let mut first = None;
    for answer in &answers {
        match answer.status {
            StatusCode::CREATED if !answer.replayed() => {
                assert!(
                    first.replace(answer.body.clone()).is_none(),
                    "two first runs"
                );
            }
            StatusCode::CREATED | StatusCode::CONFLICT => {}
            _ => panic!("an answer that is neither 201 nor 409: {answer:?}"),
        }
    }
    let first = first.expect("one request ran");
    for answer in answers.iter().filter(|answer| answer.replayed()) {
        assert_eq!(answer.body, first, "every replay is the first answer");
    }
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
}

/// Two stores on one file, each with its own pool (as two processes have): keys sent to both
/// at once run once each, their writes taking turns for the file's write lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_run_each_key_once() {
    let setup = Setup::new(module_path!()).await;
    let other_store = store_on(&setup.scratch.file("app.db"), Duration::from_secs(10)).await;
    let other = Served::start(
        setup
            .payments
            .router_with(runtime(&other_store), Policy::new().scope(Scope::Global)),
    )
    .await;
    let keys: Vec<String> = (0..50).map(|_| key()).collect();
    let setup = Arc::new(setup);
    let other = Arc::new(other);
    let mut sent = JoinSet::new();
    for key in &keys {
        for on_other in [false, true, false, true] {
            let (setup, other, key) = (Arc::clone(&setup), Arc::clone(&other), key.clone());
            sent.spawn(async move {
                if on_other {
                    setup.pay_at(&other, &key).await
                } else {
                    setup.pay(&key).await
                }
            });
        }
    }
    for answer in sent.join_all().await {
        assert!(matches!(answer.status.as_u16(), 201 | 409), "{answer:?}");
    }
    for key in &keys {
        pay_until_created(&setup, key).await;
    }
    assert_eq!(setup.payments.executions(), 50, "each key ran once");
    assert_eq!(setup.rows().await, 50);
}

/// Another connection holds the file's write lock (`BEGIN IMMEDIATE`) past the busy timeout:
/// a new key is answered 503 `store-unavailable`, and nothing runs; a completed key still
/// replays (a read takes no lock). Once the lock goes, the new key runs, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_locked_past_the_busy_timeout_answers_503_and_runs_nothing() {
    let setup = Setup::new(module_path!()).await;
    let done = key();
    setup.pay(&done).await.created();
    let mut holder = setup.admin.acquire().await.unwrap();
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    let key = key();
    for _ in 0..2 {
        let answer = setup.pay(&key).await;
        answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
        assert!(answer.header("retry-after").is_some());
    }
    assert!(setup.pay(&done).await.replayed(), "replays read beside it");
    assert_eq!(setup.payments.executions(), 1);
    holder.execute("ROLLBACK").await.unwrap();
    let answer = pay_until_created(&setup, &key).await;
    assert!(!answer.replayed());
    assert_eq!(setup.payments.executions(), 2);
    assert_eq!(setup.rows().await, 2);
}

/// A file the service may only read (opened read-only): a new key is answered 503
/// `store-unavailable` and nothing runs; what was completed before still replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_file_answers_503_and_replays_what_it_holds() {
    let setup = Setup::new(module_path!()).await;
    let done = key();
    setup.pay(&done).await.created();
    // Whatever the file's permissions say (root ignores them), a read-only opening refuses
    // every write, as a read-only mount does.
    let options = SqliteConnectOptions::new()
        .filename(setup.scratch.file("app.db"))
        .read_only(true);
    let read_only = SqliteStore::builder().connect_with(options).await.unwrap();
    let served = Served::start(
        setup
            .payments
            .router_with(runtime(&read_only), Policy::new().scope(Scope::Global)),
    )
    .await;
    let answer = setup.pay_at(&served, &key()).await;
    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(setup.pay_at(&served, &done).await.replayed());
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
}

/// A completed record whose response does not decode: every retry is answered 503 Problem
/// Details, the handler does not run again, and the record is left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_does_not_decode_answers_503_and_runs_nothing() {
    let setup = Setup::new(module_path!()).await;
    let key = key();
    setup.pay(&key).await.created();
    sqlx::query("UPDATE idempotency_records SET response = x'ff00ff' WHERE store_key = ?1")
        .bind(store_key(&key).as_bytes().to_vec())
        .execute(&setup.admin)
        .await
        .unwrap();
    for _ in 0..2 {
        let answer = setup.pay(&key).await;
        answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    }
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
    assert_eq!(setup.state(&key).await.as_deref(), Some("completed"));
    let held = setup.store.look_up(&store_key(&key)).await;
    assert!(
        held.is_err(),
        "the record still does not read back: {held:?}"
    );
}

/// A file of the first migration, open in a service whose connection is in the middle of a
/// read, is migrated by another store on the file: the read goes on, the steps columns are
/// added, and the service's store, on the connections it had, claims, completes and replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_in_use_is_upgraded_in_place() {
    let scratch = Scratch::new(module_path!());
    let file = scratch.file("app.db");
    let admin = admin_pool(&file).await;
    let [first, _] = migration_files(&TableName::default());
    sqlx::raw_sql(sqlx::AssertSqlSafe(first))
        .execute(&admin)
        .await
        .unwrap();
    let in_use = SqliteStore::connect(file.to_str().unwrap()).await.unwrap();
    // A connection of the service reads the table as the first migration left it.
    let columns = async || -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM pragma_table_info('idempotency_records')")
            .fetch_one(in_use.pool())
            .await
            .unwrap()
    };
    let before = columns().await;
    let mut reader = in_use.pool().acquire().await.unwrap();
    let mut open_read = reader.begin().await.unwrap();
    let records: i64 = sqlx::query_scalar("SELECT count(*) FROM idempotency_records")
        .fetch_one(&mut *open_read)
        .await
        .unwrap();
    assert_eq!(records, 0);
    SqliteStore::connect(file.to_str().unwrap())
        .await
        .unwrap()
        .migrate()
        .await
        .unwrap();
    open_read.rollback().await.unwrap();
    drop(reader);
    assert_eq!(columns().await, before + 6, "the steps columns were added");
    let served = Served::start(
        Payments::create(&admin, "payments")
            .await
            .router_with(runtime(&in_use), Policy::new().scope(Scope::Global)),
    )
    .await;
    let http = reqwest::Client::new();
    let pay = async |key: &str| {
        Answer::of(
            http.post(served.url("/payments"))
                .header("idempotency-key", key)
                .json(&json!({ "amount": 9800 })),
        )
        .await
    };
    let key = key();
    let first = pay(&key).await;
    first.created();
    let again = pay(&key).await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
}

/// A file system of 16 MiB of the test's own (tmpfs), mounted on a directory of the scratch
/// one and unmounted when dropped. `None` where mounting is not allowed (not root).
///
/// Small, and yet four times the WAL that SQLite keeps between two checkpoints (about 4 MB:
/// it checkpoints every 1,000 pages). On a disk with less room than that, the WAL alone fills
/// it again once the filler is gone (a 2 MiB disk did after 60 payments, each about 33 KB of
/// WAL frames), and then nothing frees it: the checkpoint that would fold the WAL back into
/// the database file needs the file to grow.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: std::path::PathBuf) -> Option<Self> {
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|status| status.success());
        mounted.then_some(Self(dir))
    }

    /// Writes a file until the disk refuses, and answers its path.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write as _;
        let path = self.0.join("filler");
        let mut filler = std::fs::File::create(&path).unwrap();
        let block = [0u8; 4096];
        while filler
            .write_all(&block)
            .and_then(|()| filler.sync_data())
            .is_ok()
        {}
        path
    }

    /// Gives one page (4 KiB) of `filler` back to the file system.
    fn give_back_a_page(filler: &std::path::Path) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(filler)
            .unwrap();
        let len = file.metadata().unwrap().len();
        file.set_len(len.saturating_sub(4096)).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a connection the pool closes in the background may still hold the file.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// `key`'s record as it stands, with SQLite's clock: its state, lease, expiry and now (in
/// microseconds since the epoch), for a test that fails to say why.
async fn record_row(admin: &SqlitePool, key: &str) -> (String, Option<i64>, i64, i64) {
    sqlx::query_as(
        "SELECT state, lease_expires_at, expires_at, \
         CAST(unixepoch('subsec') * 1000000 AS INTEGER) \
         FROM idempotency_records WHERE store_key = ?1",
    )
    .bind(store_key(key).as_bytes().to_vec())
    .fetch_one(admin)
    .await
    .unwrap()
}

/// A full disk: while the file system holds no byte more, every request is answered 201 (a
/// write that found room) or 503 `store-unavailable`, what was completed replays, and no
/// payment is written twice. The disk is given back a page at a time until a run's `COMMIT`
/// fails on it (its claim found room, its transaction did not): the outcome is unknown to the
/// runtime, which releases the key in the background, and the release fails on the full disk
/// too. Once there is room again, every key is answered 201 (one whose commit failed once its
/// release lands), each with one row: the failed commit wrote nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_and_loses_nothing() {
    let scratch = Scratch::new(module_path!());
    let Some(disk) = SmallDisk::mount(scratch.file("disk")) else {
        eprintln!("skipped: mounting a small tmpfs needs root (CI runs as root)");
        return;
    };
    let file = disk.0.join("app.db");
    let store = store_on(&file, BUSY).await;
    let admin = admin_pool(&file).await;
    let payments = Payments::create(&admin, "payments").await;
    let served =
        Served::start(payments.router_with(runtime(&store), Policy::new().scope(Scope::Global)))
            .await;
    let http = reqwest::Client::new();
    let pay = async |key: &str| {
        Answer::of(
            http.post(served.url("/payments"))
                .header("idempotency-key", key)
                .json(&json!({ "amount": 9800 })),
        )
        .await
    };
    let done = key();
    pay(&done).await.created();

    let filler = disk.fill();
    let keys: Vec<String> = (0..200).map(|_| key()).collect();
    let (mut refused, mut uncommitted) = (0, 0);
    for key in &keys {
        if uncommitted == 0 {
            SmallDisk::give_back_a_page(&filler);
        }
        let ran = payments.executions();
        let answer = pay(key).await;
        if answer.status == StatusCode::SERVICE_UNAVAILABLE {
            answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
            refused += 1;
            // The handler ran and the request was refused: its commit failed.
            if payments.executions() > ran {
                uncommitted += 1;
            }
        } else {
            answer.created();
        }
    }
    assert!(refused > 0, "a full disk refused no write in 200 payments");
    assert!(uncommitted > 0, "no commit failed on the full disk");
    assert!(
        pay(&done).await.replayed(),
        "a completed key replays on a full disk"
    );

    std::fs::remove_file(filler).unwrap();
    for key in &keys {
        let mut answer = pay(key).await;
        if answer.status != StatusCode::CREATED {
            // 409 until the release that the full disk refused lands.
            let created = eventually(PATIENCE, async || {
                answer = pay(key).await;
                answer.status == StatusCode::CREATED
            })
            .await;
            if !created {
                let row = record_row(&admin, key).await;
                panic!("{key} after the disk had room: {answer:?} {row:?}");
            }
        }
    }
    assert_eq!(count(&admin, "payments").await, 1 + keys.len() as i64);
    drop(served);
    admin.close().await;
}
