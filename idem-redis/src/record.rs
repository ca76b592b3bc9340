//! The record as Redis keeps it: one string per key, laid out here once for both sides. The
//! store writes a fresh claim and reads what a claim finds; the scripts read and write every
//! other state through the constants [`lua_constants`] hands them.
//!
//! ```text
//! byte  0       format version (2)
//! byte  1       state: CLAIMED, IN_FLIGHT or DONE
//! bytes 2..35   the request's fingerprint (Fingerprint::to_bytes)
//! bytes 35..51  the lease holder's token (LeaseToken::to_bytes); kept once done, so that the
//!               holder's repeated completion is recognised
//! DONE:
//! bytes 51..59  the TTL it was stored with, ms, a big-endian double: the key's expiry,
//!               set to it then, has run down since, so it was stored `ttl - PTTL` ms ago
//! bytes 59..    the response (StoredResponse::as_bytes)
//! CLAIMED and IN_FLIGHT:
//! bytes 51..67  two big-endian doubles: IN_FLIGHT, when the lease lapses and when the key was
//!               first claimed (ms on the server's clock); CLAIMED, the lease and the record's
//!               lifetime (ms)
//! bytes 67..71  how many times the operation was suspended (u32, big-endian)
//! bytes 71..75  how many steps ended (u32)
//! CLAIMED and IN_FLIGHT:
//! bytes 75..    each step: its length (u32), then RecordedStep::encode
//! RESUMABLE_CLAIMED and RESUMABLE, the same with the request kept before the steps:
//! bytes 75..83  the route's `resume_after`, ms (a big-endian double)
//! bytes 83..91  RESUMABLE: when the operation is due for resumption, ms on the server's
//!               clock, -1 for never; RESUMABLE_CLAIMED: 0, since it is due `resume_after`
//!               past its lease
//! bytes 91..95  the kept request's length (u32)
//! bytes 95..    the kept request (KeptRequest::encode), then the steps as above
//! ```
//!
//! Only a claim of a route the service resumes itself writes the two resumable states, so a
//! record of any other route is laid out, and costs, as it was before they existed.
//!
//! A claim that finds no record writes a CLAIMED one with one `SET NX GET PX`, which cannot
//! read the server's clock: it says how long the lease is rather than when it lapses, and the
//! key's expiry says the rest. Set to the lifetime at the claim, the expiry has run down by
//! the time since, so the claim was `lifetime - PTTL` ms ago. The first script that writes
//! the record in flight (a renewal, a step, a suspension, a takeover) turns it IN_FLIGHT with
//! the times on the server's clock. A completion keeps its TTL the same way, and so asks
//! Redis for nothing but the record and its write.

use std::ops::Range;

use idem_core::{fingerprint::Fingerprint, store::LeaseToken};

/// The record format version the store writes and reads.
pub(super) const VERSION: u8 = 2;
/// A fresh claim, written without a script: its times are relative to the claim.
pub(super) const CLAIMED: u8 = b'c';
/// In flight, its times on the server's clock.
pub(super) const IN_FLIGHT: u8 = b'f';
/// Completed.
pub(super) const DONE: u8 = b'd';
/// CLAIMED, keeping the request of a route the service resumes itself.
pub(super) const RESUMABLE_CLAIMED: u8 = b'C';
/// IN_FLIGHT, keeping the request of a route the service resumes itself, and when it is due.
pub(super) const RESUMABLE: u8 = b'F';

const STATE: usize = 1;
const FINGERPRINT: Range<usize> = 2..35;
const TOKEN: Range<usize> = 35..51;
/// DONE: the TTL the response was stored with.
const TTL_AT: usize = 51;
/// DONE: the response.
pub(super) const RESPONSE: usize = 59;
/// In flight: the two times.
const TIMES: usize = 51;
/// In flight: the suspensions, then the count of steps.
const COUNTS: usize = 67;
/// In flight: the steps, or the kept request of a resumable record.
const STEPS: usize = 75;
/// A resumable record: `resume_after`, when it is due, and the kept request's length.
const KEPT_HEAD: usize = 20;

