//! The bank the shop talks to: it takes its time, it can be down, and it signs the webhooks
//! it sends.
//!
//! Transfers go over HTTP to the bank's own service ([`crate::bank_service`]), itself
//! idempotent, through [`idem_client`]: the shop sends each transfer under a key derived
//! from the shop's own operation (the user and the key the user sent), so that a transfer the
//! shop runs again (its client retried after the shop lost its record) moves the money once.
//! Refunds are simulated in process: they show a failure whose outcome is unknown, which the
//! shop stores rather than retries.
//!
//! The delays make the interesting cases visible: a transfer takes
//! `SHOP_TRANSFER_DELAY_MS` (10 s by default, as in the seed article's demo), long enough
//! for a client to time out and retry, or to send a duplicate while the first is running.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hmac::{Hmac, KeyInit, Mac};
use idem_client::{ClientError, IdempotencyKey, RetryPolicy};
use sha2::Sha256;
use tokio::sync::OnceCell;

use crate::bank_service::{BankServer, BankTransfer, TransferOrder};

/// The shop's account at the bank: the bearer token it sends.
pub const SHOP_ACCOUNT: &str = "shop";

/// The header a bank webhook carries its signature in: `sha256=<hex HMAC of the body>`.
pub const SIGNATURE_HEADER: &str = "bank-signature";

/// The bank. Cheap to clone; clones share whether the bank is down, and the connection to it.
#[derive(Clone, Debug)]
pub struct Bank {
    transfer_delay: Duration,
    refund_delay: Duration,
    webhook_secret: Arc<str>,
    down: Arc<AtomicBool>,
    line: Arc<Line>,
}

/// How the shop reaches the bank's service.
#[derive(Debug)]
struct Line {
    http: reqwest::Client,
    policy: RetryPolicy,
    /// `SHOP_BANK_URL`, when the bank is elsewhere.
    url: Option<String>,
    /// The bank this shop started, on first use, when no URL was given.
    own: OnceCell<BankServer>,
}

/// The bank did not confirm an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BankUnavailable;

/// A transfer the bank did not make, as the shop's client saw it.
#[derive(Debug)]
pub enum TransferFailed {
    /// The bank answered a refusal (a 4xx, such as a closed account): asking again with the
    /// same key gets the same answer, and no money moved.
    Refused(String),
    /// No answer, or an answer worth retrying, within the client's retries: whether the money
    /// moved is for the next attempt with the same key to find out.
    Unconfirmed(String),
}

impl TransferFailed {
    /// What the shop's client met, sorted: an answer the bank will give again is a refusal,
    /// the rest is unconfirmed.
    fn from_client(error: &ClientError) -> Self {
        let refused = error.gave_up().is_none()
            && error
                .status()
                .is_some_and(|status| status.is_client_error());
        if refused {
            let why = error
                .problem()
                .and_then(|problem| problem.detail().map(str::to_owned))
                .unwrap_or_else(|| error.to_string());
            Self::Refused(why)
        } else {
            Self::Unconfirmed(error.to_string())
        }
    }
}

impl Bank {
    /// A bank that answers transfers after `transfer_delay`, refunds after `refund_delay`,
    /// and signs webhooks with `webhook_secret`.
    pub fn new(transfer_delay: Duration, refund_delay: Duration, webhook_secret: &str) -> Self {
        Self {
            transfer_delay,
            refund_delay,
            webhook_secret: webhook_secret.into(),
            down: Arc::default(),
            line: Arc::new(Line {
                http: reqwest::Client::new(),
                policy: RetryPolicy::new(),
                url: None,
                own: OnceCell::new(),
            }),
        }
    }

    /// The same bank, reached at `url` (`http://127.0.0.1:4000`) rather than started by the
    /// shop.
    pub fn at(mut self, url: &str) -> Self {
        self.line = Arc::new(Line {
            http: reqwest::Client::new(),
            policy: self.line.policy.clone(),
            url: Some(url.trim_end_matches('/').to_owned()),
            own: OnceCell::new(),
        });
        self
    }

