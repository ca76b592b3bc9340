//! A progress line on a terminal: which case runs and what it waits for, rewritten in place
//! while a slow request or a `Retry-After` runs its course. Nothing when stderr is not a
//! terminal (CI logs, pipes).

use std::{
    io::{IsTerminal, Write},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{task::JoinHandle, time::Instant};

use crate::{duration, exchange::Probe};

/// The progress line, or nothing.
#[derive(Debug)]
pub(crate) struct Progress {
    state: Option<Arc<Mutex<State>>>,
    ticker: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct State {
    case: String,
    doing: String,
    since: Instant,
}

impl Progress {
    /// A progress line on stderr if it is a terminal.
    pub(crate) fn on_terminal() -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::silent();
        }
        let state = Arc::new(Mutex::new(State {
            case: "preflight".to_owned(),
            doing: String::new(),
            since: Instant::now(),
        }));
        let ticking = Arc::clone(&state);
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                render(&ticking);
            }
        });
        Self {
            state: Some(state),
            ticker: Some(ticker),
        }
    }

    /// No progress line.
    pub(crate) fn silent() -> Self {
        Self {
            state: None,
            ticker: None,
        }
    }

    /// Case `index` of `total` starts.
    pub(crate) fn case(&self, index: usize, total: usize, name: &str) {
        self.update(|state| state.case = format!("[{index}/{total}] {name}"), "");
    }

    /// A request is on its way.
    pub(crate) fn waiting_for(&self, probe: &Probe) {
        let doing = format!("waiting for {} {}", probe.method, probe.url.path());
        self.update(|_| {}, &doing);
    }

    /// The check sleeps, and why.
    pub(crate) fn sleeping(&self, duration: Duration, why: &str) {
        let doing = format!("waiting {} ({why})", duration::show(duration));
        self.update(|_| {}, &doing);
    }

    /// Nothing is awaited.
    pub(crate) fn answered(&self) {
        self.update(|_| {}, "");
    }

    /// Clears the line for good.
    pub(crate) fn finish(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        if self.state.take().is_some() {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
        }
    }

    fn update(&self, change: impl FnOnce(&mut State), doing: &str) {
        let Some(state) = &self.state else {
            return;
        };
        if let Ok(mut state) = state.lock() {
            change(&mut state);
            doing.clone_into(&mut state.doing);
            state.since = Instant::now();
        }
        render(state);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn render(state: &Mutex<State>) {
    let Ok(state) = state.lock() else {
        return;
    };
    let mut line = format!("  {}", state.case);
    if !state.doing.is_empty() {
        line.push_str(&format!(
            ": {} … {}",
            state.doing,
            duration::show(state.since.elapsed())
        ));
    }
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "\r\x1b[2K{line}");
    let _ = stderr.flush();
}
