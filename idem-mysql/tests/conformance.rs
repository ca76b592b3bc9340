//! The store conformance suite (the crate `idem-conformance`) against a real MySQL or MariaDB:
//! every rule, on a table of each test's own in the database `idem_conformance`, with records
//! damaged in the table the way rule 9's test asks.
//!
//! Needs `IDEM_TEST_MYSQL_URL` (CI sets `mysql://root@127.0.0.1:3306/test`); without it each
//! test says it was skipped. Tables older than an hour, left by earlier runs, are dropped by
//! the first test of a run.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use idem::mysql::MySqlStore;
use idem_conformance::{Corruption, StoreUnderTest};
use sqlx::{AssertSqlSafe, MySqlPool};

const DATABASE: &str = "idem_conformance";

async fn fresh_store() -> Option<StoreUnderTest> {
    let Some(url) = std::env::var("IDEM_TEST_MYSQL_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        eprintln!("IDEM_TEST_MYSQL_URL is not set: the MySQL conformance tests are skipped");
        return None;
    };
    let admin = MySqlPool::connect(&url)
        .await
        .expect("cannot connect to IDEM_TEST_MYSQL_URL");
    let table = fresh_table(&admin).await;
    let store = MySqlStore::builder()
        .table(&table)
        .unwrap()
        // The suite races 1,000 claims on one store.
        .acquire_timeout(Duration::from_secs(30))
        .max_connections(8)
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    Some(
        StoreUnderTest::new(Arc::new(store)).corrupt(move |key, damage| {
            let (pool, table) = (admin.clone(), table.clone());
            Box::pin(async move {
                let update = |column: &str| {
                    AssertSqlSafe(format!(
                        "UPDATE {table} SET {column} = ? WHERE store_key = ?"
                    ))
                };
                let key = key.as_bytes().to_vec();
                let query = match damage {
                    Corruption::Response(bytes) => {
                        sqlx::query(update("response")).bind(bytes).bind(key)
                    }
                    Corruption::FormatVersion(version) => sqlx::query(update("response_format"))
                        .bind(i16::try_from(version).unwrap())
                        .bind(key),
                    other => panic!("unknown corruption {other:?}"),
                };
                assert_eq!(query.execute(&pool).await.unwrap().rows_affected(), 1);
            })
        }),
    )
}

/// A new table name in the suite's database, made when missing; its name starts with the
/// time it was made, so that a later run drops what this one leaves.
async fn fresh_table(admin: &MySqlPool) -> String {
    static SWEPT: AtomicBool = AtomicBool::new(false);
    sqlx::query(AssertSqlSafe(format!(
        "CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4"
    )))
    .execute(admin)
    .await
    .unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if !SWEPT.swap(true, Ordering::SeqCst) {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = ?",
        )
        .bind(DATABASE)
        .fetch_all(admin)
        .await
        .unwrap();
        for table in tables {
            let made = table.trim_start_matches('r').split('_').next();
            if made
                .and_then(|secs| secs.parse::<u64>().ok())
                .is_some_and(|made| made + 3600 < now)
            {
                let drop = format!("DROP TABLE IF EXISTS {DATABASE}.`{table}`");
                let _ = sqlx::query(AssertSqlSafe(drop)).execute(admin).await;
            }
        }
    }
    format!("{DATABASE}.r{now}_{:016x}", rand::random::<u64>())
}

idem_conformance::store_conformance_tests!(fresh_store());
