//! The seven cases against the shop's gRPC API from another language: a Python client
//! compiled from `examples/shop/proto/payments.proto` with grpcio-tools
//! (`tests/python/shop_client.py`), over HTTP/2 on loopback.
//!
//! It needs `IDEM_TEST_PYTHON`, a Python with `grpcio`, `grpcio-tools` and
//! `googleapis-common-protos` (`.ci/run` makes one). Unset, the test is ignored with that
//! message, except in CI, where it runs and fails.

use std::{
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use idem::{Idempotency, MemoryStore, Policy, grpc::GrpcIdempotencyLayer};
use idem_tests::{grpc_fixture::GrpcShop, shop_fixture::settings};
use shop::{
    Backend, Settings,
    grpc::{
        authenticate,
        proto::{
            CreatePaymentRequest, ListPaymentsRequest, ListPaymentsResponse, Payment,
            payments_server::{Payments, PaymentsServer},
        },
    },
};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status, transport::server::TcpIncoming};

/// A `CreatePayment` whose first call fails `INTERNAL`, behind the layer: case 7.
#[derive(Clone, Default)]
struct FailsOnce(Arc<AtomicBool>);

#[tonic::async_trait]
impl Payments for FailsOnce {
    async fn create_payment(
        &self,
        request: Request<CreatePaymentRequest>,
    ) -> Result<Response<Payment>, Status> {
        if !self.0.swap(true, Ordering::SeqCst) {
            return Err(Status::internal("the card network failed"));
        }
        let new = request.into_inner();
        Ok(Response::new(Payment {
            id: "pay_after_failure".to_owned(),
            amount: new.amount,
            currency: new.currency,
            status: "succeeded".to_owned(),
        }))
    }

    async fn list_payments(
        &self,
        _: Request<ListPaymentsRequest>,
    ) -> Result<Response<ListPaymentsResponse>, Status> {
        Ok(Response::new(ListPaymentsResponse::default()))
    }
}

async fn failing() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let layer = GrpcIdempotencyLayer::new(Idempotency::new(MemoryStore::default()), Policy::new())
        .method("/shop.v1.Payments/CreatePayment");
    let task = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(tonic::service::InterceptorLayer::new(authenticate))
            .layer(layer)
            .add_service(PaymentsServer::new(FailsOnce::default()))
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    (addr, task)
}

#[cfg_attr(
    not(idem_test_python),
    ignore = "IDEM_TEST_PYTHON is not set (a Python with grpcio, grpcio-tools and googleapis-common-protos)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seven_cases_hold_for_a_python_client() {
    let python = std::env::var("IDEM_TEST_PYTHON").expect(
        "IDEM_TEST_PYTHON must name a Python with grpcio, grpcio-tools and \
         googleapis-common-protos: .ci/run makes one",
    );
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let generated = std::env::temp_dir().join(format!("idem-grpc-python-{}", std::process::id()));
    std::fs::create_dir_all(&generated).unwrap();
    let compiled = tokio::process::Command::new(&python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(format!("{root}/examples/shop/proto"))
        .arg(format!("--python_out={}", generated.display()))
        .arg(format!("--grpc_python_out={}", generated.display()))
        .arg("payments.proto")
        .status()
        .await
        .expect("IDEM_TEST_PYTHON runs");
    assert!(
        compiled.success(),
        "grpc_tools.protoc failed on payments.proto"
    );

    let quick = GrpcShop::memory(settings()).await;
    let slow = GrpcShop::memory(Settings {
        payment_delay: Duration::from_millis(1500),
        ..settings()
    })
    .await;
    let short_ttl = GrpcShop::on(
        Backend::memory().with_runtime(Some(Duration::from_millis(1)), None),
        settings(),
    )
    .await;
    let (failing, failing_task) = failing().await;
    let run = tokio::process::Command::new(&python)
        .arg(format!("{root}/tests/python/shop_client.py"))
        .arg(&generated)
        .args([
            quick.addr.to_string(),
            slow.addr.to_string(),
            short_ttl.addr.to_string(),
            failing,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the Python client finishes")
        .unwrap();
    failing_task.abort();
    let _ = std::fs::remove_dir_all(&generated);
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("8 passed, 0 failed"), "{stdout}");
}
