//! `MySqlStore` against a real MySQL or MariaDB, for the traps a MySQL store meets: claims
//! racing uncommitted inserts and InnoDB's locks, claims of one key at once right after its
//! release (where InnoDB's locks on a deleted row make concurrent inserts deadlock), session
//! time zones, character sets, `max_allowed_packet`, the migrations, and the sweeper's and
//! the resumer's `SKIP LOCKED`. Skipped, with a note, when `IDEM_TEST_MYSQL_URL` is unset.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use axum::{
    body::Bytes,
    http::{HeaderMap, HeaderValue, Method, StatusCode},
};
use idem::{
    IdempotencyKey, StoreKey,
    fingerprint::Fingerprint,
    mysql::{MySqlStore, TableName, migration_files},
    replay::StoredResponse,
    store::{
        Claim, ClaimOutcome, Held, LeaseToken, Store,
        operation::{KeptRequest, Resumable},
    },
};
use idem_conformance::{fingerprint, new_key};
use idem_tests::mysql_fixture::{
    admin_pool, count, drop_table, fresh_name, fresh_store, mysql_url,
};
use sqlx::{AssertSqlSafe, Executor, mysql::MySqlConnectOptions};
use tokio::task::JoinSet;

const MINUTE: Duration = Duration::from_secs(60);

fn claim<'a>(key: &'a StoreKey, fingerprint: &'a Fingerprint, ttl: Duration) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        token: LeaseToken::random(),
        lease: ttl.min(MINUTE),
        ttl,
        resumable: None,
    }
}

fn response(body: &[u8]) -> StoredResponse {
    StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), body)
        .expect("an encodable response")
}

/// Writes a record the way the store does, on `conn`, without committing.
async fn insert_record(
    conn: &mut sqlx::MySqlConnection,
    table: &TableName,
    key: &StoreKey,
    fingerprint: &Fingerprint,
    completed: Option<&StoredResponse>,
) {
    let sql = format!(
        "INSERT INTO {table} (store_key, fingerprint, state, lease_token, lease_expires_at, \
         expires_at, response_status, response_format, response, created_at, updated_at) \
         VALUES (?, ?, ?, ?, IF(? = 'in_flight', UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE, NULL), \
         UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
    );
    let state = if completed.is_some() {
        "completed"
    } else {
        "in_flight"
    };
    sqlx::query(AssertSqlSafe(sql))
        .bind(key.as_bytes().to_vec())
        .bind(fingerprint.to_bytes().to_vec())
        .bind(state)
        .bind(
            completed
                .is_none()
                .then(|| LeaseToken::random().to_bytes().to_vec()),
        )
        .bind(state)
        .bind(completed.map(|r| r.status().as_u16()))
        .bind(completed.map(|_| 1_i16))
        .bind(completed.map(|r| r.as_bytes().to_vec()))
        .execute(conn)
        .await
        .unwrap();
}

/// A fresh store on `url` with a lock wait of `lock_wait`.
async fn store_waiting(url: &str, table: &TableName, lock_wait: Duration) -> MySqlStore {
    MySqlStore::builder()
        .table_name(table.clone())
        .lock_wait_timeout(lock_wait)
        .connect(url)
        .await
        .unwrap()
}

