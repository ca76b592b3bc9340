//! What the shop keeps: payments, their refunds, and transfers, as the API shows them.

use std::time::{SystemTime, UNIX_EPOCH};

use rand::{Rng, distr::Alphanumeric};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A new id: `prefix` and 24 random letters and digits (`pay_4eC39HqLyjWDarjtT1zdp7dc`).
pub fn new_id(prefix: &str) -> String {
    let random: String = rand::rng()
        .sample_iter(Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    format!("{prefix}_{random}")
}

/// The current time in seconds since the Unix epoch.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

/// A payment: money the caller paid the shop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Payment {
    /// `pay_` and 24 letters and digits.
    #[schema(example = "pay_4eC39HqLyjWDarjtT1zdp7dc")]
    pub id: String,
    /// In the currency's minor unit (cents), or its unit for currencies without one (JPY).
    #[schema(example = 9800)]
    pub amount: i64,
    /// ISO 4217 code.
    #[schema(example = "JPY")]
    pub currency: String,
    /// Always `succeeded` in this demo: the card never declines.
    #[schema(example = "succeeded")]
    pub status: String,
    /// How much of it was refunded so far.
    #[schema(example = 0)]
    pub amount_refunded: i64,
    /// When it was made, in seconds since the Unix epoch.
    #[schema(example = 1_764_460_800)]
    pub created: i64,
}

/// A payment's receipt, written once per payment by the receipts consumer from the
/// `shop.payments.created` event (with `SHOP_NATS_URL`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentReceipt {
    /// `rcpt_` and 24 letters and digits.
    #[schema(example = "rcpt_9f7Cq2rVnVJm3Q0xE4bA1sKd")]
    pub id: String,
    /// The payment it is for.
    #[schema(example = "pay_4eC39HqLyjWDarjtT1zdp7dc")]
    pub payment_id: String,
    /// The amount paid.
    #[schema(example = 9800)]
    pub amount: i64,
    /// ISO 4217 code.
    #[schema(example = "JPY")]
    pub currency: String,
    /// When it was written, in seconds since the Unix epoch.
    #[schema(example = 1_764_460_801)]
    pub created: i64,
}

/// `GET /receipts`: the caller's payment receipts, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptList {
    /// The receipts.
    pub items: Vec<PaymentReceipt>,
}

/// A refund of (part of) a payment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Refund {
    /// `re_` and 24 letters and digits.
    #[schema(example = "re_3MtwBwLkdIwHu7ix28a3tqPa")]
    pub id: String,
    /// The refunded payment.
    #[schema(example = "pay_4eC39HqLyjWDarjtT1zdp7dc")]
    pub payment: String,
    /// In the payment's currency.
    #[schema(example = 1200)]
    pub amount: i64,
    /// `succeeded`: the bank confirmed it.
    #[schema(example = "succeeded")]
    pub status: String,
    /// When it was made, in seconds since the Unix epoch.
    #[schema(example = 1_764_460_860)]
    pub created: i64,
}

/// A transfer of money to a bank account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    /// `tr_` and 24 letters and digits.
    #[schema(example = "tr_1MiN3gLkdIwHu7ixNCZvFdgA")]
    pub id: String,
    /// In the currency's minor unit.
    #[schema(example = 50000)]
    pub amount: i64,
    /// ISO 4217 code.
    #[schema(example = "JPY")]
    pub currency: String,
    /// The receiving account: 7 digits.
    #[schema(example = "0000000")]
    pub to_account: String,
    /// `pending` when the bank accepted it, `settled` once the bank's webhook says so.
    #[schema(example = "pending")]
    pub status: String,
    /// The bank's id of the money it moved for this transfer: `bt_` and 24 letters and
    /// digits.
    #[schema(example = "bt_3HcO6gYbpIKmW0oa3ZGDxUdm")]
    pub bank_transfer: String,
    /// When it was made, in seconds since the Unix epoch.
    #[schema(example = 1_764_460_800)]
    pub created: i64,
}

/// The caller's own payments, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PaymentList {
    /// The payments.
    pub items: Vec<Payment>,
}

/// The caller's own transfers, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TransferList {
    /// The transfers.
    pub items: Vec<Transfer>,
}

/// The largest amount of one payment or transfer.
pub const MAX_AMOUNT: i64 = 100_000_000;

/// The rules on values shared by the request bodies.
pub mod rules {
    use super::MAX_AMOUNT;
    use crate::problem::FieldError;

    /// An amount is 1 to [`MAX_AMOUNT`].
    pub fn amount(errors: &mut Vec<FieldError>, field: &str, amount: i64) {
        if !(1..=MAX_AMOUNT).contains(&amount) {
            errors.push(FieldError::new(
                field,
                format!("must be between 1 and {MAX_AMOUNT}, not {amount}"),
            ));
        }
    }

    /// A currency is an ISO 4217 code: 3 capital letters.
    pub fn currency(errors: &mut Vec<FieldError>, field: &str, currency: &str) {
        if currency.len() != 3 || !currency.bytes().all(|byte| byte.is_ascii_uppercase()) {
            errors.push(FieldError::new(
                field,
                format!(
                    "must be an ISO 4217 code of 3 capital letters, such as JPY, not {currency:?}"
                ),
            ));
        }
    }

    /// An account number is 7 digits.
    pub fn account(errors: &mut Vec<FieldError>, field: &str, account: &str) {
        if account.len() != 7 || !account.bytes().all(|byte| byte.is_ascii_digit()) {
            errors.push(FieldError::new(
                field,
                format!("must be 7 digits, such as \"0000000\", not {account:?}"),
            ));
        }
    }

    /// `Ok` when no rule failed.
    pub fn verdict(errors: Vec<FieldError>) -> Result<(), Vec<FieldError>> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}
