use axum::{Router, routing::post};

mod payments {
    use axum::{Json, extract::State};
    use idem::idempotent;

    #[derive(Clone)]
    pub struct Db;

    /// Creates a payment.
    #[idempotent(scope = "global")]
    pub async fn create_payment(State(_db): State<Db>, Json(amount): Json<u64>) -> Json<u64> {
        Json(amount)
    }

    #[idempotent(scope = "global")]
    pub(crate) async fn refund(Json(amount): Json<u64>) -> Json<u64> {
        Json(amount)
    }
}

fn main() {
    let _app: Router = Router::new()
        .route("/payments", post(payments::create_payment))
        .route("/refunds", post(payments::refund))
        .with_state(payments::Db);
}
