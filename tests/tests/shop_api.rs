//! The shop over real HTTP, beyond the seven cases of docs/contract.md (tested in `shop_cases`):
//! keys and their spellings, users, authentication, bodies, concurrency, reads, errors, the
//! OpenAPI document and graceful shutdown.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use idem_tests::{
    Answer, key,
    shop_fixture::{Api, Server, TestShop, payment, settings, transfer, user},
};
use reqwest::StatusCode;
use reqwest::header::{HeaderValue, WWW_AUTHENTICATE};
use serde_json::{Value, json};
use shop::{Backend, Settings, Shop};
use tokio::{sync::Barrier, task::JoinSet};

/// Reordered members and other whitespace are the same JSON request: the retry replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reordered_json_members_are_the_same_request() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let compact = Answer::of(
        test.api
            .post("/payments", Some(&alice), Some(&key))
            .header("content-type", "application/json")
            .body(r#"{"amount":9800,"currency":"JPY"}"#),
    )
    .await;
    compact.created();
    let reordered = Answer::of(
        test.api
            .post("/payments", Some(&alice), Some(&key))
            .header("content-type", "application/json")
            .body("{\n  \"currency\" : \"JPY\",\n  \"amount\" : 9800\n}\n"),
    )
    .await;
    assert!(reordered.replayed(), "{reordered:?}");
    assert_eq!(reordered.body, compact.body);
    assert_eq!(test.api.payments(&alice).await.len(), 1);
}

/// `"abc"` (the IETF draft's sf-string) and `abc` (Stripe's bare token) are one key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quoted_and_bare_spellings_are_one_key() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    for (first, second) in [(true, false), (false, true)] {
        let bare = key();
        let quoted = format!("\"{bare}\"");
        let spell = |quote: bool| if quote { quoted.clone() } else { bare.clone() };
        let ran = test.api.pay(&alice, &spell(first), &payment(9800)).await;
        ran.created();
        let again = test.api.pay(&alice, &spell(second), &payment(9800)).await;
        assert!(again.replayed(), "{} then {}", spell(first), spell(second));
        assert_eq!(again.body, ran.body);
    }
    assert_eq!(test.api.payments(&alice).await.len(), 2);
}

/// Single quotes do not quote: `'abc'` is not an sf-string, so it is read as a bare key whose
/// quotes are part of it, a key of its own beside `abc`, as the shop's README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_quoted_key_keeps_its_quotes() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let bare = key();
    let single_quoted = format!("'{bare}'");
    test.api
        .pay(&alice, &single_quoted, &payment(9800))
        .await
        .created();
    let again = test.api.pay(&alice, &single_quoted, &payment(9800)).await;
    assert!(again.replayed(), "{again:?}");
    let unquoted = test.api.pay(&alice, &bare, &payment(9800)).await;
    unquoted.created();
    assert!(!unquoted.replayed(), "{unquoted:?}");
    assert_eq!(test.api.payments(&alice).await.len(), 2);
}

/// Two users who send the same key get two payments, and each sees only their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_never_share_keys_or_payments() {
    let test = TestShop::memory(settings()).await;
    let (alice, bob, key) = (user(), user(), key());
    let alices = test.api.pay(&alice, &key, &payment(9800)).await;
    let bobs = test.api.pay(&bob, &key, &payment(9800)).await;
    assert!(!bobs.replayed(), "Bob's key is his own");
    let (alices, bobs_payment) = (alices.created(), bobs.created());
    assert_ne!(alices["id"], bobs_payment["id"]);

    assert_eq!(
        test.api.payments(&alice).await,
        std::slice::from_ref(&alices)
    );
    assert_eq!(
        test.api.payments(&bob).await,
        std::slice::from_ref(&bobs_payment)
    );
    let path = format!("/payments/{}", bobs_payment["id"].as_str().unwrap());
    Answer::of(test.api.get(&path, &alice))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    let own = Answer::of(test.api.get(&path, &bob)).await;
    assert_eq!(own.json(), bobs_payment);

    let bob_again = test.api.pay(&bob, &key, &payment(9800)).await;
    assert!(bob_again.replayed());
    assert_eq!(bob_again.body, bobs.body);
}