/// A claim whose read finds nothing, and whose insert meets an uncommitted insert of its key,
/// waits for that transaction, then answers the row it committed: in flight, or completed.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_racing_an_uncommitted_insert_answers_what_committed() {
    let Some(url) = mysql_url("a_claim_racing_an_uncommitted_insert_answers_what_committed") else {
        return;
    };
    let store = fresh_store(&url).await;
    let store = store_waiting(&url, store.table(), Duration::from_secs(20)).await;
    let admin = admin_pool(&url).await;
    for completed in [None, Some(response(b"{\"id\":1}"))] {
        let (key, fp) = (new_key(), fingerprint("{}"));
        let mut other = admin.acquire().await.unwrap();
        other.execute("START TRANSACTION").await.unwrap();
        insert_record(&mut other, store.table(), &key, &fp, completed.as_ref()).await;
        let racing = tokio::spawn({
            let store = store.clone();
            async move { store.claim(claim(&key, &fp, MINUTE)).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !racing.is_finished(),
            "the claim waits for the uncommitted insert"
        );
        other.execute("COMMIT").await.unwrap();
        let outcome = racing.await.unwrap().expect("the claim failed");
        match completed {
            None => assert_eq!(outcome, ClaimOutcome::InFlight),
            Some(stored) => assert_eq!(outcome, ClaimOutcome::Completed(stored)),
        }
    }
    drop_table(&admin, store.table().as_str()).await;
}

/// A claim blocked by a transaction that never ends fails once `innodb_lock_wait_timeout`
/// has passed, with an error rather than a guess; once that transaction rolls back, the key
/// is free.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_blocked_by_a_stuck_transaction_fails_after_the_lock_wait_timeout() {
    let test = "a_claim_blocked_by_a_stuck_transaction_fails_after_the_lock_wait_timeout";
    let Some(url) = mysql_url(test) else {
        return;
    };
    let table = fresh_store(&url).await.table().clone();
    let store = store_waiting(&url, &table, Duration::from_secs(1)).await;
    let admin = admin_pool(&url).await;
    let (key, fp) = (new_key(), fingerprint("{}"));
    let mut stuck = admin.acquire().await.unwrap();
    stuck.execute("START TRANSACTION").await.unwrap();
    insert_record(&mut stuck, &table, &key, &fp, None).await;
    let blocked = store.claim(claim(&key, &fp, MINUTE)).await;
    let error = blocked.expect_err("a claim that waited past the lock wait timeout");
    assert!(error.outcome_unknown(), "{error:?}");
    stuck.execute("ROLLBACK").await.unwrap();
    assert_eq!(
        store.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    drop_table(&admin, table.as_str()).await;
}

/// Replays, 409s and 422s are consistent reads: a record locked by another transaction (a
/// transactional completion about to commit, say) is answered at once, never after the lock.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_and_conflicts_do_not_wait_for_row_locks() {
    let Some(url) = mysql_url("replays_and_conflicts_do_not_wait_for_row_locks") else {
        return;
    };
    let table = fresh_store(&url).await.table().clone();
    // A lock wait longer than the test's patience: an answer before it did not wait.
    let store = store_waiting(&url, &table, Duration::from_secs(60)).await;
    let admin = admin_pool(&url).await;
    let (completed, in_flight) = (new_key(), new_key());
    let fp = fingerprint("{}");
    let token = LeaseToken::random();
    store
        .claim(Claim {
            token,
            ..claim(&completed, &fp, MINUTE)
        })
        .await
        .unwrap();
    store
        .complete(&completed, token, &response(b"{}"), MINUTE)
        .await
        .unwrap();
    store.claim(claim(&in_flight, &fp, MINUTE)).await.unwrap();
    let mut holder = admin.acquire().await.unwrap();
    holder.execute("START TRANSACTION").await.unwrap();
    let lock = format!("SELECT count(*) FROM {table} FOR UPDATE");
    holder.execute(AssertSqlSafe(lock)).await.unwrap();
    let answers = async {
        let replay = store.claim(claim(&completed, &fp, MINUTE)).await.unwrap();
        let conflict = store.claim(claim(&in_flight, &fp, MINUTE)).await.unwrap();
        let other = fingerprint("{\"other\":1}");
        let mismatch = store
            .claim(claim(&completed, &other, MINUTE))
            .await
            .unwrap();
        (replay, conflict, mismatch)
    };
    let (replay, conflict, mismatch) = tokio::time::timeout(Duration::from_secs(30), answers)
        .await
        .expect("the answers did not wait for the locks");
    assert!(matches!(replay, ClaimOutcome::Completed(_)), "{replay:?}");
    assert_eq!(conflict, ClaimOutcome::InFlight);
    assert!(
        matches!(mismatch, ClaimOutcome::Mismatch { .. }),
        "{mismatch:?}"
    );
    holder.execute("ROLLBACK").await.unwrap();
    drop_table(&admin, table.as_str()).await;
}

