//! The canonicalizer on any bytes: it never panics; it refuses exactly what serde_json refuses
//! and JSON that repeats a member name; what it writes is JSON, and canonical again; and it
//! writes what `serde_json_canonicalizer` (RFC 8785) writes, wherever the two are meant to
//! agree: everywhere but integers beyond 2^53, which it keeps exact on purpose.

#![no_main]

use std::collections::HashSet;

use idem_core::fingerprint::canonicalize_json_bytes;
use libfuzzer_sys::fuzz_target;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// 2^53: within it, an integer is exactly a double, and the two canonical forms agree.
const EXACT_INTEGER: u64 = 1 << 53;

fuzz_target!(|data: &[u8]| {
    let mut out = b"kept".to_vec();
    let result = canonicalize_json_bytes(data, &mut out);
    let value = serde_json::from_slice::<Value>(data);
    match result {
        Err(_) => {
            assert_eq!(out, b"kept", "the output was touched on error");
            // Not JSON, or JSON that names a member twice (which a `Value` reads all the same).
            assert!(value.is_err() || repeats_a_name(data) == Some(true));
        }
        Ok(()) => {
            let canonical = &out[b"kept".len()..];
            let value = value.expect("what is canonicalized is JSON");
            assert_eq!(repeats_a_name(data), Some(false));
            // The output is JSON, and its own canonical form.
            serde_json::from_slice::<Value>(canonical).expect("the output is JSON");
            let mut again = Vec::new();
            canonicalize_json_bytes(canonical, &mut again).expect("the output is canonical JSON");
            assert_eq!(again, canonical, "canonicalizing twice changed the text");
            if !has_large_integer(&value) {
                let reference = serde_json_canonicalizer::to_vec(&value)
                    .expect("serde_json_canonicalizer writes every Value");
                assert_eq!(
                    String::from_utf8_lossy(canonical),
                    String::from_utf8_lossy(&reference),
                    "RFC 8785 writes it otherwise"
                );
            }
        }
    }
});

/// Whether a document holds an integer beyond ±2^53, which RFC 8785 rounds to a double and the
/// canonicalizer keeps exact.
fn has_large_integer(value: &Value) -> bool {
    match value {
        Value::Number(number) => {
            number.as_u64().is_some_and(|n| n > EXACT_INTEGER)
                || number
                    .as_i64()
                    .is_some_and(|n| n.unsigned_abs() > EXACT_INTEGER)
        }
        Value::Array(items) => items.iter().any(has_large_integer),
        Value::Object(members) => members.values().any(has_large_integer),
        _ => false,
    }
}

/// Whether a JSON text names a member twice in one of its objects, read apart from the
/// canonicalizer into nothing but a set of names per object; `None` when it is not JSON.
fn repeats_a_name(json: &[u8]) -> Option<bool> {
    serde_json::from_slice::<Repeats>(json)
        .ok()
        .map(|Repeats(repeats)| repeats)
}

struct Repeats(bool);

impl<'de> Deserialize<'de> for Repeats {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RepeatsVisitor)
    }
}

struct RepeatsVisitor;

impl<'de> Visitor<'de> for RepeatsVisitor {
    type Value = Repeats;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_str<E>(self, _: &str) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_unit<E>(self) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Repeats, A::Error> {
        let mut repeats = false;
        while let Some(Repeats(inner)) = items.next_element()? {
            repeats |= inner;
        }
        Ok(Repeats(repeats))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Repeats, A::Error> {
        let mut names = HashSet::new();
        let mut repeats = false;
        while let Some(name) = map.next_key::<String>()? {
            repeats |= !names.insert(name);
            let Repeats(inner) = map.next_value()?;
            repeats |= inner;
        }
        Ok(Repeats(repeats))
    }
}
