//! `multipart/form-data` requests: a form that its client rebuilds for a retry, with a new
//! boundary, is the same request; and what the fingerprint reads of a form is what the
//! handler's parser (multer, behind axum's `Multipart`) reads of it.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{
    Json, Router,
    extract::{Multipart, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header::CONTENT_TYPE},
    routing::post,
};
use bytes::Bytes;
use idem::{
    Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope,
    fingerprint::{Fingerprint, FingerprintAlgorithm, FingerprintMode},
};
use idem_tests::shop_fixture::Server;
use proptest::prelude::*;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

/// Stores an uploaded receipt: answers what it read of the form, with the run's number as id.
async fn upload_receipt(
    State(runs): State<Arc<AtomicUsize>>,
    mut form: Multipart,
) -> Result<(StatusCode, Json<Value>), StatusCode> {
    let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
    let mut fields = Vec::new();
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|_| StatusCode::BAD_REQUEST)?
    {
        let name = field.name().map(str::to_owned);
        let file_name = field.file_name().map(str::to_owned);
        let bytes = field.bytes().await.map_err(|_| StatusCode::BAD_REQUEST)?;
        fields.push(json!({ "name": name, "fileName": file_name, "size": bytes.len() }));
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": format!("rc_{run}"), "fields": fields })),
    ))
}

async fn receipt_server() -> (Server, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let idem = Idempotency::new(MemoryStore::default());
    let router = Router::new()
        .route("/receipts", post(upload_receipt))
        .with_state(runs.clone())
        .layer(IdempotencyLayer::new(
            idem.clone(),
            Policy::new().scope(Scope::Global),
        ));
    (Server::start(router, idem).await, runs)
}

/// The form as a client builds it, afresh for every attempt: reqwest picks a new random
/// boundary for each.
fn receipt_form(amount: &str, file_name: &str) -> Form {
    Form::new().text("amount", amount.to_owned()).part(
        "receipt",
        Part::bytes(b"%PDF-1.7\r\n\x00\xFF receipt".to_vec())
            .file_name(file_name.to_owned())
            .mime_str("application/pdf")
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_form_is_the_same_request() {
    let (server, runs) = receipt_server().await;
    let client = reqwest::Client::new();
    let send = |form: Form, key: &'static str| {
        client
            .post(server.url("/receipts"))
            .header("Idempotency-Key", key)
            .multipart(form)
            .timeout(idem_tests::REQUEST_TIMEOUT)
            .send()
    };

    let (first_form, retry_form) = (receipt_form("9800", "r.pdf"), receipt_form("9800", "r.pdf"));
    assert_ne!(
        first_form.boundary(),
        retry_form.boundary(),
        "the client must pick a new boundary, or this test proves nothing"
    );
    let first = send(first_form, "receipt-1").await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["fields"][1]["fileName"], "r.pdf");

    let retry = send(retry_form, "receipt-1").await.unwrap();
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(retry.json::<Value>().await.unwrap(), first);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the retry ran the handler");

    // Another amount, or another file name, under the same key is another request.
    for changed in [receipt_form("9801", "r.pdf"), receipt_form("9800", "s.pdf")] {
        let refused = send(changed, "receipt-1").await.unwrap();
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(refused.headers()[CONTENT_TYPE], "application/problem+json");
        let problem: Value = refused.json().await.unwrap();
        assert_eq!(problem["status"], 422);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    server.stop().await;
}

// What the fingerprint reads of a form, against what multer reads of it.

/// A field as the handler sees it through multer: everything a handler can look at.
#[derive(Debug, PartialEq)]
struct Field {
    name: Option<String>,
    file_name: Option<String>,
    content_type: Option<String>,
    headers: Vec<(String, Vec<u8>)>,
    bytes: Bytes,
}

/// What a handler reading the form through multer sees: the fields it gets, in order, and
/// whether the reading then fails.
#[derive(Debug, PartialEq)]
struct Reading {
    fields: Vec<Field>,
    failed: bool,
}

/// multer's reading of a body under a boundary.
fn parse_with_multer(boundary: &str, body: &[u8]) -> Reading {
    let body = Bytes::copy_from_slice(body);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let stream = futures_util::stream::once(async move { Ok::<_, Infallible>(body) });
        let mut form = multer::Multipart::new(stream, boundary);
        let mut fields = Vec::new();
        loop {
            let Ok(next) = form.next_field().await else {
                return Reading {
                    fields,
                    failed: true,
                };
            };
            let Some(field) = next else {
                return Reading {
                    fields,
                    failed: false,
                };
            };
            let name = field.name().map(str::to_owned);
            let file_name = field.file_name().map(str::to_owned);
            let content_type = field.content_type().map(ToString::to_string);
            let headers = field
                .headers()
                .iter()
                .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
                .collect();
            let Ok(bytes) = field.bytes().await else {
                return Reading {
                    fields,
                    failed: true,
                };
            };
            fields.push(Field {
                name,
                file_name,
                content_type,
                headers,
                bytes,
            });
        }
    })
}

