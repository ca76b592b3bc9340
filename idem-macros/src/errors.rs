//! Errors collected so that the user sees all of them at once (serde_derive's `Ctxt`): the
//! arguments, the signature and the gRPC checks each push theirs, and the expansion reports
//! them together with `syn::Error::combine`.

/// The errors found so far: [`Errors::finish`] is `Ok` only without any.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn append(&mut self, other: Self) {
        if let Some(error) = other.0 {
            self.push(error);
        }
    }

    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(errors) => Err(errors),
            None => Ok(value),
        }
    }
}
