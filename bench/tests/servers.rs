//! The benchmark servers answer what the benchmarks say they measure, over real HTTP: idem's
//! servers run the handler for a fresh key and replay its answer to the repeat, and the bare
//! server runs the handler every time. A server that answered otherwise (a 4xx for the
//! benchmark's request, a repeat that runs again) would make every figure of the load run
//! measure something else.

use idem_bench::{
    payment,
    server::{Scoping, Server, UnknownServer, roomy_store},
};
use reqwest::{Client, Response, StatusCode};

/// Serves `server` on a free loopback port, its keys scoped as `scoping` says; returns the
/// URL of its route.
async fn serve(server: Server, scoping: Scoping) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        axum::serve(listener, server.router(scoping, roomy_store()))
            .await
            .expect("the server runs")
    });
    format!("http://{addr}{}", payment::PATH)
}

/// The benchmarks' request: the payment body with a key, from the benchmarks' caller.
async fn post(client: &Client, url: &str, key: &str) -> Response {
    post_as(client, url, key, payment::AUTHORIZATION).await
}

/// The benchmarks' request from the caller `authorization`.
async fn post_as(client: &Client, url: &str, key: &str, authorization: &str) -> Response {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .header("authorization", authorization)
        .body(payment::BODY)
        .send()
        .await
        .expect("the server answers")
}

/// The status, `Location`, replay marker and body of an answer.
async fn answer(response: Response) -> (StatusCode, String, Option<String>, String) {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().expect("an ASCII header").to_owned())
    };
    let location = header("location").expect("a Location");
    let replayed = header("idempotent-replayed");
    let status = response.status();
    (
        status,
        location,
        replayed,
        response.text().await.expect("a body"),
    )
}

#[tokio::test]
async fn idem_servers_run_a_fresh_key_once_and_replay_its_repeat() {
    let client = Client::new();
    for server in [Server::Layer, Server::Attribute] {
        for scoping in [Scoping::User, Scoping::Global] {
            let label = format!("{server} ({scoping:?})");
            let url = serve(server, scoping).await;
            let first = answer(post(&client, &url, "bench-key-1").await).await;
            let repeat = answer(post(&client, &url, "bench-key-1").await).await;
            let other = answer(post(&client, &url, "bench-key-2").await).await;

            assert_eq!(first.0, StatusCode::CREATED, "{label}: {first:?}");
            assert_eq!(first.2, None, "{label}: a fresh key is not a replay");
            assert_eq!(
                (repeat.0, &repeat.1, &repeat.3),
                (StatusCode::CREATED, &first.1, &first.3),
                "{label}: the repeat gets the first answer"
            );
            assert_eq!(
                repeat.2.as_deref(),
                Some("true"),
                "{label}: marked replayed"
            );
            assert_eq!(other.0, StatusCode::CREATED, "{label}: {other:?}");
            assert_ne!(other.1, first.1, "{label}: another key is another payment");
        }
    }
}

#[tokio::test]
async fn the_steps_servers_run_a_fresh_key_once_and_replay_its_repeat() {
    let client = Client::new();
    for server in [Server::Layer, Server::Attribute] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let url = format!("http://{}{}", listener.local_addr().unwrap(), payment::PATH);
        tokio::spawn(async move {
            axum::serve(listener, server.steps_router(roomy_store()))
                .await
                .expect("the server runs")
        });
        let first = answer(post(&client, &url, "steps-key-1").await).await;
        let repeat = answer(post(&client, &url, "steps-key-1").await).await;

        assert_eq!(first.0, StatusCode::CREATED, "{server}: {first:?}");
        assert_eq!(first.2, None, "{server}: a fresh key is not a replay");
        assert_eq!(
            (repeat.0, &repeat.1, repeat.2.as_deref()),
            (StatusCode::CREATED, &first.1, Some("true")),
            "{server}: the repeat gets the first answer, replayed"
        );
    }
}

#[tokio::test]
async fn the_user_configuration_keeps_each_callers_keys_apart() {
    let client = Client::new();
    for server in [Server::Layer, Server::Attribute] {
        let url = serve(server, Scoping::User).await;
        let first = answer(post(&client, &url, "shared-key").await).await;
        let other = post_as(&client, &url, "shared-key", "Bearer client-0002").await;
        let other = answer(other).await;

        assert_eq!(other.0, StatusCode::CREATED, "{server}: {other:?}");
        assert_eq!(
            other.2, None,
            "{server}: another caller's key is not a replay"
        );
        assert_ne!(other.1, first.1, "{server}: another caller's payment");

        let global = serve(server, Scoping::Global).await;
        answer(post(&client, &global, "shared-key").await).await;
        let other = post_as(&client, &global, "shared-key", "Bearer client-0002").await;
        let other = answer(other).await;
        assert_eq!(
            other.2.as_deref(),
            Some("true"),
            "{server}: one key space for every caller in the global configuration"
        );
    }
}

#[tokio::test]
async fn the_bare_server_runs_the_handler_for_every_request() {
    let client = Client::new();
    let url = serve(Server::Bare, Scoping::User).await;
    let first = answer(post(&client, &url, "bench-key-1").await).await;
    let repeat = answer(post(&client, &url, "bench-key-1").await).await;

    assert_eq!(
        (first.0, repeat.0),
        (StatusCode::CREATED, StatusCode::CREATED)
    );
    assert_eq!((&first.2, &repeat.2), (&None, &None), "no replays");
    assert_ne!(first.1, repeat.1, "two requests are two payments");
}

#[test]
fn server_names_are_the_command_line_s() {
    for server in Server::ALL {
        assert_eq!(server.name().parse(), Ok(server));
    }
    let unknown = "layr".parse::<Server>().unwrap_err();
    assert_eq!(unknown, UnknownServer("layr".to_owned()));
    assert_eq!(
        unknown.to_string(),
        "unknown server `layr`; expected one of `bare`, `layer`, `attribute`"
    );
}