/// No credentials, or malformed ones: 401 Problem Details asking for a bearer token, before
/// anything else; nothing is stored, so the key still works once authenticated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_malformed_authentication_is_401() {
    let test = TestShop::memory(settings()).await;
    let key = key();
    let anonymous = [
        Answer::of(
            test.api
                .post("/payments", None, Some(&key))
                .json(&payment(9800)),
        )
        .await,
        Answer::of(test.api.post("/payments", None, None).json(&payment(9800))).await,
        Answer::of(test.api.http.get(test.api.url("/payments"))).await,
        Answer::of(
            test.api
                .post("/transfers", None, Some(&key))
                .json(&transfer(1)),
        )
        .await,
    ];
    let long = "a".repeat(65);
    let malformed = [
        "Basic YWxpY2U6c2VjcmV0",
        "Bearer",
        "Bearer al ice",
        "Bearer alice!",
        long.as_str(),
    ];
    let mut refused = anonymous.to_vec();
    for value in malformed {
        let value = if value == long {
            format!("Bearer {long}")
        } else {
            value.to_owned()
        };
        let request = test
            .api
            .http
            .post(test.api.url("/payments"))
            .header("authorization", value)
            .header("idempotency-key", &key)
            .json(&payment(9800));
        refused.push(Answer::of(request).await);
    }
    for answer in refused {
        answer.problem(StatusCode::UNAUTHORIZED, "unauthenticated");
        let challenge = answer
            .headers
            .get(WWW_AUTHENTICATE)
            .expect("WWW-Authenticate");
        assert!(challenge.to_str().unwrap().starts_with("Bearer"));
    }

    let alice = user();
    let first = test.api.pay(&alice, &key, &payment(9800)).await;
    assert!(!first.replayed(), "the refused requests stored nothing");
    first.created();
}

/// Malformed keys of every kind: 400 Problem Details, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_keys_are_400() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let too_long = "k".repeat(256);
    let cases: Vec<(&str, Vec<HeaderValue>)> = vec![
        ("empty", vec![HeaderValue::from_static("")]),
        ("empty quoted", vec![HeaderValue::from_static("\"\"")]),
        (
            "256 characters",
            vec![HeaderValue::from_str(&too_long).unwrap()],
        ),
        (
            "two header lines",
            vec![HeaderValue::from_static("a"), HeaderValue::from_static("b")],
        ),
        ("a list", vec![HeaderValue::from_static("\"a\", \"b\"")]),
        ("a folded list", vec![HeaderValue::from_static("a,b")]),
        (
            "an unterminated string",
            vec![HeaderValue::from_static("\"abc")],
        ),
        (
            "a space in a quoted key",
            vec![HeaderValue::from_static("\"a b\"")],
        ),
        ("a tab", vec![HeaderValue::from_static("a\tb")]),
        (
            "a byte outside ASCII",
            vec![HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()],
        ),
    ];
    for (case, values) in cases {
        let mut request = test
            .api
            .post("/payments", Some(&alice), None)
            .json(&payment(9800));
        for value in values {
            request = request.header("idempotency-key", value);
        }
        let answer = Answer::of(request).await;
        let problem = answer.problem(StatusCode::BAD_REQUEST, "key-malformed");
        assert_eq!(problem["title"], "Idempotency-Key is malformed", "{case}");
    }
    let longest = "k".repeat(255);
    test.api.pay(&alice, &longest, &payment(1)).await.created();
    assert_eq!(
        test.api.payments(&alice).await.len(),
        1,
        "only the 255-character key ran"
    );
}

/// A body over the shop's 16 KiB limit: 413 Problem Details, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let padding = "x".repeat(Settings::DEFAULT_BODY_LIMIT);
    let large = json!({ "amount": 9800, "currency": "JPY", "note": padding });
    let answer = test.api.pay(&alice, &key, &large).await;
    let problem = answer.problem(StatusCode::PAYLOAD_TOO_LARGE, "body-too-large");
    assert_eq!(problem["title"], "Request body is too large");

    // Under the limit, the same key runs: the refused body was never stored.
    let fine = test.api.pay(&alice, &key, &payment(9800)).await;
    assert!(!fine.replayed());
    fine.created();
}

