//! The `Idempotency-Key` header as both ends of an idem API speak it.
//!
//! A server (`idem-core`) parses the key and answers its errors with Problem Details; a client
//! (`idem-client`) makes keys, writes them into the header and reads those answers. What they
//! must agree on lives here, with no dependency of either side:
//!
//! - [`key`]: the key, its two spellings (the IETF draft's sf-string `"abc"` and Stripe's bare
//!   `abc`), how a server parses them and a client writes them ([`KeyForm`]), and keys made
//!   for an operation, random or derived from what it is ([`IdempotencyKey::derive`]).
//! - [`problem`]: the kinds of error an idem server answers, with their statuses, titles and
//!   stable `type` URIs.
//! - [`sha256`]: the digest both sides hash keys and requests with.
//!
//! ```
//! use http::HeaderValue;
//! use idem_protocol::{IdempotencyKey, KeyForm, KeySyntax};
//!
//! // A client derives the key of an operation and writes it into the header...
//! let key = IdempotencyKey::derive("customer-create", ["user-42"])?;
//! let header: HeaderValue = KeyForm::Quoted.header_value(&key);
//! assert_eq!(header, r#""customer-create:user-42""#);
//!
//! // ...and a server reads the same key back, in either spelling.
//! assert_eq!(IdempotencyKey::parse(&header, KeySyntax::Strict)?, key);
//! assert_eq!(IdempotencyKey::parse(&KeyForm::Bare.header_value(&key), KeySyntax::Lenient)?, key);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod key;
pub mod problem;
pub mod sha256;

pub use crate::{
    key::{DeriveError, IdempotencyKey, KeyError, KeyForm, KeySyntax},
    problem::ProblemKind,
};
