//! Whether an annotated handler's last argument runs before every replay: a guard (any type)
//! does, a [`PureBody`] does not.

use std::{fmt, marker::PhantomData, ops::Deref};

use crate::extract::PureBody;

/// Answers whether a handler's last argument, of type `T`, runs before every replay. The
/// expansion asks `LastArgument::<T>::NEW.runs_on_replay()` where it names `T`: a `T` that
/// implements [`PureBody`] finds the method of this type and answers `false`; any other `T`
/// finds the method of [`Guard`] through `Deref` and answers `true`. So a body extractor is
/// a guard unless it opts out, and no annotation is needed for the safe choice.
pub struct LastArgument<T>(PhantomData<fn() -> T>);

impl<T> LastArgument<T> {
    /// The probe for `T`.
    pub const NEW: Self = Self(PhantomData);
}

impl<T: PureBody> LastArgument<T> {
    /// A pure body extractor is skipped on a replay.
    pub fn runs_on_replay(&self) -> bool {
        false
    }
}

impl<T> fmt::Debug for LastArgument<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LastArgument")
    }
}

/// What [`LastArgument`] of a type that is not a [`PureBody`] dereferences to.
#[derive(Debug)]
pub struct Guard;

impl Guard {
    /// A guard (or a parts extractor) runs before every replay.
    pub fn runs_on_replay(&self) -> bool {
        true
    }
}

impl<T> Deref for LastArgument<T> {
    type Target = Guard;

    fn deref(&self) -> &Guard {
        &Guard
    }
}

#[cfg(test)]
mod tests {
    use axum::{
        Form, Json,
        body::{Body, Bytes},
        extract::{RawForm, Request, rejection::JsonRejection},
        http::HeaderMap,
    };
    use bytes::BytesMut;
    use serde_json::Value;

    use super::LastArgument;

    /// A body extractor of the application's own, that has not said it is pure.
    struct Signed;

    #[test]
    fn axums_body_extractors_are_pure_and_every_other_type_is_a_guard() {
        let pure = [
            LastArgument::<Json<Value>>::NEW.runs_on_replay(),
            LastArgument::<Form<Vec<(String, String)>>>::NEW.runs_on_replay(),
            LastArgument::<RawForm>::NEW.runs_on_replay(),
            LastArgument::<Bytes>::NEW.runs_on_replay(),
            LastArgument::<BytesMut>::NEW.runs_on_replay(),
            LastArgument::<String>::NEW.runs_on_replay(),
            LastArgument::<Body>::NEW.runs_on_replay(),
            LastArgument::<Option<Json<Value>>>::NEW.runs_on_replay(),
            LastArgument::<Result<Json<Value>, JsonRejection>>::NEW.runs_on_replay(),
        ];
        assert_eq!(pure, [false; 9]);
        let guards = [
            LastArgument::<Signed>::NEW.runs_on_replay(),
            LastArgument::<Option<Signed>>::NEW.runs_on_replay(),
            LastArgument::<Request>::NEW.runs_on_replay(),
            LastArgument::<HeaderMap>::NEW.runs_on_replay(),
            LastArgument::<()>::NEW.runs_on_replay(),
        ];
        assert_eq!(guards, [true; 5]);
    }
}
