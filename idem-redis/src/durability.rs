//! [`Durability`]: how far a claim must have travelled before the store answers it.

use std::{fmt, time::Duration};

use ::redis::{Cmd, Value};

/// How far the store's writes must have travelled before it answers: what a claim survives.
///
/// Redis answers a write once the primary holds it in memory, and replicates it afterwards. A
/// failover to a replica that had not received a claim yet loses it: a retry then claims the
/// key again, and the operation runs twice. [`Replicas`](Self::Replicas) closes that window by
/// sending `WAIT` after each claim (and completion), and
/// [`AppendOnlyFile`](Self::AppendOnlyFile) closes the window of a crash by sending `WAITAOF`.
///
/// A claim that does not reach its target in time is released by the store and answered
/// [`StoreError::NotDurable`](idem_core::store::StoreError::NotDurable): the runtime answers 503
/// with `Retry-After`, and the handler does not run on a claim a failover could lose. A
/// completion that falls short is still answered (the operation has run), counted
/// (`idem_redis_durability_shortfalls_total{call="complete"}` with the `metrics` feature;
/// refused claims are `call="claim"`), logged as a warning, and kept by the runtime, which
/// sends it again until it reaches the target.
///
/// Wait for every replica (`replicas` equal to their number): a failover can promote any of
/// them, and a write is only on those that acknowledged it. [docs/redis.md](https://github.com/idem-rs/idem/blob/main/docs/redis.md) in the repository
/// has what each deployment survives with each setting.
///
/// ```
/// use std::time::Duration;
/// use idem::redis::Durability;
///
/// let durability = Durability::replicas(1, Duration::from_millis(100));
/// assert_eq!(durability.to_string(), "1 replica within 100ms");
/// assert_eq!(Durability::default(), Durability::Async);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Answer as soon as the primary has the write (Redis's own default): a failover may lose
    /// the latest claims, and a crash of a Redis without `appendfsync always` too.
    #[default]
    Async,
    /// Answer once `replicas` replicas acknowledged the write (`WAIT replicas timeout`).
    Replicas {
        /// How many replicas must acknowledge each claim.
        replicas: u32,
        /// How long to wait for them.
        timeout: Duration,
    },
    /// Answer once the primary's append-only file, and `replicas` replicas' files, have the
    /// write on disk (`WAITAOF 1 replicas timeout`). Needs Redis 7.2 or later with
    /// `appendonly yes`; connecting to a server without `WAITAOF` is refused.
    AppendOnlyFile {
        /// How many replicas must have synced it too (0: the primary alone).
        replicas: u32,
        /// How long to wait for them.
        timeout: Duration,
    },
}

impl Durability {
    /// Waits for `replicas` replicas for at most `timeout` after each claim and completion
    /// (`0` waits for none, and costs the round trip).
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::redis::Durability;
    ///
    /// let durability = Durability::replicas(2, Duration::from_millis(250));
    /// assert_eq!(durability, Durability::Replicas { replicas: 2, timeout: Duration::from_millis(250) });
    /// ```
    pub const fn replicas(replicas: u32, timeout: Duration) -> Self {
        Self::Replicas { replicas, timeout }
    }

    /// Waits for the primary's append-only file, and `replicas` replicas' files, for at most
    /// `timeout` after each claim and completion.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::redis::Durability;
    ///
    /// let durability = Durability::append_only_file(0, Duration::from_millis(100));
    /// assert_eq!(durability.to_string(), "the append-only file within 100ms");
    /// ```
    pub const fn append_only_file(replicas: u32, timeout: Duration) -> Self {
        Self::AppendOnlyFile { replicas, timeout }
    }

    /// How long a write may wait for its target: zero when asynchronous.
    pub const fn timeout(&self) -> Duration {
        match self {
            Self::Async => Duration::ZERO,
            Self::Replicas { timeout, .. } | Self::AppendOnlyFile { timeout, .. } => *timeout,
        }
    }

    /// Whether writes wait for anything.
    pub const fn is_async(&self) -> bool {
        matches!(self, Self::Async)
    }

