use idem::idempotent;

#[idempotent]
async fn handler<T: Send>(body: String) -> String {
    body
}

#[idempotent]
async fn bounded(body: String) -> String
where
    String: Send,
{
    body
}

fn main() {}
