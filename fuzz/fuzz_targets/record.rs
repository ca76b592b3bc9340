//! The stored-record decoder on any bytes, as a store that was tampered with or damaged would
//! hand them over: it never panics, what it decodes is those very bytes and what `new` writes
//! for its status, headers and body, and the decoded response can be replayed.

#![no_main]

use idem_core::replay::StoredResponse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(response) = StoredResponse::decode(data) {
        assert_eq!(response.as_bytes(), data);
        if let Some(body) = response.body() {
            let again = StoredResponse::new(response.status(), &response.headers(), body);
            assert_eq!(again.as_ref().map(StoredResponse::as_bytes), Ok(data));
        }
        let _ = response.into_replay();
    }
});
