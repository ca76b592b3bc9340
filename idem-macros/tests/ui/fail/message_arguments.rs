use axum::Json;
use idem::idempotent;

#[idempotent(key = header("Nats Msg Id"), scope = "global")]
async fn wrong_header(Json(_event): Json<serde_json::Value>) {}

#[idempotent(key = json("order_id"))]
async fn wrong_pointer(Json(_event): Json<serde_json::Value>) {}

#[idempotent(key = "Nats-Msg-Id")]
async fn not_a_source(Json(_event): Json<serde_json::Value>) {}

#[idempotent(key = header("Nats-Msg-Id"), scope = "user")]
async fn with_a_scope(Json(_event): Json<serde_json::Value>) {}

fn main() {}
