#![deny(warnings)]

use axum::{Json, extract::State};
use idem::{
    idempotent,
    message::{MessageError, MessageKey, MessageService},
};
use serde::Deserialize;

#[derive(Clone)]
struct Db;

#[derive(Deserialize)]
struct OrderPaid {
    order_id: String,
}

/// Keyed by the publisher's message id.
#[idempotent(key = header("Nats-Msg-Id"), ttl = "24h")]
async fn on_order_paid(State(_db): State<Db>, Json(event): Json<OrderPaid>) -> Result<(), MessageError> {
    if event.order_id.is_empty() {
        return Err(MessageError::terminal("an order without an id"));
    }
    Ok(())
}

/// Keyed by a member of the body, without state.
#[idempotent(key = json("/order_id"), lease = "10s", required = false)]
async fn on_order_shipped(Json(_event): Json<OrderPaid>) {}

fn main() {
    assert_eq!(on_order_paid.key(), MessageKey::Header("Nats-Msg-Id"));
    assert_eq!(on_order_shipped.key(), MessageKey::Json("/order_id"));
    let _services: [MessageService; 2] = [
        on_order_paid.with_state(Db),
        on_order_shipped.stateless(),
    ];
}
