//! The operations due for resumption (store rule 13): a sorted set beside the records, the
//! *due index*, which points at the records of resumable operations, and the record, which
//! decides.
//!
//! One sorted set per prefix, at `<prefix>due`. An entry is 48 bytes, the operation's
//! [`StoreKey`] and the [`LeaseToken`] of the claim that wrote it, scored by when the
//! operation may be due (ms on the server's clock). A script touches one key, and on a Redis
//! Cluster the index and a record are in different slots, so the two are never written
//! together; three rules keep them right without that:
//!
//! - **An entry before its record.** A resumable claim marks its entry, due a lease and
//!   `resume_after` from now, before it writes the record (and a suspension marks its new
//!   time before it writes it). An operation is therefore never resumable without its entry,
//!   whenever the process that claimed it dies.
//! - **The record decides.** When an entry falls due, the record it names is read under the
//!   entry's token (`due_take.lua`): held by that token, resumable, its lease lapsed
//!   and its own time come, it is deferred by `hold` and answered; not yet due, the entry
//!   moves to the record's time; anything else (no record, completed, taken over by another
//!   claim, which marked an entry of its own, or not resumed on its own), the entry is
//!   dropped. An entry does not fall due before its claim lands: it is due a lease and
//!   `resume_after` after it was marked, and the claim follows it at once.
//! - **Only what was seen is changed.** An entry moves or goes only if its score is still
//!   the one it was listed with; a suspension that moved it meanwhile wins.
//!
//! A route without `resume_after` writes no entry and reads none: it pays nothing.

use std::time::Duration;

use ::redis::aio::ConnectionLike;
use futures_util::future::join_all;

use super::{RedisStore, delay_millis, millis, script::SCRIPTS};
use idem_core::{
    scope::StoreKey,
    store::{
        LeaseToken, StoreError,
        operation::{DueOperation, KeptRequest},
    },
};

/// How many entries whose time has come one call of `due` reads at most; it checks them
/// until it has answered its limit.
const BATCH: usize = 64;

/// An entry of the index: the operation's store key, then its claim's token.
type Entry = [u8; 48];

/// What `due_take.lua` found for one entry.
enum Taken {
    /// Due: answered, and deferred until `next`.
    Due {
        next: f64,
        operation: Box<DueOperation>,
    },
    /// Not due before `at`.
    Later(f64),
    /// The entry names no operation to resume.
    Gone,
    /// The record does not read back: logged, and looked at again `hold` later, in case an
    /// operator removed it meanwhile. Never resumed: what it holds is unknown.
    Unreadable,
}

/// The entries whose time has come, as `due_list.lua` answered them.
struct Listed {
    /// The server's time, ms.
    now: f64,
    /// Each entry and its score.
    entries: Vec<(Entry, f64)>,
}

/// The entry of the operation at `key` claimed under `token`.
fn entry(key: &StoreKey, token: LeaseToken) -> Entry {
    let mut entry = [0; 48];
    entry[..32].copy_from_slice(key.as_bytes());
    entry[32..].copy_from_slice(&token.to_bytes());
    entry
}