/// A body that fails validation is refused with 400 Problem Details naming the field, and
/// nothing is stored: the same key then works with the fixed body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_is_not_stored_and_the_key_works_once_fixed() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let invalid = [
        (json!({ "amount": "9800", "currency": "JPY" }), "#/amount"),
        (json!({ "amount": 0, "currency": "JPY" }), "#/amount"),
        (
            json!({ "amount": 100_000_001, "currency": "JPY" }),
            "#/amount",
        ),
        (json!({ "amount": 9800, "currency": "jpy" }), "#/currency"),
        (json!({ "amount": 9800 }), "#/currency"),
        (
            json!({ "amount": 9800, "currency": "JPY", "amuont": 1 }),
            "#/amuont",
        ),
    ];
    for (body, pointer) in invalid {
        let answer = test.api.pay(&alice, &key, &body).await;
        let problem = answer.problem(StatusCode::BAD_REQUEST, "invalid-body");
        assert_eq!(problem["errors"][0]["pointer"], pointer, "{body}");
        let field = pointer.trim_start_matches("#/");
        assert!(
            problem["detail"].as_str().unwrap().contains(field),
            "{problem}"
        );
    }
    let broken = Answer::of(
        test.api
            .post("/payments", Some(&alice), Some(&key))
            .header("content-type", "application/json")
            .body(r#"{"amount": 98"#),
    )
    .await;
    let problem = broken.problem(StatusCode::BAD_REQUEST, "invalid-body");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    let not_json = Answer::of(
        test.api
            .post("/payments", Some(&alice), Some(&key))
            .header("content-type", "text/plain")
            .body("amount=9800"),
    )
    .await;
    not_json.problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type");

    let fixed = test.api.pay(&alice, &key, &payment(9800)).await;
    assert!(
        !fixed.replayed(),
        "nothing was stored for the refused bodies"
    );
    fixed.created();
    let again = test.api.pay(&alice, &key, &payment(9800)).await;
    assert!(again.replayed());
    assert_eq!(test.api.payments(&alice).await.len(), 1);
}

/// A body is told every member it lacks, not only the first, and what a member of the wrong
/// type must be in JSON's words, not Rust's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_is_told_every_missing_member_in_plain_words() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let empty = Answer::of(
        test.api
            .post("/transfers", Some(&alice), Some(&key()))
            .json(&json!({})),
    )
    .await;
    let problem = empty.problem(StatusCode::BAD_REQUEST, "invalid-body");
    assert_eq!(
        problem["detail"],
        "amount: is required; currency: is required; toAccount: is required"
    );
    let pointers: Vec<_> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|error| error["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["#/amount", "#/currency", "#/toAccount"]);

    let answer = test
        .api
        .pay(&alice, &key(), &json!({ "amount": "9800" }))
        .await;
    let problem = answer.problem(StatusCode::BAD_REQUEST, "invalid-body");
    assert_eq!(
        problem["detail"],
        r#"amount: invalid type: must be an integer, not the string "9800"; currency: is required"#
    );
}

/// 200 requests with one key at once, on as many connections and tasks: exactly one payment.
/// Every other request is answered 409 (the first is in flight) or the replay of its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_concurrent_requests_with_one_key_make_one_payment() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let start = Arc::new(Barrier::new(200));
    let mut requests = JoinSet::new();
    for _ in 0..200 {
        let (api, alice, key, start) =
            (test.api.clone(), alice.clone(), key.clone(), start.clone());
        requests.spawn(async move {
            start.wait().await;
            api.pay(&alice, &key, &payment(9800)).await
        });
    }
    let (mut ran, mut replayed, mut conflicts) = (Vec::new(), Vec::new(), 0);
    while let Some(answer) = requests.join_next().await {
        let answer = answer.unwrap();
        match (answer.status.as_u16(), answer.replayed()) {
            (201, false) => ran.push(answer),
            (201, true) => replayed.push(answer),
            (409, _) => {
                answer.problem(StatusCode::CONFLICT, "request-in-flight");
                conflicts += 1;
            }
            _ => panic!("unexpected answer: {answer:?}"),
        }
    }
    assert_eq!(ran.len(), 1, "one request ran");
    assert_eq!(ran.len() + replayed.len() + conflicts, 200);
    assert!(replayed.iter().all(|answer| answer.body == ran[0].body));
    assert_eq!(test.api.payments(&alice).await, [ran[0].json()]);
}

/// GET is not an operation: an `Idempotency-Key` on it is ignored, never stored, never
/// replayed, and never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_requests_are_not_intercepted() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let paid = test.api.pay(&alice, &key, &payment(9800)).await.created();
    let list = |key: &'static str| {
        let api = test.api.clone();
        let alice = alice.clone();
        async move { Answer::of(api.get("/payments", &alice).header("idempotency-key", key)).await }
    };
    let first = list("listing-1").await;
    assert_eq!(first.status, 200);
    assert!(!first.replayed());
    assert_eq!(first.json()["items"].as_array().unwrap().len(), 1);

    test.api
        .pay(&alice, &idem_tests::key(), &payment(1))
        .await
        .created();
    let second = list("listing-1").await;
    assert!(!second.replayed());
    assert_eq!(
        second.json()["items"].as_array().unwrap().len(),
        2,
        "a fresh answer, not the first one stored"
    );
    let malformed = list("\"unterminated").await;
    assert_eq!(malformed.status, 200, "a GET's key is not even parsed");

    let path = format!("/payments/{}", paid["id"].as_str().unwrap());
    let one = Answer::of(
        test.api
            .get(&path, &alice)
            .header("idempotency-key", key.as_str()),
    )
    .await;
    assert_eq!(one.json(), paid);
    assert!(!one.replayed());
    let health = Answer::of(test.api.http.get(test.api.url("/healthz"))).await;
    assert_eq!(health.status, 200);
    assert_eq!(health.json(), json!({ "status": "ok" }));
}

