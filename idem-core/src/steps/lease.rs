//! What a run knows of its lease, by its own clock: until when the store last confirmed it,
//! whether the store answered that it is lost, and the margin under which a step does not
//! start.
//!
//! A lease cannot stop a process that no longer holds it: past its lapse, another run may
//! take the operation over while this one still runs. The store confirms the lease at the
//! claim and at each renewal, for the lease's length counted from when the call was *sent*
//! (its answer may come late, never early). The run reads the local monotonic clock against
//! that instant: a step that has not started does not start with less than the margin left,
//! and the handler can ask the same ([`Steps::lease`](super::Steps::lease)), and hand the
//! lease's token to a resource that checks it.
//!
//! ```
//! use std::time::Duration;
//! use idem::steps::{LeaseStanding, LeaseView};
//! use idem::store::LeaseToken;
//!
//! let view = LeaseView::new(LeaseToken::from_u128(7), Duration::from_secs(20), LeaseStanding::Holds);
//! assert!(view.holds());
//! assert_eq!(view.token().as_u128(), 7);
//! ```

use std::time::Duration;

use tokio::time::Instant;

use crate::store::LeaseToken;

/// The lease of a run, as the run's clock sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaseClock {
    /// The lease's token, for the handler to hand to a resource that checks it.
    token: LeaseToken,
    /// Until when the store's last confirmation holds: when the confirming call was sent,
    /// plus the lease.
    confirmed_until: Instant,
    /// Under this much time left, a step does not start.
    margin: Duration,
    /// The store answered that another run holds the key (or it was removed).
    lost: bool,
}

impl LeaseClock {
    /// A lease under `token` that the store confirmed until `confirmed_until`; steps need
    /// `margin` of it left to start.
    pub(crate) fn new(token: LeaseToken, confirmed_until: Instant, margin: Duration) -> Self {
        Self {
            token,
            confirmed_until,
            margin,
            lost: false,
        }
    }

    /// A renewal sent at `sent` for `lease` was answered: the lease holds until then, unless
    /// an earlier confirmation said longer (renewals may be answered out of order).
    pub(crate) fn confirmed(&mut self, sent: Instant, lease: Duration) {
        self.confirmed_until = self.confirmed_until.max(sent + lease);
    }

    /// The store answered that the lease is lost: it stays lost.
    pub(crate) fn lost(&mut self) {
        self.lost = true;
    }

    /// The lease as it stands at `now`.
    pub(crate) fn view(&self, now: Instant) -> LeaseView {
        let left = self.confirmed_until.saturating_duration_since(now);
        let standing = if self.lost {
            LeaseStanding::Lost
        } else if left < self.margin {
            LeaseStanding::InDoubt
        } else {
            LeaseStanding::Holds
        };
        LeaseView::new(self.token, left, standing)
    }
}

/// How a run's lease stands, by the run's own clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseStanding {
    /// The store confirmed it, and more than the margin of it is left: steps start.
    Holds,
    /// The store has not confirmed it recently enough: less than the margin is left, or it
    /// lapsed. Another run may hold the operation already, or soon; a step does not start.
    InDoubt,
    /// The store answered that another run took the key over (or an operator removed it).
    Lost,
}

/// A run's lease as its handler sees it ([`Steps::lease`](super::Steps::lease)): its token,
/// how long it holds by the local clock, and how it stands.
///
/// The time left is a lower bound on the store's own view, counted from when the store was
/// last asked, never from when it answered; it says nothing of a process that pauses (a
/// long garbage collection, a suspended VM) between reading it and acting on it. Only a
/// resource that takes one run's write (a conditional write that records the
/// [token](Self::token)) closes that window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseView {
    token: LeaseToken,
    left: Duration,
    standing: LeaseStanding,
}

impl LeaseView {
    /// A view of a lease under `token`, with `left` of it, standing as `standing` says (for
    /// tests of code that reads one).
    pub fn new(token: LeaseToken, left: Duration, standing: LeaseStanding) -> Self {
        Self {
            token,
            left,
            standing,
        }
    }

    /// The lease's token: fresh at every claim, so a run that takes the operation over holds
    /// another. Random, not increasing: a resource that records it learns which run wrote,
    /// and a conditional write on a version column lets only the first of two runs write
    /// ([`Steps::lease`](super::Steps::lease) has the example).
    pub fn token(&self) -> LeaseToken {
        self.token
    }

    /// How long the lease holds by the local clock, from the last confirmation the store
    /// answered; zero once it lapsed.
    pub fn left(&self) -> Duration {
        self.left
    }

    /// How the lease stands.
    pub fn standing(&self) -> LeaseStanding {
        self.standing
    }

    /// Whether the lease holds with more than the margin left.
    pub fn holds(&self) -> bool {
        self.standing == LeaseStanding::Holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);
    const MARGIN: Duration = Duration::from_secs(10);

    fn clock(start: Instant) -> LeaseClock {
        LeaseClock::new(LeaseToken::from_u128(1), start + LEASE, MARGIN)
    }

    #[test]
    fn a_lease_holds_until_the_margin_then_is_in_doubt_then_lapses() {
        let start = Instant::now();
        let clock = clock(start);
        let fresh = clock.view(start);
        assert_eq!(fresh.standing(), LeaseStanding::Holds);
        assert_eq!(fresh.left(), LEASE);
        let late = clock.view(start + LEASE - MARGIN + Duration::from_millis(1));
        assert_eq!(late.standing(), LeaseStanding::InDoubt);
        let lapsed = clock.view(start + LEASE * 2);
        assert_eq!(lapsed.standing(), LeaseStanding::InDoubt);
        assert_eq!(lapsed.left(), Duration::ZERO);
    }

    #[test]
    fn a_renewal_counts_from_when_it_was_sent_and_never_shortens_the_lease() {
        let start = Instant::now();
        let mut clock = clock(start);
        clock.confirmed(start + Duration::from_secs(10), LEASE);
        let view = clock.view(start + Duration::from_secs(25));
        assert_eq!(view.left(), Duration::from_secs(15));
        // An older renewal answered last does not take the newer one back.
        clock.confirmed(start + Duration::from_secs(1), LEASE);
        assert_eq!(
            clock.view(start + Duration::from_secs(25)).left(),
            Duration::from_secs(15)
        );
    }

    #[test]
    fn a_lost_lease_stays_lost_whatever_the_clock_says() {
        let start = Instant::now();
        let mut clock = clock(start);
        clock.lost();
        clock.confirmed(start, LEASE);
        assert_eq!(clock.view(start).standing(), LeaseStanding::Lost);
        assert!(!clock.view(start).holds());
    }
}
