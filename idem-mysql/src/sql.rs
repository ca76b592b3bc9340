//! The statements of the store, written once per table name, and their parameters.
//!
//! Every statement reads the time from the server, as `UTC_TIMESTAMP(6)`: UTC whatever the
//! session's `time_zone`, to the microsecond (`UTC_TIMESTAMP()` without the 6 is whole
//! seconds), and fixed for the statement, so all instances agree on leases and TTLs. Columns
//! are `DATETIME(6)`, which store what they are given, with no time zone conversion.

use std::{sync::Arc, time::Duration};

use sqlx::{
    AssertSqlSafe, MySql, SqlSafeStr, SqlStr,
    mysql::MySqlArguments,
    query::{Query, QueryScalar},
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

/// The claim's read: a consistent read of the record, which locks nothing. The response and
/// the steps come only with the same fingerprint (`?` 2 and 3), the only case that uses them.
const READ: &str = "\
SELECT state,
       fingerprint,
       expires_at <= UTC_TIMESTAMP(6) AS expired,
       state = 'in_flight' AND lease_expires_at <= UTC_TIMESTAMP(6) AS lapsed,
       IF(fingerprint = ?, response_format, NULL) AS response_format,
       IF(fingerprint = ?, response, NULL) AS response,
       step_count,
       suspensions,
       IF(fingerprint = ?, steps, NULL) AS steps
FROM {table}
WHERE store_key = ?";

/// The claim of an absent key: a plain insert, which the primary key lets one claim win.
const INSERT: &str = "\
INSERT INTO {table}
    (store_key, fingerprint, state, lease_token, lease_expires_at, expires_at,
     created_at, updated_at, request, resume_after_us, resume_at)
VALUES (?, ?, 'in_flight', ?,
        UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
        UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
        UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
        ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

/// The claim of a record that may be replaced: expired, or in flight under a lapsed lease with
/// the same fingerprint. Checked against the latest committed row, under its lock (an `UPDATE`
/// reads no snapshot), and only if the record is still what the read saw: as live or expired,
/// with as many steps and suspensions. Taking over a live record keeps its steps, its
/// suspensions, its start and its expiry (at least the lease); replacing an expired one starts
/// afresh.
///
/// MySQL assigns left to right, each assignment seeing the ones before it: every column that
/// depends on the record's old expiry is assigned before `expires_at`.
const TAKE_OVER: &str = "\
UPDATE {table} SET
    steps = IF(expires_at > UTC_TIMESTAMP(6), steps, NULL),
    step_count = IF(expires_at > UTC_TIMESTAMP(6), step_count, 0),
    suspensions = IF(expires_at > UTC_TIMESTAMP(6), suspensions, 0),
    created_at = IF(expires_at > UTC_TIMESTAMP(6), created_at, UTC_TIMESTAMP(6)),
    expires_at = IF(expires_at > UTC_TIMESTAMP(6) AND (step_count > 0 OR suspensions > 0),
                    GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
                    UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
    fingerprint = ?,
    state = 'in_flight',
    lease_token = ?,
    lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    request = ?,
    resume_after_us = ?,
    resume_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    response_status = NULL,
    response_format = NULL,
    response = NULL,
    updated_at = UTC_TIMESTAMP(6)
WHERE store_key = ?
  AND (expires_at <= UTC_TIMESTAMP(6)
       OR (state = 'in_flight' AND lease_expires_at <= UTC_TIMESTAMP(6) AND fingerprint = ?))
  AND (expires_at > UTC_TIMESTAMP(6)) = ?
  AND step_count = ? AND suspensions = ?";

/// The fenced completion: only the holder of a live in-flight record completes it. The token
/// stays with the completed record, so that the holder's completion sent again (after the
/// answer to the first was lost) is recognised by [`COMPLETED`].
const COMPLETE: &str = "\
UPDATE {table} SET
    state = 'completed',
    lease_expires_at = NULL,
    response_status = ?,
    response_format = ?,
    response = ?,
    expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    steps = NULL,
    step_count = 0,
    request = NULL,
    resume_after_us = NULL,
    resume_at = NULL,
    updated_at = UTC_TIMESTAMP(6)
WHERE store_key = ? AND lease_token = ? AND state = 'in_flight'
  AND expires_at > UTC_TIMESTAMP(6)";

/// Whether the holder of `?` 2 already completed the record: the answer to a completion that
/// found nothing in flight.
const COMPLETED: &str = "\
SELECT count(*) FROM {table}
WHERE store_key = ? AND lease_token = ? AND state = 'completed'
  AND expires_at > UTC_TIMESTAMP(6)";

/// The fenced renewal: the lease runs `?` 1 from now, and the record lives at least as long;
/// a resumable operation is due for resumption `resume_after` past the new lease.
const RENEW: &str = "\
UPDATE {table} SET
    lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
    resume_at = UTC_TIMESTAMP(6) + INTERVAL (? + resume_after_us) MICROSECOND,
    updated_at = UTC_TIMESTAMP(6)
WHERE store_key = ? AND lease_token = ? AND state = 'in_flight'
  AND expires_at > UTC_TIMESTAMP(6)";

/// The fenced release.
const RELEASE: &str = "\
DELETE FROM {table}
WHERE store_key = ? AND lease_token = ? AND state = 'in_flight'
  AND expires_at > UTC_TIMESTAMP(6)";

/// The fenced suspension (store rule 12): the lease ends now, the steps stay, and a resumable
/// operation is due for resumption `?` 1 microseconds from now (never, when it is NULL).
const SUSPEND: &str = "\
UPDATE {table} SET
    lease_expires_at = UTC_TIMESTAMP(6),
    suspensions = suspensions + 1,
    resume_at = IF(request IS NOT NULL, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, NULL),
    updated_at = UTC_TIMESTAMP(6)
WHERE store_key = ? AND lease_token = ? AND state = 'in_flight'
  AND expires_at > UTC_TIMESTAMP(6)";

/// The fenced recording of step `?` 4 (store rule 11): appended only to a record that holds
/// exactly that many steps. `CONCAT`, not `||`, which is `OR` unless `sql_mode` says
/// `PIPES_AS_CONCAT`.
const RECORD_STEP: &str = "\
UPDATE {table} SET
    steps = CONCAT(COALESCE(steps, ''), ?),
    step_count = step_count + 1,
    updated_at = UTC_TIMESTAMP(6)
WHERE store_key = ? AND lease_token = ? AND state = 'in_flight'
  AND expires_at > UTC_TIMESTAMP(6) AND step_count = ?";

/// Whether the holder already recorded the step at `?` 3: the answer to a recording that
/// found the record holding another count of steps.
const STEP_RECORDED: &str = "\
SELECT count(*) FROM {table}
WHERE store_key = ? AND lease_token = ? AND state = 'in_flight'
  AND expires_at > UTC_TIMESTAMP(6) AND step_count > ?";

/// The operations due for resumption (store rule 13), the longest due first, skipping rows
/// that a claim or another instance's resumer has locked.
const DUE: &str = "\
SELECT store_key, request, suspensions FROM {table}
WHERE resume_at <= UTC_TIMESTAMP(6)
  AND state = 'in_flight'
  AND request IS NOT NULL
  AND lease_expires_at <= UTC_TIMESTAMP(6)
  AND expires_at > UTC_TIMESTAMP(6)
ORDER BY resume_at
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Defers the due operations just read (the keys) by the last `?`, in microseconds.
const DEFER: &str = "\
UPDATE {table} AS record JOIN ({keys}) AS chosen ON record.store_key = chosen.store_key
SET record.resume_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND";

/// What is held for a key (store rule 14): a live record's times as microseconds since the
/// epoch on the server's clock, its state, and the first 4 bytes of a completed record's
/// response (its version, body kind and status) rather than the response.
const LOOK_UP: &str = "\
SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) AS now_us,
       state,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', created_at) AS since_us,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', updated_at) AS updated_us,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', lease_expires_at) AS lease_us,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at) AS expires_us,
       response_format,
       SUBSTRING(response, 1, 4) AS head,
       CAST(LENGTH(response) AS SIGNED) AS bytes,
       steps,
       suspensions,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', IF(request IS NOT NULL, resume_at, NULL))
           AS resume_us
FROM {table}
WHERE store_key = ? AND expires_at > UTC_TIMESTAMP(6)";

/// The removal's look at the row it is about to delete (store rule 15), under its lock.
const REMOVING: &str = "\
SELECT state, expires_at > UTC_TIMESTAMP(6) AS live FROM {table}
WHERE store_key = ?
FOR UPDATE";

/// The removal, unfenced: the row goes whatever holds it.
const REMOVE: &str = "DELETE FROM {table} WHERE store_key = ?";

/// The sweeper's choice of a batch: the oldest expired records, skipping locked rows.
const EXPIRED: &str = "\
SELECT store_key FROM {table}
WHERE expires_at <= UTC_TIMESTAMP(6)
ORDER BY expires_at
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// The sweeper's deletion of the batch it chose (the keys). The rows are locked by the
/// statement that chose them, so they are still expired. The keys are a derived table joined
/// on the primary key rather than a `WHERE store_key IN (...)`, for which the optimizer may
/// scan the table instead (a small one, or with many keys): a `DELETE` that scans locks every
/// row it reads, and would wait for the expired rows another transaction holds, which the
/// choice skipped.
const SWEEP: &str = "\
DELETE record FROM {table} AS record
JOIN ({keys}) AS chosen ON record.store_key = chosen.store_key";

/// A query with the store's parameters.
pub(crate) type Statement = Query<'static, MySql, MySqlArguments>;

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
    removing: SqlStr,
    remove: SqlStr,
    expired: SqlStr,
    /// `DEFER` and `SWEEP` with `{table}` in place and `{keys}` still to fill.
    defer: String,
    sweep: String,
}

/// What the claim's read saw, which its takeover checks the record still is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen {
    pub(crate) live: bool,
    pub(crate) step_count: i32,
    pub(crate) suspensions: i32,
}

