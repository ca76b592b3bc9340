//! Request fingerprints: what changes them, what does not, and their stored encoding.

mod common;

use std::hash::{DefaultHasher, Hash, Hasher};

use http::{HeaderMap, HeaderValue, Method, header::CONTENT_TYPE};
use idem::fingerprint::{Fingerprint, FingerprintAlgorithm, FingerprintMode, Members};
use proptest::prelude::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn headers(content_type: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(content_type) = content_type {
        headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap());
    }
    headers
}

/// A `POST /orders` fingerprint with the given content type, body and mode.
fn post(content_type: Option<&str>, body: impl AsRef<[u8]>, mode: FingerprintMode) -> Fingerprint {
    Fingerprint::compute(
        &Method::POST,
        "/orders",
        &headers(content_type),
        body.as_ref(),
        mode,
    )
}

fn json(body: impl AsRef<[u8]>) -> Fingerprint {
    post(Some("application/json"), body, FingerprintMode::Json)
}

/// The digest as the module docs define it, built by hand.
fn documented_digest(tag: u8, method: &str, route: &str, body: &[u8]) -> [u8; 32] {
    let mut input = Vec::new();
    for field in [
        &b"idem-fingerprint"[..],
        &[tag],
        method.as_bytes(),
        route.as_bytes(),
    ] {
        if field.len() != 1 || field[0] != tag {
            input.extend_from_slice(&(field.len() as u64).to_be_bytes());
        }
        input.extend_from_slice(field);
    }
    input.extend_from_slice(body);
    input.extend_from_slice(&(body.len() as u64).to_be_bytes());
    Sha256::digest(&input).into()
}

