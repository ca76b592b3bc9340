//! [`ConnectError`]: what a store says when it cannot be reached as the service starts.
//!
//! A service usually connects its store in `main` and ends with `?`, which prints the error's
//! `Debug`. `Connection refused (os error 111)` alone names neither the store nor where it was
//! looked for; this error names both (never a password) and what to check.

use std::{error::Error, fmt};

use super::BoxError;

/// A store that could not be reached when it was connected: which store, where (a URL without
/// its credentials or query), and the store's own error as the [`source`](Error::source).
///
/// Its `Debug`, which `main` prints for an error it returns, is one sentence with all three:
///
/// ```
/// use idem::store::ConnectError;
///
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// let error = ConnectError::for_url("Redis", "redis://shop:secret@10.0.0.7:6379/2", refused);
/// assert_eq!(error.at(), "redis://10.0.0.7:6379/2");
/// let said = format!("{error:?}");
/// assert!(said.starts_with("cannot connect to Redis at redis://10.0.0.7:6379/2: connection refused;"));
/// assert!(!said.contains("secret"));
/// ```
pub struct ConnectError {
    store: &'static str,
    at: String,
    source: BoxError,
    /// What to check, in words for the operator.
    advice: &'static str,
}

/// What to check when a store cannot be reached.
const UNREACHABLE: &str = "check that it runs there and that the address, port, database and \
                           credentials are right";

impl ConnectError {
    /// The error of `store` (`"Redis"`, `"PostgreSQL"`), which could not be reached at `at`
    /// (an address, or what the store was given: never with credentials).
    pub fn new(store: &'static str, at: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            store,
            at: at.into(),
            source: source.into(),
            advice: UNREACHABLE,
        }
    }

    /// A store that was reached and cannot serve as it is set up (a server too old for the
    /// durability asked of it, say): its `source` says what it needs.
    pub fn unsuited(
        store: &'static str,
        at: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self {
            advice: "the server answered, and cannot do what the store is set up to ask of it",
            ..Self::new(store, at, source)
        }
    }

    /// [`new`](Self::new) for a store given a URL, which it names without its user, password
    /// and query (`redis://user:secret@host:6379/0?password=x` is `redis://host:6379/0`).
    pub fn for_url(store: &'static str, url: &str, source: impl Into<BoxError>) -> Self {
        Self::new(store, redact(url), source)
    }

    /// The store's name.
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// Where the store was looked for.
    pub fn at(&self) -> &str {
        &self.at
    }
}

/// `url` without its user information and its query, which may carry credentials.
fn redact(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        // Everything up to the last `@` is user information, whatever a password holds.
        Some((scheme, rest)) => {
            let host_and_path = rest.rsplit_once('@').map_or(rest, |(_, after)| after);
            format!("{scheme}://{host_and_path}")
        }
        // Not a URL: shown whole only if it cannot hide a password.
        None if !url.contains('@') => url.to_owned(),
        None => "the address given".to_owned(),
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            store, at, advice, ..
        } = self;
        write!(f, "cannot connect to {store} at {at}; {advice}")
    }
}

/// One line with the store's own error in it: what `main` prints for an error it returns.
impl fmt::Debug for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            store,
            at,
            source,
            advice,
        } = self;
        write!(f, "cannot connect to {store} at {at}: {source}; {advice}")
    }
}

impl Error for ConnectError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_and_query() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://:secret@host:6379/2", "redis://host:6379/2"),
            (
                "postgres://app:p%40ss@db.internal/shop?sslmode=require",
                "postgres://db.internal/shop",
            ),
            (
                "mysql://root@127.0.0.1:3306/test",
                "mysql://127.0.0.1:3306/test",
            ),
            (
                "sqlite:///var/lib/shop.db?mode=rwc",
                "sqlite:///var/lib/shop.db",
            ),
            (
                "redis+unix:///run/redis.sock",
                "redis+unix:///run/redis.sock",
            ),
            ("10.0.0.7:6379", "10.0.0.7:6379"),
            ("postgres://app:pa/ss@db/shop", "postgres://db/shop"),
            ("user:secret@10.0.0.7", "the address given"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}
