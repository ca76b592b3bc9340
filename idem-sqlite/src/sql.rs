//! The statements of the store, written once per table name, and their parameters.
//!
//! Times are integers, microseconds since the Unix epoch, and every statement reads the time
//! from SQLite itself (`{now}` below), which gives the same instant to every use within one
//! statement. SQLite's clock is the machine's, to the millisecond: every process on the file
//! shares it, so all of them agree on leases and TTLs.

use std::{sync::Arc, time::Duration};

use sqlx::{
    AssertSqlSafe, SqlSafeStr, SqlStr, Sqlite,
    query::{Query, QueryScalar},
    sqlite::SqliteArguments,
};

use super::table::TableName;
use idem_core::{
    fingerprint::Fingerprint,
    replay::StoredResponse,
    scope::StoreKey,
    store::{Claim, LeaseToken, operation::RecordedStep},
};

/// The version of [`StoredResponse::as_bytes`]'s format the store writes, kept in the
/// `response_format` column.
pub(crate) const RESPONSE_FORMAT: i16 = 1;

/// The longest duration written to the database; longer leases and TTLs are cut to it.
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// Now, in microseconds since the epoch. `unixepoch('subsec')` is in seconds, to the
/// millisecond, as a float: rounded to whole milliseconds before it becomes an integer, so
/// that no float error moves an instant by a microsecond.
const NOW: &str = "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)";

/// The claim's read: a snapshot of the record, which waits for no writer (WAL). The response
/// and the steps come only with the same fingerprint (`?1`), the only case that uses them.
const READ: &str = "\
SELECT state,
       fingerprint,
       expires_at <= {now} AS expired,
       state = 'in_flight' AND lease_expires_at <= {now} AS lapsed,
       iif(fingerprint = ?1, response_format, NULL) AS response_format,
       iif(fingerprint = ?1, response, NULL) AS response,
       step_count,
       suspensions,
       iif(fingerprint = ?1, steps, NULL) AS steps
FROM {table}
WHERE store_key = ?2";

/// The claim of an absent key: an insert that the primary key lets one claim win; the others
/// insert nothing and read again.
const INSERT: &str = "\
INSERT INTO {table}
    (store_key, fingerprint, state, lease_token, lease_expires_at, expires_at,
     created_at, updated_at, request, resume_after_us, resume_at)
VALUES (?1, ?2, 'in_flight', ?3, {now} + ?4, {now} + ?5, {now}, {now}, ?6, ?7, {now} + ?8)
ON CONFLICT (store_key) DO NOTHING";

/// The claim of a record that may be replaced: expired, or in flight under a lapsed lease with
/// the same fingerprint, and still what the read saw: as live or expired, with as many steps
/// and suspensions (the write lock makes the check and the write one step). Taking over a live
/// record keeps its steps, its suspensions, its start and its expiry (at least the lease);
/// replacing an expired one starts afresh. Every expression sees the row as it was before.
const TAKE_OVER: &str = "\
UPDATE {table} SET
    steps = iif(expires_at > {now}, steps, NULL),
    step_count = iif(expires_at > {now}, step_count, 0),
    suspensions = iif(expires_at > {now}, suspensions, 0),
    created_at = iif(expires_at > {now}, created_at, {now}),
    expires_at = iif(expires_at > {now} AND (step_count > 0 OR suspensions > 0),
                     max(expires_at, {now} + ?1),
                     {now} + ?2),
    fingerprint = ?3,
    state = 'in_flight',
    lease_token = ?4,
    lease_expires_at = {now} + ?1,
    request = ?5,
    resume_after_us = ?6,
    resume_at = {now} + ?7,
    response_status = NULL,
    response_format = NULL,
    response = NULL,
    updated_at = {now}
WHERE store_key = ?8
  AND (expires_at <= {now}
       OR (state = 'in_flight' AND lease_expires_at <= {now} AND fingerprint = ?3))
  AND (expires_at > {now}) = ?9
  AND step_count = ?10 AND suspensions = ?11";

