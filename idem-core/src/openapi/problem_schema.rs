//! The schemas of idem's Problem Details answers: one RFC 9457 component, and for each status
//! the `type` URIs and the status idem answers with it.

use utoipa::openapi::{
    Ref, RefOr, Schema, SchemaFormat,
    schema::{AllOfBuilder, ObjectBuilder, Type},
};

use super::probe::RuntimeFacts;
use crate::problem::ProblemKind;

/// The name of the component that holds [`component`].
pub(crate) const SCHEMA_NAME: &str = "IdempotencyProblem";

/// An RFC 9457 Problem Details object as idem writes it. Further members are allowed, as the
/// RFC allows extension members.
pub(crate) fn component() -> Schema {
    let string = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
    };
    let uri_reference = |description: &str| {
        string(description).format(Some(SchemaFormat::Custom("uri-reference".to_owned())))
    };
    let status = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(100))
            .maximum(Some(599))
            .description(Some(description))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .title(Some("Problem Details (RFC 9457)"))
        .description(Some(
            "An error answered by the idempotency runtime, as `application/problem+json`. \
             `type` ends with `#` and the kind's name, which the problem catalogue explains.",
        ))
        .property("type", uri_reference("The kind of problem: a stable URI"))
        .property(
            "title",
            string("A short summary of the kind, the same for every occurrence"),
        )
        .property("status", status("The HTTP status code of the answer"))
        .property("detail", string("What was wrong with this request"))
        .property("instance", uri_reference("This occurrence, where it helps"))
        .property(
            "originalStatus",
            status("For `response-not-replayable`: the status of the first response"),
        )
        .required("type")
        .required("title")
        .required("status")
        .required("detail")
        .into()
}

/// The schema of idem's answers with `status`: [`component`], with `type` one of the URIs of
/// `kinds` as the runtime writes them.
pub(crate) fn for_status(
    status: u16,
    kinds: &[ProblemKind],
    facts: &RuntimeFacts,
) -> RefOr<Schema> {
    let uris: Vec<String> = kinds.iter().map(|kind| facts.type_uri(*kind)).collect();
    let narrowed = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(uris)),
        )
        .property(
            "status",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .enum_values(Some([status])),
        );
    AllOfBuilder::new()
        .item(Ref::from_schema_name(SCHEMA_NAME))
        .item(narrowed)
        .into()
}
