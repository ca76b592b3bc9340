//! `PostgresStore` against a real PostgreSQL: the claim under
//! concurrent transactions, the migration, the table name rules and the sweeper. Skipped,
//! with a note, when `IDEM_TEST_DATABASE_URL` is unset.

use std::time::{Duration, Instant};

use axum::{
    body::Bytes,
    http::{HeaderMap, Method, StatusCode},
};
use idem::{
    IdempotencyKey, StoreKey, fingerprint::Fingerprint, postgres::PostgresStore,
    postgres::SweepPace, postgres::TableName, postgres::TableNameError, postgres::migration_files,
    postgres::migration_sql, replay::StoredResponse, store::Claim, store::ClaimOutcome,
    store::LeaseToken, store::Store, store::StoreError, store::operation::KeptRequest,
    store::operation::RecordedStep, store::operation::Resumable,
};
use idem_conformance::{fingerprint, new_key};
use idem_tests::postgres_fixture::{admin_pool, count, database_url, drop_table, fresh_store};
use sqlx::{AssertSqlSafe, PgPool};

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

fn response(body: &'static str) -> StoredResponse {
    StoredResponse::new(
        StatusCode::CREATED,
        &HeaderMap::new(),
        &Bytes::from_static(body.as_bytes()),
    )
    .expect("an encodable response")
}

/// Writes a record the way the store does, in `tx`, without committing.
async fn insert_record(
    tx: &mut sqlx::PgConnection,
    table: &TableName,
    key: &StoreKey,
    fingerprint: &Fingerprint,
    completed: Option<&StoredResponse>,
) {
    let sql = format!(
        "INSERT INTO {table} (key, fingerprint, state, lease_token, lease_expires_at, expires_at, \
         response_status, response_format, response, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, CASE WHEN $3 = 'in_flight' THEN now() + interval '1 minute' END, \
         now() + interval '1 hour', $5, $6, $7, now(), now())"
    );
    let lease_token = completed
        .is_none()
        .then(|| LeaseToken::random().to_bytes().to_vec());
    sqlx::query(AssertSqlSafe(sql))
        .bind(key.as_bytes().to_vec())
        .bind(fingerprint.to_bytes().to_vec())
        .bind(if completed.is_some() {
            "completed"
        } else {
            "in_flight"
        })
        .bind(lease_token)
        .bind(completed.map(|r| r.status().as_u16() as i16))
        .bind(completed.map(|_| 1_i16))
        .bind(completed.map(|r| r.as_bytes().to_vec()))
        .execute(tx)
        .await
        .unwrap();
}