/// The fenced completion: only the holder of a live in-flight record completes it. The token
/// stays with the completed record, so that the holder's completion sent again (after the
/// answer to the first was lost) is recognised by [`COMPLETED`].
const COMPLETE: &str = "\
UPDATE {table} SET
    state = 'completed',
    lease_expires_at = NULL,
    response_status = ?1,
    response_format = ?2,
    response = ?3,
    expires_at = {now} + ?4,
    steps = NULL,
    step_count = 0,
    request = NULL,
    resume_after_us = NULL,
    resume_at = NULL,
    updated_at = {now}
WHERE store_key = ?5 AND lease_token = ?6 AND state = 'in_flight'
  AND expires_at > {now}";

/// Whether the holder of `?2` already completed the record: the answer to a completion that
/// found nothing in flight.
const COMPLETED: &str = "\
SELECT count(*) FROM {table}
WHERE store_key = ?1 AND lease_token = ?2 AND state = 'completed'
  AND expires_at > {now}";

/// The fenced renewal: the lease runs `?1` from now, and the record lives at least as long;
/// a resumable operation is due for resumption `resume_after` past the new lease.
const RENEW: &str = "\
UPDATE {table} SET
    lease_expires_at = {now} + ?1,
    expires_at = max(expires_at, {now} + ?1),
    resume_at = {now} + ?1 + resume_after_us,
    updated_at = {now}
WHERE store_key = ?2 AND lease_token = ?3 AND state = 'in_flight'
  AND expires_at > {now}";

/// The fenced release.
const RELEASE: &str = "\
DELETE FROM {table}
WHERE store_key = ?1 AND lease_token = ?2 AND state = 'in_flight'
  AND expires_at > {now}";

/// The fenced suspension (store rule 12): the lease ends now, the steps stay, and a resumable
/// operation is due for resumption `?1` microseconds from now (never, when it is NULL).
const SUSPEND: &str = "\
UPDATE {table} SET
    lease_expires_at = {now},
    suspensions = suspensions + 1,
    resume_at = iif(request IS NOT NULL, {now} + ?1, NULL),
    updated_at = {now}
WHERE store_key = ?2 AND lease_token = ?3 AND state = 'in_flight'
  AND expires_at > {now}";

/// The fenced recording of step `?4` (store rule 11): appended only to a record that holds
/// exactly that many steps. `||` works on text, so both sides are blobs made text and the
/// result made a blob again: bytes in, the same bytes out, NULs included.
const RECORD_STEP: &str = "\
UPDATE {table} SET
    steps = CAST(coalesce(steps, x'') || ?1 AS BLOB),
    step_count = step_count + 1,
    updated_at = {now}
WHERE store_key = ?2 AND lease_token = ?3 AND state = 'in_flight'
  AND expires_at > {now} AND step_count = ?4";

/// Whether the holder already recorded the step at `?3`: the answer to a recording that
/// found the record holding another count of steps.
const STEP_RECORDED: &str = "\
SELECT count(*) FROM {table}
WHERE store_key = ?1 AND lease_token = ?2 AND state = 'in_flight'
  AND expires_at > {now} AND step_count > ?3";

/// The operations due for resumption (store rule 13), the longest due first, chosen and
/// deferred by `?2` microseconds in one statement: no other resumer, in this process or
/// another, is handed the same operation until then.
const DUE: &str = "\
UPDATE {table} SET resume_at = {now} + ?2
WHERE store_key IN (
    SELECT store_key FROM {table}
    WHERE resume_at <= {now}
      AND state = 'in_flight'
      AND request IS NOT NULL
      AND lease_expires_at <= {now}
      AND expires_at > {now}
    ORDER BY resume_at
    LIMIT ?1)
RETURNING store_key, request, suspensions";

/// What is held for a key (store rule 14): a live record's times as microseconds since the
/// epoch, its state, and the first 4 bytes of a completed record's response (its version,
/// body kind and status) rather than the response.
const LOOK_UP: &str = "\
SELECT {now} AS now_us,
       state,
       created_at AS since_us,
       updated_at AS updated_us,
       lease_expires_at AS lease_us,
       expires_at AS expires_us,
       response_format,
       substr(response, 1, 4) AS head,
       length(response) AS bytes,
       steps,
       suspensions,
       iif(request IS NOT NULL, resume_at, NULL) AS resume_us