/// The constants the scripts read records by, as Lua: positions are 1-based there.
pub(super) fn lua_constants() -> String {
    format!(
        "local VERSION, CLAIMED, IN_FLIGHT, DONE = {VERSION}, {CLAIMED}, {IN_FLIGHT}, {DONE}\n\
         local RESUMABLE_CLAIMED, RESUMABLE = {RESUMABLE_CLAIMED}, {RESUMABLE}\n\
         local FP_AT, FP_END, TOKEN_AT, TOKEN_END = {}, {}, {}, {}\n\
         local TTL_AT, RESPONSE_AT, TIMES_AT, STEPS_AT = {}, {}, {}, {}\n\
         local KEPT_HEAD = {KEPT_HEAD}\n",
        FINGERPRINT.start + 1,
        FINGERPRINT.end,
        TOKEN.start + 1,
        TOKEN.end,
        TTL_AT + 1,
        RESPONSE + 1,
        TIMES + 1,
        STEPS + 1,
    )
}

/// The record a fresh claim writes: CLAIMED, with no steps.
pub(super) fn claimed(
    fingerprint: &Fingerprint,
    token: LeaseToken,
    lease_ms: u64,
    lifetime_ms: u64,
) -> [u8; STEPS] {
    let mut record = [0; STEPS];
    record[0] = VERSION;
    record[STATE] = CLAIMED;
    record[FINGERPRINT].copy_from_slice(&fingerprint.to_bytes());
    record[TOKEN].copy_from_slice(&token.to_bytes());
    // Whole milliseconds below 2^53: exact as doubles, which is how Lua reads numbers.
    record[TIMES..TIMES + 8].copy_from_slice(&(lease_ms as f64).to_be_bytes());
    record[TIMES + 8..COUNTS].copy_from_slice(&(lifetime_ms as f64).to_be_bytes());
    record
}

/// The record a fresh claim of a resumable route writes: RESUMABLE_CLAIMED, keeping
/// `request` (a `KeptRequest`'s bytes), due `after_ms` past its lease.
///
/// # Errors
///
/// When the request is longer than its length field holds (4 GiB − 1; Redis's strings hold
/// 512 MiB).
pub(super) fn resumable_claimed(
    claimed: [u8; STEPS],
    after_ms: u64,
    request: &[u8],
) -> Result<Vec<u8>, TooLong> {
    let len = u32::try_from(request.len()).map_err(|_| TooLong(request.len()))?;
    let mut record = Vec::with_capacity(STEPS + KEPT_HEAD + request.len());
    record.extend_from_slice(&claimed);
    record[STATE] = RESUMABLE_CLAIMED;
    record.extend_from_slice(&(after_ms as f64).to_be_bytes());
    record.extend_from_slice(&0f64.to_be_bytes());
    record.extend_from_slice(&len.to_be_bytes());
    record.extend_from_slice(request);
    Ok(record)
}

/// A kept request longer than a record holds.
#[derive(Debug, thiserror::Error)]
#[error("the request to keep for resumption is {0} bytes long, more than a record holds")]
pub(super) struct TooLong(usize);

