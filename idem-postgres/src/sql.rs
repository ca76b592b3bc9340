//! The statements of the store, written once per table name, and their parameters.
//!
//! Every statement reads the time from the server (`clock_timestamp()`, the time the row is
//! examined, also inside a long transaction), so every instance agrees on leases and TTLs.

use std::{sync::Arc, time::Duration};

use sqlx::{
    AssertSqlSafe, Postgres, SqlSafeStr, SqlStr,
    postgres::{PgArguments, types::PgInterval},
    query::Query,
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
pub(super) const RESPONSE_FORMAT: i16 = 1;

/// The longest duration written to the database; longer leases and TTLs are cut to it, so
/// that `clock_timestamp() + interval` stays a valid timestamp.
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// The claim, in one statement (see the module docs of `postgres` for why it is correct).
///
/// `existing` reads the record in the statement's snapshot, without locking it. Only when that
/// snapshot shows no record, or a record the claim may replace, does `claimed` try to insert;
/// on a conflict its `DO UPDATE ... WHERE` is checked against the latest committed version of
/// the row, under a row lock. The final `SELECT` answers `claimed`, or the record that stood in
/// the way. When it answers neither (the snapshot missed a record committed meanwhile), or a
/// record the claim may replace that it did not replace (another claim replaced it first), the
/// snapshot was stale and the caller runs the statement again.
const CLAIM: &str = "\
WITH existing AS (
    SELECT state,
           fingerprint,
           fingerprint = $2 AS same_fingerprint,
           CASE WHEN fingerprint = $2 THEN response_format END AS response_format,
           CASE WHEN fingerprint = $2 THEN response END AS response,
           expires_at <= clock_timestamp()
               OR (state = 'in_flight'
                   AND lease_expires_at <= clock_timestamp()
                   AND fingerprint = $2) AS replaceable
    FROM {table}
    WHERE key = $1
),
claimed AS (
    INSERT INTO {table} AS record
        (key, fingerprint, state, lease_token, lease_expires_at, expires_at, created_at, updated_at,
         request, resume_after, resume_at)
    SELECT $1, $2, 'in_flight', $3,
           clock_timestamp() + $4, clock_timestamp() + $5, clock_timestamp(), clock_timestamp(),
           $6, $7, clock_timestamp() + $4 + $7
    WHERE NOT EXISTS (SELECT FROM existing WHERE replaceable IS NOT TRUE)
    ON CONFLICT (key) DO UPDATE SET
        fingerprint = excluded.fingerprint,
        state = 'in_flight',
        lease_token = excluded.lease_token,
        lease_expires_at = excluded.lease_expires_at,
        -- Taking over an operation that stopped part-way keeps its steps, its suspensions and
        -- its expiry (at least the lease); replacing an expired record, or taking over one
        -- that holds nothing of the kind, starts afresh.
        expires_at = CASE
            WHEN record.expires_at > clock_timestamp()
                 AND (record.step_count > 0 OR record.suspensions > 0)
            THEN greatest(record.expires_at, excluded.lease_expires_at)
            ELSE excluded.expires_at END,
        steps = CASE WHEN record.expires_at > clock_timestamp() THEN record.steps END,
        step_count = CASE WHEN record.expires_at > clock_timestamp() THEN record.step_count ELSE 0 END,
        suspensions = CASE WHEN record.expires_at > clock_timestamp() THEN record.suspensions ELSE 0 END,
        request = excluded.request,
        resume_after = excluded.resume_after,
        resume_at = excluded.resume_at,
        response_status = NULL,
        response_format = NULL,
        response = NULL,
        created_at = CASE
            WHEN record.expires_at > clock_timestamp() THEN record.created_at
            ELSE excluded.created_at END,
        updated_at = excluded.updated_at
    WHERE record.expires_at <= clock_timestamp()
       OR (record.state = 'in_flight'
           AND record.lease_expires_at <= clock_timestamp()
           AND record.fingerprint = excluded.fingerprint)
    RETURNING steps, step_count, suspensions
)
SELECT true AS claimed, NULL::text AS state, NULL::bytea AS fingerprint,
       NULL::boolean AS same_fingerprint, NULL::smallint AS response_format,
       NULL::bytea AS response, NULL::boolean AS replaceable,
       steps, step_count, suspensions
FROM claimed
UNION ALL
SELECT false, state, fingerprint, same_fingerprint, response_format, response, replaceable,
       NULL, NULL, NULL
FROM existing
WHERE NOT EXISTS (SELECT FROM claimed)";