/// A malformed answer of a due script.
fn malformed(why: &str) -> StoreError {
    StoreError::backend(super::script::UnexpectedReply(why.to_owned()))
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The Redis key of the due index: `<prefix>due`.
    pub(super) fn due_key(&self) -> String {
        format!("{}due", self.prefix)
    }

    /// Marks the operation at `key` claimed under `token` due `delay` from now, before the
    /// record that makes it so is written. With a durability that waits, the entry waits for
    /// the replicas as a claim does: a claim whose entry fell short is not made (the claim
    /// answers [`StoreError::NotDurable`]).
    pub(super) async fn mark_due(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        delay: Duration,
        waited: bool,
    ) -> Result<(), StoreError> {
        let call = SCRIPTS
            .due_mark
            .call(self.due_key())
            .arg(&entry(key, token)[..])
            .arg(delay_millis(delay));
        match &self.durable {
            Some(durable) if waited => {
                let lanes = self.lanes(durable);
                durable
                    .write_or_refuse(lanes, call, self.command_timeout)
                    .await?
                    .into_write_result()
            }
            _ => self.run(&call).await?.into_write_result(),
        }
    }

    /// At most `limit` operations due now, each deferred by `hold`: see the module docs.
    pub(super) async fn take_due(
        &self,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<DueOperation>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let listed = self.list_due().await?;
        let hold_ms = millis(hold) as f64;
        let (mut due, mut settled, mut failed) = (Vec::new(), Vec::new(), None);
        let mut rest = listed.entries.as_slice();
        while due.len() < limit && !rest.is_empty() {
            let (chunk, tail) = rest.split_at((limit - due.len()).min(rest.len()));
            rest = tail;
            let taken = join_all(chunk.iter().map(|(entry, _)| self.take(entry, hold))).await;
            for (&(entry, seen), taken) in chunk.iter().zip(taken) {
                let next = match taken {
                    Ok(Taken::Due { next, operation }) => {
                        due.push(*operation);
                        next
                    }
                    Ok(Taken::Later(at)) => at,
                    Ok(Taken::Gone) => -1.0,
                    Ok(Taken::Unreadable) => listed.now + hold_ms,
                    // Left as it is, for the next call: its record's node may be away.
                    Err(error) => {
                        failed.get_or_insert(error);
                        continue;
                    }
                };
                settled.push((entry, seen, next));
            }
        }
        if let (true, Some(error)) = (settled.is_empty(), failed) {
            return Err(error);
        }
        self.settle(&settled).await;
        Ok(due)
    }

    /// The entries whose time has come, earliest first, at most [`BATCH`].
    async fn list_due(&self) -> Result<Listed, StoreError> {
        let reply = self
            .run(&SCRIPTS.due_list.call(self.due_key()).arg(BATCH))
            .await?;
        let payload = match (&reply.outcome[..], reply.payload) {
            (b"listed", Some(payload)) => payload,
            _ => return Err(malformed("an answer to due_list that is not a list")),
        };
        let (now, entries) = payload
            .split_first_chunk::<8>()
            .ok_or_else(|| malformed("a due list without the time"))?;
        if entries.len() % 56 != 0 {
            return Err(malformed(
                "a due list of entries that are not 56 bytes long",
            ));
        }
        let entries = entries
            .chunks_exact(56)
            .map(|listed| {
                let (entry, score) = listed.split_at(48);
                let score = f64::from_be_bytes(score.try_into().expect("8 bytes"));
                (entry.try_into().expect("48 bytes"), score)
            })
            .collect();
        Ok(Listed {
            now: f64::from_be_bytes(*now),
            entries,
        })
    }

    /// Reads the record `entry` names, and takes it if it is due.
    async fn take(&self, entry: &Entry, hold: Duration) -> Result<Taken, StoreError> {
        let key = StoreKey::from_bytes(entry[..32].try_into().expect("32 bytes"));
        let call = SCRIPTS
            .due_take
            .call(self.redis_key(&key))
            .arg(&entry[32..])
            .arg(millis(hold));
        let reply = self.run(&call).await?;
        let payload = reply.payload.as_deref().unwrap_or_default();
        match &reply.outcome[..] {
            b"due" => {
                let (next, rest) = payload
                    .split_first_chunk::<8>()
                    .ok_or_else(|| malformed("a due operation without its time"))?;
                let (suspensions, request) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| malformed("a due operation without its suspensions"))?;
                Ok(Taken::Due {
                    next: f64::from_be_bytes(*next),
                    operation: Box::new(DueOperation {
                        key,
                        request: KeptRequest::decode(request),
                        suspensions: u32::from_be_bytes(*suspensions),
                    }),
                })
            }
            b"later" => payload
                .try_into()
                .map(|at| Taken::Later(f64::from_be_bytes(at)))
                .map_err(|_| malformed("a later operation without its time")),
            b"gone" => {
                tracing::debug!(
                    key = %&key.to_hex()[..16],
                    why = %String::from_utf8_lossy(payload),
                    "idempotency: an entry of the Redis due index names no operation to \
                     resume; it is dropped"
                );
                Ok(Taken::Gone)
            }
            _ => match reply.into_error() {
                StoreError::Corrupt(error) => {
                    tracing::warn!(
                        key = %&key.to_hex()[..16],
                        error = %error,
                        "idempotency: the Redis record of an operation due for resumption does \
                         not read back; it is not resumed (look it up, and remove it if it is \
                         not to be finished)"
                    );
                    Ok(Taken::Unreadable)
                }
                error => Err(error),
            },
        }
    }

    /// Moves or drops the entries `settled` names (entry, the score it was listed with, its
    /// next score or a negative one to drop it). Not taken, it changes nothing that matters:
    /// the entries are listed again, and their records say the same.
    async fn settle(&self, settled: &[(Entry, f64, f64)]) {
        if settled.is_empty() {
            return;
        }
        let mut entries = Vec::with_capacity(settled.len() * 64);
        for (entry, seen, next) in settled {
            entries.extend_from_slice(entry);
            entries.extend_from_slice(&seen.to_be_bytes());
            entries.extend_from_slice(&next.to_be_bytes());
        }
        let call = SCRIPTS.due_settle.call(self.due_key()).arg(entries);
        if let Err(error) = self.run(&call).await {
            tracing::debug!(%error, "idempotency: the Redis due index was not updated");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_the_store_key_then_the_token() {
        let key = StoreKey::from_bytes([7; 32]);
        let token = LeaseToken::from_u128(0x0102);
        let entry = entry(&key, token);
        assert_eq!(&entry[..32], key.as_bytes());
        assert_eq!(&entry[32..], &token.to_bytes());
    }
}
