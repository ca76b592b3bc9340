//! Which members of a JSON body the fingerprint covers: all of them (the default), all but
//! those named, or only those named, each named by a JSON Pointer (RFC 6901).
//!
//! Some members are not the request: a client's timestamp, a trace id, a nonce. A client that
//! sends a fresh one with each retry changes its body, and its retry would be answered 422
//! "Idempotency-Key is already used". A route leaves such members out
//! ([`Members::Omit`]), or names the members that are the request ([`Members::Only`]), and a
//! retry that differs only outside them is the same request: it is replayed.
//!
//! ```
//! use http::{HeaderMap, Method, header};
//! use idem::fingerprint::{Fingerprint, FingerprintMode, Members};
//!
//! let mut headers = HeaderMap::new();
//! headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
//! let members = Members::Omit(&["/clientTimestamp"]);
//! let fingerprint = |body: &str| {
//!     Fingerprint::compute_members(&Method::POST, "/payments", &headers, body.as_bytes(),
//!         FingerprintMode::Json, &members)
//! };
//! let first = fingerprint(r#"{"amount":9800,"clientTimestamp":"2026-12-01T10:00:00Z"}"#);
//! // The retry's new timestamp is not the request; its amount is.
//! assert_eq!(first, fingerprint(r#"{"amount":9800,"clientTimestamp":"2026-12-01T10:00:07Z"}"#));
//! assert_eq!(first, fingerprint(r#"{"amount":9800}"#));
//! assert_ne!(first, fingerprint(r#"{"amount":9801,"clientTimestamp":"2026-12-01T10:00:00Z"}"#));
//! ```
//!
//! # What it risks
//!
//! A member left out is never compared. A retry that changes it is answered with the first
//! request's response, and the change is ignored without a word: leave out only what does not
//! change what the operation does. A handler that reads a member left out (it stores the
//! client's timestamp, say) keeps the first request's value, since a replay does not run it.
//! With [`Members::Only`], everything not named is ignored, including a member the API gains
//! later, until the route names it too.
//!
//! # What is hashed
//!
//! A selection applies to a body that is canonicalized (JSON, see the [module
//! docs](super#which-bodies-are-canonicalized)); any other body (not JSON, a repeated member
//! name, a form) is fingerprinted whole, as without one. The fingerprint's algorithm is then
//! [`FingerprintAlgorithm::JcsMembersSha256V1`](super::FingerprintAlgorithm::JcsMembersSha256V1),
//! and after the method and target the hash covers the selection itself (`omit` or `only`, and
//! its pointers in byte order, each with its length), so that two routes that select
//! differently never share a fingerprint, and a change of the selection is a change of
//! algorithm to the stores' eyes. Then:
//!
//! - for [`Members::Omit`], the canonical form of the document without the members named (a
//!   member of an object is removed; an element of an array is removed, indices counting in
//!   the array as it was sent), followed by its length;
//! - for [`Members::Only`], for each pointer in byte order a `0` byte when it names nothing, or
//!   a `1` byte, the length and the canonical form of what it names: a member missing and a
//!   member that is `null` differ.
//!
//! The document is read into a `serde_json::Value` for this, which a fingerprint without a
//! selection never does: a route with a selection pays for that allocation.
//!
//! # Which pointers are refused
//!
//! [`Policy::validate`](crate::Policy::validate) refuses, and `#[idempotent]` does not
//! compile, a selection that cannot do what it says: a pointer that is not a JSON Pointer (it
//! must start with `/`, and every `~` is `~0` or `~1`), the empty pointer (the whole body, not
//! a member of it), a pointer given twice, a pointer inside another one (`/order/note` with
//! `/order`), an empty list, and a selection on a route whose fingerprint is `raw`.

use std::{collections::BTreeMap, fmt};

use serde_json::Value;

use super::jcs::canonicalize_json;

