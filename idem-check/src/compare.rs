//! Whether two answers are the same: the same bytes, the same JSON written otherwise, or
//! different, and then where.

use serde_json::Value;

use crate::show;

/// How two answers' bodies compare.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sameness {
    /// The same bytes.
    Bytes,
    /// The same JSON value, written differently.
    Json,
    /// Different; says where, as a JSON Pointer when both are JSON.
    Differs(String),
}

/// Compares two answers' bodies.
pub(crate) fn compare(first: &[u8], second: &[u8]) -> Sameness {
    if first == second {
        return Sameness::Bytes;
    }
    match (
        serde_json::from_slice::<Value>(first),
        serde_json::from_slice::<Value>(second),
    ) {
        (Ok(a), Ok(b)) => match first_difference(&a, &b, String::new()) {
            None => Sameness::Json,
            Some(difference) => Sameness::Differs(difference),
        },
        _ => Sameness::Differs("the bodies are not the same bytes".to_owned()),
    }
}

/// Where two JSON values first differ: `/id: "pay_1" vs "pay_2"`.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(a_members), Value::Object(b_members)) => {
            let mut names: Vec<&String> = a_members.keys().chain(b_members.keys()).collect();
            names.sort();
            names.dedup();
            names.into_iter().find_map(|name| {
                let at = format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"));
                match (a_members.get(name), b_members.get(name)) {
                    (Some(a), Some(b)) => first_difference(a, b, at),
                    (Some(_), None) => Some(format!("{at}: only in the first")),
                    _ => Some(format!("{at}: only in the second")),
                }
            })
        }
        (Value::Array(a_items), Value::Array(b_items)) if a_items.len() == b_items.len() => a_items
            .iter()
            .zip(b_items)
            .enumerate()
            .find_map(|(index, (a, b))| first_difference(a, b, format!("{path}/{index}"))),
        _ if a == b => None,
        _ => Some(format!(
            "{}: {} vs {}",
            if path.is_empty() { "/" } else { &path },
            show::body_text(a.to_string().as_bytes()),
            show::body_text(b.to_string().as_bytes())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_compare_by_bytes_then_by_json() {
        assert_eq!(compare(b"{\"a\":1}", b"{\"a\":1}"), Sameness::Bytes);
        assert_eq!(
            compare(b"{\"a\":1,\"b\":2}", b"{\"b\":2, \"a\":1}"),
            Sameness::Json
        );
        assert_eq!(
            compare(br#"{"id":"p1","n":[1,2]}"#, br#"{"id":"p2","n":[1,2]}"#),
            Sameness::Differs(r#"/id: "p1" vs "p2""#.to_owned())
        );
        assert_eq!(
            compare(br#"{"n":[1,2]}"#, br#"{"n":[1,3]}"#),
            Sameness::Differs("/n/1: 2 vs 3".to_owned())
        );
        assert_eq!(
            compare(br#"{"a":1}"#, br#"{"a":1,"b":2}"#),
            Sameness::Differs("/b: only in the second".to_owned())
        );
        assert!(matches!(compare(b"x", b"y"), Sameness::Differs(_)));
    }
}