/// What a claim found at the key, read far enough to decide by.
#[derive(Debug)]
pub(super) enum Found<'a> {
    /// Completed with the claim's fingerprint: the response's bytes.
    Completed(&'a [u8]),
    /// Claimed with another fingerprint, in any state: the stored fingerprint's bytes.
    Mismatch(&'a [u8]),
    /// In flight with the claim's fingerprint: whether its lease lapsed takes the server's
    /// clock, which only a script reads.
    InFlight,
}

/// Why a record cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unreadable {
    /// Another format version than [`VERSION`].
    Version(u8),
    /// Too short for its state, or a state this build does not know.
    Malformed(&'static str),
}

/// Reads the record a claim found, for the claim of `fingerprint`.
pub(super) fn read_found<'a>(
    record: &'a [u8],
    fingerprint: &Fingerprint,
) -> Result<Found<'a>, Unreadable> {
    let (&version, _) = record
        .split_first()
        .ok_or(Unreadable::Malformed("an empty record"))?;
    if version != VERSION {
        return Err(Unreadable::Version(version));
    }
    let (state, header) = match record.get(STATE) {
        Some(&DONE) => (DONE, RESPONSE),
        Some(&(CLAIMED | IN_FLIGHT)) => (IN_FLIGHT, STEPS),
        Some(&(RESUMABLE_CLAIMED | RESUMABLE)) => (IN_FLIGHT, STEPS + KEPT_HEAD),
        _ => return Err(Unreadable::Malformed("an unknown state")),
    };
    if record.len() < header {
        return Err(Unreadable::Malformed("a record shorter than its header"));
    }
    let stored = &record[FINGERPRINT];
    if stored != fingerprint.to_bytes() {
        return Ok(Found::Mismatch(stored));
    }
    Ok(match state {
        DONE => Found::Completed(&record[RESPONSE..]),
        _ => Found::InFlight,
    })
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, Method};

    use super::*;
    use idem_core::fingerprint::FingerprintMode;

    fn fingerprint(body: &[u8]) -> Fingerprint {
        Fingerprint::compute(
            &Method::POST,
            "/payments",
            &HeaderMap::new(),
            body,
            FingerprintMode::Raw,
        )
    }

    #[test]
    fn a_fresh_claim_is_laid_out_as_documented() {
        let fp = fingerprint(b"{}");
        let token = LeaseToken::from_u128(0x0102);
        let record = claimed(&fp, token, 60_000, 86_400_000);
        assert_eq!(record.len(), 75);
        assert_eq!(&record[..2], &[2, b'c']);
        assert_eq!(record[2..35], fp.to_bytes());
        assert_eq!(record[35..51], token.to_bytes());
        assert_eq!(
            f64::from_be_bytes(record[51..59].try_into().unwrap()),
            60_000.0
        );
        assert_eq!(
            f64::from_be_bytes(record[59..67].try_into().unwrap()),
            86_400_000.0
        );
        assert_eq!(&record[67..], &[0; 8], "no suspensions, no steps");
    }

    #[test]
    fn a_found_record_is_read_by_its_state_and_fingerprint() {
        let fp = fingerprint(b"{}");
        let other = fingerprint(b"[]");
        let in_flight = claimed(&fp, LeaseToken::random(), 1, 1);
        assert!(matches!(read_found(&in_flight, &fp), Ok(Found::InFlight)));
        assert!(
            matches!(read_found(&in_flight, &other), Ok(Found::Mismatch(stored)) if stored == fp.to_bytes())
        );

        let mut done = in_flight[..RESPONSE].to_vec();
        done[STATE] = DONE;
        done.extend_from_slice(b"response");
        assert!(matches!(
            read_found(&done, &fp),
            Ok(Found::Completed(b"response"))
        ));
        assert!(matches!(read_found(&done, &other), Ok(Found::Mismatch(_))));
    }

    #[test]
    fn a_record_it_cannot_read_says_why() {
        let fp = fingerprint(b"{}");
        let mut record = claimed(&fp, LeaseToken::random(), 1, 1);
        assert_eq!(
            read_found(&record[..40], &fp).unwrap_err(),
            Unreadable::Malformed("a record shorter than its header")
        );
        record[STATE] = b'x';
        assert_eq!(
            read_found(&record, &fp).unwrap_err(),
            Unreadable::Malformed("an unknown state")
        );
        record[0] = 3;
        assert_eq!(
            read_found(&record, &fp).unwrap_err(),
            Unreadable::Version(3)
        );
        assert_eq!(
            read_found(&[], &fp).unwrap_err(),
            Unreadable::Malformed("an empty record")
        );
    }

    #[test]
    fn the_scripts_get_one_based_positions() {
        let lua = lua_constants();
        assert!(lua.contains("= 2, 99, 102, 100\n"), "{lua}");
        assert!(lua.contains("= 3, 35, 36, 51\n"), "{lua}");
        assert!(lua.contains("= 52, 60, 52, 76\n"), "{lua}");
        assert!(lua.contains("= 67, 70\n"), "{lua}");
    }

    #[test]
    fn a_fresh_resumable_claim_keeps_its_request_before_its_steps() {
        let fp = fingerprint(b"{}");
        let plain = claimed(&fp, LeaseToken::from_u128(7), 15_000, 86_400_000);
        let record = resumable_claimed(plain, 5_000, b"request").unwrap();
        assert_eq!(record[1], b'C');
        assert_eq!(record[2..75], plain[2..75], "the header is a fresh claim's");
        assert_eq!(
            f64::from_be_bytes(record[75..83].try_into().unwrap()),
            5_000.0
        );
        assert_eq!(&record[83..91], &[0; 8]);
        assert_eq!(&record[91..95], &7u32.to_be_bytes());
        assert_eq!(&record[95..], b"request");
        assert!(matches!(read_found(&record, &fp), Ok(Found::InFlight)));
        assert!(matches!(
            read_found(&record[..90], &fp),
            Err(Unreadable::Malformed(_))
        ));
    }
}