    /// The command that waits for the target, sent after the write on its connection.
    pub(super) fn wait_command(&self) -> Option<Cmd> {
        let millis = |timeout: &Duration| timeout.as_millis().clamp(1, u64::MAX as u128) as u64;
        match self {
            Self::Async => None,
            Self::Replicas { replicas, timeout } => {
                let mut command = ::redis::cmd("WAIT");
                command.arg(replicas).arg(millis(timeout));
                Some(command)
            }
            Self::AppendOnlyFile { replicas, timeout } => {
                let mut command = ::redis::cmd("WAITAOF");
                command.arg(1).arg(replicas).arg(millis(timeout));
                Some(command)
            }
        }
    }

    /// Reads the answer of [`wait_command`](Self::wait_command): `Ok` when the write reached
    /// the target, the shortfall otherwise.
    pub(super) fn check(&self, answer: Value) -> Result<(), Shortfall> {
        let short = |reached: String| {
            Err(Shortfall {
                durability: *self,
                reached,
            })
        };
        match (self, answer) {
            (Self::Async, _) => Ok(()),
            (Self::Replicas { replicas, .. }, Value::Int(acked)) => {
                if acked >= i64::from(*replicas) {
                    Ok(())
                } else {
                    short(format!("{acked} acknowledged"))
                }
            }
            (Self::AppendOnlyFile { replicas, .. }, Value::Array(counts)) => {
                match counts.as_slice() {
                    [Value::Int(local), Value::Int(acked)] => {
                        if *local >= 1 && *acked >= i64::from(*replicas) {
                            Ok(())
                        } else {
                            short(format!(
                                "synced on the primary: {}, replicas that synced: {acked}",
                                if *local >= 1 { "yes" } else { "no" }
                            ))
                        }
                    }
                    other => short(format!("an unexpected answer {other:?}")),
                }
            }
            (_, Value::ServerError(error)) => short(format!("Redis refused to wait: {error:?}")),
            (_, other) => short(format!("an unexpected answer {other:?}")),
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Async => f.write_str("asynchronous"),
            Self::Replicas { replicas, timeout } => write!(
                f,
                "{replicas} replica{} within {timeout:?}",
                if *replicas == 1 { "" } else { "s" }
            ),
            Self::AppendOnlyFile {
                replicas: 0,
                timeout,
            } => write!(f, "the append-only file within {timeout:?}"),
            Self::AppendOnlyFile { replicas, timeout } => write!(
                f,
                "the append-only file and {replicas} replica{} within {timeout:?}",
                if *replicas == 1 { "" } else { "s" }
            ),
        }
    }
}

/// A write that did not reach its durability target in time.
#[derive(Debug, thiserror::Error)]
#[error("the write did not reach its durability target ({durability}): {reached}")]
pub(super) struct Shortfall {
    durability: Durability,
    reached: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(command: Option<Cmd>) -> String {
        String::from_utf8(command.expect("a command").get_packed_command())
            .unwrap()
            .replace("\r\n", " ")
    }

    #[test]
    fn the_wait_commands_name_the_target() {
        assert!(Durability::Async.wait_command().is_none());
        let replicas = Durability::replicas(2, Duration::from_millis(150));
        assert!(packed(replicas.wait_command()).ends_with("$4 WAIT $1 2 $3 150 "));
        let aof = Durability::append_only_file(1, Duration::from_micros(10));
        assert!(packed(aof.wait_command()).ends_with("$7 WAITAOF $1 1 $1 1 $1 1 "));
    }

    #[test]
    fn answers_short_of_the_target_are_shortfalls() {
        let replicas = Durability::replicas(2, Duration::from_millis(100));
        assert!(replicas.check(Value::Int(2)).is_ok());
        assert!(replicas.check(Value::Int(3)).is_ok());
        let short = replicas.check(Value::Int(1)).unwrap_err();
        assert_eq!(
            short.to_string(),
            "the write did not reach its durability target (2 replicas within 100ms): 1 \
             acknowledged"
        );
        assert!(replicas.check(Value::Nil).is_err());

        let aof = Durability::append_only_file(1, Duration::from_millis(100));
        let counts = |local, acked| Value::Array(vec![Value::Int(local), Value::Int(acked)]);
        assert!(aof.check(counts(1, 1)).is_ok());
        assert!(aof.check(counts(0, 1)).is_err());
        assert!(aof.check(counts(1, 0)).is_err());
        assert!(aof.check(Value::Int(1)).is_err());
    }
}
