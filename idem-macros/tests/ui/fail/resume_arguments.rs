use axum::Json;
use idem::idempotent;

#[idempotent(keep_headers = ["authorization"], resume_after = "30s")]
async fn keeps_credentials(Json(_order): Json<serde_json::Value>) {}

#[idempotent(keep_headers = ["X-Source", 7], resume_after = "30s")]
async fn not_header_names(Json(_order): Json<serde_json::Value>) {}

#[idempotent(keep_headers = "x-source")]
async fn not_a_list(Json(_order): Json<serde_json::Value>) {}

#[idempotent(resume_after = "soon")]
async fn not_a_duration(Json(_order): Json<serde_json::Value>) {}

#[idempotent(key = json("/id"), resume_after = "30s")]
async fn a_message_handler(Json(_event): Json<serde_json::Value>) {}

fn main() {}
