//! What the gRPC layer's calls share: the runtime, the policy, and the methods it covers with
//! how each is keyed. Below both the layer, which builds it, and the service, which reads it.

use std::collections::HashMap;

use super::request::ReadKey;
use crate::{policy::Policy, runtime::Idempotency};

/// How the door treats one method it covers.
#[derive(Clone, Default)]
pub(crate) struct Covered {
    /// Reads the key from the request message, when the metadata has none.
    pub(crate) key: Option<ReadKey>,
}

/// What every call through the layer shares.
pub(crate) struct Config {
    pub(crate) idem: Idempotency,
    pub(crate) policy: Policy,
    /// The covered methods, by path (`/shop.v1.Payments/CreatePayment`).
    pub(crate) methods: HashMap<String, Covered>,
    /// The longest request message, in bytes.
    pub(crate) max_message: usize,
}
