//! How a durable write runs: the script and its wait in one pipeline on a lane, and what
//! the store does when the wait falls short of the target (see [`Durability`]).
//!
//! Only writes take a lane. A claim runs on the store's shared connection like any other
//! call, since most claims write nothing (a replay, a 409, a 422) and need no wait; one that
//! claimed the key is then confirmed on a lane ([`Durable::confirm_claim`]). A completion
//! always writes, and runs on a lane at once.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use ::redis::{Cmd, ServerErrorKind, Value};
use tokio::time::{Instant, timeout_at};

use super::{
    Durability,
    durability::Shortfall,
    lanes::{Lane, Lanes},
    script::{Reply, ScriptCall},
};
use idem_core::store::StoreError;

/// The durability of a store's writes, and the lanes they go on.
pub(super) struct Durable {
    pub(super) durability: Durability,
    /// How many lanes, when the store opens them itself.
    pub(super) lanes_wanted: usize,
    /// Set when the store connects; otherwise at the first durable write, on the store's own
    /// connection.
    pub(super) lanes: OnceLock<Arc<Lanes>>,
}

/// Why a durable write failed.
enum Failed {
    /// An error.
    Error(StoreError),
    /// The deadline passed; the lane, if one was taken, may still carry the write.
    TimedOut(Option<Lane>),
}

/// A claim short of its target that could not be released either.
#[derive(Debug, thiserror::Error)]
#[error("{shortfall}; releasing the claim failed too, so its outcome is unknown")]
struct UnreleasedClaim {
    shortfall: Shortfall,
    #[source]
    error: StoreError,
}

impl Durable {
    /// Confirms a claim that `call` made on the store's shared connection: sends `call` again
    /// on a lane, followed by the wait. Sent again under the same token, the claim finds its own
    /// record and writes it again (the claim script treats its own token as a retry of
    /// itself), and the wait covers that write; replication being one ordered stream, it covers
    /// the first write too. A claim that got there answers the second run's reply (which is
    /// another request's record if a failover lost the first run and someone claimed the key
    /// since). A claim short of its target is undone with `release` on the same lane, and
    /// answers [`StoreError::NotDurable`]. A confirmation that timed out is released on its
    /// own lane in the background, after whatever of it Redis runs, for at most `lease`.
    pub(super) async fn confirm_claim(
        &self,
        lanes: &Arc<Lanes>,
        call: &ScriptCall<'_>,
        release: ScriptCall<'_>,
        command_timeout: Duration,
        lease: Duration,
    ) -> Result<Reply, StoreError> {
        let limit = command_timeout + self.durability.timeout();
        let release = [release.command(false), release.command(true)];
        let (lane, reply, target) = match self.write(lanes, call, limit).await {
            Ok(written) => written,
            Err(Failed::Error(error)) => return Err(error),
            Err(Failed::TimedOut(lane)) => {
                if let Some(lane) = lane {
                    release_in_background(lane, release, lease);
                }
                return Err(StoreError::Timeout(limit));
            }
        };
        let shortfall = match target {
            Err(shortfall) if reply.wrote() => shortfall,
            // Reached; or the key is another request's now, and nothing was written.
            _ => return Ok(reply),
        };
        count_shortfall("claim");
        lane.fell_short();
        match undo(lane, &release, command_timeout).await {
            Ok(()) => Err(StoreError::NotDurable(Box::new(shortfall))),
            Err(error) => Err(StoreError::backend(UnreleasedClaim { shortfall, error })),
        }
    }

    /// A fenced write through `call` (a completion, a step), on a lane, followed by the wait;
    /// `what` names it in the shortfall count. A write short of its target answers an error
    /// whose outcome is unknown ([`StoreError::Backend`]). For a completion: the operation ran
    /// and its caller gets its response, and the runtime keeps the result and sends the
    /// completion again until it lands (answering retries of the key in this process from its
    /// copy meanwhile), as it does for any completion the store did not take. For a step: the
    /// run stops there, and the next run does the step again (a foreign step under the same
    /// key). Sent again, a write finds its own record and writes it again, so that the wait
    /// covers it.
    pub(super) async fn write_waited(
        &self,
        lanes: &Arc<Lanes>,
        call: ScriptCall<'_>,
        command_timeout: Duration,
        what: &'static str,
    ) -> Result<Reply, StoreError> {
        let limit = command_timeout + self.durability.timeout();
        match self.write(lanes, &call, limit).await {
            Ok((lane, reply, Err(shortfall))) if reply.wrote() => {
                count_shortfall(what);
                lane.fell_short();
                Err(StoreError::backend(shortfall))
            }
            Ok((_, reply, _)) => Ok(reply),
            Err(Failed::Error(error)) => Err(error),
            Err(Failed::TimedOut(_)) => Err(StoreError::Timeout(limit)),
        }
    }