    /// The same bank, whose transfers the shop's client retries for at most `deadline`
    /// (60 s by default) before the transfer's step fails, retryably.
    pub fn retrying_for(mut self, deadline: Duration) -> Self {
        self.line = Arc::new(Line {
            http: self.line.http.clone(),
            policy: self.line.policy.clone().deadline(deadline),
            url: self.line.url.clone(),
            own: OnceCell::new(),
        });
        self
    }

    /// Where the bank's service is: the configured URL, or the one this shop started (`None`
    /// until the first transfer starts it).
    pub fn url(&self) -> Option<&str> {
        self.line
            .url
            .as_deref()
            .or_else(|| self.line.own.get().map(BankServer::url))
    }

    /// Takes the bank down (refunds fail with [`BankUnavailable`]) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Orders a transfer under `key`, retrying through timeouts, 409 and 5xx with that key:
    /// the bank moves the money once per key, however often it is asked.
    pub async fn transfer(
        &self,
        key: &IdempotencyKey,
        order: &TransferOrder,
    ) -> Result<BankTransfer, TransferFailed> {
        let failed = |error: &dyn std::fmt::Display| TransferFailed::Unconfirmed(error.to_string());
        let base = match &self.line.url {
            Some(url) => url.as_str(),
            None => self
                .line
                .own
                .get_or_try_init(|| BankServer::start(self.transfer_delay))
                .await
                .map_err(|error| failed(&format!("the bank could not start: {error}")))?
                .url(),
        };
        let request = self
            .line
            .http
            .post(format!("{base}/transfers"))
            .bearer_auth(SHOP_ACCOUNT)
            .json(order);
        let answer = self
            .line
            .policy
            .send_with_key(key, request)
            .await
            .map_err(|error: ClientError| TransferFailed::from_client(&error))?;
        answer
            .json()
            .map_err(|error| failed(&format!("the bank's answer is not a transfer: {error}")))
    }

    /// Asks for a refund, which takes the refund delay, and fails while the bank is down.
    /// A failure comes after the request reached the bank: whether the money moved is
    /// unknown until the bank's statement says.
    pub async fn refund(&self) -> Result<(), BankUnavailable> {
        tokio::time::sleep(self.refund_delay).await;
        if self.down.load(Ordering::SeqCst) {
            Err(BankUnavailable)
        } else {
            Ok(())
        }
    }

    /// The signature the bank puts on a webhook with this body: `sha256=<hex>`.
    pub fn sign(&self, body: &[u8]) -> String {
        format!(
            "sha256={}",
            hex::encode(self.mac(body).finalize().into_bytes())
        )
    }

    /// Whether `signature` is the bank's signature of `body`, compared in constant time.
    pub fn verify(&self, body: &[u8], signature: &str) -> bool {
        let Some(digest) = signature
            .strip_prefix("sha256=")
            .and_then(|hex| hex::decode(hex).ok())
        else {
            return false;
        };
        self.mac(body).verify_slice(&digest).is_ok()
    }

    fn mac(&self, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.webhook_secret.as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(body);
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_its_own_body_only() {
        let bank = Bank::new(Duration::ZERO, Duration::ZERO, "whsec_test");
        let body = br#"{"type":"transfer.settled","transfer":"tr_1"}"#;
        let signature = bank.sign(body);
        assert!(signature.starts_with("sha256="));
        assert!(bank.verify(body, &signature));
        assert!(!bank.verify(
            br#"{"transfer":"tr_1","type":"transfer.settled"}"#,
            &signature
        ));
        assert!(!bank.verify(body, "sha256=00"));
        assert!(!bank.verify(body, &signature[7..]));
        let other = Bank::new(Duration::ZERO, Duration::ZERO, "whsec_other");
        assert!(!other.verify(body, &signature));
    }

    #[tokio::test]
    async fn refunds_fail_while_the_bank_is_down() {
        let bank = Bank::new(Duration::ZERO, Duration::ZERO, "s");
        assert_eq!(bank.refund().await, Ok(()));
        bank.clone().set_down(true);
        assert_eq!(bank.refund().await, Err(BankUnavailable));
    }
}
