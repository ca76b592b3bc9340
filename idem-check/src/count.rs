//! Counting what the endpoint creates, through a listing URL: "exactly one effect", not just
//! "the same answer". A server that ignores keys and answers a canned body passes every
//! comparison of answers; only a count catches it.

use http::HeaderMap;
use reqwest::Url;
use serde_json::Value;

use crate::{
    exchange::{Exchange, Probe, Received},
    show,
    wire::{Abort, Wire},
};

/// A listing read with the first principal's headers.
#[derive(Clone, Debug)]
pub(crate) struct Counter {
    url: Url,
    headers: HeaderMap,
}

impl Counter {
    pub(crate) fn new(url: Url, headers: HeaderMap) -> Self {
        Self { url, headers }
    }

    pub(crate) fn url(&self) -> &Url {
        &self.url
    }

    /// The listing as the report names it: its path (and query), `/payments`.
    pub(crate) fn label(&self) -> String {
        match self.url.query() {
            Some(query) => format!("{}?{query}", self.url.path()),
            None => self.url.path().to_owned(),
        }
    }

    /// The count before and after something, as read from this listing.
    pub(crate) fn effects(&self, before: Option<usize>, after: Option<usize>) -> Option<Effects> {
        Some(Effects {
            listing: self.label(),
            before: before?,
            after: after?,
        })
    }

    /// How many items the listing has now.
    ///
    /// # Errors
    ///
    /// [`Abort::Unusable`] when the listing does not answer 200 with a countable JSON body:
    /// a count that cannot be read would make every verdict that uses it a guess.
    pub(crate) async fn read(&self, wire: &Wire) -> Result<usize, Abort> {
        let exchange = wire
            .send(Probe::get(self.url.clone(), self.headers.clone()))
            .await?;
        self.count(&exchange).map_err(|why| {
            Abort::Unusable(format!(
                "the count URL {} {why}; it must answer 200 with a JSON array, or an object \
                 whose only array-valued member lists what the endpoint creates, as \
                 {{\"items\": [...]}}",
                self.url
            ))
        })
    }

    /// The count an exchange with the listing says, or why it says none.
    fn count(&self, exchange: &Exchange) -> Result<usize, String> {
        let answer = match &exchange.received {
            Received::Answered(answer) if answer.status == 200 => answer,
            Received::Answered(answer) => {
                return Err(format!(
                    "answered {}: {}",
                    answer.status.as_u16(),
                    show::body_text(&answer.body)
                ));
            }
            _ => return Err(format!("did not answer: {}", show::summary(exchange))),
        };
        let body = show::body_text(&answer.body);
        let value: Value = serde_json::from_slice(&answer.body)
            .map_err(|_| format!("answered a body that is not JSON: {body}"))?;
        count_of(&value).ok_or_else(|| format!("answered JSON with nothing to count: {body}"))
    }
}

/// The length of the array `value` is, or of its only array-valued member.
fn count_of(value: &Value) -> Option<usize> {
    match value {
        Value::Array(items) => Some(items.len()),
        Value::Object(members) => {
            let mut arrays = members.values().filter_map(Value::as_array);
            let only = arrays.next()?;
            arrays.next().is_none().then_some(only.len())
        }
        _ => None,
    }
}

/// The count of one listing before and after something. Cases count two listings (the
/// endpoint's, and the slow or failing request's), so a count always says which it is.
#[derive(Clone, Debug)]
pub(crate) struct Effects {
    /// The listing, as [`Counter::label`] names it.
    pub(crate) listing: String,
    pub(crate) before: usize,
    pub(crate) after: usize,
}

impl Effects {
    /// How many effects appeared (none when the count went down).
    pub(crate) fn new_effects(&self) -> usize {
        self.after.saturating_sub(self.before)
    }

    /// `count of /payments: 3 → 4`.
    pub(crate) fn shown(&self) -> String {
        format!(
            "count of {}: {} → {}",
            self.listing, self.before, self.after
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_count_names_its_listing() {
        let counter = Counter::new(
            "http://127.0.0.1:3000/transfers?status=all"
                .parse()
                .unwrap(),
            HeaderMap::new(),
        );
        let effects = counter.effects(Some(1), Some(2)).unwrap();
        assert_eq!(effects.shown(), "count of /transfers?status=all: 1 → 2");
        assert_eq!(effects.new_effects(), 1);
        assert!(counter.effects(None, Some(2)).is_none());
    }

    #[test]
    fn an_array_or_the_only_array_member_is_counted() {
        assert_eq!(count_of(&json!([1, 2, 3])), Some(3));
        assert_eq!(count_of(&json!({"items": [1], "next": null})), Some(1));
        assert_eq!(count_of(&json!({"items": []})), Some(0));
        assert_eq!(count_of(&json!({"a": [1], "b": [2]})), None);
        assert_eq!(count_of(&json!({"total": 3})), None);
        assert_eq!(count_of(&json!("x")), None);
    }
}
