//! Handlers in an `impl` block: one that names `Self` (kept as a hidden associated function
//! next to the constant) and one that does not (nested in it), both routed and called.
use axum::{Json, Router, extract::State, routing::post};
use idem::idempotent;

#[derive(Clone)]
struct Shop {
    name: &'static str,
}

impl Shop {
    fn greeting(&self, who: &str) -> String {
        format!("{} greets {who}", self.name)
    }

    #[idempotent(scope = "global")]
    async fn greet(State(shop): State<Self>, Json(who): Json<String>) -> Json<String> {
        Json(Self::greeting(&shop, &who))
    }

    #[idempotent(scope = "global")]
    pub(crate) async fn echo(Json(body): Json<String>) -> String {
        body
    }
}

fn main() {
    let shop = Shop { name: "shop" };
    let _app: Router = Router::new()
        .route("/greet", post(Shop::greet))
        .route("/echo", post(Shop::echo))
        .with_state(shop.clone());
    let _greeting = Shop::greet(State(shop), Json("alice".to_owned()));
    let _echo = Shop::echo(Json("hi".to_owned()));
}