/// A key released and then claimed by a hundred requests at once, twenty times over: InnoDB
/// keeps the released row delete-marked for a while, concurrent inserts of its key lock it
/// and can deadlock, and the store reads again instead of failing. Each time exactly one
/// claim wins and no claim fails.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_a_key_just_released_grant_it_once_without_errors() {
    let Some(url) = mysql_url("claims_of_a_key_just_released_grant_it_once_without_errors") else {
        return;
    };
    let store = Arc::new(fresh_store(&url).await);
    let (key, fp) = (new_key(), fingerprint("{}"));
    for _ in 0..20 {
        let mut claims = JoinSet::new();
        for _ in 0..100 {
            let store = Arc::clone(&store);
            claims.spawn(async move {
                let token = LeaseToken::random();
                let outcome = store.claim(Claim {
                    token,
                    ..claim(&key, &fp, MINUTE)
                });
                (outcome.await.expect("a claim failed"), token)
            });
        }
        let mut winners = Vec::new();
        for (outcome, token) in claims.join_all().await {
            match outcome {
                ClaimOutcome::Claimed => winners.push(token),
                ClaimOutcome::InFlight => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one claim wins");
        store.release(&key, winners[0]).await.unwrap();
    }
    let admin = admin_pool(&url).await;
    drop_table(&admin, store.table().as_str()).await;
}

/// Leases and TTLs are the server's UTC: stores whose sessions are nine hours east and five
/// west of UTC agree on them, and a record's expiry is UTC in the table.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_and_ttls_do_not_depend_on_the_session_time_zone() {
    let Some(url) = mysql_url("leases_and_ttls_do_not_depend_on_the_session_time_zone") else {
        return;
    };
    let table = fresh_store(&url).await.table().clone();
    let in_zone = async |zone: &str| {
        let options: MySqlConnectOptions = url.parse().unwrap();
        MySqlStore::builder()
            .table_name(table.clone())
            .connect_with(options.timezone(Some(zone.to_owned())))
            .await
            .unwrap()
    };
    let (east, west) = (in_zone("+09:00").await, in_zone("-05:00").await);
    let (key, fp) = (new_key(), fingerprint("{}"));
    let short = Claim {
        lease: Duration::from_millis(300),
        ..claim(&key, &fp, MINUTE)
    };
    assert_eq!(east.claim(short).await.unwrap(), ClaimOutcome::Claimed);
    assert_eq!(
        west.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::InFlight
    );
    let Some(Held::InFlight(held)) = west.look_up(&key).await.unwrap() else {
        panic!("the record is in flight");
    };
    let lease_left = held.lease_expires_at.duration_since(SystemTime::now());
    assert!(
        lease_left.is_ok_and(|left| left < Duration::from_secs(5)),
        "{held:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        west.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Claimed,
        "the lease lapsed 300 ms after the claim, in the west as in the east"
    );
    let admin = admin_pool(&url).await;
    let sql = format!(
        "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), expires_at) FROM {table} WHERE store_key = ?"
    );
    let left: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(key.as_bytes().to_vec())
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(
        (55..=60).contains(&left),
        "the expiry is UTC in the table: {left} s left"
    );
    drop_table(&admin, table.as_str()).await;
}

/// A response is bytes in the table, whatever the connection's character set: one written
/// over a `latin1` connection, with four-byte UTF-8 and bytes that are not UTF-8 in its
/// headers and body, replays byte for byte over a `utf8mb4` one.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_bytes_whatever_the_connection_character_set() {
    let Some(url) = mysql_url("records_are_bytes_whatever_the_connection_character_set") else {
        return;
    };
    let table = fresh_store(&url).await.table().clone();
    let options: MySqlConnectOptions = url.parse().unwrap();
    let latin1 = MySqlStore::builder()
        .table_name(table.clone())
        .connect_with(options.charset("latin1"))
        .await
        .unwrap();
    let utf8mb4 = store_waiting(&url, &table, Duration::from_secs(2)).await;
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-note",
        HeaderValue::from_bytes(b"caf\xe9 \xf0\x9f\x92\xb3").unwrap(),
    );
    let body = "{\"item\":\"🍵 抹茶\",\"raw\":\"\u{1F4B3}\"}"
        .as_bytes()
        .to_vec();
    let body = [body, vec![0xff, 0x00, 0xc3]].concat();
    let stored = StoredResponse::new(StatusCode::CREATED, &headers, &Bytes::from(body)).unwrap();
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    latin1
        .claim(Claim {
            token,
            ..claim(&key, &fp, MINUTE)
        })
        .await
        .unwrap();
    latin1.complete(&key, token, &stored, MINUTE).await.unwrap();
    assert_eq!(
        utf8mb4.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Completed(stored)
    );
    drop_table(&admin_pool(&url).await, table.as_str()).await;
}

