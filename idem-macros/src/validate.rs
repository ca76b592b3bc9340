//! Signature checks: what an `#[idempotent]` handler can be.
//!
//! The handler becomes a constant whose type names the tuple of its argument types, and its
//! body is called through a plain `fn` pointer. So it must be a free `async fn` whose argument
//! types can be written down: no receiver, no generics, no `impl Trait` arguments.

use syn::{
    Attribute, FnArg, ItemFn, Safety, Signature, Type, TypeImplTrait, spanned::Spanned,
    visit::Visit,
};

use crate::errors::Errors;

/// The most arguments an axum handler takes, and so an annotated one.
const MAX_ARGUMENTS: usize = 16;

/// Checks the handler's signature and returns its argument types, in order.
pub(crate) fn handler(function: &ItemFn) -> syn::Result<Vec<&Type>> {
    let mut errors = Errors::default();
    qualifiers(&function.sig, &mut errors);
    not_generic(&function.sig, &mut errors);
    let types = argument_types(&function.sig, &mut errors);
    applied_once(&function.attrs, &mut errors);
    errors.finish(types)
}

/// `async`, and none of `const`, `unsafe` and `extern`: the constant calls the function
/// through a plain `fn` pointer that returns its boxed future.
fn qualifiers(sig: &Signature, errors: &mut Errors) {
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new_spanned(
            constness,
            "an `#[idempotent]` handler cannot be a `const fn`; remove `const`",
        ));
    }
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new_spanned(
            sig.fn_token,
            "an `#[idempotent]` handler must be an `async fn`; add `async`",
        ));
    }
    if let Safety::Unsafe(unsafety) = &sig.safety {
        errors.push(syn::Error::new_spanned(
            unsafety,
            "an `#[idempotent]` handler cannot be `unsafe`; remove `unsafe`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(
            abi,
            "an `#[idempotent]` handler cannot have an ABI; remove `extern`",
        ));
    }
}

/// No generic parameters and no `where` clause: the constant's type names the argument types.
fn not_generic(sig: &Signature, errors: &mut Errors) {
    let generic = "an `#[idempotent]` handler cannot be generic: its type names its argument \
                   types; use concrete types";
    if !sig.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(&sig.generics, generic));
    }
    if let Some(where_clause) = &sig.generics.where_clause {
        errors.push(syn::Error::new_spanned(where_clause, generic));
    }
}

/// The argument types, which must be nameable: no `...`, no `self`, no `impl Trait`, and at
/// most [`MAX_ARGUMENTS`].
fn argument_types<'a>(sig: &'a Signature, errors: &mut Errors) -> Vec<&'a Type> {
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            variadic,
            "an `#[idempotent]` handler cannot be variadic; remove `...`",
        ));
    }
    let mut types = Vec::new();
    for (index, input) in sig.inputs.iter().enumerate() {
        match input {
            FnArg::Receiver(receiver) => errors.push(syn::Error::new_spanned(
                receiver,
                "an `#[idempotent]` handler cannot take `self`; make it a free function",
            )),
            FnArg::Typed(typed) => {
                no_impl_trait(&typed.ty, errors);
                types.push(&*typed.ty);
            }
        }
        if index == MAX_ARGUMENTS {
            errors.push(syn::Error::new(
                input.span(),
                format!(
                    "an `#[idempotent]` handler takes at most {MAX_ARGUMENTS} arguments, as an \
                     axum handler does; this one takes {}",
                    sig.inputs.len()
                ),
            ));
        }
    }
    types
}

fn no_impl_trait(ty: &Type, errors: &mut Errors) {
    let mut impl_traits = ImplTraits::default();
    impl_traits.visit_type(ty);
    for impl_trait in impl_traits.0 {
        errors.push(syn::Error::new_spanned(
            impl_trait,
            "an `#[idempotent]` handler cannot take `impl Trait` arguments: its type names its \
             argument types; use a concrete type",
        ));
    }
}

/// Refuses a second `#[idempotent]` among the function's attributes.
fn applied_once(attributes: &[Attribute], errors: &mut Errors) {
    for attribute in attributes {
        let applied_again = attribute
            .path()
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "idempotent");
        if applied_again {
            errors.push(syn::Error::new_spanned(
                attribute,
                "`#[idempotent]` is applied more than once; keep one",
            ));
        }
    }
}

/// The `impl Trait` types inside a type.
#[derive(Default)]
pub(crate) struct ImplTraits<'ast>(pub(crate) Vec<&'ast TypeImplTrait>);

impl<'ast> Visit<'ast> for ImplTraits<'ast> {
    fn visit_type_impl_trait(&mut self, impl_trait: &'ast TypeImplTrait) {
        self.0.push(impl_trait);
    }
}