impl Statements {
    pub(crate) fn new(table: &TableName) -> Self {
        let quoted = table.quoted();
        let fill = |template: &str| template.replace("{table}", &quoted);
        // The name was checked by `TableName::new`: plain identifiers, quoted.
        let render =
            |template: &str| AssertSqlSafe(Arc::<str>::from(fill(template))).into_sql_str();
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
            removing: render(REMOVING),
            remove: render(REMOVE),
            expired: render(EXPIRED),
            defer: fill(DEFER),
            sweep: fill(SWEEP),
        }
    }

    pub(crate) fn read(&self, claim: &Claim<'_>) -> Statement {
        let fingerprint = fingerprint(claim.fingerprint);
        sqlx::query(self.read.clone())
            .bind(fingerprint.clone())
            .bind(fingerprint.clone())
            .bind(fingerprint)
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
        let fingerprint = fingerprint(claim.fingerprint);
        sqlx::query(self.take_over.clone())
            .bind(micros(claim.lease))
            .bind(micros(claim.in_flight_lifetime()))
            .bind(fingerprint.clone())
            .bind(token(claim.token))
            .bind(micros(claim.lease))
            .bind(claim.resumable.map(|resumable| resumable.request.encode()))
            .bind(claim.resumable.map(|resumable| micros(resumable.after)))
            .bind(
                claim
                    .resumable
                    .map(|resumable| micros(claim.lease.saturating_add(resumable.after))),
            )
            .bind(key(claim.key))
            .bind(fingerprint)
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
            .bind(response.status().as_u16())
            .bind(RESPONSE_FORMAT)
            .bind(response.as_bytes().to_vec())
            .bind(micros(ttl))
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn completed(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
    ) -> QueryScalar<'static, MySql, i64, MySqlArguments> {
        sqlx::query_scalar(self.completed.clone())
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(crate) fn renew(&self, key_: &StoreKey, token_: LeaseToken, lease: Duration) -> Statement {
        sqlx::query(self.renew.clone())
            .bind(micros(lease))
            .bind(micros(lease))
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
            .bind(i32::try_from(index).unwrap_or(i32::MAX))
    }

    pub(crate) fn step_recorded(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        index: usize,
    ) -> QueryScalar<'static, MySql, i64, MySqlArguments> {
        sqlx::query_scalar(self.step_recorded.clone())
            .bind(key(key_))
            .bind(token(token_))
            .bind(i32::try_from(index).unwrap_or(i32::MAX))
    }

    pub(crate) fn due(&self, limit: usize) -> Statement {
        sqlx::query(self.due.clone()).bind(i64::try_from(limit).unwrap_or(i64::MAX))
    }

    /// Defers the operations `keys` by `hold`.
    pub(crate) fn defer(&self, keys: &[Vec<u8>], hold: Duration) -> Statement {
        keyed(&self.defer, keys, Some(micros(hold)))
    }

    pub(crate) fn look_up(&self, key_: &StoreKey) -> Statement {
        sqlx::query(self.look_up.clone()).bind(key(key_))
    }

    pub(crate) fn removing(&self, key_: &StoreKey) -> Statement {
        sqlx::query(self.removing.clone()).bind(key(key_))
    }

    pub(crate) fn remove(&self, key_: &StoreKey) -> Statement {
        sqlx::query(self.remove.clone()).bind(key(key_))
    }

    pub(crate) fn expired(&self, batch: u32) -> Statement {
        sqlx::query(self.expired.clone()).bind(batch)
    }

    /// Deletes the expired records `keys`, which [`expired`](Self::expired) chose.
    pub(crate) fn sweep(&self, keys: &[Vec<u8>]) -> Statement {
        keyed(&self.sweep, keys, None)
    }
}