#[test]
fn digest_follows_the_documented_layout() {
    let raw = Fingerprint::compute(
        &Method::PATCH,
        "/carts/{id}",
        &headers(Some("text/plain")),
        b"{ \"b\": 1, \"a\": [2.0] }",
        FingerprintMode::Json,
    );
    assert_eq!(raw.algorithm(), FingerprintAlgorithm::RawSha256V1);
    assert_eq!(
        raw.digest(),
        &documented_digest(2, "PATCH", "/carts/{id}", b"{ \"b\": 1, \"a\": [2.0] }")
    );

    let jcs = Fingerprint::compute(
        &Method::PATCH,
        "/carts/{id}",
        &headers(Some("application/json")),
        b"{ \"b\": 1, \"a\": [2.0] }",
        FingerprintMode::Json,
    );
    assert_eq!(jcs.algorithm(), FingerprintAlgorithm::JcsSha256V1);
    assert_eq!(
        jcs.digest(),
        &documented_digest(1, "PATCH", "/carts/{id}", br#"{"a":[2],"b":1}"#)
    );
}

#[test]
fn digests_are_stable() {
    // Stores compare these bytes across releases: a change here invalidates every stored key
    // and needs a new algorithm, not a new expected value. The values were computed apart from
    // this crate, with Python's hashlib over the documented layout.
    assert_eq!(
        json(r#"{ "currency": "EUR", "amount": 1000.0 }"#).to_string(),
        "jcs-sha256-v1:0b5bb668a04c4760e9be461b16364142b6d28d3aa13d069ae5213197e3bd9250"
    );
    assert_eq!(
        post(None, "amount=1000", FingerprintMode::Raw).to_string(),
        "raw-sha256-v1:8da929908e7bae00eef51a3db73e7224a47a82199ebafef61e67c99a8e71ba3b"
    );
}

/// A `POST /orders` JSON fingerprint of `body` under a selection of its members.
fn selected(body: &str, members: Members) -> Fingerprint {
    Fingerprint::compute_members(
        &Method::POST,
        "/orders",
        &headers(Some("application/json")),
        body.as_bytes(),
        FingerprintMode::Json,
        &members,
    )
}

#[test]
fn digests_of_a_selection_are_stable() {
    // As `digests_are_stable`: computed apart from this crate, with Python's hashlib over the
    // layout of `fingerprint::members` (the selection, then what it selects).
    let omitted = selected(
        r#"{ "clientTimestamp": "10:00", "currency": "EUR", "amount": 1000.0 }"#,
        Members::Omit(&["/clientTimestamp"]),
    );
    assert_eq!(
        omitted.to_string(),
        "jcs-members-sha256-v1:b9d52c73d8cb532b33f5030d9549dfec3fb40590a91781b693a0f3fb029285c2"
    );
    let only = selected(
        r#"{"note":"x","currency":"EUR","amount":1000}"#,
        Members::Only(&["/currency", "/amount", "/missing"]),
    );
    assert_eq!(
        only.to_string(),
        "jcs-members-sha256-v1:ad80208ffbe2828257c568b1b29214045f0c19bacfd2a65a35c9aab7b9a1eec1"
    );
}

#[test]
fn a_selection_compares_only_what_it_selects() {
    let omit = Members::Omit(&["/trace/id"]);
    let base = selected(r#"{"a":1,"trace":{"id":"t1","span":"s"}}"#, omit);
    assert_eq!(
        base,
        selected(r#"{"trace":{"span":"s","id":"t2"},"a":1}"#, omit)
    );
    assert_eq!(base, selected(r#"{"a":1,"trace":{"span":"s"}}"#, omit));
    assert_ne!(
        base,
        selected(r#"{"a":1,"trace":{"id":"t1","span":"x"}}"#, omit)
    );
    assert_ne!(
        base,
        json(r#"{"a":1,"trace":{"span":"s"}}"#),
        "another algorithm"
    );
    // A body that is not JSON, or has no canonical form, is fingerprinted whole.
    let raw = Fingerprint::compute_members(
        &Method::POST,
        "/orders",
        &headers(Some("text/plain")),
        b"{\"a\":1}",
        FingerprintMode::Json,
        &omit,
    );
    assert_eq!(raw.algorithm(), FingerprintAlgorithm::RawSha256V1);
    let repeated = selected(r#"{"a":1,"a":2}"#, omit);
    assert_eq!(repeated.algorithm(), FingerprintAlgorithm::RawSha256V1);
}

proptest! {
    /// Leaving out a member that a document does not have changes nothing of what is compared:
    /// two documents equal but for a left-out member share a fingerprint.
    #[test]
    fn documents_equal_but_for_a_left_out_member_share_a_fingerprint(
        amount in any::<i64>(),
        stamp_a in "[0-9:TZ-]{0,24}",
        stamp_b in "[0-9:TZ-]{0,24}",
    ) {
        let omit = Members::Omit(&["/clientTimestamp"]);
        let with = |stamp: &str| {
            selected(&format!(r#"{{"amount":{amount},"clientTimestamp":"{stamp}"}}"#), omit)
        };
        prop_assert_eq!(with(&stamp_a), with(&stamp_b));
        prop_assert_eq!(with(&stamp_a), selected(&format!(r#"{{"amount":{amount}}}"#), omit));
        prop_assert_ne!(
            with(&stamp_a),
            selected(&format!(r#"{{"amount":{},"clientTimestamp":"{stamp_a}"}}"#, amount.wrapping_add(1)), omit)
        );
    }
}

#[test]
fn json_content_types() {
    let body = r#"{"b":1,"a":2}"#;
    let reordered = r#"{ "a": 2, "b": 1 }"#;
    for content_type in [
        "application/json",
        "application/json; charset=utf-8",
        "application/problem+json",
        "APPLICATION/JSON",
        "application/vnd.api+json",
    ] {
        let first = post(Some(content_type), body, FingerprintMode::Json);
        assert_eq!(
            first.algorithm(),
            FingerprintAlgorithm::JcsSha256V1,
            "{content_type}"
        );
        assert_eq!(
            first,
            post(Some(content_type), reordered, FingerprintMode::Json),
            "{content_type}"
        );
        // The content type itself is not hashed: only whether the body was canonicalized.
        assert_eq!(first, json(body), "{content_type}");
    }
}

#[test]
fn other_bodies_are_hashed_as_bytes() {
    let body = r#"{"b":1,"a":2}"#;
    let raw = post(None, body, FingerprintMode::Raw);
    assert_eq!(raw.algorithm(), FingerprintAlgorithm::RawSha256V1);
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let fingerprint = post(content_type, body, FingerprintMode::Json);
        assert_eq!(fingerprint, raw, "{content_type:?}");
        assert_ne!(
            fingerprint,
            post(content_type, r#"{ "a": 2, "b": 1 }"#, FingerprintMode::Json),
            "{content_type:?}: bytes, so whitespace and order count"
        );
    }
}

#[test]
fn invalid_json_is_hashed_as_bytes() {
    for body in [
        &b"{\"a\":"[..],
        b"{'a': 1}",
        b"{\"a\":1} trailing",
        b"\xEF\xBB\xBF{\"a\":1}",
        b"[\"\\ud800\"]",
        b"1e400",
        b"\xFF",
    ] {
        let fingerprint = json(body);
        assert_eq!(
            fingerprint.algorithm(),
            FingerprintAlgorithm::RawSha256V1,
            "{:?}",
            String::from_utf8_lossy(body)
        );
        assert_eq!(
            fingerprint,
            post(None, body, FingerprintMode::Raw),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn nesting_beyond_serde_json_limit_is_hashed_as_bytes() {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(
        json(nested(100)).algorithm(),
        FingerprintAlgorithm::JcsSha256V1
    );
    assert_eq!(
        json(nested(1000)),
        post(None, nested(1000), FingerprintMode::Raw)
    );
}

#[test]
fn repeated_member_names_are_hashed_as_bytes() {
    // A `Value` keeps the last value, so this body would otherwise replay the record of
    // `{"amount":9800}`, which a stricter handler than serde_json's would not have refused.
    for (repeated, clean) in [
        (
            r#"{"amount":1,"amount":9800,"currency":"EUR"}"#,
            r#"{"amount":9800,"currency":"EUR"}"#,
        ),
        (r#"{"a":1,"\u0061":2}"#, r#"{"a":2}"#),
        (
            r#"{"order":{"lines":[{"sku":"A","sku":"B"}]}}"#,
            r#"{"order":{"lines":[{"sku":"B"}]}}"#,
        ),
    ] {
        let fingerprint = json(repeated);
        assert_eq!(
            fingerprint.algorithm(),
            FingerprintAlgorithm::RawSha256V1,
            "{repeated}"
        );
        assert_eq!(
            fingerprint,
            post(None, repeated, FingerprintMode::Raw),
            "{repeated}"
        );
        assert_ne!(fingerprint, json(clean), "{repeated}");
        assert_eq!(json(clean).algorithm(), FingerprintAlgorithm::JcsSha256V1);
    }
    // As bytes, only the same bytes match: not even a reordering of the same text.
    assert_ne!(json(r#"{"a":1,"a":2}"#), json(r#"{ "a":1, "a":2 }"#));
    assert_eq!(json(r#"{"a":1,"a":2}"#), json(r#"{"a":1,"a":2}"#));
}

#[test]
fn empty_body() {
    let empty = json("");
    assert_eq!(empty.algorithm(), FingerprintAlgorithm::RawSha256V1);
    assert_eq!(empty, post(None, "", FingerprintMode::Raw));
    assert_eq!(
        empty.digest(),
        &documented_digest(2, "POST", "/orders", b"")
    );
    assert_ne!(empty, json("{}"));
    assert_ne!(empty, json("null"));
}

#[test]
fn scalar_bodies_are_json() {
    assert_eq!(json("1.0").algorithm(), FingerprintAlgorithm::JcsSha256V1);
    assert_eq!(json("1.0"), json(" 1 "));
    assert_eq!(json("\"\\u0041\""), json("\"A\""));
    assert_ne!(json("true"), json("false"));
}

#[test]
fn numbers_equal_as_rfc_8785_says() {
    assert_eq!(json(r#"{"n":1.0}"#), json(r#"{"n":1}"#));
    assert_eq!(json(r#"{"n":-0.0}"#), json(r#"{"n":0}"#));
    assert_eq!(json(r#"{"n":-0}"#), json(r#"{"n":0}"#));
    assert_eq!(json(r#"{"n":4.50}"#), json(r#"{"n":45e-1}"#));
    assert_ne!(json(r#"{"n":0.1}"#), json(r#"{"n":0.10000000000000002}"#));
    assert_ne!(json(r#"{"n":1}"#), json(r#"{"n":"1"}"#));
}

#[test]
fn integers_beyond_two_to_the_53_differ() {
    // RFC 8785 alone would write both as 9007199254740992.
    assert_ne!(
        json(r#"{"id":9007199254740993}"#),
        json(r#"{"id":9007199254740992}"#)
    );
    assert_ne!(
        json(r#"{"id":18446744073709551615}"#),
        json(r#"{"id":18446744073709551614}"#)
    );
    assert_ne!(
        json(r#"{"id":-9007199254740993}"#),
        json(r#"{"id":-9007199254740992}"#)
    );
    assert_eq!(
        json(r#"{"id":9007199254740993}"#).digest(),
        &documented_digest(1, "POST", "/orders", br#"{"id":9007199254740993}"#)
    );
}

#[test]
fn keys_sort_by_utf16_code_units() {
    let fingerprint = json("{\"\u{E000}\":1,\"\u{1F600}\":2}");
    assert_eq!(fingerprint, json("{\"\u{1F600}\":2,\"\u{E000}\":1}"));
    assert_eq!(
        fingerprint.digest(),
        &documented_digest(
            1,
            "POST",
            "/orders",
            "{\"\u{1F600}\":2,\"\u{E000}\":1}".as_bytes()
        )
    );
}

#[test]
fn fields_do_not_run_into_each_other() {
    let fingerprint = |method: &[u8], route: &str, body: &[u8]| {
        Fingerprint::compute(
            &Method::from_bytes(method).unwrap(),
            route,
            &HeaderMap::new(),
            body,
            FingerprintMode::Raw,
        )
    };
    assert_ne!(
        fingerprint(b"POS", "T/a", b""),
        fingerprint(b"POST", "/a", b"")
    );
    assert_ne!(
        fingerprint(b"POST", "/a", b"bc"),
        fingerprint(b"POST", "/ab", b"c")
    );
    assert_ne!(
        fingerprint(b"POST", "", b"/a"),
        fingerprint(b"POST", "/a", b"")
    );
}

#[test]
fn bytes_round_trip() {
    for fingerprint in [
        json(r#"{"a":1}"#),
        post(None, "a=1", FingerprintMode::Raw),
        form("b0undary", &[FIELD_A]),
    ] {
        let bytes = fingerprint.to_bytes();
        let tag = match fingerprint.algorithm() {
            FingerprintAlgorithm::JcsSha256V1 => 1,
            FingerprintAlgorithm::RawSha256V1 => 2,
            FingerprintAlgorithm::MultipartSha256V1 => 3,
            other => panic!("no tag known for {other:?}"),
        };
        assert_eq!(bytes[0], tag);
        assert_eq!(&bytes[1..], fingerprint.digest());
        let decoded = Fingerprint::from_bytes(&bytes).unwrap();
        assert_eq!(decoded, fingerprint);
        assert_eq!(decoded.algorithm(), fingerprint.algorithm());
    }
}

#[test]
fn bad_bytes_are_rejected() {
    let good = json(r#"{"a":1}"#).to_bytes();
    assert_eq!(Fingerprint::from_bytes(&[]), None);
    assert_eq!(Fingerprint::from_bytes(&good[..1]), None);
    assert_eq!(Fingerprint::from_bytes(&good[..32]), None);
    assert_eq!(Fingerprint::from_bytes(&[&good[..], &[0]].concat()), None);
    for tag in [0, 5, 0x7F, 0xFF] {
        let mut bytes = good;
        bytes[0] = tag;
        assert_eq!(Fingerprint::from_bytes(&bytes), None, "tag {tag}");
    }
}

#[test]
fn text_form() {
    let fingerprint = Fingerprint::from_bytes(&[[1].as_slice(), &[0xAB; 32]].concat()).unwrap();
    let expected = format!("jcs-sha256-v1:{}", "ab".repeat(32));
    assert_eq!(fingerprint.to_string(), expected);
    assert_eq!(format!("{fingerprint:?}"), expected);
    let raw = Fingerprint::from_bytes(&[[2].as_slice(), &[0x0F; 32]].concat()).unwrap();
    assert_eq!(
        raw.to_string(),
        format!("raw-sha256-v1:{}", "0f".repeat(32))
    );
    assert_eq!(
        FingerprintAlgorithm::JcsSha256V1.to_string(),
        "jcs-sha256-v1"
    );
    let multipart = Fingerprint::from_bytes(&[[3].as_slice(), &[0x5A; 32]].concat()).unwrap();
    assert_eq!(
        multipart.to_string(),
        format!("multipart-sha256-v1:{}", "5a".repeat(32))
    );
}

// Multipart bodies: read by their parts, so that a new boundary is the same request.

const FIELD_A: &[u8] = b"Content-Disposition: form-data; name=\"amount\"\r\n\r\n9800";
const FILE_B: &[u8] = b"Content-Disposition: form-data; name=\"receipt\"; filename=\"r.pdf\"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.7\r\n\x00\xFF\r\n";

/// A `multipart/form-data` body of these parts (each its header lines, a blank line and its
/// content), as clients write it.
fn form_body(boundary: &str, parts: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        body.extend_from_slice(part);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// The Content-Type of a form: the boundary as a token when it is one, quoted otherwise.
fn form_content_type(boundary: &str) -> String {
    if boundary
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || b"'+_-.".contains(&byte))
    {
        format!("multipart/form-data; boundary={boundary}")
    } else {
        format!("multipart/form-data; boundary=\"{boundary}\"")
    }
}

fn form(boundary: &str, parts: &[&[u8]]) -> Fingerprint {
    post(
        Some(&form_content_type(boundary)),
        form_body(boundary, parts),
        FingerprintMode::Json,
    )
}

/// The multipart digest as the module docs define it, built by hand.
fn documented_multipart_digest(parts: &[&[u8]], epilogue: &[u8]) -> [u8; 32] {
    let mut input = Vec::new();
    for field in [&b"idem-fingerprint"[..], b"POST", b"/orders"] {
        input.extend_from_slice(&(field.len() as u64).to_be_bytes());
        input.extend_from_slice(field);
        if field == b"idem-fingerprint" {
            input.push(3);
        }
    }
    for part in parts {
        input.push(1);
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part);
    }
    input.push(0);
    input.extend_from_slice(&(epilogue.len() as u64).to_be_bytes());
    input.extend_from_slice(epilogue);
    Sha256::digest(&input).into()
}

#[test]
fn multipart_forms_under_two_boundaries_fingerprint_alike() {
    let first = form("----WebKitFormBoundary7MA4YWxkTrZu0gW", &[FIELD_A, FILE_B]);
    assert_eq!(first.algorithm(), FingerprintAlgorithm::MultipartSha256V1);
    assert_eq!(
        first.digest(),
        &documented_multipart_digest(&[FIELD_A, FILE_B], b"\r\n")
    );
    for boundary in ["a3f5c1d09e7b4c2a", "x", "'()+_,-./:=? z", &"b".repeat(70)] {
        assert_eq!(form(boundary, &[FIELD_A, FILE_B]), first, "{boundary:?}");
    }
    // Quoted or not, with other parameters or not: the same boundary.
    let body = form_body("abc", &[FIELD_A, FILE_B]);
    for content_type in [
        "multipart/form-data; boundary=\"abc\"",
        "Multipart/Form-Data;charset=utf-8;BOUNDARY=abc",
    ] {
        assert_eq!(
            post(Some(content_type), &body, FingerprintMode::Json),
            first,
            "{content_type}"
        );
    }
}

#[test]
fn any_change_of_a_part_changes_the_fingerprint() {
    let first = form("b0undary", &[FIELD_A, FILE_B]);
    let renamed = b"Content-Disposition: form-data; name=\"amount2\"\r\n\r\n9800";
    let refiled = b"Content-Disposition: form-data; name=\"receipt\"; filename=\"s.pdf\"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.7\r\n\x00\xFF\r\n";
    let retyped = b"Content-Disposition: form-data; name=\"receipt\"; filename=\"r.pdf\"\r\nContent-Type: application/octet-stream\r\n\r\n%PDF-1.7\r\n\x00\xFF\r\n";
    let changed = b"Content-Disposition: form-data; name=\"amount\"\r\n\r\n9801";
    let longer = b"Content-Disposition: form-data; name=\"amount\"\r\n\r\n9800\r\n";
    for other in [
        form("b0undary", &[renamed, FILE_B]),
        form("b0undary", &[FIELD_A, refiled]),
        form("b0undary", &[FIELD_A, retyped]),
        form("b0undary", &[changed, FILE_B]),
        form("b0undary", &[longer, FILE_B]),
        form("b0undary", &[FILE_B, FIELD_A]),
        form("b0undary", &[FIELD_A]),
        form("b0undary", &[FIELD_A, FILE_B, FIELD_A]),
        form("b0undary", &[FIELD_A, b"", FILE_B]),
        form("b0undary", &[]),
    ] {
        assert_eq!(other.algorithm(), FingerprintAlgorithm::MultipartSha256V1);
        assert_ne!(other, first);
    }
    // The parts do not run into each other.
    assert_ne!(
        form("b0undary", &[b"ab", b"c"]),
        form("b0undary", &[b"a", b"bc"])
    );
    // Nor into what follows the close delimiter.
    let body = form_body("b0undary", &[FIELD_A]);
    let without_crlf = post(
        Some(&form_content_type("b0undary")),
        &body[..body.len() - 2],
        FingerprintMode::Json,
    );
    assert_eq!(
        without_crlf.algorithm(),
        FingerprintAlgorithm::MultipartSha256V1
    );
    assert_ne!(without_crlf, form("b0undary", &[FIELD_A]));
}

#[test]
fn multipart_bodies_in_another_form_are_hashed_as_bytes() {
    let content_type = form_content_type("b0undary");
    let plain = form_body("b0undary", &[FIELD_A, FILE_B]);
    let with = |prefix: &[u8], body: &[u8], suffix: &[u8]| [prefix, body, suffix].concat();
    for body in [
        Vec::new(),
        b"amount=9800".to_vec(),
        with(b"a preamble\r\n", &plain, b""),
        with(b"", &plain, b"an epilogue"),
        plain[..plain.len() - 12].to_vec(),
        form_body("b0undary", &[b"the boundary b0undary inside a part"]),
        form_body("b0undary", &[b"a bare LF delimiter\n--b0undary\n"]),
        form_body("other", &[FIELD_A]),
        String::from_utf8_lossy(&plain)
            .replace("\r\n", "\n")
            .into_bytes(),
    ] {
        let fingerprint = post(Some(&content_type), &body, FingerprintMode::Json);
        assert_eq!(
            fingerprint.algorithm(),
            FingerprintAlgorithm::RawSha256V1,
            "{}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(fingerprint, post(None, &body, FingerprintMode::Raw));
    }
    // A doubtful Content-Type leaves even a plain body to the raw algorithm.
    for content_type in [
        "multipart/form-data",
        "multipart/form-data; boundary=b0undary; boundary=b0undary",
        "multipart/mixed; boundary=b0undary",
        "text/plain; boundary=b0undary",
    ] {
        let fingerprint = post(Some(content_type), &plain, FingerprintMode::Json);
        assert_eq!(
            fingerprint,
            post(None, &plain, FingerprintMode::Raw),
            "{content_type}"
        );
    }
    // And so does the raw mode.
    assert_eq!(
        post(Some(&content_type), &plain, FingerprintMode::Raw),
        post(None, &plain, FingerprintMode::Raw)
    );
}

#[test]
fn earlier_requests_do_not_leak_into_later_ones() {
    // Fingerprints reuse buffers per thread: whatever came before, a body must hash as it would
    // on a fresh thread.
    let body = r#"{"b":[1,{"d":2,"c":3}],"a":"x"}"#;
    let fresh = std::thread::spawn(move || json(body)).join().unwrap();
    assert_eq!(json(body), fresh);

    let large = format!(
        "[{}]",
        vec![r#"{"z":"a long enough string","y":12.5,"x":[1,2,3]}"#; 40_000].join(",")
    );
    assert!(large.len() > 1 << 20, "larger than the buffers kept");
    let nested = format!("{}1{}", "{\"b\":0,\"a\":".repeat(1000), "}".repeat(1000));
    let invalid_late = format!("{}!", &large[..large.len() - 1]);
    for before in [
        large.as_str(),
        nested.as_str(),
        invalid_late.as_str(),
        r#"{"a":1,"a":2,"$serde_json::private::Number":"1"}"#,
        r#"{"$serde_json::private::Number":"1"}"#,
        "[\"\\ud800\"]",
    ] {
        let _ = json(before);
        let _ = post(None, before, FingerprintMode::Raw);
        assert_eq!(json(body), fresh);
    }
    assert_eq!(
        json(&large).digest(),
        &documented_digest(1, "POST", "/orders", &canonical_bytes(&large))
    );
    assert_eq!(
        json(&invalid_late),
        post(None, &invalid_late, FingerprintMode::Raw)
    );
}

/// The canonical form of a JSON text, through a `Value`.
fn canonical_bytes(json: &str) -> Vec<u8> {
    let value: Value = serde_json::from_str(json).unwrap();
    let mut out = Vec::new();
    idem::fingerprint::canonicalize_json(&value, &mut out);
    out
}

/// Writes `value` as JSON with members in an order chosen by `seed`, whitespace between every
/// token, every string character as a `\u` escape and numbers respelled: the same document in
/// as different bytes as JSON allows.
fn write_respelled(value: &Value, seed: u64, out: &mut String) {
    let string = |s: &str, out: &mut String| {
        out.push('"');
        for unit in s.encode_utf16() {
            if seed.is_multiple_of(2) {
                out.push_str(&format!("\\u{unit:04x}"));
            } else {
                out.push_str(&format!("\\u{unit:04X}"));
            }
        }
        out.push('"');
    };
    match value {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_by_key(|(name, _)| {
                let mut hasher = DefaultHasher::new();
                (seed, name).hash(&mut hasher);
                hasher.finish()
            });
            out.push_str("{ ");
            for (index, (name, value)) in members.into_iter().enumerate() {
                if index > 0 {
                    out.push_str(" ,\n\t");
                }
                string(name, out);
                out.push_str(" :\r\n ");
                write_respelled(value, seed, out);
            }
            out.push_str(" }");
        }
        Value::Array(items) => {
            out.push_str("[\n");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str("\t,  ");
                }
                write_respelled(item, seed, out);
            }
            out.push_str(" ]");
        }
        Value::String(s) => string(s, out),
        Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            // `1.0` for `1`: the same number per RFC 8785, now parsed as a double.
            (Some(integer), _) => out.push_str(&format!("{integer}.0")),
            (None, Some(double)) => out.push_str(&format!("{double:e}")),
            (None, None) => unreachable!("serde_json numbers are i64, u64 or f64"),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// Counts the places [`mutate`] can change: scalars and empty containers.
fn leaf_count(value: &Value) -> usize {
    match value {
        Value::Array(items) if !items.is_empty() => items.iter().map(leaf_count).sum(),
        Value::Object(map) if !map.is_empty() => map.values().map(leaf_count).sum(),
        _ => 1,
    }
}

/// Changes the `target`-th leaf (depth first) to another value: `None` once done, or how many
/// leaves remain to skip when `target` lies beyond this subtree.
fn mutate(value: &mut Value, target: usize) -> Option<usize> {
    match value {
        Value::Array(items) if !items.is_empty() => items
            .iter_mut()
            .try_fold(target, |target, item| mutate(item, target)),
        Value::Object(map) if !map.is_empty() => map
            .values_mut()
            .try_fold(target, |target, item| mutate(item, target)),
        _ if target > 0 => Some(target - 1),
        leaf => {
            *leaf = match leaf.take() {
                Value::Null => Value::Bool(false),
                Value::Bool(b) => Value::Bool(!b),
                Value::String(mut s) => {
                    s.push('x');
                    Value::String(s)
                }
                Value::Array(_) => Value::Array(vec![Value::Null]),
                Value::Object(_) => serde_json::json!({ "": null }),
                Value::Number(n) => {
                    if let Some(i) = n.as_i64() {
                        Value::from(if i < i64::MAX { i + 1 } else { i - 1 })
                    } else if let Some(u) = n.as_u64() {
                        Value::from(u - 1)
                    } else {
                        let d = n.as_f64().unwrap();
                        let changed = if d < f64::MAX {
                            d.next_up()
                        } else {
                            d.next_down()
                        };
                        Value::from(changed)
                    }
                }
            };
            None
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn member_order_whitespace_and_spelling_do_not_matter(
        value in common::json_value(),
        seed in any::<u64>(),
    ) {
        let compact = serde_json::to_vec(&value).unwrap();
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        let mut respelled = String::new();
        write_respelled(&value, seed, &mut respelled);

        let fingerprint = json(&compact);
        prop_assert_eq!(fingerprint.algorithm(), FingerprintAlgorithm::JcsSha256V1);
        prop_assert_eq!(json(&pretty), fingerprint);
        prop_assert_eq!(json(&respelled), fingerprint, "{}", respelled);
    }

    #[test]
    fn changing_any_value_changes_the_fingerprint(
        value in common::json_value(),
        target in any::<prop::sample::Index>(),
    ) {
        let mut changed = value.clone();
        prop_assert_eq!(mutate(&mut changed, target.index(leaf_count(&value))), None);
        prop_assert_ne!(&changed, &value);
        let before = json(serde_json::to_vec(&value).unwrap());
        let after = json(serde_json::to_vec(&changed).unwrap());
        prop_assert_ne!(before, after, "{} against {}", value, changed);
    }

    #[test]
    fn method_and_route_count(
        value in common::json_value(),
        methods in prop::sample::subsequence(
            vec![Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE],
            2,
        ),
        routes in (".{0,12}", ".{0,12}"),
    ) {
        let body = serde_json::to_vec(&value).unwrap();
        let headers = headers(Some("application/json"));
        let fingerprint = |method: &Method, route: &str| {
            Fingerprint::compute(method, route, &headers, &body, FingerprintMode::Json)
        };
        let (route, other_route) = routes;
        prop_assert_ne!(fingerprint(&methods[0], &route), fingerprint(&methods[1], &route));
        if route != other_route {
            prop_assert_ne!(fingerprint(&methods[0], &route), fingerprint(&methods[0], &other_route));
        }
    }

    /// The documented layout over the canonical form that `canonicalize_json` gives: the
    /// fingerprint's own canonicalizer writes the same bytes.
    #[test]
    fn json_fingerprints_hash_the_canonical_form(
        value in common::json_value(),
        seed in any::<u64>(),
    ) {
        let mut canonical = Vec::new();
        idem::fingerprint::canonicalize_json(&value, &mut canonical);
        let expected = documented_digest(1, "POST", "/orders", &canonical);
        let mut respelled = String::new();
        write_respelled(&value, seed, &mut respelled);
        for body in [serde_json::to_vec(&value).unwrap(), respelled.into_bytes()] {
            prop_assert_eq!(*json(&body).digest(), expected);
        }
    }

    /// A body that repeats a member name, anywhere, never shares a fingerprint with one that
    /// does not: neither with the object that keeps the first value, nor with the one that keeps
    /// the last.
    #[test]
    fn a_repeated_name_never_shares_a_fingerprint(
        value in common::json_value(),
        name in ".{0,6}",
        (first, second) in (common::json_value(), common::json_value()),
        depth in 0usize..4,
    ) {
        let member = |value: &Value| serde_json::to_string(&serde_json::json!({ name.clone(): value })).unwrap();
        let repeats = format!(
            "{{{},{}}}",
            &member(&first)[1..member(&first).len() - 1],
            &member(&second)[1..member(&second).len() - 1],
        );
        let nest = |inner: &str| {
            let mut text = inner.to_owned();
            for level in 0..depth {
                text = if level % 2 == 0 {
                    format!("[{value},{text}]")
                } else {
                    format!("{{\"z\":{value},\"k\":{text}}}")
                };
            }
            text
        };
        let body = nest(&repeats);
        prop_assert_eq!(common::repeats_a_name(body.as_bytes()), Some(true));
        let fingerprint = json(&body);
        prop_assert_eq!(fingerprint.algorithm(), FingerprintAlgorithm::RawSha256V1);
        for clean in [nest(&member(&first)), nest(&member(&second))] {
            prop_assert_ne!(fingerprint, json(&clean), "{} against {}", body, clean);
        }
    }

    #[test]
    fn raw_mode_differs_from_json_mode(value in common::json_value()) {
        // Canonical bytes too: the algorithm tag is hashed, so equal bodies still differ.
        let mut canonical = Vec::new();
        idem::fingerprint::canonicalize_json(&value, &mut canonical);
        for body in [serde_json::to_vec(&value).unwrap(), canonical] {
            let json_mode = json(&body);
            let raw_mode = post(Some("application/json"), &body, FingerprintMode::Raw);
            prop_assert_eq!(raw_mode.algorithm(), FingerprintAlgorithm::RawSha256V1);
            prop_assert_ne!(json_mode.digest(), raw_mode.digest());
        }
    }
}