FROM {table}
WHERE store_key = ?1 AND expires_at > {now}";

/// The removal (store rule 15), unfenced: the row goes whatever holds it, and says what it
/// was.
const REMOVE: &str = "\
DELETE FROM {table} WHERE store_key = ?1
RETURNING state, expires_at > {now} AS live";

/// The sweeper's batch: the oldest expired records, chosen and deleted in one statement.
const SWEEP: &str = "\
DELETE FROM {table}
WHERE store_key IN (
    SELECT store_key FROM {table}
    WHERE expires_at <= {now}
    ORDER BY expires_at
    LIMIT ?1)";

/// A query with the store's parameters.
pub(crate) type Statement = Query<'static, Sqlite, SqliteArguments>;
/// A query answering one number.
pub(crate) type Count = QueryScalar<'static, Sqlite, i64, SqliteArguments>;

/// The statements for one table.
#[derive(Debug)]
pub(crate) struct Statements {
    read: SqlStr,
    insert: SqlStr,
    take_over: SqlStr,
    complete: SqlStr,
    completed: SqlStr,
    renew: SqlStr,
    release: SqlStr,
    suspend: SqlStr,
    record_step: SqlStr,
    step_recorded: SqlStr,
    due: SqlStr,
    look_up: SqlStr,
    remove: SqlStr,
    sweep: SqlStr,
}

/// What the claim's read saw, which its takeover checks the record still is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen {
    pub(crate) live: bool,
    pub(crate) step_count: i64,
    pub(crate) suspensions: i64,
}

/// `template` with the table and the clock in place.
pub(crate) fn fill(template: &str, table: &TableName) -> String {
    template
        .replace("{table}", &table.quoted())
        .replace("{now}", NOW)
}

impl Statements {
    pub(crate) fn new(table: &TableName) -> Self {
        // The name was checked by `TableName::new`: plain identifiers, quoted.
        let render =
            |template: &str| AssertSqlSafe(Arc::<str>::from(fill(template, table))).into_sql_str();
        Self {
            read: render(READ),
            insert: render(INSERT),
            take_over: render(TAKE_OVER),
            complete: render(COMPLETE),
            completed: render(COMPLETED),
            renew: render(RENEW),
            release: render(RELEASE),
            suspend: render(SUSPEND),
            record_step: render(RECORD_STEP),
            step_recorded: render(STEP_RECORDED),
            due: render(DUE),
            look_up: render(LOOK_UP),
            remove: render(REMOVE),
            sweep: render(SWEEP),
        }
    }

    pub(crate) fn read(&self, claim: &Claim<'_>) -> Statement {
        sqlx::query(self.read.clone())
            .bind(fingerprint(claim.fingerprint))
            .bind(key(claim.key))
    }

    pub(crate) fn insert(&self, claim: &Claim<'_>) -> Statement {
        sqlx::query(self.insert.clone())
            .bind(key(claim.key))
            .bind(fingerprint(claim.fingerprint))
            .bind(token(claim.token))
            .bind(micros(claim.lease))
            .bind(micros(claim.in_flight_lifetime()))
            .bind(claim.resumable.map(|resumable| resumable.request.encode()))
            .bind(claim.resumable.map(|resumable| micros(resumable.after)))
            .bind(
                claim
                    .resumable
                    .map(|resumable| micros(claim.lease.saturating_add(resumable.after))),
            )
    }

    pub(crate) fn take_over(&self, claim: &Claim<'_>, seen: Seen) -> Statement {
        sqlx::query(self.take_over.clone())
            .bind(micros(claim.lease))
            .bind(micros(claim.in_flight_lifetime()))
            .bind(fingerprint(claim.fingerprint))
            .bind(token(claim.token))
            .bind(claim.resumable.map(|resumable| resumable.request.encode()))
            .bind(claim.resumable.map(|resumable| micros(resumable.after)))
            .bind(
                claim
                    .resumable
                    .map(|resumable| micros(claim.lease.saturating_add(resumable.after))),
            )
            .bind(key(claim.key))
            .bind(seen.live)
            .bind(seen.step_count)
            .bind(seen.suspensions)
    }

