//! The ledger in process memory: gone when the process stops.

use std::sync::{Arc, Mutex, MutexGuard};

use super::RefundOutcome;
use crate::model::{Payment, PaymentReceipt, Refund, Transfer};

/// Payments, refunds and transfers in memory, each with its owner.
#[derive(Clone, Debug, Default)]
pub struct MemoryLedger {
    data: Arc<Mutex<Data>>,
}

#[derive(Debug, Default)]
struct Data {
    payments: Vec<(String, Payment)>,
    refunds: Vec<Refund>,
    transfers: Vec<(String, Transfer)>,
    receipts: Vec<(String, PaymentReceipt)>,
}

impl MemoryLedger {
    fn data(&self) -> MutexGuard<'_, Data> {
        // A panic while holding the lock left whole values behind (every write is one push or
        // one assignment), so the data is still sound.
        self.data
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn insert_payment(&self, owner: &str, payment: &Payment) {
        self.data()
            .payments
            .push((owner.to_owned(), payment.clone()));
    }

    pub(super) fn insert_receipt(&self, owner: &str, receipt: &PaymentReceipt) {
        self.data()
            .receipts
            .push((owner.to_owned(), receipt.clone()));
    }

    pub(super) fn receipts(&self, owner: &str) -> Vec<PaymentReceipt> {
        owned(&self.data().receipts, owner)
    }

    pub(super) fn payments(&self, owner: &str) -> Vec<Payment> {
        owned(&self.data().payments, owner)
    }

    pub(super) fn payment(&self, owner: &str, id: &str) -> Option<Payment> {
        self.data()
            .payments
            .iter()
            .find(|(who, payment)| who == owner && payment.id == id)
            .map(|(_, payment)| payment.clone())
    }

    pub(super) fn refund(&self, owner: &str, refund: &Refund) -> RefundOutcome {
        let mut data = self.data();
        let Some((_, payment)) = data
            .payments
            .iter_mut()
            .find(|(who, payment)| who == owner && payment.id == refund.payment)
        else {
            return RefundOutcome::NotFound;
        };
        let refundable = payment.amount - payment.amount_refunded;
        if refund.amount > refundable {
            return RefundOutcome::Exceeds { refundable };
        }
        payment.amount_refunded += refund.amount;
        let payment = payment.clone();
        data.refunds.push(refund.clone());
        RefundOutcome::Refunded(payment)
    }

    pub(super) fn insert_transfer(&self, owner: &str, transfer: &Transfer) {
        self.data()
            .transfers
            .push((owner.to_owned(), transfer.clone()));
    }

    pub(super) fn transfers(&self, owner: &str) -> Vec<Transfer> {
        owned(&self.data().transfers, owner)
    }

    pub(super) fn settle_transfer(&self, id: &str) -> Option<Transfer> {
        let mut data = self.data();
        let (_, transfer) = data
            .transfers
            .iter_mut()
            .find(|(_, transfer)| transfer.id == id)?;
        transfer.status = "settled".to_owned();
        Some(transfer.clone())
    }
}

fn owned<T: Clone>(items: &[(String, T)], owner: &str) -> Vec<T> {
    items
        .iter()
        .filter(|(who, _)| who == owner)
        .map(|(_, item)| item.clone())
        .collect()
}
