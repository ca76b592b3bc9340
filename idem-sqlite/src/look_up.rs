//! What a look-up finds (store rule 14), read from the row of the look-up statement.
//!
//! Times come as microseconds since the epoch on SQLite's clock; a completed record's
//! response as its first bytes and its length, never its headers and body.

use std::time::{Duration, SystemTime};

use sqlx::{Row, sqlite::SqliteRow};

use super::{
    claim::{ReadError, corrupt},
    sql::RESPONSE_FORMAT,
};
use idem_core::{
    replay::{ResponseHead, StoredResponse},
    store::{
        held::{CompletedRecord, Held, InFlightRecord},
        operation::decode_steps,
    },
};

/// The record the look-up statement's row describes.
pub(crate) fn read_held(row: &SqliteRow) -> Result<Held, ReadError> {
    let at = time(row.try_get("now_us")?);
    let expires_at = time(row.try_get("expires_us")?);
    let state: String = row.try_get("state")?;
    match state.as_str() {
        "in_flight" => {
            let steps: Option<Vec<u8>> = row.try_get("steps")?;
            let steps = decode_steps(steps.as_deref().unwrap_or_default()).map_err(corrupt)?;
            let lease: Option<i64> = row.try_get("lease_us")?;
            let suspensions: i32 = row.try_get("suspensions")?;
            let resume: Option<i64> = row.try_get("resume_us")?;
            Ok(Held::InFlight(InFlightRecord {
                since: Some(time(row.try_get("since_us")?)),
                lease_expires_at: lease.map_or(at, time),
                expires_at,
                steps: steps.iter().map(|step| step.name().to_owned()).collect(),
                suspensions: u32::try_from(suspensions).unwrap_or(0),
                resumes_at: resume.map(time),
                at,
            }))
        }
        "completed" => {
            let format: i16 = row.try_get("response_format")?;
            if format != RESPONSE_FORMAT {
                return Err(corrupt(format!("unknown response format {format}")));
            }
            let head: Vec<u8> = row.try_get("head")?;
            let ResponseHead { status, body_kept } =
                StoredResponse::read_head(&head).map_err(corrupt)?;
            let bytes: i64 = row.try_get("bytes")?;
            Ok(Held::Completed(CompletedRecord {
                status,
                stored_at: Some(time(row.try_get("updated_us")?)),
                expires_at,
                bytes: u64::try_from(bytes).unwrap_or(0),
                body_kept,
                at,
            }))
        }
        other => Err(corrupt(format!("unknown record state {other:?}"))),
    }
}

/// Microseconds since the epoch (before it, for a negative count).
fn time(micros: i64) -> SystemTime {
    let offset = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 {
        SystemTime::UNIX_EPOCH + offset
    } else {
        SystemTime::UNIX_EPOCH - offset
    }
}
