//! The store's Lua scripts, how a call of one is written as a command, and how its answer is
//! read.

use std::sync::LazyLock;

use ::redis::{Cmd, Script, ToRedisArgs, Value};

use super::record;
use idem_core::replay::DecodeError;
use idem_core::store::StoreError;

/// One of the store's Lua scripts: its source, and the SHA-1 that `EVALSHA` names it by.
pub(super) struct LuaScript {
    source: String,
    sha: String,
}

impl LuaScript {
    /// The script of `body`, after the `parts` of the prelude it uses. Each function a script
    /// defines is made anew on every call (about 0.2 µs of Redis's time each), so a script
    /// takes only the parts it calls.
    fn new(parts: &[&str], body: &str) -> Self {
        let mut source = String::new();
        for part in parts {
            source.push_str(part);
        }
        source.push_str(body);
        Self {
            sha: Script::new(&source).get_hash().to_owned(),
            source,
        }
    }

    /// A call of this script on one record.
    pub(super) fn call(&self, key: String) -> ScriptCall<'_> {
        ScriptCall {
            script: self,
            key,
            args: Vec::new(),
        }
    }
}

/// A script call: the script, its one key and its arguments.
pub(super) struct ScriptCall<'a> {
    script: &'a LuaScript,
    key: String,
    args: Vec<Vec<u8>>,
}

impl ScriptCall<'_> {
    pub(super) fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// `EVALSHA sha 1 key args..`, or with `EVAL` the script's source instead of its SHA.
    pub(super) fn command(&self, eval: bool) -> Cmd {
        let mut command = if eval {
            let mut command = ::redis::cmd("EVAL");
            command.arg(&self.script.source);
            command
        } else {
            let mut command = ::redis::cmd("EVALSHA");
            command.arg(&self.script.sha);
            command
        };
        command.arg(1).arg(&self.key).arg(&*self.args);
        command
    }
}

pub(super) struct Scripts {
    pub(super) claim: LuaScript,
    pub(super) complete: LuaScript,
    pub(super) renew: LuaScript,
    pub(super) release: LuaScript,
    pub(super) record_step: LuaScript,
    pub(super) suspend: LuaScript,
    pub(super) look_up: LuaScript,
    pub(super) remove: LuaScript,
    /// The due index's (`due.rs`): on the index, then on a record it names.
    pub(super) due_mark: LuaScript,
    pub(super) due_list: LuaScript,
    pub(super) due_settle: LuaScript,
    pub(super) due_take: LuaScript,
}

/// Reading a record: the first part of every script of a record, after the layout's constants.
const READ: &str = include_str!("scripts/prelude/record.lua");
/// The server's clock.
const CLOCK: &str = include_str!("scripts/prelude/clock.lua");
/// Lease times, what a resumable record keeps, and the writing of an in-flight record.
const IN_FLIGHT: &str = include_str!("scripts/prelude/in_flight.lua");
/// The record its holder's token holds in flight.
const HELD: &str = include_str!("scripts/prelude/held.lua");

/// A script of one record: the layout's constants, reading a record, then `parts`.
macro_rules! script {
    ($file:literal $(, $part:ident)*) => {
        LuaScript::new(
            &[&record::lua_constants(), READ $(, $part)*],
            include_str!(concat!("scripts/", $file)),
        )
    };
}

/// A script of the due index, which reads no record.
macro_rules! index_script {
    ($file:literal) => {
        LuaScript::new(&[CLOCK], include_str!(concat!("scripts/", $file)))
    };
}

pub(super) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    claim: script!("claim.lua", CLOCK, IN_FLIGHT),
    complete: script!("complete.lua"),
    renew: script!("renew.lua", HELD, CLOCK, IN_FLIGHT),
    release: script!("release.lua", HELD),
    record_step: script!("record_step.lua", HELD, CLOCK, IN_FLIGHT),
    suspend: script!("suspend.lua", HELD, CLOCK, IN_FLIGHT),
    look_up: script!("look_up.lua", CLOCK, IN_FLIGHT),
    remove: script!("remove.lua"),
    due_mark: index_script!("due_mark.lua"),
    due_list: index_script!("due_list.lua"),
    due_settle: index_script!("due_settle.lua"),
    due_take: script!("due_take.lua", CLOCK, IN_FLIGHT),
});

