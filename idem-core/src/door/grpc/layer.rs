//! [`GrpcIdempotencyLayer`]: the gRPC door's configuration, and the layer that installs it.

use std::{collections::HashMap, fmt, sync::Arc};

use prost::Message;
use tower_layer::Layer;

use super::{
    config::{Config, Covered},
    descriptor,
    request::ReadKey,
    service::GrpcIdempotencyService,
};
use crate::{
    fingerprint::FingerprintMode,
    policy::{Policy, PolicyError},
    runtime::Idempotency,
};

/// A request message that carries its own idempotency key, as AIP-155's `request_id` field
/// does. Implement it for a generated message to key calls by it when their metadata has no
/// `idempotency-key` ([`GrpcIdempotencyLayer::request_id`]).
///
/// ```
/// # #[derive(Clone, PartialEq, prost::Message)]
/// # struct CreatePaymentRequest { #[prost(string, tag = "3")] request_id: String }
/// impl idem::grpc::RequestId for CreatePaymentRequest {
///     fn request_id(&self) -> &str {
///         &self.request_id
///     }
/// }
/// ```
pub trait RequestId: Message + Default + 'static {
    /// The call's key; empty (proto3's default) when the caller set none.
    fn request_id(&self) -> &str;
}

/// A tower layer over a tonic server (a generated `...Server`, `tonic::service::Routes`, or
/// `Server::builder().layer(..)`) that makes the unary methods it covers idempotent under
/// one [`Policy`], and gives `#[idempotent]` methods their runtime.
///
/// ```
/// use idem::{Idempotency, MemoryStore, Policy, Scope, grpc::GrpcIdempotencyLayer};
///
/// let idem = Idempotency::new(MemoryStore::default());
/// let layer = GrpcIdempotencyLayer::new(idem, Policy::new().scope(Scope::Global))
///     .method("/shop.v1.Payments/CreatePayment");
/// // tonic::transport::Server::builder().layer(layer).add_service(PaymentsServer::new(shop))
/// # drop(layer);
/// ```
///
/// A method is covered when it is named ([`method`](Self::method)), given a key field
/// ([`request_id`](Self::request_id)), or listed as unary by the service's descriptor
/// ([`unary_methods`](Self::unary_methods)). Every other call (a streaming method, server
/// reflection, health checks) passes through untouched.
#[derive(Clone)]
#[must_use]
pub struct GrpcIdempotencyLayer {
    config: Arc<Config>,
}

impl GrpcIdempotencyLayer {
    /// The longest request message by default: tonic's default `max_decoding_message_size`.
    pub const DEFAULT_MAX_MESSAGE: usize = 4 * 1024 * 1024;

    /// The layer for `policy` on the runtime `idem`, covering no method yet: it already gives
    /// `#[idempotent]` methods below it their runtime.
    ///
    /// # Panics
    ///
    /// If the policy cannot work ([`Policy::validate`]); [`try_new`](Self::try_new) returns
    /// the error instead.
    pub fn new(idem: Idempotency, policy: Policy) -> Self {
        match Self::try_new(idem, policy) {
            Ok(layer) => layer,
            Err(error) => panic!("invalid idempotency policy: {error}"),
        }
    }

    /// The layer for `policy`, or the reason the policy cannot work.
    pub fn try_new(idem: Idempotency, policy: Policy) -> Result<Self, PolicyError> {
        policy.validate()?;
        Ok(Self {
            config: Arc::new(Config {
                idem,
                policy: for_grpc(policy),
                methods: HashMap::new(),
                max_message: Self::DEFAULT_MAX_MESSAGE,
            }),
        })
    }

    fn config(&mut self) -> &mut Config {
        Arc::get_mut(&mut self.config).expect("the layer is configured before it is cloned")
    }

    /// Covers the unary method at `path` (`/<package>.<Service>/<Method>`), keyed by its
    /// `idempotency-key` metadata.
    pub fn method(mut self, path: &str) -> Self {
        self.config().methods.entry(path.to_owned()).or_default();
        self
    }

    /// Covers every unary method of `service` (`shop.v1.Payments`) that the encoded
    /// `FileDescriptorSet` describes (the one tonic-build writes with
    /// `file_descriptor_set_path`, which server reflection serves too). Streaming methods
    /// are left out: they pass through untouched.
    pub fn unary_methods(
        mut self,
        file_descriptor_set: &[u8],
        service: &str,
    ) -> Result<Self, descriptor::DescriptorError> {
        for path in descriptor::unary_methods(file_descriptor_set, service)? {
            self.config().methods.entry(path).or_default();
        }
        Ok(self)
    }

    /// Covers the method at `path`, keyed by its metadata or, when that has none, by the
    /// request message's own id ([`RequestId`]).
    pub fn request_id<M: RequestId>(self, path: &str) -> Self {
        self.request_id_with(path, |message: &M| message.request_id())
    }

    /// Covers the method at `path`, keyed by its metadata or, when that has none, by what
    /// `read` finds in the request message `M` (an empty string: no key).
    pub fn request_id_with<M: Message + Default + 'static>(
        mut self,
        path: &str,
        read: fn(&M) -> &str,
    ) -> Self {
        let key: ReadKey = Arc::new(move |bytes: &[u8]| {
            let message = M::decode(bytes)?;
            Ok(Some(read(&message).to_owned()).filter(|key| !key.is_empty()))
        });
        self.config()
            .methods
            .insert(path.to_owned(), Covered { key: Some(key) });
        self
    }

    /// The longest request message a covered method takes (4 MiB by default, as tonic's
    /// `max_decoding_message_size`; set both alike). A longer one is refused
    /// `RESOURCE_EXHAUSTED` as soon as its length is read.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.config().max_message = bytes;
        self
    }
}

/// A policy as the gRPC door applies it: the message's bytes are the fingerprint.
pub(crate) const fn for_grpc(policy: Policy) -> Policy {
    policy.fingerprint(FingerprintMode::Raw)
}

impl<S> Layer<S> for GrpcIdempotencyLayer {
    type Service = GrpcIdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcIdempotencyService::new(inner, Arc::clone(&self.config))
    }
}

impl fmt::Debug for GrpcIdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut methods: Vec<_> = self.config.methods.keys().collect();
        methods.sort();
        f.debug_struct("GrpcIdempotencyLayer")
            .field("policy", &self.config.policy)
            .field("methods", &methods)
            .field("max_message", &self.config.max_message)
            .finish_non_exhaustive()
    }
}
