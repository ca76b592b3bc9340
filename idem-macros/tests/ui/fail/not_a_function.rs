use idem::idempotent;

#[idempotent]
struct Handler;

fn main() {
    let _ = Handler;
}
