//! The shop example arrives with its own issue.
fn main() {
    println!("the shop example is not built yet");
}
