//! The claim: a consistent read that answers every key already held, and, only when the key
//! is free or may be taken over, one atomic write that decides who wins.
//!
//! SQLite lets one connection write at a time, in the whole file, and lets readers read
//! beside it (WAL). So the claim is the read followed, when needed, by the write, each a
//! statement of its own in autocommit, and only the write takes the write lock:
//!
//! - The read waits for nothing: replays, 409s and 422s are one statement that never queues
//!   behind a writer (a transactional handler holding the lock included) and never makes one
//!   wait.
//! - An absent key is claimed by an `INSERT ... ON CONFLICT DO NOTHING`: writers run one
//!   after another, so exactly one of any number of concurrent inserts adds the row, and the
//!   others insert nothing and read again, seeing the winner.
//! - A record that may be replaced (expired, or a lapsed lease with the same fingerprint) is
//!   taken over by an `UPDATE` of its primary key, which runs under the write lock and only
//!   if the record is still what the read saw.
//! - A write that did nothing means another claim changed the key in between: the claim reads
//!   again. After 5 attempts it answers an error rather than a guess (store rule 7). A write
//!   that waited longer than the busy timeout for the lock did nothing either: an error, and
//!   the request answers 503.

use sqlx::{Row, sqlite::SqliteRow};

use super::{
    SqliteStore,
    sql::{RESPONSE_FORMAT, Seen},
};
use idem_core::{
    fingerprint::Fingerprint,
    replay::StoredResponse,
    store::{
        Claim, ClaimOutcome, StoreError,
        operation::{Progress, decode_steps},
    },
};

/// How many times a claim reads and writes when concurrent claims keep changing its key.
pub(crate) const CLAIM_ATTEMPTS: u32 = 5;

/// What the read decided.
enum Read {
    /// The key is held: this is the answer.
    Answer(ClaimOutcome),
    /// The key is free.
    Absent,
    /// The record may be taken over; it was as `Seen`, with these steps.
    Replaceable(Seen, Option<Vec<u8>>),
}

/// Why reading the record failed.
pub(crate) enum ReadError {
    Sql(sqlx::Error),
    Corrupt(StoreError),
}

impl From<sqlx::Error> for ReadError {
    fn from(error: sqlx::Error) -> Self {
        Self::Sql(error)
    }
}

impl SqliteStore {
    /// One read and, if needed, one write; `None` when another claim changed the key in
    /// between.
    pub(crate) async fn try_claim(
        &self,
        claim: &Claim<'_>,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        let (pool, statements) = (&self.shared.pool, &self.shared.statements);
        let row = statements
            .read(claim)
            .fetch_optional(pool)
            .await
            .map_err(|e| self.error(e))?;
        let read = match row.as_ref().map(|row| read(row, claim.fingerprint)) {
            None => Read::Absent,
            Some(Ok(read)) => read,
            Some(Err(ReadError::Sql(e))) => return Err(self.error(e)),
            Some(Err(ReadError::Corrupt(e))) => return Err(e),
        };
        let written = match &read {
            Read::Answer(_) => return Ok(read.into_answer()),
            Read::Absent => statements.insert(claim).execute(pool).await,
            Read::Replaceable(seen, _) => statements.take_over(claim, *seen).execute(pool).await,
        };
        match written {
            Ok(done) if done.rows_affected() == 1 => self.claimed(claim, read).await.map(Some),
            Ok(_) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The answer of a claim that wrote: claimed, or resumed with the steps it took over.
    async fn claimed(&self, claim: &Claim<'_>, read: Read) -> Result<ClaimOutcome, StoreError> {
        let Read::Replaceable(seen, steps) = read else {
            return Ok(ClaimOutcome::Claimed);
        };
        if !seen.live || (seen.step_count == 0 && seen.suspensions == 0) {
            return Ok(ClaimOutcome::Claimed);
        }
        match progress(seen, steps.as_deref()) {
            Ok(progress) => Ok(ClaimOutcome::Resumed(progress)),
            Err(error) => {
                // The claim took the key over before its steps were found unreadable. Its
                // lease ends at once, so that the record stays as it is, for whoever reads it
                // next (and gets the same error), rather than blocked for a lease.
                let _ = self
                    .shared
                    .statements
                    .suspend(claim.key, claim.token, None)
                    .execute(&self.shared.pool)
                    .await;
                Err(error)
            }
        }
    }
}

impl Read {
    fn into_answer(self) -> Option<ClaimOutcome> {
        match self {
            Self::Answer(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// What the read's row says.
fn read(row: &SqliteRow, fingerprint: &Fingerprint) -> Result<Read, ReadError> {
    let stored: Vec<u8> = row.try_get("fingerprint")?;
    let same = stored == fingerprint.to_bytes();
    let expired: bool = row.try_get("expired")?;
    let seen = Seen {
        live: !expired,
        step_count: row.try_get("step_count")?,
        suspensions: row.try_get("suspensions")?,
    };
    if expired {
        return Ok(Read::Replaceable(seen, None));
    }
    if !same {
        return Ok(Read::Answer(ClaimOutcome::Mismatch {
            stored_algorithm: Fingerprint::from_bytes(&stored).map(|f| f.algorithm()),
        }));
    }
    let state: String = row.try_get("state")?;
    match state.as_str() {
        "in_flight" if row.try_get::<bool, _>("lapsed")? => {
            Ok(Read::Replaceable(seen, row.try_get("steps")?))
        }
        "in_flight" => Ok(Read::Answer(ClaimOutcome::InFlight)),
        "completed" => {
            let format: i16 = row.try_get("response_format")?;
            if format != RESPONSE_FORMAT {
                return Err(corrupt(format!("unknown response format {format}")));
            }
            let bytes: Vec<u8> = row.try_get("response")?;
            let response = StoredResponse::decode(&bytes).map_err(corrupt)?;
            Ok(Read::Answer(ClaimOutcome::Completed(response)))
        }
        other => Err(corrupt(format!("unknown record state {other:?}"))),
    }
}

/// The steps a takeover kept, as they were read.
fn progress(seen: Seen, steps: Option<&[u8]>) -> Result<Progress, StoreError> {
    let steps = decode_steps(steps.unwrap_or_default()).map_err(StoreError::corrupt)?;
    if steps.len() != usize::try_from(seen.step_count).unwrap_or(usize::MAX) {
        return Err(StoreError::corrupt(format!(
            "the record counts {} steps and holds {}",
            seen.step_count,
            steps.len()
        )));
    }
    Ok(Progress {
        steps,
        suspensions: u32::try_from(seen.suspensions).unwrap_or(0),
    })
}

pub(crate) fn corrupt(error: impl Into<idem_core::store::BoxError>) -> ReadError {
    ReadError::Corrupt(StoreError::corrupt(error))
}
