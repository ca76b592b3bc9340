//! The store conformance suite (written next).
