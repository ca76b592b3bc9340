//! `Idempotent::new` checks its policy with `Policy::validate` where the constant is compiled,
//! written by hand here: the check an attribute's arguments meet (`zero_duration.rs`,
//! `ttl_shorter_than_lease.rs`, ...), there reported on the arguments, here on the call.
use idem::__private::{Idempotent, LastArgument, Policy, Scope, boxed};

#[allow(non_upper_case_globals)]
const handler: Idempotent<fn() -> idem::__private::HandlerFuture<()>> = Idempotent::new(
    Policy::new().scope(Scope::Custom("user")),
    || boxed(async {}),
    || LastArgument::<()>::NEW.runs_on_replay(),
);

fn main() {
    let _ = handler.policy();
}