/// `template` with `{keys}` a derived table of the keys, one placeholder each, and the keys
/// then `last` (if any) bound. The list is padded to a power of two with the last key (which
/// joins the row it names once all the same), so that a few statement texts, prepared once
/// each, serve every batch.
fn keyed(template: &str, keys: &[Vec<u8>], last: Option<i64>) -> Statement {
    let slots = keys.len().max(1).next_power_of_two();
    let derived = vec!["SELECT ? AS store_key"; slots].join(" UNION ALL ");
    // The text is the checked table name and placeholders: nothing from input.
    let sql = AssertSqlSafe(template.replace("{keys}", &derived));
    let mut query = sqlx::query(sql);
    let padding = keys.last().cloned().unwrap_or_default();
    for index in 0..slots {
        query = query.bind(keys.get(index).cloned().unwrap_or_else(|| padding.clone()));
    }
    if let Some(last) = last {
        query = query.bind(last);
    }
    query
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

/// A duration in whole microseconds (rounded up: `DATETIME(6)`'s resolution), capped at 100
/// years.
fn micros(duration: Duration) -> i64 {
    let micros = duration.min(LONGEST).as_nanos().div_ceil(1000);
    i64::try_from(micros).expect("100 years of microseconds fit in i64")
}

#[cfg(test)]
mod tests {
    use sqlx::Execute;

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
    fn statements_name_the_quoted_table_and_nothing_else() {
        let statements = Statements::new(&TableName::new("idem.records").unwrap());
        for sql in [
            statements.read.as_str(),
            statements.insert.as_str(),
            statements.take_over.as_str(),
            statements.complete.as_str(),
            statements.completed.as_str(),
            statements.renew.as_str(),
            statements.release.as_str(),
            statements.suspend.as_str(),
            statements.record_step.as_str(),
            statements.step_recorded.as_str(),
            statements.due.as_str(),
            statements.look_up.as_str(),
            statements.removing.as_str(),
            statements.remove.as_str(),
            statements.expired.as_str(),
            &statements.defer,
            &statements.sweep,
        ] {
            assert!(sql.contains("`idem`.`records`"), "{sql}");
            assert!(!sql.contains("{table}"), "{sql}");
            assert!(!sql.contains("||"), "{sql}");
            // Whole seconds would cut every lease: the time is always to the microsecond.
            assert!(
                !sql.contains("UTC_TIMESTAMP()") && !sql.contains("NOW("),
                "{sql}"
            );
        }
    }

    #[test]
    fn key_lists_are_padded_to_a_power_of_two() {
        let statements = Statements::new(&TableName::default());
        let keys: Vec<Vec<u8>> = (0..5u8).map(|k| vec![k; 32]).collect();
        let query = statements.sweep(&keys);
        assert_eq!(query.sql().as_str().matches('?').count(), 8);
        let one = statements.sweep(&keys[..1]);
        assert_eq!(one.sql().as_str().matches('?').count(), 1);
    }
}