/// The fenced completion: only the holder of a live in-flight record completes it. The token
/// stays with the completed record, so that the holder's completion sent again (after the
/// answer to the first was lost) answers `done` too, and changes nothing. (In the statement's
/// snapshot the second `EXISTS` sees the row as it was before the `UPDATE`.)
const COMPLETE: &str = "\
WITH completed AS (
    UPDATE {table} SET
        state = 'completed',
        lease_expires_at = NULL,
        response_status = $3,
        response_format = $4,
        response = $5,
        expires_at = clock_timestamp() + $6,
        steps = NULL,
        step_count = 0,
        request = NULL,
        resume_after = NULL,
        resume_at = NULL,
        updated_at = clock_timestamp()
    WHERE key = $1 AND lease_token = $2 AND state = 'in_flight' AND expires_at > clock_timestamp()
    RETURNING 1
)
SELECT EXISTS (SELECT FROM completed)
    OR EXISTS (
        SELECT FROM {table}
        WHERE key = $1 AND lease_token = $2 AND state = 'completed'
          AND expires_at > clock_timestamp()
    ) AS done";

/// The fenced renewal: the lease runs `$3` from now, and the record lives at least as long; a
/// resumable operation is due for resumption `resume_after` past the new lease.
const RENEW: &str = "\
UPDATE {table} SET
    lease_expires_at = clock_timestamp() + $3,
    expires_at = greatest(expires_at, clock_timestamp() + $3),
    resume_at = clock_timestamp() + $3 + resume_after,
    updated_at = clock_timestamp()
WHERE key = $1 AND lease_token = $2 AND state = 'in_flight' AND expires_at > clock_timestamp()";

/// The fenced release.
const RELEASE: &str = "\
DELETE FROM {table}
WHERE key = $1 AND lease_token = $2 AND state = 'in_flight' AND expires_at > clock_timestamp()";

/// The fenced suspension (store rule 12): the lease ends now, the steps stay, and a resumable
/// operation is due for resumption `$3` from now (never, when `$3` is NULL).
const SUSPEND: &str = "\
UPDATE {table} SET
    lease_expires_at = clock_timestamp(),
    suspensions = suspensions + 1,
    resume_at = CASE WHEN request IS NOT NULL THEN clock_timestamp() + $3 END,
    updated_at = clock_timestamp()
WHERE key = $1 AND lease_token = $2 AND state = 'in_flight' AND expires_at > clock_timestamp()";

/// The fenced recording of step `$3` (store rule 11): appended only to a record that holds
/// exactly `$3` steps. The holder's own step sent again finds it holding more, and answers
/// `done` too.
const RECORD_STEP: &str = "\
WITH recorded AS (
    UPDATE {table} SET
        steps = coalesce(steps, ''::bytea) || $4,
        step_count = step_count + 1,
        updated_at = clock_timestamp()
    WHERE key = $1 AND lease_token = $2 AND state = 'in_flight'
      AND expires_at > clock_timestamp() AND step_count = $3
    RETURNING 1
)
SELECT EXISTS (SELECT FROM recorded)
    OR EXISTS (
        SELECT FROM {table}
        WHERE key = $1 AND lease_token = $2 AND state = 'in_flight'
          AND expires_at > clock_timestamp() AND step_count > $3
    ) AS done";

