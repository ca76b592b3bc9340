//! The store conformance suite (the crate `idem-conformance`) against the embedded
//! [`MemoryStore`].

use std::sync::Arc;

use idem_core::store::{MemoryStore, Store};

async fn fresh_store() -> Option<Arc<dyn Store>> {
    Some(Arc::new(MemoryStore::default()))
}

idem_conformance::store_conformance_tests!(fresh_store());
