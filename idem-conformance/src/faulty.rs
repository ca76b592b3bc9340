//! [`FaultyStore`]: a store wrapper that injects the faults a real store has, for tests of
//! what the runtime does when its store misbehaves.

use std::{
    fmt,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;

use idem_core::{
    replay::StoredResponse,
    scope::StoreKey,
    store::{
        BoxError, Claim, ClaimOutcome, Held, LeaseToken, RecordState, StepSupport, Store,
        StoreError, StoreTransaction,
        operation::{DueOperation, RecordedStep},
    },
};

/// A store call, as [`FaultyStore`] tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// [`Store::claim`].
    Claim,
    /// [`Store::complete`].
    Complete,
    /// [`Store::release`].
    Release,
    /// [`Store::renew`].
    Renew,
    /// [`Store::record_step`].
    RecordStep,
    /// [`Store::suspend`].
    Suspend,
    /// [`Store::look_up`].
    LookUp,
    /// [`Store::remove`].
    Remove,
}

const CALLS: [Call; 8] = [
    Call::Claim,
    Call::Complete,
    Call::Release,
    Call::Renew,
    Call::RecordStep,
    Call::Suspend,
    Call::LookUp,
    Call::Remove,
];

impl Call {
    fn index(self) -> usize {
        CALLS.iter().position(|call| *call == self).unwrap_or(0)
    }
}

/// A fault [`FaultyStore`] injects into a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The call fails as a refused connection does; nothing is applied.
    Fail,
    /// The call is applied, and its answer lost: the caller gets a timeout.
    LoseAnswer,
    /// The call never answers (a frozen server); nothing is applied.
    Hang,
    /// The call is applied and then never answers (a server that froze after doing it).
    Stall,
    /// The call never reaches the store but answers `Ok` (a renewal lost on the way).
    Skip,
}

/// Wraps a store and injects [`Fault`]s into the calls a test chooses; counts every call.
///
/// ```
/// use idem_core::MemoryStore;
/// use idem_conformance::{Call, Fault, FaultyStore};
///
/// let store = FaultyStore::new(MemoryStore::default());
/// // The next two completions fail, then the store works again.
/// store.inject(Call::Complete, Fault::Fail, Some(2));
/// assert_eq!(store.calls(Call::Complete), 0);
/// ```
#[derive(Clone)]
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    state: Arc<State>,
}

/// A fault and how many more calls get it (`None`: every call).
type Injected = Option<(Fault, Option<usize>)>;

#[derive(Default)]
struct State {
    /// Per call, in the order of `CALLS`.
    faults: [Mutex<Injected>; CALLS.len()],
    calls: [AtomicUsize; CALLS.len()],
}

impl FaultyStore {
    /// `store`, with no faults yet.
    pub fn new(store: impl Store) -> Self {
        Self::from_arc(Arc::new(store))
    }

    /// A store already shared as `Arc<dyn Store>`, with no faults yet.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        Self {
            inner: store,
            state: Arc::default(),
        }
    }

    /// Injects `fault` into the next `times` calls of `call` (every call when `None`),
    /// replacing what was injected before.
    pub fn inject(&self, call: Call, fault: Fault, times: Option<usize>) {
        *self.fault_slot(call) = Some((fault, times));
    }

    /// Stops injecting faults into `call`.
    pub fn heal(&self, call: Call) {
        *self.fault_slot(call) = None;
    }

    /// Stops injecting faults into every call.
    pub fn heal_all(&self) {
        CALLS.iter().for_each(|call| self.heal(*call));
    }

    /// How many times `call` was made, faulty or not.
    pub fn calls(&self, call: Call) -> usize {
        self.state.calls[call.index()].load(Ordering::SeqCst)
    }

    fn fault_slot(&self, call: Call) -> std::sync::MutexGuard<'_, Injected> {
        self.state.faults[call.index()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call and takes the fault it gets, if any.
    fn fault(&self, call: Call) -> Option<Fault> {
        self.state.calls[call.index()].fetch_add(1, Ordering::SeqCst);
        let mut slot = self.fault_slot(call);
        let (fault, times) = (*slot)?;
        match times {
            None => {}
            Some(1) => *slot = None,
            Some(n) => *slot = Some((fault, Some(n - 1))),
        }
        Some(fault)
    }

    async fn call<T: Default>(
        &self,
        call: Call,
        apply: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match self.fault(call) {
            None => apply.await,
            Some(Fault::Fail) => Err(StoreError::backend(refused())),
            Some(Fault::LoseAnswer) => {
                let _ = apply.await;
                Err(StoreError::Timeout(Duration::from_millis(1)))
            }
            Some(Fault::Hang) => std::future::pending().await,
            Some(Fault::Stall) => {
                let _ = apply.await;
                std::future::pending().await
            }
            Some(Fault::Skip) => Ok(T::default()),
        }
    }
}

fn refused() -> BoxError {
    Box::new(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused (injected)",
    ))
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyStore")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Store for FaultyStore {
    async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError> {
        match self.fault(Call::Claim) {
            None => self.inner.claim(claim).await,
            Some(Fault::Fail) => Err(StoreError::backend(refused())),
            Some(Fault::LoseAnswer) => {
                let _ = self.inner.claim(claim).await;
                Err(StoreError::Timeout(Duration::from_millis(1)))
            }
            Some(Fault::Hang) => std::future::pending().await,
            Some(Fault::Stall) => {
                let _ = self.inner.claim(claim).await;
                std::future::pending().await
            }
            // A claim cannot be skipped: one that never reaches the store is a failure.
            Some(Fault::Skip) => Err(StoreError::backend(refused())),
        }
    }

    async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let apply = self.inner.complete(key, token, response, ttl);
        self.call(Call::Complete, apply).await
    }

    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
        let apply = self.inner.release(key, token);
        self.call(Call::Release, apply).await
    }

    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let apply = self.inner.renew(key, token, lease);
        self.call(Call::Renew, apply).await
    }

    async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StoreError> {
        self.inner.begin().await
    }

    fn step_support(&self) -> StepSupport {
        self.inner.step_support()
    }

    async fn record_step(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let apply = self.inner.record_step(key, token, index, step);
        self.call(Call::RecordStep, apply).await
    }

    async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        let apply = self.inner.suspend(key, token, resume_in);
        self.call(Call::Suspend, apply).await
    }

    async fn due(&self, limit: usize, hold: Duration) -> Result<Vec<DueOperation>, StoreError> {
        self.inner.due(limit, hold).await
    }

    async fn look_up(&self, key: &StoreKey) -> Result<Option<Held>, StoreError> {
        self.call(Call::LookUp, self.inner.look_up(key)).await
    }

    async fn remove(&self, key: &StoreKey) -> Result<Option<RecordState>, StoreError> {
        self.call(Call::Remove, self.inner.remove(key)).await
    }
}