/// A response larger than the server's `max_allowed_packet` (16 MiB on MariaDB by default)
/// could never be written in one statement: it is completed without its body, so the
/// operation is recorded as done and is never run again; retries get its status and the
/// answer for a response that cannot be replayed.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_max_allowed_packet_is_completed_without_its_body() {
    let Some(url) = mysql_url("a_response_over_max_allowed_packet_is_completed_without_its_body")
    else {
        return;
    };
    let store = fresh_store(&url).await;
    let admin = admin_pool(&url).await;
    let packet: i64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS SIGNED)")
        .fetch_one(&admin)
        .await
        .unwrap();
    let fits = vec![b'a'; usize::try_from(packet).unwrap() / 2];
    let too_large = vec![b'b'; usize::try_from(packet).unwrap() + 1];
    for (body, kept) in [(fits, true), (too_large, false)] {
        let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
        let claimed = Claim {
            token,
            ..claim(&key, &fp, MINUTE)
        };
        store.claim(claimed).await.unwrap();
        let stored = response(&body);
        store.complete(&key, token, &stored, MINUTE).await.unwrap();
        let ClaimOutcome::Completed(replayed) =
            store.claim(claim(&key, &fp, MINUTE)).await.unwrap()
        else {
            panic!("the operation is recorded as done");
        };
        assert_eq!(replayed.status(), StatusCode::CREATED);
        assert_eq!(replayed.body().is_some(), kept, "{} bytes", body.len());
        if kept {
            assert_eq!(replayed, stored);
        }
    }
    drop_table(&admin, store.table().as_str()).await;
}

/// The SQL files, run as a migration tool runs them, and `migrate()` make the same table.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_files_and_function_make_the_same_table() {
    let Some(url) = mysql_url("the_migration_files_and_function_make_the_same_table") else {
        return;
    };
    let admin = admin_pool(&url).await;
    let (by_files, by_function) = (fresh_name(&admin, "f").await, fresh_name(&admin, "m").await);
    let by_files = TableName::new(&by_files).unwrap();
    for file in migration_files(&by_files) {
        sqlx::raw_sql(AssertSqlSafe(file))
            .execute(&admin)
            .await
            .unwrap();
    }
    let by_function = TableName::new(&by_function).unwrap();
    let store = MySqlStore::builder()
        .table_name(by_function.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();
    let shape = async |table: &TableName| -> String {
        let (_, ddl): (String, String) =
            sqlx::query_as(AssertSqlSafe(format!("SHOW CREATE TABLE {table}")))
                .fetch_one(&admin)
                .await
                .unwrap();
        ddl.replace(by_files.table(), "T")
            .replace(by_function.table(), "T")
    };
    assert_eq!(shape(&by_files).await, shape(&by_function).await);
    drop_table(&admin, by_files.as_str()).await;
    drop_table(&admin, by_function.as_str()).await;
}

/// A table of the first migration, holding a completed record, is migrated while it is in
/// use, and the record replays after.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_the_first_migration_keeps_its_records_through_the_second() {
    let test = "a_table_of_the_first_migration_keeps_its_records_through_the_second";
    let Some(url) = mysql_url(test) else {
        return;
    };
    let admin = admin_pool(&url).await;
    let table = TableName::new(&fresh_name(&admin, "r").await).unwrap();
    let [first, _] = migration_files(&table);
    sqlx::raw_sql(AssertSqlSafe(first))
        .execute(&admin)
        .await
        .unwrap();
    let (key, fp) = (new_key(), fingerprint("{}"));
    let stored = response(b"{\"kept\":true}");
    let mut conn = admin.acquire().await.unwrap();
    insert_record(&mut conn, &table, &key, &fp, Some(&stored)).await;
    drop(conn);
    let store = MySqlStore::builder()
        .table_name(table.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    assert_eq!(
        store.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Completed(stored)
    );
    drop_table(&admin, table.as_str()).await;
}