/// The operations due for resumption (store rule 13), the longest due first, each deferred by
/// `$2` so that another instance's resumer does not take it up meanwhile; rows a claim has
/// locked are skipped.
const DUE: &str = "\
UPDATE {table} SET resume_at = clock_timestamp() + $2
WHERE key IN (
    SELECT key FROM {table}
    WHERE resume_at <= clock_timestamp()
      AND state = 'in_flight'
      AND request IS NOT NULL
      AND lease_expires_at <= clock_timestamp()
      AND expires_at > clock_timestamp()
    ORDER BY resume_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
AND resume_at <= clock_timestamp()
RETURNING key, request, suspensions";

/// What is held for a key (store rule 14): a live record's times as microseconds since the
/// epoch on the server's clock, its state, and what a look-up says of each state; the first
/// 4 bytes of a completed record's response (its version, body kind and status) rather than
/// the response.
const LOOK_UP: &str = "\
SELECT (extract(epoch FROM now) * 1000000)::int8 AS now_us,
       state,
       (extract(epoch FROM created_at) * 1000000)::int8 AS since_us,
       (extract(epoch FROM updated_at) * 1000000)::int8 AS updated_us,
       (extract(epoch FROM lease_expires_at) * 1000000)::int8 AS lease_us,
       (extract(epoch FROM expires_at) * 1000000)::int8 AS expires_us,
       response_format,
       substring(response FROM 1 FOR 4) AS head,
       octet_length(response)::int8 AS bytes,
       steps,
       suspensions,
       (extract(epoch FROM CASE WHEN request IS NOT NULL THEN resume_at END) * 1000000)::int8
           AS resume_us
FROM {table}, (SELECT clock_timestamp() AS now) AS clock
WHERE key = $1 AND expires_at > now";

/// The removal (store rule 15), unfenced: the row goes whatever holds it. An expired row is
/// deleted too, and answered as absent.
const REMOVE: &str = "\
DELETE FROM {table}
WHERE key = $1
RETURNING state, expires_at > clock_timestamp() AS live";

/// One batch of the sweeper: the oldest expired records, skipping rows a claim has locked.
const SWEEP: &str = "\
DELETE FROM {table}
WHERE key IN (
    SELECT key FROM {table}
    WHERE expires_at <= clock_timestamp()
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
AND expires_at <= clock_timestamp()";

/// The statements for one table.
#[derive(Debug)]
pub(super) struct Statements {
    claim: SqlStr,
    complete: SqlStr,
    renew: SqlStr,
    release: SqlStr,
    suspend: SqlStr,
    record_step: SqlStr,
    due: SqlStr,
    sweep: SqlStr,
    look_up: SqlStr,
    remove: SqlStr,
}

impl Statements {
    pub(super) fn new(table: &TableName) -> Self {
        let quoted = table.quoted();
        // The name was checked by `TableName::new`: plain identifiers, quoted.
        let render = |template: &str| {
            AssertSqlSafe(Arc::<str>::from(template.replace("{table}", &quoted))).into_sql_str()
        };
        Self {
            claim: render(CLAIM),
            complete: render(COMPLETE),
            renew: render(RENEW),
            release: render(RELEASE),
            suspend: render(SUSPEND),
            record_step: render(RECORD_STEP),
            due: render(DUE),
            sweep: render(SWEEP),
            look_up: render(LOOK_UP),
            remove: render(REMOVE),
        }
    }

    pub(super) fn look_up(&self, key_: &StoreKey) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.look_up.clone()).bind(key(key_))
    }

    pub(super) fn remove(&self, key_: &StoreKey) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.remove.clone()).bind(key(key_))
    }

    pub(super) fn claim(&self, claim: &Claim<'_>) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.claim.clone())
            .bind(key(claim.key))
            .bind(fingerprint(claim.fingerprint))
            .bind(token(claim.token))
            .bind(interval(claim.lease))
            .bind(interval(claim.in_flight_lifetime()))
            .bind(claim.resumable.map(|resumable| resumable.request.encode()))
            .bind(claim.resumable.map(|resumable| interval(resumable.after)))
    }

    pub(super) fn suspend(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.suspend.clone())
            .bind(key(key_))
            .bind(token(token_))
            .bind(resume_in.map(interval))
    }

    pub(super) fn record_step(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.record_step.clone())
            .bind(key(key_))
            .bind(token(token_))
            .bind(i32::try_from(index).unwrap_or(i32::MAX))
            .bind(step.encode())
    }

    pub(super) fn due(
        &self,
        limit: usize,
        hold: Duration,
    ) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.due.clone())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(interval(hold))
    }

    /// The fenced completion.
    pub(super) fn complete(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Query<'static, Postgres, PgArguments> {
        let status = i16::try_from(response.status().as_u16()).expect("status codes fit in i16");
        sqlx::query(self.complete.clone())
            .bind(key(key_))
            .bind(token(token_))
            .bind(status)
            .bind(RESPONSE_FORMAT)
            .bind(response.as_bytes().to_vec())
            .bind(interval(ttl))
    }

    pub(super) fn renew(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
        lease: Duration,
    ) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.renew.clone())
            .bind(key(key_))
            .bind(token(token_))
            .bind(interval(lease))
    }

    pub(super) fn release(
        &self,
        key_: &StoreKey,
        token_: LeaseToken,
    ) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.release.clone())
            .bind(key(key_))
            .bind(token(token_))
    }

    pub(super) fn sweep(&self, batch: i64) -> Query<'static, Postgres, PgArguments> {
        sqlx::query(self.sweep.clone()).bind(batch)
    }
}

fn key(key: &StoreKey) -> Vec<u8> {
    key.as_bytes().to_vec()
}

fn fingerprint(fingerprint: &Fingerprint) -> Vec<u8> {
    fingerprint.to_bytes().to_vec()
}

fn token(token: LeaseToken) -> Vec<u8> {
    token.to_bytes().to_vec()
}

/// A duration as an interval, rounded up to whole microseconds (PostgreSQL's resolution).
fn interval(duration: Duration) -> PgInterval {
    let micros = duration.min(LONGEST).as_nanos().div_ceil(1000);
    PgInterval {
        months: 0,
        days: 0,
        microseconds: i64::try_from(micros).expect("100 years of microseconds fit in i64"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_round_up_to_microseconds_and_are_capped() {
        assert_eq!(interval(Duration::from_nanos(1)).microseconds, 1);
        assert_eq!(interval(Duration::from_millis(300)).microseconds, 300_000);
        assert_eq!(
            interval(Duration::MAX).microseconds,
            i64::try_from(LONGEST.as_micros()).unwrap()
        );
    }

    #[test]
    fn statements_name_the_quoted_table_and_nothing_else() {
        let statements = Statements::new(&TableName::new("idem.records").unwrap());
        for sql in [
            &statements.claim,
            &statements.complete,
            &statements.renew,
            &statements.release,
            &statements.suspend,
            &statements.record_step,
            &statements.due,
            &statements.sweep,
            &statements.look_up,
            &statements.remove,
        ] {
            assert!(sql.as_str().contains("\"idem\".\"records\""));
            assert!(!sql.as_str().contains("{table}"));
        }
    }
}
