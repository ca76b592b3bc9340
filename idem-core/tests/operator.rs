//! The operator's side of the runtime on an operation of several steps: a look-up says which
//! steps it recorded, that it is suspended and when this process resumes it; a removal
//! removes the whole operation, so that nothing resumes it and the next request runs it from
//! its start.

use std::time::{Duration, SystemTime};

use axum::{
    Extension, Json, Router, body::Body, extract::Request, http::StatusCode, routing::post,
};
use http::Method;
use idem::{
    Idempotency, IdempotencyKey, MemoryStore, RecordAddress, Scope, idempotent,
    steps::{StepError, Steps},
    store::{Held, RecordState},
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A transfer whose bank order goes through and whose ledger step fails for now: the
/// operation stops after its first step, and the service would resume it in 30 s.
#[idempotent(scope = "global", resume_after = "30s")]
async fn transfer(mut steps: Steps, Json(_order): Json<Value>) -> Result<StatusCode, StepError> {
    steps
        .call("bank-order", |_key| async { Ok(json!({ "id": "bt_1" })) })
        .await?;
    steps
        .call("ledger", |_key| async {
            Err::<Value, _>(StepError::retryable(StatusCode::SERVICE_UNAVAILABLE))
        })
        .await?;
    Ok(StatusCode::CREATED)
}

fn request() -> Request {
    Request::post("/transfers")
        .header("idempotency-key", "k-operator")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"amount":50000}"#))
        .unwrap()
}

#[tokio::test]
async fn a_suspended_operation_is_shown_with_its_steps_and_removed_whole() {
    let idem = Idempotency::new(MemoryStore::default());
    let app = Router::new()
        .route("/transfers", post(transfer))
        .layer(Extension(idem.clone()));
    let stopped = app.clone().oneshot(request()).await.unwrap();
    assert_eq!(stopped.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(idem.scheduled_resumptions(), 1);

    let address = RecordAddress::new(
        Scope::Global,
        None,
        Method::POST,
        "/transfers",
        IdempotencyKey::new("k-operator").unwrap(),
    )
    .unwrap();
    let Some(Held::InFlight(record)) = idem.look_up(&address).await.unwrap() else {
        panic!("the operation is in flight");
    };
    assert_eq!(record.steps, ["bank-order"]);
    assert_eq!(record.suspensions, 1);
    assert!(record.is_suspended(), "{record:?}");
    let resumes_in = record
        .resumes_at
        .expect("this process resumes it")
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    // The resumer's first pause is the route's 30 s, give or take a tenth.
    assert!(
        resumes_in > Duration::from_secs(20) && resumes_in <= Duration::from_secs(33),
        "{resumes_in:?}"
    );

    assert_eq!(
        idem.remove(&address, "a test").await.unwrap(),
        Some(RecordState::InFlight)
    );
    assert_eq!(idem.scheduled_resumptions(), 0, "nothing resumes it");
    assert_eq!(idem.look_up(&address).await.unwrap(), None);
    // The next request runs the operation from its start: the bank order runs again, and the
    // operation stops at the ledger again, its first suspension.
    app.oneshot(request()).await.unwrap();
    let Some(Held::InFlight(again)) = idem.look_up(&address).await.unwrap() else {
        panic!("the operation is in flight again");
    };
    assert_eq!((again.steps.len(), again.suspensions), (1, 1));
}
