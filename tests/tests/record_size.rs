//! Bytes per record, measured: how much PostgreSQL, MySQL, SQLite and Redis hold for each
//! completed record, for the benchmark's response and for a 4 KiB one. Measurements, not tests: they are
//! `#[ignore]`d, and `bench/record-size.sh` runs them and prints the figures
//! (docs/benchmarks.md, *Bytes per record*).
//!
//! Each writes `IDEM_RECORD_SIZE_RECORDS` records (100,000 unless set) through the store, as a
//! service does (a claim, then the completion, 32 at a time), into a table or under a key
//! prefix of its own, measures, and removes what it wrote. The PostgreSQL store's connections
//! commit with `synchronous_commit = off`, which changes nothing stored and only how long the
//! fill takes (MySQL has no such session setting: its fill waits for each commit's flush).

use std::{future::Future, sync::Arc, time::Duration};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use idem::{replay::StoredResponse, store::Claim, store::LeaseToken, store::Store};
use idem_conformance::{fingerprint, new_key};
use idem_tests::{
    mysql_fixture,
    postgres_fixture::{admin_pool, database_url, drop_table, fresh_store},
    redis_fixture::{connect, redis_url},
    sqlite_fixture,
};
use sqlx::{AssertSqlSafe, PgPool};

const TTL: Duration = Duration::from_secs(3600);

