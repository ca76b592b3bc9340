//! Generators shared by the canonicalizer and fingerprint tests.

use proptest::prelude::*;
use serde_json::{Number, Value};

/// 2^53: the largest magnitude below which every integer is exactly a double, and so the range in
/// which this crate's canonical form is exactly RFC 8785's.
pub(crate) const EXACT_INTEGER_LIMIT: i64 = 1 << 53;

/// Characters from every range that escaping or UTF-16 sorting treats differently: controls,
/// `"` and `\`, ASCII, the BMP below and above the surrogates, and supplementary planes.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        any::<char>(),
        prop::char::range('\u{0}', '\u{7F}'),
        prop::sample::select(vec![
            '"', '\\', '/', '\u{7F}', '\u{2028}', '\u{2029}', '\u{FEFF}'
        ]),
        prop::char::range('\u{E000}', '\u{FFFF}'),
        prop::char::range('\u{10000}', '\u{10FFFF}'),
    ]
}

fn tricky_string() -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_char(), 0..8).prop_map(String::from_iter)
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i8>().prop_map(Number::from),
        (-EXACT_INTEGER_LIMIT..=EXACT_INTEGER_LIMIT).prop_map(Number::from),
        // Integral doubles must canonicalize like the integers they equal.
        (-EXACT_INTEGER_LIMIT..=EXACT_INTEGER_LIMIT)
            .prop_filter_map("a double", |n| Number::from_f64(n as f64)),
        any::<f64>().prop_filter_map("finite", Number::from_f64),
        (-1e6..1e6_f64).prop_filter_map("finite", Number::from_f64),
        prop::sample::select(vec![
            0.0,
            -0.0,
            5e-324,
            -5e-324,
            1e21,
            1e-7,
            1e-6,
            0.1,
            f64::MAX
        ])
        .prop_filter_map("finite", Number::from_f64),
    ]
}

/// JSON documents of any shape whose integers lie within ±2^53.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        tricky_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((tricky_string(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

// The fuzz crate (outside the workspace) includes this file too, so it stays one oracle.
#[path = "repeats.rs"]
mod repeats;
pub(crate) use repeats::repeats_a_name;