fn fingerprint(content_type: &str, body: &[u8]) -> Fingerprint {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap());
    Fingerprint::compute(
        &Method::POST,
        "/receipts",
        &headers,
        body,
        FingerprintMode::Json,
    )
}

/// One part as generated: name, file name, content type, content.
type PartSpec = (String, Option<String>, Option<String>, Vec<u8>);

/// Part contents made of pieces that matter to a multipart parser: line ends, dashes, and
/// both boundaries of a test, whole or cut short.
fn content(boundaries: (&'static str, &'static str)) -> impl Strategy<Value = Vec<u8>> {
    let (one, two) = boundaries;
    let pieces = vec![
        "a".to_owned(),
        "\r\n".to_owned(),
        "\n".to_owned(),
        "-".to_owned(),
        "--".to_owned(),
        "\r\n--".to_owned(),
        "\r\n\r\n".to_owned(),
        one.to_owned(),
        two.to_owned(),
        one[..one.len() / 2].to_owned(),
        format!("\r\n--{one}"),
        format!("\r\n--{two}--"),
    ];
    prop::collection::vec(
        prop_oneof![
            6 => prop::collection::vec(any::<u8>(), 0..6),
            4 => prop::sample::select(pieces).prop_map(String::into_bytes),
        ],
        0..6,
    )
    .prop_map(|pieces| pieces.concat())
}

fn part_spec(boundaries: (&'static str, &'static str)) -> impl Strategy<Value = PartSpec> {
    (
        prop::sample::select(vec!["amount", "receipt", "note", "a b"]),
        prop::option::of(prop::sample::select(vec!["r.pdf", "s.pdf", "x"])),
        prop::option::of(prop::sample::select(vec!["application/pdf", "text/plain"])),
        content(boundaries),
    )
        .prop_map(|(name, file_name, content_type, content)| {
            (
                name.to_owned(),
                file_name.map(str::to_owned),
                content_type.map(str::to_owned),
                content,
            )
        })
}

/// Writes a form as clients do.
fn form_body(boundary: &str, parts: &[PartSpec]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file_name, content_type, content) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        body.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{name}\"").as_bytes(),
        );
        if let Some(file_name) = file_name {
            body.extend_from_slice(format!("; filename=\"{file_name}\"").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        if let Some(content_type) = content_type {
            body.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// Ways a body can leave the plain form: bytes before it, after it, cut short, or spliced in.
#[derive(Clone, Debug)]
enum Damage {
    None,
    Prefix(Vec<u8>),
    Suffix(Vec<u8>),
    Truncate(prop::sample::Index),
    Splice(prop::sample::Index, Vec<u8>),
    BareLineEnds,
}

fn damage(boundaries: (&'static str, &'static str)) -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => Just(Damage::None),
        1 => content(boundaries).prop_map(Damage::Prefix),
        1 => content(boundaries).prop_map(Damage::Suffix),
        1 => any::<prop::sample::Index>().prop_map(Damage::Truncate),
        2 => (any::<prop::sample::Index>(), content(boundaries))
            .prop_map(|(at, bytes)| Damage::Splice(at, bytes)),
        1 => Just(Damage::BareLineEnds),
    ]
}

fn apply(damage: &Damage, mut body: Vec<u8>) -> Vec<u8> {
    match damage {
        Damage::None => body,
        Damage::Prefix(bytes) => [bytes.as_slice(), &body].concat(),
        Damage::Suffix(bytes) => [body.as_slice(), bytes].concat(),
        Damage::Truncate(at) => {
            body.truncate(at.index(body.len() + 1));
            body
        }
        Damage::Splice(at, bytes) => {
            let at = at.index(body.len() + 1);
            body.splice(at..at, bytes.iter().copied());
            body
        }
        Damage::BareLineEnds => String::from_utf8_lossy(&body)
            .replace("\r\n", "\n")
            .into_bytes(),
    }
}

const BOUNDARIES: (&str, &str) = ("XyZ-7f3a", "----WebKitFormBoundary7MA4YWxkTrZu0gW");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Two bodies that share a multipart fingerprint are the same form to multer, field for
    /// field, header for header, byte for byte; and a form whose parts do not hold its
    /// boundaries is read by parts, so both spellings share a fingerprint.
    #[test]
    fn equal_multipart_fingerprints_are_equal_forms_to_multer(
        parts in prop::collection::vec(part_spec(BOUNDARIES), 0..4),
        damage_one in damage(BOUNDARIES),
        damage_two in damage(BOUNDARIES),
    ) {
        let (one, two) = BOUNDARIES;
        let body_one = apply(&damage_one, form_body(one, &parts));
        let body_two = apply(&damage_two, form_body(two, &parts));
        let fingerprint_one = fingerprint(&format!("multipart/form-data; boundary={one}"), &body_one);
        let fingerprint_two = fingerprint(&format!("multipart/form-data; boundary=\"{two}\""), &body_two);

        let clean = matches!((&damage_one, &damage_two), (Damage::None, Damage::None))
            && parts.iter().all(|(.., content)| {
                [one, two].iter().all(|boundary| {
                    !content.windows(boundary.len()).any(|window| window == boundary.as_bytes())
                })
            });
        if clean {
            prop_assert_eq!(fingerprint_one.algorithm(), FingerprintAlgorithm::MultipartSha256V1);
            prop_assert_eq!(fingerprint_one, fingerprint_two);
        }
        // (Equal raw fingerprints are equal bytes, read under two boundaries: the Content-Type
        // is not part of a fingerprint.)
        if fingerprint_one == fingerprint_two
            && fingerprint_one.algorithm() == FingerprintAlgorithm::MultipartSha256V1
        {
            prop_assert_eq!(
                parse_with_multer(one, &body_one),
                parse_with_multer(two, &body_two),
                "{:?} against {:?}",
                String::from_utf8_lossy(&body_one),
                String::from_utf8_lossy(&body_two)
            );
        }
    }

    /// A body damaged in one place never keeps the fingerprint of the plain form, unless
    /// multer reads the same form from it.
    #[test]
    fn a_damaged_form_differs_or_reads_alike(
        parts in prop::collection::vec(part_spec(BOUNDARIES), 0..4),
        damage in damage(BOUNDARIES),
    ) {
        let boundary = BOUNDARIES.0;
        let content_type = format!("multipart/form-data; boundary={boundary}");
        let plain = form_body(boundary, &parts);
        let damaged = apply(&damage, plain.clone());
        if fingerprint(&content_type, &plain) == fingerprint(&content_type, &damaged) {
            prop_assert_eq!(
                parse_with_multer(boundary, &plain),
                parse_with_multer(boundary, &damaged)
            );
        }
    }
}

