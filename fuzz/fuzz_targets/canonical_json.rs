//! The canonicalizer on any bytes: it never panics; it refuses exactly what serde_json refuses
//! and JSON that repeats a member name; what it writes is JSON, and canonical again; and it
//! writes what `serde_json_canonicalizer` (RFC 8785) writes, wherever the two are meant to
//! agree: everywhere but integers beyond 2^53, which it keeps exact on purpose.

#![no_main]

use idem_core::fingerprint::canonicalize_json_bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

// The duplicate-name oracle that idem-core's property tests use.
#[path = "../../idem-core/tests/common/repeats.rs"]
mod repeats;
use repeats::repeats_a_name;

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