/// Every error the shop answers is `application/problem+json` with a stable `type`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_problem_json() {
    let test = TestShop::memory(settings()).await;
    let (alice, bob) = (user(), user());
    let bobs = test.api.pay(&bob, &key(), &payment(9800)).await.created();
    let bobs = bobs["id"].as_str().unwrap();
    let api = &test.api;

    Answer::of(api.get("/nothing-here", &alice))
        .await
        .problem(StatusCode::NOT_FOUND, "route-not-found");
    Answer::of(api.post("/nothing-here", Some(&alice), Some(&key())))
        .await
        .problem(StatusCode::NOT_FOUND, "route-not-found");
    let wrong_method = Answer::of(api.http.delete(api.url("/payments")).bearer_auth(&alice)).await;
    wrong_method.problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
    let allow = wrong_method.header("allow").unwrap();
    assert!(allow.contains("POST") && allow.contains("GET"), "{allow}");
    Answer::of(api.http.put(api.url("/transfers")).bearer_auth(&alice))
        .await
        .problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
    Answer::of(api.http.post(api.url("/healthz")))
        .await
        .problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
    Answer::of(
        api.post("/payments", Some(&alice), Some(&key()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("amount=9800&currency=JPY"),
    )
    .await
    .problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type");
    Answer::of(api.post("/payments", Some(&alice), Some(&key())))
        .await
        .problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type");
    Answer::of(api.get(&format!("/payments/{bobs}"), &alice))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    Answer::of(api.get("/payments/pay_nonexistent", &alice))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    Answer::of(api.get("/payments/%FF", &alice))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    Answer::of(api.post("/payments/%FF/receipt", Some(&alice), None))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    Answer::of(
        api.post(
            &format!("/payments/{bobs}/refunds"),
            Some(&alice),
            Some(&key()),
        )
        .json(&json!({ "amount": 1 })),
    )
    .await
    .problem(StatusCode::NOT_FOUND, "payment-not-found");
    Answer::of(api.post(&format!("/payments/{bobs}/receipt"), Some(&alice), None))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    Answer::of(api.http.get(api.url("/payments")))
        .await
        .problem(StatusCode::UNAUTHORIZED, "unauthenticated");
    test.api
        .pay(&alice, &key(), &json!({ "amount": -1, "currency": "JPY" }))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid-body");
}

/// `GET /openapi.json` is an OpenAPI 3.1 document that documents the key header, the bearer
/// scheme and the Problem Details answers, and whose operations are the router's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_the_service() {
    let test = TestShop::memory(settings()).await;
    let answer = Answer::of(test.api.http.get(test.api.url("/openapi.json"))).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let document = answer.json();
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        document["openapi"]
    );
    assert!(document["info"]["title"].is_string());

    let create = &document["paths"]["/payments"]["post"];
    let header = parameter(create, "Idempotency-Key");
    assert_eq!(header["in"], "header");
    assert_eq!(header["required"], true);
    let description = header["description"].as_str().unwrap();
    assert!(
        description.contains("sf-string") && description.contains("bare"),
        "{description}"
    );
    assert_eq!(create["security"][0]["bearer"], json!([]));
    assert_eq!(
        create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/NewPayment"
    );
    assert_eq!(
        create["responses"]["201"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Payment"
    );
    assert!(create["responses"]["201"]["headers"]["Idempotent-Replayed"].is_object());
    // The shop's own Problem Details, and idem's beside them where both answer a status.
    let schema = |status: &str| {
        create["responses"][status]["content"]["application/problem+json"]["schema"].clone()
    };
    let shops = json!({ "$ref": "#/components/schemas/Problem" });
    // 401 is the shop's alone: idem answers no client a 401 (a missing principal is the
    // service's fault, and not in the document).
    assert_eq!(schema("415"), shops);
    assert_eq!(schema("401"), shops);
    for status in ["400", "503"] {
        assert_eq!(schema(status)["anyOf"][0], shops, "POST /payments {status}");
    }
    for status in ["409", "410", "413", "422", "500"] {
        assert_eq!(
            schema(status)["allOf"][0]["$ref"],
            "#/components/schemas/IdempotencyProblem",
            "POST /payments {status}"
        );
    }
    assert!(create["responses"]["409"]["headers"]["Retry-After"].is_object());
    assert_eq!(create["x-idempotency"]["ttl"], 86_400);

    let receipt = &document["paths"]["/payments/{id}/receipt"]["post"];
    assert_eq!(parameter(receipt, "Idempotency-Key")["required"], false);
    let webhook = &document["paths"]["/webhooks/bank"]["post"];
    let strict = parameter(webhook, "Idempotency-Key");
    assert!(
        strict["schema"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with("^\"")
    );
    let lists = &document["paths"]["/payments"]["get"];
    assert!(lists["parameters"].is_null(), "a GET takes no key");

    let problem = &document["components"]["schemas"]["Problem"];
    for member in ["type", "title", "status", "detail"] {
        assert!(
            problem["properties"][member].is_object(),
            "Problem.{member}"
        );
    }
    let schemes = &document["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!(schemes["bankSignature"]["in"], "header");

    // Every documented operation exists on the router: none is answered "no such route" or
    // "method not allowed".
    let paths = document["paths"].as_object().unwrap();
    let alice = user();
    for (path, item) in paths {
        let concrete = path.replace("{id}", "pay_unknown");
        for method in item.as_object().unwrap().keys() {
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let request = test
                .api
                .http
                .request(method.clone(), test.api.url(&concrete))
                .bearer_auth(&alice);
            let answer = Answer::of(request).await;
            assert_ne!(answer.status, 405, "{method} {path}: {answer:?}");
            if answer.status == 404 {
                answer.problem(StatusCode::NOT_FOUND, "payment-not-found");
            }
        }
    }
}

fn parameter<'a>(operation: &'a Value, name: &str) -> &'a Value {
    operation["parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("no parameters: {operation}"))
        .iter()
        .find(|parameter| parameter["name"] == name)
        .unwrap_or_else(|| panic!("no parameter {name}: {operation}"))
}

/// A transfer whose client timed out is still running when the server is told to stop. The
/// server stops accepting, the shutdown waits for the transfer to store its result, and a
/// new server on the same runtime and store replays it at once: one transfer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_a_detached_handler_store_its_result() {
    let backend = Backend::memory();
    let shop = Shop::new(
        backend.ledger.clone(),
        Settings {
            transfer_delay: Duration::from_millis(1000),
            ..settings()
        },
    );
    let idem = backend.idem.clone();
    let before = Server::start(shop::app(shop.clone(), idem.clone()), idem.clone()).await;
    let api = Api::new(&before);
    let (alice, key) = (user(), key());
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let started = Instant::now();
    let lost = impatient
        .post(api.url("/transfers"))
        .bearer_auth(&alice)
        .header("idempotency-key", &key)
        .json(&transfer(50_000))
        .send()
        .await
        .unwrap_err();
    assert!(lost.is_timeout());
    assert_eq!(idem.running(), 1, "the transfer runs on without its client");

    let old_address = api.url("/healthz");
    before.stop().await;
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "the shutdown waited for the transfer"
    );
    assert_eq!(idem.running(), 0);
    assert!(
        reqwest::get(&old_address).await.is_err(),
        "the stopped server accepts nothing"
    );

    let after = Server::start(shop::app(shop, idem.clone()), idem).await;
    let api = Api::new(&after);
    let retried = api.transfer(&alice, &key, &transfer(50_000)).await;
    assert!(
        retried.replayed(),
        "the result was stored before the shutdown ended: {retried:?}"
    );
    let transfers = api.transfers(&alice).await;
    assert_eq!(transfers, [retried.created()], "one transfer");
}

/// A client still waiting when the shutdown signal comes gets its answer: the server stops
/// only after the requests in progress are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_answers_the_requests_in_progress() {
    let test = TestShop::memory(Settings {
        transfer_delay: Duration::from_millis(1000),
        ..settings()
    })
    .await;
    let (alice, key) = (user(), key());
    let waiting = {
        let (api, alice, key) = (test.api.clone(), alice.clone(), key.clone());
        tokio::spawn(async move { api.transfer(&alice, &key, &transfer(50_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let TestShop {
        server, shop, idem, ..
    } = test;
    server.stop().await;
    let answer = waiting.await.unwrap();
    let created = answer.created();
    assert!(!answer.replayed());

    let after = Server::start(shop::app(shop, idem.clone()), idem).await;
    assert_eq!(Api::new(&after).transfers(&alice).await, [created]);
}
