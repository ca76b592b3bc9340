use idem_core::idempotent;

#[idempotent]
struct Handler;

fn main() {
    let _ = Handler;
}
