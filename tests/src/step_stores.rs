//! The stores a suite of operations of several steps runs on: memory and SQLite always,
//! Redis, PostgreSQL and MySQL when the variables that name them are set.

use std::sync::Arc;

use idem::{MemoryStore, Store};

use crate::{mysql_fixture, postgres_fixture, redis_fixture, sqlite_fixture};

/// Each store that keeps steps, named, fresh (its own key prefix, schema or database), for
/// the suite called `suite` (named in the message of a store that is skipped).
pub async fn step_stores(suite: &str) -> Vec<(&'static str, Arc<dyn Store>)> {
    let mut stores: Vec<(&'static str, Arc<dyn Store>)> = vec![
        ("memory", Arc::new(MemoryStore::default())),
        ("sqlite", Arc::new(sqlite_fixture::fresh_store().await)),
    ];
    if let Some(url) = redis_fixture::redis_url() {
        stores.push(("redis", Arc::new(redis_fixture::connect(&url).await)));
    }
    if let Some(url) = postgres_fixture::database_url(suite) {
        stores.push((
            "postgres",
            Arc::new(postgres_fixture::fresh_store(&url).await),
        ));
    }
    if let Some(url) = mysql_fixture::mysql_url(suite) {
        stores.push(("mysql", Arc::new(mysql_fixture::fresh_store(&url).await)));
    }
    stores
}
