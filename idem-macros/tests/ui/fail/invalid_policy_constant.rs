//! The expansion checks its policy with `Policy::validate` where the constant is compiled:
//! a policy the macro's own parser would let through still fails to compile. (Written by
//! hand here, as no attribute argument reaches it.)
use idem_core::__private::{Idempotent, LastArgument, Policy, Scope, boxed};

#[allow(non_upper_case_globals)]
const handler: Idempotent<fn() -> idem_core::__private::HandlerFuture<()>> = Idempotent::new(
    Policy::new().scope(Scope::Custom("user")),
    || boxed(async {}),
    || LastArgument::<()>::NEW.runs_on_replay(),
);

fn main() {
    let _ = handler.policy();
}