    /// A write that comes before a claim (the entry of the due index a resumable claim marks
    /// first), on a lane, followed by the wait. One short of its target answers
    /// [`StoreError::NotDurable`]: the claim is not made, and what was written alone is
    /// harmless (an entry without its record is dropped when it falls due).
    pub(super) async fn write_or_refuse(
        &self,
        lanes: &Arc<Lanes>,
        call: ScriptCall<'_>,
        command_timeout: Duration,
    ) -> Result<Reply, StoreError> {
        let limit = command_timeout + self.durability.timeout();
        match self.write(lanes, &call, limit).await {
            Ok((lane, reply, Err(shortfall))) if reply.wrote() => {
                count_shortfall("claim");
                lane.fell_short();
                Err(StoreError::NotDurable(Box::new(shortfall)))
            }
            Ok((_, reply, _)) => Ok(reply),
            Err(Failed::Error(error)) => Err(error),
            Err(Failed::TimedOut(_)) => Err(StoreError::Timeout(limit)),
        }
    }

    /// Sends `call` and the wait on a lane, within `limit`: the script's reply, and whether
    /// the wait met the target.
    async fn write(
        &self,
        lanes: &Arc<Lanes>,
        call: &ScriptCall<'_>,
        limit: Duration,
    ) -> Result<(Lane, Reply, Result<(), Shortfall>), Failed> {
        let deadline = Instant::now() + limit;
        let mut lane = match timeout_at(deadline, lanes.acquire()).await {
            Ok(Ok(lane)) => lane,
            Ok(Err(error)) => return Err(Failed::Error(StoreError::backend(error))),
            Err(_) => return Err(Failed::TimedOut(None)),
        };
        let wait = self
            .durability
            .wait_command()
            .expect("a durable store waits");
        let commands = [call.command(false), call.command(true)];
        let answers =
            match timeout_at(deadline, script_then(&mut lane, &commands, Some(wait))).await {
                Ok(Ok(answers)) => answers,
                Ok(Err(error)) => return Err(Failed::Error(error)),
                Err(_) => return Err(Failed::TimedOut(Some(lane))),
            };
        let [script, waited] = answers;
        let reply = match script.extract_error() {
            Ok(value) => Reply::parse(value).map_err(Failed::Error)?,
            Err(error) => {
                lane.refused(&error);
                return Err(Failed::Error(StoreError::backend(error)));
            }
        };
        let target = self.durability.check(waited);
        Ok((lane, reply, target))
    }
}

/// Sends `commands[0]` (`EVALSHA`), then `wait` if any, in one pipeline; if Redis does not know
/// the script, the same with `commands[1]` (`EVAL` and its source). Answers the script's reply
/// and the wait's (`Nil` without one).
async fn script_then(
    lane: &mut Lane,
    commands: &[Cmd; 2],
    wait: Option<Cmd>,
) -> Result<[Value; 2], StoreError> {
    for command in commands {
        let mut pipeline = vec![command.clone()];
        pipeline.extend(wait.clone());
        let mut answers = lane
            .send(&pipeline)
            .await
            .map_err(StoreError::backend)?
            .into_iter();
        let script = answers.next().unwrap_or(Value::Nil);
        if matches!(&script, Value::ServerError(error) if error.kind() == Some(ServerErrorKind::NoScript))
        {
            continue;
        }
        return Ok([script, answers.next().unwrap_or(Value::Nil)]);
    }
    Err(StoreError::backend(::redis::RedisError::from((
        ::redis::ErrorKind::Server(ServerErrorKind::NoScript),
        "the script was not cached after EVAL",
    ))))
}

/// Releases a claim that fell short on the lane that made it, so that Redis runs the release
/// after the claim. `Ok` when the key is free: released now, or already by someone else.
async fn undo(mut lane: Lane, release: &[Cmd; 2], timeout: Duration) -> Result<(), StoreError> {
    let answered = tokio::time::timeout(timeout, script_then(&mut lane, release, None))
        .await
        .map_err(|_| StoreError::Timeout(timeout))??;
    let [reply, _] = answered;
    let reply = Reply::parse(reply.extract_error().map_err(StoreError::backend)?)?;
    match reply.into_write_result() {
        Ok(()) | Err(StoreError::LeaseLost) => Ok(()),
        Err(error) => Err(error),
    }
}

/// After a claim timed out on `lane`, releases it on the same lane in the background: Redis
/// runs the release after the claim if the claim lands late (a frozen server thawing), so
/// the key is free once Redis answers. The runtime releases too, on another connection, which
/// Redis may run first; this one cannot be overtaken. Given up after `lease`, when a retry
/// may take the key over anyway.
fn release_in_background(mut lane: Lane, release: [Cmd; 2], lease: Duration) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(lease, script_then(&mut lane, &release, None)).await;
    });
}

fn count_shortfall(call: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("idem_redis_durability_shortfalls_total", "call" => call).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = call;
}
