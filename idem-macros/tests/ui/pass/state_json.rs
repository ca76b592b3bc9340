use axum::{Json, Router, extract::State, routing::post};
use idem::idempotent;
use serde::{Deserialize, Serialize};

#[derive(Clone)]
struct Db;

#[derive(Deserialize)]
struct NewPayment {
    amount: u64,
}

#[derive(Serialize)]
struct Payment {
    id: u64,
    amount: u64,
}

#[idempotent(ttl = "24h", scope = "user")]
async fn create_payment(State(_db): State<Db>, Json(new): Json<NewPayment>) -> Json<Payment> {
    Json(Payment {
        id: 1,
        amount: new.amount,
    })
}

fn main() {
    let _app: Router = Router::new()
        .route("/payments", post(create_payment))
        .with_state(Db);
}
