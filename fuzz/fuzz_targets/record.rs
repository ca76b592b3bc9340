//! The stored-record decoder on any bytes, as a store that was tampered with or damaged would
//! hand them over: it never panics, what it decodes encodes back to the same bytes, and the
//! decoded response can be replayed.

#![no_main]

use idem_core::replay::StoredResponse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(response) = StoredResponse::decode(data) {
        assert_eq!(response.encode().as_deref(), Ok(data));
        let _ = response.into_replay();
    }
});
