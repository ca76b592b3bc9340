use axum::{Form, Router, routing::post};
use idem::idempotent;
use serde::Deserialize;

#[derive(Deserialize)]
struct Signup {
    email: String,
}

#[idempotent(scope = "global", fingerprint = "raw")]
async fn signup(Form(signup): Form<Signup>) -> String {
    signup.email
}

fn main() {
    let _app: Router = Router::new().route("/signup", post(signup));
}