/// Which members of a JSON body the fingerprint covers; see the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Members {
    /// Every member (the default).
    #[default]
    All,
    /// Every member but those the JSON Pointers name.
    Omit(&'static [&'static str]),
    /// Only the members the JSON Pointers name.
    Only(&'static [&'static str]),
}

/// Why a selection of members is refused, with the pointer at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MembersError {
    /// Not a JSON Pointer: it does not start with `/`, or a `~` is not `~0` or `~1`.
    NotAPointer(&'static str),
    /// The same pointer twice.
    Repeated(&'static str),
    /// A pointer inside another one, which already covers it.
    Nested {
        /// The pointer that covers the other.
        outer: &'static str,
        /// The pointer inside it.
        inner: &'static str,
    },
    /// A list with no pointer.
    Empty,
}

impl fmt::Display for MembersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAPointer(pointer) => write!(
                f,
                "`{pointer}` is not a JSON Pointer to a member: start it with `/`, and write `~` \
                 as `~0` and `/` within a name as `~1`"
            ),
            Self::Repeated(pointer) => write!(f, "the JSON Pointer `{pointer}` is given twice"),
            Self::Nested { outer, inner } => write!(
                f,
                "the JSON Pointer `{inner}` is inside `{outer}`, which already names it"
            ),
            Self::Empty => f.write_str("a selection of members names at least one JSON Pointer"),
        }
    }
}

impl std::error::Error for MembersError {}

impl MembersError {
    /// What is wrong, without the pointer: the message a constant that holds an invalid
    /// policy fails to compile with.
    pub const fn summary(&self) -> &'static str {
        match self {
            Self::NotAPointer(_) => {
                "invalid idempotency policy: a fingerprint member is not a JSON Pointer to a \
                 member: start it with `/`, as in `/clientTimestamp`, and write `~` as `~0` \
                 and `/` within a name as `~1`"
            }
            Self::Repeated(_) => {
                "invalid idempotency policy: a JSON Pointer of the fingerprint's members is \
                 given twice"
            }
            Self::Nested { .. } => {
                "invalid idempotency policy: a JSON Pointer of the fingerprint's members is \
                 inside another one, which already names it"
            }
            Self::Empty => {
                "invalid idempotency policy: a selection of the fingerprint's members names at \
                 least one JSON Pointer"
            }
        }
    }
}

impl Members {
    /// The pointers, if the selection names any.
    pub const fn pointers(&self) -> &'static [&'static str] {
        match self {
            Self::All => &[],
            Self::Omit(pointers) | Self::Only(pointers) => pointers,
        }
    }

    /// Checks that every pointer can name a member, and none is given twice or inside
    /// another (see the [module docs](self#which-pointers-are-refused)).
    ///
    /// ```
    /// use idem::fingerprint::{Members, MembersError};
    ///
    /// assert_eq!(Members::Omit(&["/clientTimestamp", "/trace/id"]).validate(), Ok(()));
    /// assert_eq!(
    ///     Members::Omit(&["clientTimestamp"]).validate(),
    ///     Err(MembersError::NotAPointer("clientTimestamp"))
    /// );
    /// assert_eq!(
    ///     Members::Only(&["/order", "/order/note"]).validate(),
    ///     Err(MembersError::Nested { outer: "/order", inner: "/order/note" })
    /// );
    /// ```
    pub const fn validate(&self) -> Result<(), MembersError> {
        let pointers = match self {
            Self::All => return Ok(()),
            Self::Omit(pointers) | Self::Only(pointers) => *pointers,
        };
        if pointers.is_empty() {
            return Err(MembersError::Empty);
        }
        let mut i = 0;
        while i < pointers.len() {
            if !is_member_pointer(pointers[i].as_bytes()) {
                return Err(MembersError::NotAPointer(pointers[i]));
            }
            let mut j = 0;
            while j < pointers.len() {
                if i != j {
                    let (a, b) = (pointers[i].as_bytes(), pointers[j].as_bytes());
                    if i < j && equal(a, b) {
                        return Err(MembersError::Repeated(pointers[i]));
                    }
                    if is_inside(b, a) {
                        return Err(MembersError::Nested {
                            outer: pointers[i],
                            inner: pointers[j],
                        });
                    }
                }
                j += 1;
            }
            i += 1;
        }
        Ok(())
    }

    /// What the hash covers of `document` under this selection: the selection, then the
    /// selected members (see the [module docs](self#what-is-hashed)). `None` for
    /// [`Members::All`].
    pub(super) fn write(&self, document: Value, out: &mut Vec<u8>) -> Option<()> {
        let (kind, pointers) = match self {
            Self::All => return None,
            Self::Omit(pointers) => (b'o', *pointers),
            Self::Only(pointers) => (b'k', *pointers),
        };
        let mut sorted = pointers.to_vec();
        sorted.sort_unstable();
        out.push(kind);
        out.extend_from_slice(&(sorted.len() as u64).to_be_bytes());
        for pointer in &sorted {
            with_length(pointer.as_bytes(), out);
        }
        match self {
            Self::Omit(_) => {
                let mut document = document;
                let tokens: Vec<Vec<String>> = sorted.iter().map(|p| tokens(p)).collect();
                let paths: Vec<&[String]> = tokens.iter().map(Vec::as_slice).collect();
                remove(&mut document, &paths);
                let start = out.len();
                canonicalize_json(&document, out);
                let len = (out.len() - start) as u64;
                out.extend_from_slice(&len.to_be_bytes());
            }
            _ => {
                let mut value = Vec::new();
                for pointer in &sorted {
                    match document.pointer(pointer) {
                        None => out.push(0),
                        Some(selected) => {
                            out.push(1);
                            value.clear();
                            canonicalize_json(selected, &mut value);
                            with_length(&value, out);
                        }
                    }
                }
            }
        }
        Some(())
    }
}