/// Why a record could not be read back.
#[derive(Debug, thiserror::Error)]
pub(super) enum RecordError {
    #[error("the record has format version {0:?}, which this build does not know")]
    UnknownVersion(String),
    #[error("malformed record: {0}")]
    Malformed(String),
    #[error("the stored response does not decode")]
    Response(#[source] DecodeError),
    #[error("the recorded steps do not decode")]
    Steps(#[source] DecodeError),
}

impl From<record::Unreadable> for RecordError {
    fn from(unreadable: record::Unreadable) -> Self {
        match unreadable {
            record::Unreadable::Version(version) => Self::UnknownVersion(version.to_string()),
            record::Unreadable::Malformed(why) => Self::Malformed(why.to_owned()),
        }
    }
}

/// An answer that no call of the store's can get: the server runs other scripts than ours, or
/// is not the Redis it is meant to be.
#[derive(Debug, thiserror::Error)]
#[error("unexpected reply from Redis: {0}")]
pub(super) struct UnexpectedReply(pub(super) String);

/// A script's answer: the outcome's name, and its payload if it has one.
pub(super) struct Reply {
    pub(super) outcome: Vec<u8>,
    pub(super) payload: Option<Vec<u8>>,
}

impl Reply {
    /// The reply of a claim that claimed the key without a script.
    pub(super) fn claimed() -> Self {
        Self {
            outcome: b"claimed".to_vec(),
            payload: None,
        }
    }

    pub(super) fn parse(value: Value) -> Result<Self, StoreError> {
        let unexpected = |value: &Value| StoreError::backend(UnexpectedReply(format!("{value:?}")));
        let Value::Array(items) = value else {
            return Err(unexpected(&value));
        };
        if !(1..=2).contains(&items.len()) {
            return Err(unexpected(&Value::Array(items)));
        }
        let mut fields = Vec::with_capacity(2);
        for item in items {
            match item {
                Value::BulkString(bytes) => fields.push(bytes),
                Value::SimpleString(text) => fields.push(text.into_bytes()),
                other => return Err(unexpected(&other)),
            }
        }
        let mut fields = fields.into_iter();
        let outcome = fields.next().expect("one or two fields");
        Ok(Self {
            outcome,
            payload: fields.next(),
        })
    }

    /// Whether the script wrote the record: a claim that claimed (a fresh key or a takeover,
    /// resumed or not) or a write that was done.
    pub(super) fn wrote(&self) -> bool {
        matches!(&self.outcome[..], b"claimed" | b"resumed" | b"ok")
    }

    /// The error for the outcomes every script may answer besides its own.
    pub(super) fn into_error(self) -> StoreError {
        let payload = String::from_utf8_lossy(self.payload.as_deref().unwrap_or_default());
        match &self.outcome[..] {
            b"lost" => StoreError::LeaseLost,
            b"version" => StoreError::corrupt(RecordError::UnknownVersion(payload.into())),
            b"corrupt" => StoreError::corrupt(RecordError::Malformed(payload.into())),
            outcome => StoreError::backend(UnexpectedReply(
                String::from_utf8_lossy(outcome).into_owned(),
            )),
        }
    }

    /// The answer of a fenced write: `ok`, or the reason it was refused.
    pub(super) fn into_write_result(self) -> Result<(), StoreError> {
        match &self.outcome[..] {
            b"ok" => Ok(()),
            _ => Err(self.into_error()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_and_map_to_errors() {
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let lost = Reply::parse(Value::Array(vec![bulk("lost")])).unwrap();
        assert!(!lost.wrote());
        assert!(matches!(
            lost.into_write_result(),
            Err(StoreError::LeaseLost)
        ));
        let version = Reply::parse(Value::Array(vec![bulk("version"), bulk("2")])).unwrap();
        assert!(matches!(version.into_error(), StoreError::Corrupt(_)));
        assert!(matches!(
            Reply::parse(Value::Int(1)),
            Err(StoreError::Backend(_))
        ));
        assert!(matches!(
            Reply::parse(Value::Array(vec![])),
            Err(StoreError::Backend(_))
        ));
        assert!(
            Reply::parse(Value::Array(vec![bulk("claimed")]))
                .unwrap()
                .wrote()
        );
        assert!(
            !Reply::parse(Value::Array(vec![bulk("in_flight")]))
                .unwrap()
                .wrote()
        );
    }

    #[test]
    fn every_script_compiles_to_its_own_sha() {
        let shas = [
            &SCRIPTS.claim.sha,
            &SCRIPTS.complete.sha,
            &SCRIPTS.renew.sha,
            &SCRIPTS.release.sha,
            &SCRIPTS.record_step.sha,
            &SCRIPTS.suspend.sha,
            &SCRIPTS.look_up.sha,
            &SCRIPTS.remove.sha,
            &SCRIPTS.due_mark.sha,
            &SCRIPTS.due_list.sha,
            &SCRIPTS.due_settle.sha,
            &SCRIPTS.due_take.sha,
        ];
        for (i, sha) in shas.iter().enumerate() {
            assert!(!shas[i + 1..].contains(sha));
        }
    }
}
