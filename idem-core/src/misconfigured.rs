//! Misconfigurations the runtime can only see on a request (a route whose attribute finds no
//! runtime, a per-user route whose service named no user): each is the service's fault, is
//! logged at `error` the first time a route meets it, with the fix, and answered 500 without
//! blaming the client. Once per route and kind, so that a log is not flooded by every request
//! of a broken route, and every broken route is named.

use std::{
    collections::HashSet,
    sync::{Mutex, PoisonError},
};

/// The routes whose misconfiguration was told, at most this many: a route outside a router is
/// its request path, which a client chooses, and the set must not grow with them.
const MOST_ROUTES: usize = 1024;

/// The misconfigurations told, by kind and route.
type Told = HashSet<(&'static str, Box<str>)>;

static TOLD: Mutex<Option<Told>> = Mutex::new(None);

/// Whether `kind` of misconfiguration on `route` is met for the first time in this process:
/// the caller then logs it.
pub(crate) fn first_on_route(kind: &'static str, route: &str) -> bool {
    let mut told = TOLD.lock().unwrap_or_else(PoisonError::into_inner);
    let told = told.get_or_insert_with(HashSet::new);
    if told.len() >= MOST_ROUTES {
        return false;
    }
    told.insert((kind, route.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_and_kind_is_told_once() {
        assert!(first_on_route("test-kind", "/a"));
        assert!(!first_on_route("test-kind", "/a"));
        assert!(first_on_route("test-kind", "/b"));
        assert!(first_on_route("other-kind", "/a"));
    }
}