fn records() -> usize {
    std::env::var("IDEM_RECORD_SIZE_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

/// What the benchmark's handler (`bench/src/payment.rs`) answers: 201, its `Location`, and the
/// payment as JSON; `Content-Length` is not stored.
fn payment_response(number: u64) -> StoredResponse {
    let id = format!("pay_{number:016x}");
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&format!("/payments/{id}")).unwrap(),
    );
    let body = format!(r#"{{"id":"{id}","amount":9800,"currency":"JPY","status":"succeeded"}}"#);
    StoredResponse::new(StatusCode::CREATED, &headers, &Bytes::from(body))
        .expect("an encodable response")
}

/// The same response with a 4 KiB body: JSON around random hex digits, which PostgreSQL's
/// compression gains little on, so that the figure is near the worst case of that size.
fn large_response(number: u64) -> StoredResponse {
    let small = payment_response(number);
    let filler: String = (0..4096 - r#"{"blob":""}"#.len())
        .map(|_| char::from(b"0123456789abcdef"[usize::from(rand::random::<u8>() % 16)]))
        .collect();
    let body = format!(r#"{{"blob":"{filler}"}}"#);
    assert_eq!(body.len(), 4096);
    StoredResponse::new(small.status(), &small.headers(), body.as_bytes())
        .expect("an encodable response")
}

/// A response measured: its name, and the response of the record numbered so.
type Shape = (&'static str, fn(u64) -> StoredResponse);

/// The responses measured.
const SHAPES: [Shape; 2] = [
    ("the benchmark's response", payment_response),
    ("a 4 KiB response", large_response),
];

/// Writes `n` completed records into `store`, 32 at a time, calling `written` with each key.
async fn fill<S, F, Fut>(store: Arc<S>, n: usize, shape: fn(u64) -> StoredResponse, written: F)
where
    S: Store + 'static,
    F: Fn(idem::StoreKey) -> Fut,
    Fut: Future<Output = ()>,
{
    let fp = fingerprint(r#"{"amount":9800,"currency":"JPY"}"#);
    futures_util::stream::iter(0..n as u64)
        .map(|number| {
            let store = store.clone();
            async move {
                let (key, token) = (new_key(), LeaseToken::random());
                let claim = Claim {
                    key: &key,
                    fingerprint: &fp,
                    token,
                    lease: Duration::from_secs(60),
                    ttl: TTL,
                    resumable: None,
                };
                store.claim(claim).await.unwrap();
                store
                    .complete(&key, token, &shape(number), TTL)
                    .await
                    .unwrap();
                key
            }
        })
        .buffer_unordered(32)
        .for_each(written)
        .await;
}

/// Sizes of `table` in bytes: heap, TOAST, indexes, all.
async fn sizes(pool: &PgPool, table: &str) -> [i64; 4] {
    let sql = format!(
        "SELECT pg_relation_size('{table}'), \
         pg_total_relation_size('{table}') - pg_relation_size('{table}') \
             - pg_indexes_size('{table}'), \
         pg_indexes_size('{table}'), pg_total_relation_size('{table}')"
    );
    let row: (i64, i64, i64, i64) = sqlx::query_as(AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .unwrap();
    [row.0, row.1, row.2, row.3]
}

#[ignore = "a measurement: bench/record-size.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_bytes_per_record() {
    let Some(url) = database_url("postgres_bytes_per_record") else {
        return;
    };
    let n = records();
    let admin = admin_pool(&url).await;
    // Commits that do not wait for their WAL flush: the same rows, written in seconds.
    let separator = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{separator}options%5Bsynchronous_commit%5D=off");
    println!("PostgreSQL, {n} completed records each");
    println!(
        "| response | stored response | row | when | heap | TOAST | indexes | total | per record |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, shape) in SHAPES {
        let store = Arc::new(fresh_store(&url).await);
        let table = store.table().to_string();
        fill(store.clone(), n, shape, |_| async {}).await;
        let average = format!(
            "SELECT avg(pg_column_size(response))::float8, avg(pg_column_size(t.*))::float8 \
             FROM {table} t"
        );
        let (response, row): (f64, f64) = sqlx::query_as(AssertSqlSafe(average))
            .fetch_one(&admin)
            .await
            .unwrap();
        let encoded = shape(0).as_bytes().len();
        for when in ["as written", "after VACUUM", "after VACUUM FULL"] {
            match when {
                "after VACUUM" => vacuum(&admin, &format!("VACUUM {table}")).await,
                "after VACUUM FULL" => vacuum(&admin, &format!("VACUUM FULL {table}")).await,
                _ => {}
            }
            let [heap, toast, indexes, total] = sizes(&admin, &table).await;
            let mib = |bytes: i64| format!("{:.1} MiB", bytes as f64 / 1048576.0);
            println!(
                "| {name} | {encoded} B ({response:.0} B in the row) | {row:.0} B | {when} | {} | {} | {} | {} | {} B |",
                mib(heap),
                mib(toast),
                mib(indexes),
                mib(total),
                total / n as i64
            );
        }
        drop_table(&admin, &table).await;
    }
}

async fn vacuum(pool: &PgPool, statement: &str) {
    sqlx::raw_sql(AssertSqlSafe(statement.to_owned()))
        .execute(pool)
        .await
        .unwrap();
}

#[ignore = "a measurement: bench/record-size.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_bytes_per_record() {
    let Some(url) = redis_url() else {
        return;
    };
    let n = records();
    let mut side = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    println!("Redis, {n} completed records each");
    println!("| response | stored response | encoding | MEMORY USAGE | used_memory per record |");
    println!("| --- | --- | --- | --- | --- |");
    for (name, shape) in SHAPES {
        let store = Arc::new(connect(&url).await);
        let before = used_memory(&mut side).await;
        let keys = std::sync::Mutex::new(Vec::with_capacity(n));
        fill(store.clone(), n, shape, |key| {
            keys.lock().unwrap().push(store.redis_key(&key));
            async {}
        })
        .await;
        let after = used_memory(&mut side).await;
        let keys = keys.into_inner().unwrap();
        let sample = &keys[..keys.len().min(1000)];
        let mut usage = 0;
        for key in sample {
            let bytes: i64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut side)
                .await
                .unwrap();
            usage += bytes;
        }
        let encoding: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(&keys[0])
            .query_async(&mut side)
            .await
            .unwrap();
        println!(
            "| {name} | {} B | {encoding} | {} B | {} B |",
            shape(0).as_bytes().len(),
            usage / sample.len() as i64,
            (after - before) / n as i64
        );
        for chunk in keys.chunks(1000) {
            let _: i64 = redis::cmd("UNLINK")
                .arg(chunk)
                .query_async(&mut side)
                .await
                .unwrap();
        }
    }
}

async fn used_memory(side: &mut redis::aio::MultiplexedConnection) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(side)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|bytes| bytes.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

#[ignore = "a measurement: bench/record-size.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_bytes_per_record() {
    let Some(url) = mysql_fixture::mysql_url("mysql_bytes_per_record") else {
        return;
    };
    let n = records();
    let admin = mysql_fixture::admin_pool(&url).await;
    println!("MySQL, {n} completed records each");
    println!("| response | stored response | when | data | indexes | total | per record |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, shape) in SHAPES {
        let store = Arc::new(mysql_fixture::fresh_store(&url).await);
        let table = store.table().to_string();
        fill(store.clone(), n, shape, |_| async {}).await;
        let encoded = shape(0).as_bytes().len();
        for when in ["as written", "after OPTIMIZE TABLE"] {
            if when == "after OPTIMIZE TABLE" {
                sqlx::raw_sql(AssertSqlSafe(format!("OPTIMIZE TABLE {table}")))
                    .execute(&admin)
                    .await
                    .unwrap();
            }
            let [data, indexes] = mysql_sizes(&admin, &table).await;
            let mib = |bytes: i64| format!("{:.1} MiB", bytes as f64 / 1048576.0);
            println!(
                "| {name} | {encoded} B | {when} | {} | {} | {} | {} B |",
                mib(data),
                mib(indexes),
                mib(data + indexes),
                (data + indexes) / n as i64
            );
        }
        mysql_fixture::drop_table(&admin, &table).await;
    }
}

/// `data_length` (the clustered index: rows, and the pages of responses stored off the row)
/// and `index_length` (the secondary indexes) of `table`, once `ANALYZE TABLE` has counted
/// them afresh.
async fn mysql_sizes(pool: &sqlx::MySqlPool, table: &str) -> [i64; 2] {
    sqlx::raw_sql(AssertSqlSafe(format!("ANALYZE TABLE {table}")))
        .execute(pool)
        .await
        .unwrap();
    let (database, name) = table.split_once('.').expect("a qualified test table");
    let (data, indexes): (i64, i64) = sqlx::query_as(
        "SELECT CAST(data_length AS SIGNED), CAST(index_length AS SIGNED) \
         FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
    )
    .bind(database)
    .bind(name)
    .fetch_one(pool)
    .await
    .unwrap();
    [data, indexes]
}

#[ignore = "a measurement: bench/record-size.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_bytes_per_record() {
    let n = records();
    println!("SQLite, {n} completed records each");
    println!("| response | stored response | when | table | indexes | file | per record |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, shape) in SHAPES {
        let scratch = sqlite_fixture::Scratch::new("sqlite_bytes_per_record");
        let file = scratch.file("records.db");
        let store = Arc::new(sqlite_fixture::store_on(&file, Duration::from_secs(10)).await);
        fill(store.clone(), n, shape, |_| async {}).await;
        let encoded = shape(0).as_bytes().len();
        for when in ["as written", "after VACUUM"] {
            if when == "after VACUUM" {
                sqlx::raw_sql("VACUUM").execute(store.pool()).await.unwrap();
            }
            let [table, indexes, file] = sqlite_sizes(store.pool()).await;
            let mib = |bytes: i64| format!("{:.1} MiB", bytes as f64 / 1048576.0);
            println!(
                "| {name} | {encoded} B | {when} | {} | {} | {} | {} B |",
                mib(table),
                mib(indexes),
                mib(file),
                file / n as i64
            );
        }
    }
}

/// The pages of the records table (its rows, and the overflow pages of long responses), of
/// its indexes (the primary key's included), and of the whole file, in bytes, once the WAL is
/// checkpointed into the file.
async fn sqlite_sizes(pool: &sqlx::SqlitePool) -> [i64; 3] {
    sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(pool)
        .await
        .unwrap();
    let (table, indexes): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(pgsize) FILTER (WHERE name = 'idempotency_records'), 0), \
                coalesce(sum(pgsize) FILTER (WHERE name <> 'idempotency_records'), 0) \
         FROM dbstat \
         WHERE name = 'idempotency_records' \
            OR name IN (SELECT name FROM sqlite_schema WHERE tbl_name = 'idempotency_records' \
                        AND type = 'index')",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let file: i64 = sqlx::query_scalar(
        "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    [table, indexes, file]
}
