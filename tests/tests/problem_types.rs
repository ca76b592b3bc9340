//! The `type` of idem's Problem Details leads somewhere: a reader who resolves it against the
//! URL of the refused request, as RFC 9457 says to resolve a relative `type`, and opens it,
//! finds the page the shop serves and, on it, the section of that kind of problem.

use idem::problem::{CATALOGUE_PATH, PROBLEM_JSON};
use idem_tests::{
    Answer, key,
    shop_fixture::{TestShop, payment, settings, user},
};
use reqwest::{StatusCode, Url};

/// The section a `type` URI leads to, as a reader's browser finds it: the page at the URI
/// resolved against `request_url`, without its fragment, and the element whose `id` is the
/// fragment.
async fn open(http: &reqwest::Client, request_url: &str, type_uri: &str) -> (Url, String) {
    let resolved = Url::parse(request_url).unwrap().join(type_uri).unwrap();
    let fragment = resolved
        .fragment()
        .expect("a type URI names its section")
        .to_owned();
    let mut page_url = resolved.clone();
    page_url.set_fragment(None);
    let page = Answer::of(http.get(page_url.clone())).await;
    assert_eq!(page.status, StatusCode::OK, "{page_url}");
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{page_url}"
    );
    let html = String::from_utf8(page.body.to_vec()).unwrap();
    let section = format!("<section id=\"{fragment}\">");
    let start = html
        .find(&section)
        .unwrap_or_else(|| panic!("{resolved}: the page has no {section}"));
    let end = html[start..].find("</section>").unwrap() + start;
    (resolved, html[start..end].to_owned())
}

#[tokio::test]
async fn the_type_of_each_refusal_leads_to_its_section_of_the_catalogue() {
    let test = TestShop::memory(settings()).await;
    let api = &test.api;
    let alice = user();
    let url = api.url("/payments");

    let missing = Answer::of(
        api.post("/payments", Some(&alice), None)
            .json(&payment(9800)),
    )
    .await;
    let reused_key = key();
    Answer::of(
        api.post("/payments", Some(&alice), Some(&reused_key))
            .json(&payment(9800)),
    )
    .await
    .created();
    let reused = Answer::of(
        api.post("/payments", Some(&alice), Some(&reused_key))
            .json(&payment(1200)),
    )
    .await;
    let malformed = Answer::of(
        api.post("/payments", Some(&alice), Some("\"never closed"))
            .json(&payment(9800)),
    )
    .await;

    for (answer, slug, status) in [
        (&missing, "key-missing", 400),
        (&reused, "key-reused", 422),
        (&malformed, "key-malformed", 400),
    ] {
        assert_eq!(answer.status.as_u16(), status, "{answer:?}");
        assert_eq!(answer.header("content-type"), Some(PROBLEM_JSON));
        let type_uri = answer.json()["type"].as_str().unwrap().to_owned();
        assert_eq!(type_uri, format!("/problems/idempotency#{slug}"));
        let (resolved, section) = open(&api.http, &url, &type_uri).await;
        assert_eq!(
            resolved.as_str(),
            format!("{}{CATALOGUE_PATH}#{slug}", api.base),
            "the reference resolves on the shop itself"
        );
        // The section says the status and what to do, in words a reader can act on.
        assert!(section.contains(&format!("<h2>{slug}</h2>")), "{section}");
        assert!(section.contains(&format!("<strong>{status} ")), "{section}");
    }
}

#[tokio::test]
async fn the_catalogue_is_open_to_anyone_and_answers_head() {
    let test = TestShop::memory(settings()).await;
    let page = Answer::of(test.api.http.get(test.api.url(CATALOGUE_PATH))).await;
    assert_eq!(page.status, StatusCode::OK, "no credentials needed");
    let head = Answer::of(test.api.http.head(test.api.url(CATALOGUE_PATH))).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
}

#[tokio::test]
async fn the_type_of_the_shop_s_own_problems_leads_to_the_shop_s_catalogue() {
    let test = TestShop::memory(settings()).await;
    let api = &test.api;
    let alice = user();

    let invalid = Answer::of(
        api.post("/payments", Some(&alice), Some(&key()))
            .json(&payment(0)),
    )
    .await;
    let not_found = Answer::of(api.get("/payments/pay_none", &alice)).await;
    for (answer, slug, status, url) in [
        (&invalid, "invalid-body", 400, api.url("/payments")),
        (
            &not_found,
            "payment-not-found",
            404,
            api.url("/payments/pay_none"),
        ),
    ] {
        assert_eq!(answer.status.as_u16(), status, "{answer:?}");
        let type_uri = answer.json()["type"].as_str().unwrap().to_owned();
        assert_eq!(type_uri, format!("/problems/shop#{slug}"));
        let (resolved, section) = open(&api.http, &url, &type_uri).await;
        assert_eq!(
            resolved.as_str(),
            format!("{}/problems/shop#{slug}", api.base)
        );
        assert!(
            section.contains(&format!("<strong>{status}.</strong>")),
            "{section}"
        );
    }
}
