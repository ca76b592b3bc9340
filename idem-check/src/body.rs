//! Bodies made from the endpoint's: another request (one member changed) for case 2, and the
//! same request with its members in another order for the reordered-JSON case. A body's
//! members are read in the order they were sent, each value kept as the bytes it was, so a
//! variant differs from the original only where it means to.

use std::fmt;

use bytes::Bytes;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Number, Value, value::RawValue};

/// A JSON object's members in the order they were written, values as written.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Box<RawValue>>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

impl Members {
    fn of(body: &[u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }

    fn write(members: &[(String, Box<RawValue>)]) -> Bytes {
        Self::write_spaced(members, "")
    }

    /// The members written with `space` after each `{`, `:` and `,`.
    fn write_spaced(members: &[(String, Box<RawValue>)], space: &str) -> Bytes {
        let mut out = format!("{{{space}");
        for (index, (name, value)) in members.iter().enumerate() {
            if index > 0 {
                out.push(',');
                out.push_str(space);
            }
            out.push_str(&Value::String(name.clone()).to_string());
            out.push(':');
            out.push_str(space);
            out.push_str(value.get());
        }
        out.push_str(space);
        out.push('}');
        Bytes::from(out)
    }
}

/// Another request: the body with its first number increased by one (or, failing a number,
/// its first boolean flipped, or its first string with `-2` appended); the member and its
/// values are named in the second element. `None` when the body is not an object with such a
/// member.
pub(crate) fn other_body(body: &[u8]) -> Option<(Bytes, String)> {
    let Members(mut members) = Members::of(body)?;
    let (index, changed) = [changed_number, changed_bool, changed_string]
        .into_iter()
        .find_map(|change| {
            members
                .iter()
                .enumerate()
                .find_map(|(index, (_, value))| change(value).map(|changed| (index, changed)))
        })?;
    let (name, old) = &members[index];
    let note = format!("{name}: {} instead of {}", changed, old.get());
    members[index].1 = RawValue::from_string(changed).ok()?;
    Some((Members::write(&members), note))
}

fn changed_number(value: &RawValue) -> Option<String> {
    let number: Number = serde_json::from_str(value.get()).ok()?;
    let changed = if let Some(n) = number.as_i64() {
        Number::from(n.checked_add(1).unwrap_or(n - 1))
    } else if let Some(n) = number.as_u64() {
        Number::from(n.checked_add(1).unwrap_or(n - 1))
    } else {
        Number::from_f64(number.as_f64()? + 1.0)?
    };
    Some(changed.to_string())
}

fn changed_bool(value: &RawValue) -> Option<String> {
    let flag: bool = serde_json::from_str(value.get()).ok()?;
    Some((!flag).to_string())
}

fn changed_string(value: &RawValue) -> Option<String> {
    let text: String = serde_json::from_str(value.get()).ok()?;
    Some(Value::String(format!("{text}-2")).to_string())
}

/// The same object with its members in reverse order, each value as it was: the same JSON
/// value, other bytes. `None` unless the body is an object of two members or more.
pub(crate) fn reordered(body: &[u8]) -> Option<Bytes> {
    let Members(mut members) = Members::of(body)?;
    if members.len() < 2 {
        return None;
    }
    members.reverse();
    Some(Members::write(&members)).filter(|reordered| reordered[..] != *body)
}

/// The same object with its members in the same order and each value as it was, spaced
/// otherwise: the same JSON, in the same order, in other bytes. `None` unless the body is an
/// object.
pub(crate) fn respaced(body: &[u8]) -> Option<Bytes> {
    let Members(members) = Members::of(body)?;
    [" ", "\n  "]
        .into_iter()
        .map(|space| Members::write_spaced(&members, space))
        .find(|respaced| respaced[..] != *body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_body_changes_one_member_and_keeps_the_rest_as_sent() {
        let (other, note) = other_body(br#"{"currency":"JPY", "amount":9800}"#).unwrap();
        assert_eq!(&other[..], br#"{"currency":"JPY","amount":9801}"#);
        assert_eq!(note, "amount: 9801 instead of 9800");
        let (other, _) = other_body(br#"{"a":{"x":1},"b":1.5}"#).unwrap();
        assert_eq!(&other[..], br#"{"a":{"x":1},"b":2.5}"#);
        let (other, _) = other_body(br#"{"ok":true,"name":"x"}"#).unwrap();
        assert_eq!(&other[..], br#"{"ok":false,"name":"x"}"#);
        let (other, _) = other_body(br#"{"name":"x"}"#).unwrap();
        assert_eq!(&other[..], br#"{"name":"x-2"}"#);
        let (other, _) = other_body(br#"{"n":9223372036854775807}"#).unwrap();
        assert_eq!(&other[..], br#"{"n":9223372036854775806}"#);
        for nothing in [&b"{}"[..], b"[1,2]", b"{\"a\":null}", b"{\"a\":[1]}", b"7"] {
            assert_eq!(other_body(nothing), None, "{nothing:?}");
        }
    }

    #[test]
    fn a_reordered_body_is_the_same_json() {
        let body = br#"{"amount":9800,"currency":"JPY","meta":{"b":1,"a":2}}"#;
        let reversed = reordered(body).unwrap();
        assert_eq!(
            &reversed[..],
            br#"{"meta":{"b":1,"a":2},"currency":"JPY","amount":9800}"#
        );
        let parse = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap();
        assert_eq!(parse(&reversed), parse(body));
        assert_eq!(reordered(br#"{"a":1}"#), None);
        let respaced = respaced(body).unwrap();
        assert_eq!(
            &respaced[..],
            br#"{ "amount": 9800, "currency": "JPY", "meta": {"b":1,"a":2} }"#
        );
        assert_eq!(parse(&respaced), parse(body));
        let spaced = br#"{ "a": 1 }"#;
        assert_ne!(&super::respaced(spaced).unwrap()[..], spaced);
        assert_eq!(reordered(b"[1,2]"), None);
    }
}
