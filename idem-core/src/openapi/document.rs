//! [`Documenter`]: probes a router's routes and writes what each idempotent one does into the
//! OpenAPI document that describes them.

use std::{collections::HashMap, time::Duration};

use axum::{Router, middleware};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use utoipa::openapi::{OpenApi, RefOr, Response, path::Operation};

use super::{
    DocumentError, Endpoint,
    ask::{self, Found, Outcome},
    endpoint, extension, parameter,
    probe::{self, RuntimeFacts, Sighting},
    problem_schema, responses,
};

/// Describes the idempotency of a router's routes in their OpenAPI document, from the policy
/// each route runs: see the [module docs](super) for an example and what it adds.
///
/// It sends each operation of the document whose method idem guards (POST, PUT, PATCH,
/// DELETE) a probe through the router: a request marked with [`Probe`](super::Probe), with
/// the headers given here and a body that cannot be read. idem answers it without claiming a
/// key or calling the handler; a route without idem answers it as it answers any request
/// with such a body (its body extractor refuses it; a handler that reads no body runs), which
/// is why the document should be made before the service serves, or in a test.
#[derive(Clone, Debug)]
#[must_use]
pub struct Documenter {
    headers: HeaderMap,
    timeout: Duration,
}

impl Default for Documenter {
    fn default() -> Self {
        Self::new()
    }
}

impl Documenter {
    /// The time a probe waits for its answer unless [`timeout`](Self::timeout) says otherwise.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// A documenter whose probes carry no headers.
    pub fn new() -> Self {
        Self {
            headers: HeaderMap::new(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// Adds a header to every probe: the credentials that an authentication layer in front of
    /// idem wants, so that the probe gets as far as idem.
    ///
    /// ```
    /// use http::{HeaderValue, header::AUTHORIZATION};
    /// use idem::openapi::Documenter;
    ///
    /// let documenter = Documenter::new()
    ///     .header(AUTHORIZATION, HeaderValue::from_static("Bearer openapi-probe"));
    /// # drop(documenter);
    /// ```
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.append(name, value);
        self
    }

    /// How long a probe waits for its answer (5 seconds by default). idem answers at once;
    /// only a route without idem, or a layer in front of it, can take long.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `openapi`, with what each of its operations that `router` guards with idem does:
    /// the `Idempotency-Key` parameter, the Problem Details answers, `Idempotent-Replayed`
    /// and `x-idempotency`. The other operations are left as they are.
    ///
    /// # Errors
    ///
    /// When the document cannot say what the router does: an operation that no route serves,
    /// a probe that was refused or did not come back, an `#[idempotent]` handler without its
    /// runtime, two operations that are one route, an operation that documents the key
    /// itself, a reference the document does not hold ([`DocumentError`]).
    pub async fn document(
        &self,
        router: &Router,
        mut openapi: OpenApi,
    ) -> Result<OpenApi, DocumentError> {
        let router = marked(router);
        let shared = openapi
            .components
            .as_ref()
            .map(|components| components.responses.clone())
            .unwrap_or_default();
        let mut described = false;
        for (endpoint, found) in self.probe_documented(&router, &openapi).await? {
            let Outcome::Guarded(sighting) = found.outcome else {
                continue;
            };
            let Some(facts) = &sighting.runtime else {
                return Err(DocumentError::RuntimeMissing { endpoint });
            };
            let operation = openapi
                .paths
                .paths
                .get_mut(endpoint.path())
                .and_then(|item| endpoint::operation_mut(item, &endpoint.method()));
            if let Some(operation) = operation {
                describe(operation, &sighting, facts, &shared, &endpoint)?;
                described = true;
            }
        }
        if described {
            add_problem_schema(&mut openapi)?;
        }
        Ok(openapi)
    }

    /// Probes every operation of `openapi` that idem may guard, and refuses two that are one
    /// route, or one whose probe reached another route.
    async fn probe_documented(
        &self,
        router: &Router,
        openapi: &OpenApi,
    ) -> Result<Vec<(Endpoint, Found)>, DocumentError> {
        let mut found = Vec::new();
        let mut routes: HashMap<(Method, String), Endpoint> = HashMap::new();
        for endpoint in documented(openapi) {
            let answer = self.ask(router, &endpoint).await?;
            let route = (endpoint.method(), endpoint.shape());
            if let Some(first) = routes.insert(route, endpoint.clone()) {
                return Err(DocumentError::SameRoute {
                    first,
                    second: endpoint,
                    route: answer.route,
                });
            }
            found.push((endpoint, answer));
        }
        Ok(found)
    }

    /// Sends `endpoint` a probe through `router`, a [`marked`] one, and checks that it reached
    /// the route of that template.
    pub(crate) async fn ask(
        &self,
        router: &Router,
        endpoint: &Endpoint,
    ) -> Result<Found, DocumentError> {
        let found = ask::ask(router, endpoint, &self.headers, self.timeout).await?;
        if !endpoint.is_route(&found.route) {
            return Err(DocumentError::OtherRoute {
                endpoint: endpoint.clone(),
                route: found.route,
            });
        }
        Ok(found)
    }
}

/// `router`, marking the route a probe matched (see [`probe::mark_matched`]).
pub(crate) fn marked(router: &Router) -> Router {
    if router.has_routes() {
        router
            .clone()
            .route_layer(middleware::from_fn(probe::mark_matched))
    } else {
        router.clone()
    }
}

/// The operations of `openapi` whose method idem may guard.
pub(crate) fn documented(openapi: &OpenApi) -> Vec<Endpoint> {
    let mut endpoints = Vec::new();
    for (path, item) in openapi.paths.paths.iter() {
        for method in endpoint::GUARDED {
            if endpoint::operation(item, &method).is_some() {
                endpoints.push(Endpoint::new(method, path.clone()));
            }
        }
    }
    endpoints
}

/// Writes into `operation` what a route that runs `sighting` does.
fn describe(
    operation: &mut Operation,
    sighting: &Sighting,
    facts: &RuntimeFacts,
    shared: &std::collections::BTreeMap<String, RefOr<Response>>,
    endpoint: &Endpoint,
) -> Result<(), DocumentError> {
    let parameters = operation.parameters.get_or_insert_with(Vec::new);
    if parameters.iter().any(parameter::is_key_parameter) {
        return Err(DocumentError::KeyDocumented {
            endpoint: endpoint.clone(),
        });
    }
    parameters.push(RefOr::T(parameter::key_parameter(sighting)));
    responses::add(operation, sighting, facts, shared, endpoint)?;
    operation
        .extensions
        .get_or_insert_with(Default::default)
        .insert(extension::NAME.to_owned(), extension::value(sighting));
    Ok(())
}

/// Adds idem's Problem Details schema to the components, unless it is there already.
fn add_problem_schema(openapi: &mut OpenApi) -> Result<(), DocumentError> {
    let schemas = &mut openapi
        .components
        .get_or_insert_with(Default::default)
        .schemas;
    let ours = RefOr::T(problem_schema::component());
    match schemas.get(problem_schema::SCHEMA_NAME) {
        Some(theirs) if *theirs != ours => Err(DocumentError::SchemaTaken {
            name: problem_schema::SCHEMA_NAME,
        }),
        Some(_) => Ok(()),
        None => {
            schemas.insert(problem_schema::SCHEMA_NAME.to_owned(), ours);
            Ok(())
        }
    }
}
