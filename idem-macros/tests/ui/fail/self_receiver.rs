use idem::idempotent;

struct Service;

impl Service {
    #[idempotent]
    async fn handler(&self, body: String) -> String {
        body
    }
}

fn main() {
    let _ = Service;
}