/// Content-Type values made of the pieces parsers disagree on, around the boundary `b0-x`.
fn content_type_text() -> impl Strategy<Value = String> {
    let media_type = prop::sample::select(vec![
        "multipart/form-data",
        "Multipart/Form-Data",
        " multipart/form-data",
        "multipart/form-data ",
        "multipart/mixed",
    ]);
    let separator = prop::sample::select(vec!["; ", ";", " ;", ";;", ";\t", ";  ", "; ; "]);
    let parameter = prop::sample::select(vec![
        "boundary=b0-x",
        "BOUNDARY=b0-x",
        "boundary=\"b0-x\"",
        "boundary = b0-x",
        "boundary=b0-y",
        "boundary=",
        "charset=utf-8",
        "charset=\"a\\\"b\"",
        "foo",
        "",
    ]);
    (
        media_type,
        prop::collection::vec((separator, parameter), 0..4),
        prop::sample::select(vec!["", ";", " ", " ;"]),
    )
        .prop_map(|(media_type, parameters, end)| {
            let mut text = media_type.to_owned();
            for (separator, parameter) in parameters {
                text.push_str(separator);
                text.push_str(parameter);
            }
            text.push_str(end);
            text
        })
}

proptest! {
    /// Whenever the fingerprint reads a boundary from a Content-Type, multer reads the same one.
    #[test]
    fn a_boundary_read_is_the_one_multer_reads(content_type in content_type_text()) {
        let body = form_body("b0-x", &[("a".into(), None, None, b"1".to_vec())]);
        if fingerprint(&content_type, &body).algorithm() == FingerprintAlgorithm::MultipartSha256V1 {
            prop_assert_eq!(
                multer::parse_boundary(&content_type).ok(),
                Some("b0-x".to_owned()),
                "{:?}",
                content_type
            );
        }
    }
}

/// The plain Content-Types clients send are read, with the boundary multer reads.
#[test]
fn boundaries_agree_with_multer() {
    for content_type in [
        "multipart/form-data; boundary=abc",
        "multipart/form-data;boundary=abc",
        "Multipart/Form-Data; BOUNDARY=abc",
        "multipart/form-data; boundary=\"a b:c\"",
        "multipart/form-data; charset=utf-8; boundary=x-1",
        "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW",
        "multipart/form-data; boundary=\"'()+_,-./:=?\"",
    ] {
        let body = form_body(
            &multer::parse_boundary(content_type).unwrap(),
            &[("a".into(), None, None, b"1".to_vec())],
        );
        assert_eq!(
            fingerprint(content_type, &body).algorithm(),
            FingerprintAlgorithm::MultipartSha256V1,
            "{content_type}: the fingerprint reads multer's boundary"
        );
    }
}
