//! The bank the shop talks to, simulated: it takes its time, it can be down, and it signs
//! the webhooks it sends.
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
use sha2::Sha256;

/// The header a bank webhook carries its signature in: `sha256=<hex HMAC of the body>`.
pub const SIGNATURE_HEADER: &str = "bank-signature";

/// The simulated bank. Cheap to clone; clones share whether the bank is down.
#[derive(Clone, Debug)]
pub struct Bank {
    transfer_delay: Duration,
    refund_delay: Duration,
    webhook_secret: Arc<str>,
    down: Arc<AtomicBool>,
}

/// The bank did not confirm an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BankUnavailable;

impl Bank {
    /// A bank that answers transfers after `transfer_delay`, refunds after `refund_delay`,
    /// and signs webhooks with `webhook_secret`.
    pub fn new(transfer_delay: Duration, refund_delay: Duration, webhook_secret: &str) -> Self {
        Self {
            transfer_delay,
            refund_delay,
            webhook_secret: webhook_secret.into(),
            down: Arc::default(),
        }
    }

    /// Takes the bank down (refunds fail with [`BankUnavailable`]) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Sends a transfer. Always accepted, after the transfer delay.
    pub async fn transfer(&self) {
        tokio::time::sleep(self.transfer_delay).await;
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