fn with_length(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A pointer's reference tokens, unescaped (`~1` is `/`, `~0` is `~`).
fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Removes from `value` what each path of tokens names. An array's indices count in the array
/// as it was: its elements are removed after every path into it has been followed.
fn remove(value: &mut Value, paths: &[&[String]]) {
    let mut by_first: BTreeMap<&str, Vec<&[String]>> = BTreeMap::new();
    for path in paths {
        if let Some((first, rest)) = path.split_first() {
            by_first.entry(first.as_str()).or_default().push(rest);
        }
    }
    match value {
        Value::Object(members) => {
            for (name, rests) in by_first {
                if rests.iter().any(|rest| rest.is_empty()) {
                    members.remove(name);
                } else if let Some(member) = members.get_mut(name) {
                    remove(member, &rests);
                }
            }
        }
        Value::Array(elements) => {
            let mut removed = Vec::new();
            for (token, rests) in by_first {
                let Some(index) = array_index(token).filter(|index| *index < elements.len()) else {
                    continue;
                };
                if rests.iter().any(|rest| rest.is_empty()) {
                    removed.push(index);
                } else {
                    remove(&mut elements[index], &rests);
                }
            }
            removed.sort_unstable();
            for index in removed.into_iter().rev() {
                elements.remove(index);
            }
        }
        _ => {}
    }
}

/// An array index as RFC 6901 writes one: `0`, or digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    let digits = token.bytes().all(|byte| byte.is_ascii_digit());
    if token.is_empty() || !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

/// Whether `pointer` is a JSON Pointer to a member: `/` and tokens, every `~` escaped.
const fn is_member_pointer(pointer: &[u8]) -> bool {
    if pointer.is_empty() || pointer[0] != b'/' {
        return false;
    }
    let mut index = 0;
    while index < pointer.len() {
        if pointer[index] == b'~' {
            if index + 1 >= pointer.len()
                || !(pointer[index + 1] == b'0' || pointer[index + 1] == b'1')
            {
                return false;
            }
            index += 1;
        }
        index += 1;
    }
    true
}

/// Whether the pointer `inner` names something inside what `outer` names.
const fn is_inside(inner: &[u8], outer: &[u8]) -> bool {
    if inner.len() <= outer.len() || inner[outer.len()] != b'/' {
        return false;
    }
    let mut index = 0;
    while index < outer.len() {
        if inner[index] != outer[index] {
            return false;
        }
        index += 1;
    }
    true
}

const fn equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut index = 0;
    while index < a.len() {
        if a[index] != b[index] {
            return false;
        }
        index += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn omitted(pointers: &'static [&'static str], document: Value) -> Value {
        let mut document = document;
        let tokens: Vec<Vec<String>> = pointers.iter().map(|p| tokens(p)).collect();
        let paths: Vec<&[String]> = tokens.iter().map(Vec::as_slice).collect();
        remove(&mut document, &paths);
        document
    }

    #[test]
    fn omitting_removes_members_and_elements_as_they_were_sent() {
        let document = json!({
            "amount": 1,
            "trace": {"id": "t", "span": "s"},
            "items": [{"sku": "a", "at": 1}, {"sku": "b", "at": 2}, {"sku": "c"}],
            "a/b": 1, "m~n": 2,
        });
        assert_eq!(
            omitted(
                &["/trace/id", "/items/0", "/items/1/at", "/a~1b", "/m~0n"],
                document
            ),
            json!({
                "amount": 1,
                "trace": {"span": "s"},
                "items": [{"sku": "b"}, {"sku": "c"}],
            })
        );
        // What names nothing changes nothing.
        let same = json!({"items": [1, 2], "n": null});
        assert_eq!(
            omitted(
                &["/missing", "/items/2", "/items/01", "/items/-", "/n/x"],
                same.clone()
            ),
            same
        );
    }

    #[test]
    fn pointers_that_cannot_name_a_member_are_refused() {
        let bad: [&'static [&'static str]; 5] =
            [&[""], &["clientTimestamp"], &["/a~"], &["/a~2"], &["/~x"]];
        for pointers in bad {
            assert_eq!(
                Members::Omit(pointers).validate(),
                Err(MembersError::NotAPointer(pointers[0])),
                "{pointers:?}"
            );
        }
        let good: [&'static [&'static str]; 5] =
            [&["/"], &["/a"], &["/a/0"], &["/a~0b~1c"], &["/-"]];
        for pointers in good {
            assert_eq!(Members::Only(pointers).validate(), Ok(()), "{pointers:?}");
        }
        assert_eq!(Members::Omit(&[]).validate(), Err(MembersError::Empty));
        assert_eq!(
            Members::Omit(&["/a", "/b", "/a"]).validate(),
            Err(MembersError::Repeated("/a"))
        );
        assert_eq!(
            Members::Omit(&["/a/b", "/a"]).validate(),
            Err(MembersError::Nested {
                outer: "/a",
                inner: "/a/b"
            })
        );
        // A common prefix is not nesting.
        assert_eq!(Members::Omit(&["/ab", "/a"]).validate(), Ok(()));
        assert_eq!(Members::All.validate(), Ok(()));
    }

    #[test]
    fn only_tells_a_missing_member_from_null() {
        let write = |document: Value| {
            let mut out = Vec::new();
            Members::Only(&["/amount"]).write(document, &mut out);
            out
        };
        assert_ne!(write(json!({})), write(json!({"amount": null})));
        assert_eq!(
            write(json!({"amount": 1, "x": 2})),
            write(json!({"amount": 1}))
        );
    }

    #[test]
    fn the_order_of_the_pointers_does_not_matter_and_the_selection_does() {
        let write = |members: Members| {
            let mut out = Vec::new();
            members.write(json!({"a": 1, "b": 2, "c": 3}), &mut out);
            out
        };
        assert_eq!(
            write(Members::Omit(&["/a", "/b"])),
            write(Members::Omit(&["/b", "/a"]))
        );
        assert_ne!(
            write(Members::Omit(&["/a"])),
            write(Members::Only(&["/b", "/c"]))
        );
        assert_eq!(write(Members::All), Vec::<u8>::new());
    }
}