/// Claims and completes `n` records with `ttl`.
async fn records(store: &MySqlStore, n: usize, ttl: Duration) {
    let fp = fingerprint("{}");
    for _ in 0..n {
        let (key, token) = (new_key(), LeaseToken::random());
        let claimed = Claim {
            token,
            lease: ttl,
            ttl,
            ..claim(&key, &fp, ttl)
        };
        store.claim(claimed).await.unwrap();
        store
            .complete(&key, token, &response(b"{}"), ttl)
            .await
            .unwrap();
    }
}

/// The sweeper deletes the expired records in batches, skips a row another transaction holds
/// (it waits for nothing), and keeps the live ones.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_deletes_expired_records_and_skips_locked_ones() {
    let Some(url) = mysql_url("the_sweeper_deletes_expired_records_and_skips_locked_ones") else {
        return;
    };
    let table = fresh_store(&url).await.table().clone();
    let store = store_waiting(&url, &table, Duration::from_secs(60)).await;
    let admin = admin_pool(&url).await;
    records(&store, 25, Duration::from_millis(50)).await;
    records(&store, 5, MINUTE).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut holder = admin.acquire().await.unwrap();
    holder.execute("START TRANSACTION").await.unwrap();
    let lock_one = format!(
        "SELECT store_key FROM {table} WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT 1 FOR UPDATE"
    );
    holder.execute(AssertSqlSafe(lock_one)).await.unwrap();
    let swept = tokio::time::timeout(Duration::from_secs(30), store.sweep(7))
        .await
        .expect("the sweep did not wait for the locked row")
        .unwrap();
    assert_eq!(swept, 24, "every expired record but the locked one");
    assert_eq!(count(&admin, table.as_str()).await, 6);
    holder.execute("ROLLBACK").await.unwrap();
    assert_eq!(store.sweep(7).await.unwrap(), 1);
    assert_eq!(
        count(&admin, table.as_str()).await,
        5,
        "the live records stay"
    );
    drop_table(&admin, table.as_str()).await;
}

/// An operation due for resumption that another instance's resumer holds (its row locked) is
/// skipped, not waited for; once free, it is answered, and deferred by the hold.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_operations_another_instance_holds_are_skipped() {
    let Some(url) = mysql_url("due_operations_another_instance_holds_are_skipped") else {
        return;
    };
    let table = fresh_store(&url).await.table().clone();
    let store = store_waiting(&url, &table, Duration::from_secs(60)).await;
    let admin = admin_pool(&url).await;
    let kept = KeptRequest::new(
        Method::POST,
        "/transfers".to_owned(),
        IdempotencyKey::new("k").unwrap(),
        None,
        HeaderMap::new(),
        Bytes::from_static(b"{}"),
    );
    let (key, fp) = (new_key(), fingerprint("{}"));
    let resumable = Claim {
        lease: Duration::from_millis(50),
        resumable: Some(Resumable {
            request: &kept,
            after: Duration::from_millis(50),
        }),
        ..claim(&key, &fp, MINUTE)
    };
    store.claim(resumable).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut holder = admin.acquire().await.unwrap();
    holder.execute("START TRANSACTION").await.unwrap();
    let lock = format!("SELECT count(*) FROM {table} FOR UPDATE");
    holder.execute(AssertSqlSafe(lock)).await.unwrap();
    let held = tokio::time::timeout(Duration::from_secs(30), store.due(10, MINUTE))
        .await
        .expect("due did not wait for the locked row")
        .unwrap();
    assert!(held.is_empty(), "{held:?}");
    holder.execute("ROLLBACK").await.unwrap();
    let due = store.due(10, MINUTE).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].key, key);
    assert!(
        store.due(10, MINUTE).await.unwrap().is_empty(),
        "deferred by the hold"
    );
    drop_table(&admin, table.as_str()).await;
}