/// A claim that meets an uncommitted insert of its key waits for it, then reads the row that
/// transaction committed, although its own snapshot predates it: here, a completed record.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_racing_an_uncommitted_insert_answers_what_committed() {
    let Some(url) = database_url("a_claim_racing_an_uncommitted_insert_answers_what_committed")
    else {
        return;
    };
    let store = fresh_store(&url).await;
    let admin = admin_pool(&url).await;
    for completed in [None, Some(response("{\"id\":1}"))] {
        let (key, fp) = (new_key(), fingerprint("{}"));
        let mut other = admin.begin().await.unwrap();
        insert_record(&mut other, store.table(), &key, &fp, completed.as_ref()).await;

        let racing = tokio::spawn({
            let store = store.clone();
            async move { store.claim(claim(&key, &fp, MINUTE)).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !racing.is_finished(),
            "the claim must wait for the uncommitted insert"
        );
        other.commit().await.unwrap();

        let outcome = racing.await.unwrap().expect("the claim failed");
        match completed {
            None => assert_eq!(outcome, ClaimOutcome::InFlight),
            Some(stored) => assert_eq!(outcome, ClaimOutcome::Completed(stored)),
        }
    }
    drop_table(&admin, &store.table().to_string()).await;
}

/// If the racing insert rolls back, the waiting claim gets the key.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_racing_an_insert_that_rolls_back_gets_the_key() {
    let Some(url) = database_url("a_claim_racing_an_insert_that_rolls_back_gets_the_key") else {
        return;
    };
    let store = fresh_store(&url).await;
    let admin = admin_pool(&url).await;
    let (key, fp) = (new_key(), fingerprint("{}"));
    let mut other = admin.begin().await.unwrap();
    insert_record(&mut other, store.table(), &key, &fp, None).await;
    let racing = tokio::spawn({
        let store = store.clone();
        async move { store.claim(claim(&key, &fp, MINUTE)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    other.rollback().await.unwrap();
    assert_eq!(racing.await.unwrap().unwrap(), ClaimOutcome::Claimed);
    drop_table(&admin, &store.table().to_string()).await;
}

/// `lock_timeout` bounds the wait: a claim blocked by a transaction that never ends fails
/// with an error (the runtime answers 503) instead of hanging the request.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_blocked_by_a_long_transaction_fails_after_the_lock_timeout() {
    let Some(url) =
        database_url("a_claim_blocked_by_a_long_transaction_fails_after_the_lock_timeout")
    else {
        return;
    };
    let admin = admin_pool(&url).await;
    let table = idem_tests::postgres_fixture::fresh_name(&admin, "r").await;
    let store = PostgresStore::builder()
        .table(&table)
        .unwrap()
        .lock_timeout(Duration::from_millis(300))
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();

    let (key, fp) = (new_key(), fingerprint("{}"));
    let mut other = admin.begin().await.unwrap();
    insert_record(&mut other, store.table(), &key, &fp, None).await;
    let started = Instant::now();
    let blocked = store.claim(claim(&key, &fp, MINUTE)).await;
    let waited = started.elapsed();
    assert!(
        matches!(blocked, Err(StoreError::Backend(_))),
        "expected a backend error, got {blocked:?}"
    );
    assert!(
        waited >= Duration::from_millis(300),
        "failed before the lock timeout: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");
    other.rollback().await.unwrap();
    assert_eq!(
        store.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    drop_table(&admin, &store.table().to_string()).await;
}

/// Replays, conflicts and mismatches are plain reads: they answer at once even while another
/// transaction holds the record's row lock.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_and_conflicts_do_not_wait_for_row_locks() {
    let Some(url) = database_url("replays_and_conflicts_do_not_wait_for_row_locks") else {
        return;
    };
    let store = fresh_store(&url).await;
    let admin = admin_pool(&url).await;
    let (done, running, fp) = (new_key(), new_key(), fingerprint("{}"));
    let token = LeaseToken::random();
    store
        .claim(Claim {
            token,
            ..claim(&done, &fp, MINUTE)
        })
        .await
        .unwrap();
    store
        .complete(&done, token, &response("{\"ok\":true}"), MINUTE)
        .await
        .unwrap();
    store.claim(claim(&running, &fp, MINUTE)).await.unwrap();

    let mut locker = admin.begin().await.unwrap();
    let lock = format!("SELECT 1 FROM {} FOR UPDATE", store.table());
    sqlx::query(AssertSqlSafe(lock))
        .execute(&mut *locker)
        .await
        .unwrap();

    let other = fingerprint("{\"other\":1}");
    let started = Instant::now();
    assert_eq!(
        store.claim(claim(&done, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Completed(response("{\"ok\":true}"))
    );
    assert_eq!(
        store.claim(claim(&running, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::InFlight
    );
    assert!(matches!(
        store.claim(claim(&done, &other, MINUTE)).await.unwrap(),
        ClaimOutcome::Mismatch {
            stored_algorithm: Some(_)
        }
    ));
    let took = started.elapsed();
    locker.rollback().await.unwrap();
    assert!(
        took < Duration::from_secs(1),
        "the reads waited for the lock: {took:?}"
    );
    drop_table(&admin, &store.table().to_string()).await;
}

/// The SQL files are what `migrate` runs for the default name, and running either gives the
/// same table; running `migrate` again changes nothing.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_file_and_function_are_the_same() {
    let files = [
        include_str!("../../idem-postgres/migrations/001_idempotency_records.sql"),
        include_str!("../../idem-postgres/migrations/002_steps.sql"),
        include_str!("../../idem-postgres/migrations/003_autovacuum.sql"),
    ];
    assert_eq!(migration_files(&TableName::default()), files);
    assert_eq!(migration_sql(&TableName::default()), files.concat());

    let Some(url) = database_url("the_migration_file_and_function_are_the_same") else {
        return;
    };
    let admin = admin_pool(&url).await;
    let schema = fresh_schema(&admin).await;
    // The file, as an operator would run it with psql, with the schema on the search path.
    let mut conn = admin.acquire().await.unwrap();
    let search = format!("SET search_path TO {schema}");
    sqlx::query(AssertSqlSafe(search))
        .execute(&mut *conn)
        .await
        .unwrap();
    for file in files {
        sqlx::raw_sql(file).execute(&mut *conn).await.unwrap();
    }
    sqlx::query("RESET search_path")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    // The function, for another table of the same schema.
    let by_function = format!("{schema}.by_function");
    let store = PostgresStore::builder()
        .table(&by_function)
        .unwrap()
        .build(admin.clone());
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();

    let by_file = describe(&admin, &schema, "idempotency_records").await;
    assert_eq!(by_file, describe(&admin, &schema, "by_function").await);
    assert!(
        by_file.iter().any(|line| line.contains("(expires_at)")),
        "{by_file:#?}"
    );
    assert!(
        by_file
            .iter()
            .any(|line| line.contains("autovacuum_vacuum_scale_factor=0.02")),
        "{by_file:#?}"
    );

    // A store works on the table the file made, and migrating it again is harmless.
    let on_file = PostgresStore::builder()
        .table(&format!("{schema}.idempotency_records"))
        .unwrap()
        .build(admin.clone());
    on_file.migrate().await.unwrap();
    let (key, fp) = (new_key(), fingerprint("{}"));
    assert_eq!(
        on_file.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    drop_schema(&admin, &schema).await;
}

/// A table made by the first migration alone (a service of the version before steps) keeps
/// its records through `migrate`, which adds the second one's columns, while it serves.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_the_first_migration_keeps_its_records_through_the_second() {
    let Some(url) =
        database_url("a_table_of_the_first_migration_keeps_its_records_through_the_second")
    else {
        return;
    };
    let admin = admin_pool(&url).await;
    let schema = fresh_schema(&admin).await;
    let table = TableName::new(&format!("{schema}.idempotency_records")).unwrap();
    let [first, ..] = migration_files(&table);
    sqlx::raw_sql(AssertSqlSafe(first))
        .execute(&admin)
        .await
        .unwrap();
    let (key, fp) = (new_key(), fingerprint("{}"));
    let stored = StoredResponse::new(
        StatusCode::CREATED,
        &HeaderMap::new(),
        &Bytes::from_static(b"{\"id\":\"pay_1\"}"),
    )
    .expect("an encodable response");
    let insert = format!(
        "INSERT INTO {table} (key, fingerprint, state, expires_at, response_status, \
         response_format, response, created_at, updated_at) \
         VALUES ($1, $2, 'completed', now() + interval '1 hour', 201, 1, $3, now(), now())"
    );
    sqlx::query(AssertSqlSafe(insert))
        .bind(key.as_bytes().to_vec())
        .bind(fp.to_bytes().to_vec())
        .bind(stored.as_bytes().to_vec())
        .execute(&admin)
        .await
        .unwrap();
    let store = PostgresStore::builder()
        .table_name(table)
        .build(admin.clone());
    store.migrate().await.unwrap();
    assert_eq!(
        store.claim(claim(&key, &fp, MINUTE)).await.unwrap(),
        ClaimOutcome::Completed(stored)
    );
    drop_schema(&admin, &schema).await;
}

/// The third migration tunes autovacuum on a table without settings of its own, and leaves a
/// table whose operator set any autovacuum parameter as it is.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autovacuum_migration_keeps_settings_of_your_own() {
    let Some(url) = database_url("the_autovacuum_migration_keeps_settings_of_your_own") else {
        return;
    };
    let admin = admin_pool(&url).await;
    let schema = fresh_schema(&admin).await;
    let options = |table: &'static str| {
        let admin = admin.clone();
        let schema = schema.clone();
        async move {
            let options: Vec<String> = sqlx::query_scalar(
                "SELECT unnest(c.reloptions) FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 ORDER BY 1",
            )
            .bind(&schema)
            .bind(table)
            .fetch_all(&admin)
            .await
            .unwrap();
            options
        }
    };
    let store = |table: &str| {
        PostgresStore::builder()
            .table(&format!("{schema}.{table}"))
            .unwrap()
            .build(admin.clone())
    };

    store("tuned").migrate().await.unwrap();
    assert_eq!(
        options("tuned").await,
        [
            "autovacuum_vacuum_scale_factor=0.02",
            "autovacuum_vacuum_threshold=1000"
        ]
    );

    let own = TableName::new(&format!("{schema}.own")).unwrap();
    let [first, ..] = migration_files(&own);
    sqlx::raw_sql(AssertSqlSafe(first))
        .execute(&admin)
        .await
        .unwrap();
    let set = format!("ALTER TABLE {own} SET (autovacuum_vacuum_cost_delay = 5)");
    sqlx::query(AssertSqlSafe(set))
        .execute(&admin)
        .await
        .unwrap();
    store("own").migrate().await.unwrap();
    store("own").migrate().await.unwrap();
    assert_eq!(options("own").await, ["autovacuum_vacuum_cost_delay=5"]);
    drop_schema(&admin, &schema).await;
}

/// Columns, constraints, indexes and storage parameters of a table, with its name taken out.
async fn describe(pool: &PgPool, schema: &str, table: &str) -> Vec<String> {
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT format('column %s %s %s %s', ordinal_position, column_name, data_type, is_nullable) \
         FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 \
         ORDER BY ordinal_position",
    )
    .bind(schema)
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    let constraints: Vec<String> = sqlx::query_scalar(
        "SELECT format('constraint %s', pg_get_constraintdef(c.oid)) \
         FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         WHERE n.nspname = $1 AND t.relname = $2 ORDER BY 1",
    )
    .bind(schema)
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT replace(replace(indexdef, $2, 'T'), indexname, 'I') FROM pg_indexes \
         WHERE schemaname = $1 AND tablename = $2 ORDER BY 1",
    )
    .bind(schema)
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    let options: Vec<String> = sqlx::query_scalar(
        "SELECT format('option %s', option) FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace, unnest(c.reloptions) AS option \
         WHERE n.nspname = $1 AND c.relname = $2 ORDER BY 1",
    )
    .bind(schema)
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(!columns.is_empty(), "{schema}.{table} does not exist");
    [columns, constraints, indexes, options].concat()
}

async fn fresh_schema(pool: &PgPool) -> String {
    let schema = format!("idem_tests_{:016x}", rand::random::<u64>());
    let create = format!("CREATE SCHEMA {schema}");
    sqlx::query(AssertSqlSafe(create))
        .execute(pool)
        .await
        .unwrap();
    schema
}

async fn drop_schema(pool: &PgPool, schema: &str) {
    let drop = format!("DROP SCHEMA {schema} CASCADE");
    sqlx::query(AssertSqlSafe(drop))
        .execute(pool)
        .await
        .unwrap();
}

/// Table names are plain or schema-qualified lowercase identifiers; anything else is refused
/// with a typed error before it reaches SQL. A reserved word works, quoted.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_names_are_checked_and_quoted() {
    let refused = |name: &str| PostgresStore::builder().table(name).err();
    assert_eq!(refused(""), Some(TableNameError::Empty));
    assert!(matches!(
        refused("a.b.c"),
        Some(TableNameError::TooManyParts(_))
    ));
    for bad in [
        "Records",
        "records; DROP TABLE x",
        "idem.\"records\"",
        "1st",
        "re-cords",
    ] {
        assert!(
            matches!(refused(bad), Some(TableNameError::InvalidIdentifier { .. })),
            "{bad:?} was accepted"
        );
    }
    assert!(matches!(
        refused(&"r".repeat(49)),
        Some(TableNameError::TooLong { max: 48, .. })
    ));
    assert!(refused("idem.idempotency_records").is_none());

    let Some(url) = database_url("table_names_are_checked_and_quoted") else {
        return;
    };
    let admin = admin_pool(&url).await;
    let schema = fresh_schema(&admin).await;
    let store = PostgresStore::builder()
        .table(&format!("{schema}.order"))
        .unwrap()
        .build(admin.clone());
    store.migrate().await.unwrap();
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    store
        .claim(Claim {
            token,
            ..claim(&key, &fp, MINUTE)
        })
        .await
        .unwrap();
    store
        .complete(&key, token, &response("{}"), MINUTE)
        .await
        .unwrap();
    assert_eq!(count(&admin, &format!("{schema}.\"order\"")).await, 1);
    drop_schema(&admin, &schema).await;
}

/// The sweeper deletes expired records in batches of the size asked for and keeps live ones,
/// in flight or completed; the background sweeper does the same until stopped.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_deletes_expired_records_in_batches() {
    let Some(url) = database_url("the_sweeper_deletes_expired_records_in_batches") else {
        return;
    };
    let store = fresh_store(&url).await;
    let admin = admin_pool(&url).await;
    let table = store.table().to_string();
    let short = Duration::from_millis(50);
    let fp = fingerprint("{}");
    // 25 expired: 15 completed with a short TTL, 10 abandoned claims.
    for i in 0..25 {
        let (key, token) = (new_key(), LeaseToken::random());
        let lapsing = Claim {
            key: &key,
            fingerprint: &fp,
            token,
            lease: short,
            ttl: short,
            resumable: None,
        };
        store.claim(lapsing).await.unwrap();
        if i < 15 {
            store
                .complete(&key, token, &response("{}"), short)
                .await
                .unwrap();
        }
    }
    // 5 live: 3 completed, 2 in flight.
    for i in 0..5 {
        let (key, token) = (new_key(), LeaseToken::random());
        store
            .claim(Claim {
                token,
                ..claim(&key, &fp, MINUTE)
            })
            .await
            .unwrap();
        if i < 3 {
            store
                .complete(&key, token, &response("{}"), MINUTE)
                .await
                .unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(&admin, &table).await, 30);

    assert_eq!(store.sweep_batch(10).await.unwrap(), 10);
    assert_eq!(count(&admin, &table).await, 20);
    assert_eq!(store.sweep(10).await.unwrap(), 15);
    assert_eq!(count(&admin, &table).await, 5);
    assert_eq!(store.sweep(10).await.unwrap(), 0);

    // The background sweeper.
    for _ in 0..7 {
        let key = new_key();
        let lapsing = Claim {
            key: &key,
            fingerprint: &fp,
            token: LeaseToken::random(),
            lease: short,
            ttl: short,
            resumable: None,
        };
        store.claim(lapsing).await.unwrap();
    }
    assert_eq!(count(&admin, &table).await, 12);
    let sweeper = store.spawn_sweeper(Duration::from_millis(100));
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&admin, &table).await > 5 {
        assert!(
            Instant::now() < deadline,
            "the background sweeper deleted nothing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sweeper.stop().await;
    assert_eq!(count(&admin, &table).await, 5, "live records must be kept");
    drop_table(&admin, &store.table().to_string()).await;
}

/// Writes completed records numbered `numbers` that expired a minute ago, in one statement.
async fn insert_expired(pool: &PgPool, table: &str, numbers: std::ops::Range<i32>) {
    let insert = format!(
        "INSERT INTO {table} (key, fingerprint, state, expires_at, response_status, \
         response_format, response, created_at, updated_at) \
         SELECT sha256(int4send(i)), $3, 'completed', now() - interval '1 minute', 201, 1, $4, \
         now(), now() FROM generate_series($1, $2) AS i"
    );
    sqlx::query(AssertSqlSafe(insert))
        .bind(numbers.start)
        .bind(numbers.end - 1)
        .bind(fingerprint("{}").to_bytes().to_vec())
        .bind(response("{\"id\":1}").as_bytes().to_vec())
        .execute(pool)
        .await
        .unwrap();
}

/// Waits until `table` holds `rows` rows or fewer, failing after a minute.
async fn wait_for_count(pool: &PgPool, table: &str, rows: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(pool, table).await > rows {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A paced sweeper works off a backlog many batches long and keeps the live records; a stop
/// request ends it while it rests between batches.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_sweeper_clears_a_backlog_and_stops_when_asked() {
    let Some(url) = database_url("a_paced_sweeper_clears_a_backlog_and_stops_when_asked") else {
        return;
    };
    let store = fresh_store(&url).await;
    let admin = admin_pool(&url).await;
    let table = store.table().to_string();
    insert_expired(&admin, &table, 0..3000).await;
    let fp = fingerprint("{}");
    for _ in 0..5 {
        let (key, token) = (new_key(), LeaseToken::random());
        let live = Claim {
            token,
            ..claim(&key, &fp, MINUTE)
        };
        store.claim(live).await.unwrap();
        store
            .complete(&key, token, &response("{}"), MINUTE)
            .await
            .unwrap();
    }
    assert_eq!(count(&admin, &table).await, 3005);

    // Thirty batches of 100, each followed by a rest nine times its length.
    let every = Duration::from_secs(3600);
    let sweeper = store.spawn_sweeper_with(every, SweepPace::default().batch(100));
    wait_for_count(&admin, &table, 5, "the paced sweeper left expired records").await;
    sweeper.stop().await;
    assert_eq!(count(&admin, &table).await, 5, "live records must be kept");

    // Busy a millionth of the time: after its first batch the sweeper rests a million times
    // as long as the batch took, minutes at the least. The stop request ends that rest.
    insert_expired(&admin, &table, 3000..3300).await;
    let slow = SweepPace::default().batch(100).busy(1e-6).unwrap();
    let resting = store.spawn_sweeper_with(every, slow);
    wait_for_count(&admin, &table, 205, "the first batch deleted nothing").await;
    tokio::time::timeout(Duration::from_secs(60), resting.stop())
        .await
        .expect("a stop request ends the sweeper's rest");
    assert_eq!(count(&admin, &table).await, 205, "one batch, then the rest");
    drop_table(&admin, &table).await;
}

/// Recorded steps that do not decode make the claim that would resume them a `Corrupt` error,
/// every time: never a panic, never a run that would do the steps again.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_steps_that_do_not_decode_are_a_store_error() {
    let Some(url) = database_url("recorded_steps_that_do_not_decode_are_a_store_error") else {
        return;
    };
    let store = fresh_store(&url).await;
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let mine = Claim {
        token,
        ..claim(&key, &fp, MINUTE)
    };
    assert_eq!(store.claim(mine).await.unwrap(), ClaimOutcome::Claimed);
    let step = RecordedStep::new("bank", Bytes::from_static(b"{}"));
    store.record_step(&key, token, 0, &step).await.unwrap();
    store.suspend(&key, token, None).await.unwrap();
    let damage = format!(
        "UPDATE {} SET steps = '\\x0700'::bytea WHERE key = $1",
        store.table()
    );
    sqlx::query(AssertSqlSafe(damage))
        .bind(key.as_bytes().to_vec())
        .execute(store.pool())
        .await
        .unwrap();
    for attempt in ["first", "second"] {
        let answer = store.claim(claim(&key, &fp, MINUTE)).await;
        assert!(
            matches!(answer, Err(StoreError::Corrupt(_))),
            "{attempt} claim: {answer:?}"
        );
    }
    drop_table(&admin_pool(&url).await, &store.table().to_string()).await;
}

/// A kept request that does not decode is answered as such by `due`, for the resumer to log;
/// the other operations due are answered as usual.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_request_that_does_not_decode_is_reported_by_due() {
    let Some(url) = database_url("a_kept_request_that_does_not_decode_is_reported_by_due") else {
        return;
    };
    let store = fresh_store(&url).await;
    let request = KeptRequest::new(
        Method::POST,
        "/transfers",
        IdempotencyKey::new("k").unwrap(),
        None,
        HeaderMap::new(),
        Bytes::from_static(b"{}"),
    );
    let fp = fingerprint("{}");
    let (good, bad) = (new_key(), new_key());
    for key in [&good, &bad] {
        let token = LeaseToken::random();
        let resumable = Claim {
            token,
            resumable: Some(Resumable {
                request: &request,
                after: Duration::ZERO,
            }),
            ..claim(key, &fp, MINUTE)
        };
        assert_eq!(store.claim(resumable).await.unwrap(), ClaimOutcome::Claimed);
        store
            .suspend(key, token, Some(Duration::ZERO))
            .await
            .unwrap();
    }
    let damage = format!(
        "UPDATE {} SET request = 'not a request'::bytea WHERE key = $1",
        store.table()
    );
    sqlx::query(AssertSqlSafe(damage))
        .bind(bad.as_bytes().to_vec())
        .execute(store.pool())
        .await
        .unwrap();
    let due = store.due(10, MINUTE).await.unwrap();
    assert_eq!(due.len(), 2, "{due:?}");
    for operation in due {
        if operation.key == good {
            assert_eq!(operation.request.unwrap(), request);
        } else {
            assert_eq!(operation.key, bad);
            assert!(operation.request.is_err(), "{operation:?}");
        }
    }
    drop_table(&admin_pool(&url).await, &store.table().to_string()).await;
}