    pub(crate) fn complete(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Statement {
        sqlx::query(self.complete.clone())
            .bind(i64::from(response.status().as_u16()))
            .bind(RESPONSE_FORMAT)
            .bind(response.as_bytes().to_vec())
            .bind(micros(ttl))
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn completed(&self, key_: &StoreKey, token_: LeaseToken) -> Count {
        sqlx::query_scalar(self.completed.clone())
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn renew(&self, key_: &StoreKey, token_: LeaseToken, lease: Duration) -> Statement {
        sqlx::query(self.renew.clone())
            .bind(micros(lease))
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn release(&self, key_: &StoreKey, token_: LeaseToken) -> Statement {
        sqlx::query(self.release.clone())
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn suspend(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Statement {
        sqlx::query(self.suspend.clone())
            .bind(resume_in.map(micros))
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn record_step(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Statement {
        sqlx::query(self.record_step.clone())
            .bind(step.encode())
            .bind(key(key_))
            .bind(token(token_))
            .bind(count(index))
    }

    pub(crate) fn step_recorded(&self, key_: &StoreKey, token_: LeaseToken, index: usize) -> Count {
        sqlx::query_scalar(self.step_recorded.clone())
            .bind(key(key_))
            .bind(token(token_))
            .bind(count(index))
    }

    /// Chooses at most `limit` due operations and defers them by `hold`.
    pub(crate) fn due(&self, limit: usize, hold: Duration) -> Statement {
        sqlx::query(self.due.clone())
            .bind(count(limit))
            .bind(micros(hold))
    }

    pub(crate) fn look_up(&self, key_: &StoreKey) -> Statement {
        sqlx::query(self.look_up.clone()).bind(key(key_))
    }

    pub(crate) fn remove(&self, key_: &StoreKey) -> Statement {
        sqlx::query(self.remove.clone()).bind(key(key_))
    }

    pub(crate) fn sweep(&self, batch: u32) -> Statement {
        sqlx::query(self.sweep.clone()).bind(i64::from(batch))
    }
}

pub(crate) fn key(key: &StoreKey) -> Vec<u8> {
    key.as_bytes().to_vec()
}

fn fingerprint(fingerprint: &Fingerprint) -> Vec<u8> {
    fingerprint.to_bytes().to_vec()
}

fn token(token: LeaseToken) -> Vec<u8> {
    token.to_bytes().to_vec()
}

fn count(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A duration in whole microseconds (rounded up), capped at 100 years.
fn micros(duration: Duration) -> i64 {
    let micros = duration.min(LONGEST).as_nanos().div_ceil(1000);
    i64::try_from(micros).expect("100 years of microseconds fit in i64")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up_to_microseconds_and_are_capped() {
        assert_eq!(micros(Duration::from_nanos(1)), 1);
        assert_eq!(micros(Duration::from_millis(300)), 300_000);
        assert_eq!(
            micros(Duration::MAX),
            i64::try_from(LONGEST.as_micros()).unwrap()
        );
    }

    #[test]
    fn statements_name_the_quoted_table_and_read_the_clock_to_the_millisecond() {
        let statements = Statements::new(&TableName::new("idem.records").unwrap());
        for sql in [
            &statements.read,
            &statements.insert,
            &statements.take_over,
            &statements.complete,
            &statements.completed,
            &statements.renew,
            &statements.release,
            &statements.suspend,
            &statements.record_step,
            &statements.step_recorded,
            &statements.due,
            &statements.look_up,
            &statements.remove,
            &statements.sweep,
        ] {
            let sql = sql.as_str();
            assert!(sql.contains("\"idem\".\"records\""), "{sql}");
            assert!(!sql.contains('{'), "{sql}");
            // `unixepoch()` without 'subsec' is whole seconds, which would cut every lease.
            assert!(!sql.contains("unixepoch()"), "{sql}");
        }
    }
}
