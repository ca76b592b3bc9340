//! The unary methods of a service, read from its `FileDescriptorSet`: what "all unary
//! methods" means for a layer that sees only paths.

use std::fmt;

use prost::Message;
use prost_types::FileDescriptorSet;

/// Why the unary methods of a service could not be listed.
#[derive(Debug)]
#[non_exhaustive]
pub enum DescriptorError {
    /// The bytes are not an encoded `FileDescriptorSet`.
    Decode(prost::DecodeError),
    /// No file of the set declares the service.
    NoSuchService(String),
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decode(error) => write!(f, "the file descriptor set does not decode: {error}"),
            Self::NoSuchService(service) => write!(
                f,
                "no file of the descriptor set declares the service `{service}`"
            ),
        }
    }
}

impl std::error::Error for DescriptorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Decode(error) => Some(error),
            Self::NoSuchService(_) => None,
        }
    }
}

impl From<prost::DecodeError> for DescriptorError {
    fn from(error: prost::DecodeError) -> Self {
        Self::Decode(error)
    }
}

/// The paths (`/<package>.<Service>/<Method>`) of the unary methods of `service`, named in
/// full (`shop.v1.Payments`).
pub(crate) fn unary_methods(set: &[u8], service: &str) -> Result<Vec<String>, DescriptorError> {
    let set = FileDescriptorSet::decode(set)?;
    for file in &set.file {
        let package = file.package();
        for declared in &file.service {
            let full = if package.is_empty() {
                declared.name().to_owned()
            } else {
                format!("{package}.{}", declared.name())
            };
            if full != service {
                continue;
            }
            let unary = declared
                .method
                .iter()
                .filter(|method| !method.client_streaming() && !method.server_streaming())
                .map(|method| format!("/{full}/{}", method.name()))
                .collect();
            return Ok(unary);
        }
    }
    Err(DescriptorError::NoSuchService(service.to_owned()))
}

#[cfg(test)]
mod tests {
    use prost_types::{FileDescriptorProto, MethodDescriptorProto, ServiceDescriptorProto};

    use super::*;

    fn method(name: &str, streaming: bool) -> MethodDescriptorProto {
        MethodDescriptorProto {
            name: Some(name.to_owned()),
            server_streaming: Some(streaming),
            ..Default::default()
        }
    }

    #[test]
    fn streaming_methods_are_left_out() {
        let set = FileDescriptorSet {
            file: vec![FileDescriptorProto {
                package: Some("shop.v1".to_owned()),
                service: vec![ServiceDescriptorProto {
                    name: Some("Payments".to_owned()),
                    method: vec![method("CreatePayment", false), method("Watch", true)],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let bytes = set.encode_to_vec();
        assert_eq!(
            unary_methods(&bytes, "shop.v1.Payments").unwrap(),
            ["/shop.v1.Payments/CreatePayment"]
        );
        assert!(matches!(
            unary_methods(&bytes, "shop.v1.Other"),
            Err(DescriptorError::NoSuchService(_))
        ));
        assert!(unary_methods(b"\xff", "x").is_err());
    }
}
