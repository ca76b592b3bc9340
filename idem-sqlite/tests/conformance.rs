//! The store conformance suite (the crate `idem-conformance`) against SQLite: every rule, on a
//! file of each test's own in the directory `idem-sqlite-conformance` of the system's
//! temporary directory, with records damaged in the file the way rule 9's test asks.
//!
//! Needs no service: it always runs. Files older than an hour, left by earlier runs, are
//! deleted by the first test of a run.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use idem::sqlite::SqliteStore;
use idem_conformance::{Corruption, StoreUnderTest};
use sqlx::AssertSqlSafe;

async fn fresh_store() -> Option<StoreUnderTest> {
    let file = fresh_file();
    let store = SqliteStore::builder()
        // The suite races 1,000 claims on one store, and its writes take turns.
        .acquire_timeout(Duration::from_secs(30))
        .busy_timeout(Duration::from_secs(10))
        .max_connections(8)
        .connect(file.to_str().unwrap())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let pool = store.pool().clone();
    Some(
        StoreUnderTest::new(Arc::new(store)).corrupt(move |key, damage| {
            let pool = pool.clone();
            Box::pin(async move {
                let update = |column: &str| {
                    AssertSqlSafe(format!(
                        "UPDATE idempotency_records SET {column} = ?1 WHERE store_key = ?2"
                    ))
                };
                let key = key.as_bytes().to_vec();
                let query = match damage {
                    Corruption::Response(bytes) => {
                        sqlx::query(update("response")).bind(bytes).bind(key)
                    }
                    Corruption::FormatVersion(version) => sqlx::query(update("response_format"))
                        .bind(i64::from(version))
                        .bind(key),
                    other => panic!("unknown corruption {other:?}"),
                };
                assert_eq!(query.execute(&pool).await.unwrap().rows_affected(), 1);
            })
        }),
    )
}

/// A new file name in the suite's directory; its name starts with the time it was made, so
/// that a later run deletes what this one leaves.
fn fresh_file() -> PathBuf {
    static SWEPT: AtomicBool = AtomicBool::new(false);
    let dir = std::env::temp_dir().join("idem-sqlite-conformance");
    std::fs::create_dir_all(&dir).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if !SWEPT.swap(true, Ordering::SeqCst) {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let made = name.split('_').next().and_then(|s| s.parse::<u64>().ok());
            if made.is_some_and(|made| made + 3600 < now) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    dir.join(format!("{now}_{:016x}.db", rand::random::<u64>()))
}

idem_conformance::store_conformance_tests!(fresh_store());
