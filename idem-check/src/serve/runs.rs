//! What the server really did, per key: how many requests came with it (attempts) and how
//! many times the operation ran (runs). A client test asserts on these, not on the answers.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use serde::Serialize;
use serde_json::Value;

/// Per key and principal: attempts and runs; per principal: what was created.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    keys: BTreeMap<(String, String), KeyRuns>,
    created: BTreeMap<String, Vec<Value>>,
}

/// What happened to one key of one principal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KeyRuns {
    /// Requests that came with the key, replays and refusals included.
    pub attempts: u32,
    /// Times the operation ran.
    pub runs: u32,
}

/// One line of `GET /runs`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct KeyLine {
    principal: String,
    key: String,
    #[serde(flatten)]
    runs: KeyRuns,
}

impl Runs {
    /// Counts an attempt with `key`; answers its number (1 for the first).
    pub(crate) fn attempt(&self, principal: &str, key: &str) -> u32 {
        self.update(principal, key, |runs| {
            runs.attempts += 1;
            runs.attempts
        })
    }

    /// Counts a run of the operation under `key`; answers its number.
    pub(crate) fn run(&self, principal: &str, key: &str) -> u32 {
        self.update(principal, key, |runs| {
            runs.runs += 1;
            runs.runs
        })
    }

    /// Keeps what a run created.
    pub(crate) fn created(&self, principal: &str, item: Value) {
        self.lock()
            .created
            .entry(principal.to_owned())
            .or_default()
            .push(item);
    }

    /// What was created for `principal`, oldest first.
    pub(crate) fn items(&self, principal: &str) -> Vec<Value> {
        self.lock()
            .created
            .get(principal)
            .cloned()
            .unwrap_or_default()
    }

    /// The attempts and runs of `key` for `principal`.
    #[must_use]
    pub fn of(&self, principal: &str, key: &str) -> KeyRuns {
        self.lock()
            .keys
            .get(&(principal.to_owned(), key.to_owned()))
            .copied()
            .unwrap_or_default()
    }

    /// Every key seen, optionally only `key`.
    pub(crate) fn lines(&self, key: Option<&str>) -> Vec<KeyLine> {
        self.lock()
            .keys
            .iter()
            .filter(|((_, k), _)| key.is_none_or(|wanted| wanted == k))
            .map(|((principal, key), runs)| KeyLine {
                principal: principal.clone(),
                key: key.clone(),
                runs: *runs,
            })
            .collect()
    }

    fn update<T>(&self, principal: &str, key: &str, change: impl FnOnce(&mut KeyRuns) -> T) -> T {
        let mut inner = self.lock();
        let runs = inner
            .keys
            .entry((principal.to_owned(), key.to_owned()))
            .or_default();
        change(runs)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while the lock is held leaves counts that are still counts.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
