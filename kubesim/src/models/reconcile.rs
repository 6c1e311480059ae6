//! One reconcile at a time per object key, and a panic in reconcile failing the run: a wrapper
//! around the user's reconcile function ([`Guard::wrap`], [`guard`]) that the user opts into.
//!
//! kube-runtime's `Controller` promises never to run two reconciles of the same object at once
//! (its runner holds a message back while one for the same `ObjectRef` is in flight). The guard
//! checks it: it records `kube.reconcile.start` / `kube.reconcile.end` (identity the object) in
//! the run's history, and a start while the same guard (or a clone: give every replica a clone to
//! check them against each other) has one in flight for that key is a violation — inside a
//! simulation the run fails ([`ONE_RECONCILE`]); outside, [`Guard::violations`] lists them.
//!
//! A panic inside reconcile is caught (the future is polled under `catch_unwind`) and fails the
//! run ([`RECONCILE_PANIC`]) unless [`Guard::allow_panics`] was set; either way the reconcile
//! returns `Err(E::from(ReconcilePanic))`, which kube-runtime hands to the error policy. Note
//! that `sim` also fails a run in which any panic was recovered unless the simulation allows it
//! (`Simulation::allow_recovered_panics`).
//!
//! Usage with kube-runtime:
//!
//! ```ignore
//! let guard = kubesim::models::Guard::new();
//! Controller::new(api, watcher::Config::default())
//!     .run(guard.wrap(reconcile), error_policy, ctx)
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use kube::Resource;
use sim::Oracle;

use crate::introspect::ObjectRef;
use crate::models::violation::Violation;

/// The oracle of overlapping reconciles of one key.
pub const ONE_RECONCILE: Oracle = Oracle::new("kube-one-reconcile");
/// The oracle of a panic inside reconcile.
pub const RECONCILE_PANIC: Oracle = Oracle::new("kube-reconcile-panic");

/// A reconcile panicked; its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("reconcile of {object} panicked: {message}")]
pub struct ReconcilePanic {
    /// The object reconciled.
    pub object: String,
    /// The panic's message.
    pub message: String,
}

#[derive(Default)]
struct State {
    in_flight: BTreeSet<ObjectRef>,
    violations: Vec<Violation>,
}

/// The wrapper's shared state (see the module docs). Cheap to clone; clones share it.
#[derive(Clone, Default)]
pub struct Guard {
    state: Arc<Mutex<State>>,
    allow_panics: bool,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("allow_panics", &self.allow_panics).finish_non_exhaustive()
    }
}

/// [`Guard::new`]`.wrap(reconcile)`.
pub fn guard<K, C, F, Fut, A, E>(reconcile: F) -> impl Fn(Arc<K>, Arc<C>) -> Guarded<Fut>
where
    K: Resource<DynamicType = ()>,
    F: Fn(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<A, E>>,
    E: From<ReconcilePanic>,
{
    Guard::new().wrap(reconcile)
}

/// The `ObjectRef` of `obj` as the fake names it (`plural[.group]`, namespace, name).
pub fn object_ref<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectRef {
    let group = K::group(&());
    let plural = K::plural(&());
    let resource = if group.is_empty() { plural.into_owned() } else { format!("{plural}.{group}") };
    ObjectRef {
        resource,
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        name: obj.meta().name.clone().unwrap_or_default(),
    }
}

impl Guard {
    /// A guard failing the run on overlap and on a panic.
    pub fn new() -> Guard {
        Guard::default()
    }

    /// A panic inside reconcile no longer fails the run (the reconcile still returns the error).
    pub fn allow_panics(mut self) -> Guard {
        self.allow_panics = true;
        self
    }

    /// The violations found so far (also failed into the run inside a simulation).
    pub fn violations(&self) -> Vec<Violation> {
        self.lock().violations.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wraps `reconcile` (see the module docs).
    pub fn wrap<K, C, F, Fut, A, E>(
        &self,
        reconcile: F,
    ) -> impl Fn(Arc<K>, Arc<C>) -> Guarded<Fut> + use<K, C, F, Fut, A, E>
    where
        K: Resource<DynamicType = ()>,
        F: Fn(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<A, E>>,
        E: From<ReconcilePanic>,
    {
        let guard = self.clone();
        move |obj: Arc<K>, ctx: Arc<C>| {
            let key = object_ref(obj.as_ref());
            guard.start(&key);
            Guarded { inner: Box::pin(reconcile(obj, ctx)), guard: guard.clone(), key: Some(key) }
        }
    }

    fn start(&self, key: &ObjectRef) {
        let ctx = sim::Ctx::try_current();
        let at = ctx.as_ref().map(sim::Ctx::elapsed).unwrap_or_default();
        if let Some(ctx) = &ctx {
            ctx.record("kube.reconcile.start", &key.to_string(), "");
        }
        let fresh = self.lock().in_flight.insert(key.clone());
        if !fresh {
            let v = Violation::new(&ONE_RECONCILE, at, format!("a reconcile of {key} started while one was in flight"));
            self.violate(v, true);
        }
    }

    fn end(&self, key: &ObjectRef, outcome: &str) {
        if let Some(ctx) = sim::Ctx::try_current() {
            ctx.record("kube.reconcile.end", &key.to_string(), outcome);
        }
        self.lock().in_flight.remove(key);
    }

    fn violate(&self, v: Violation, fail: bool) {
        if fail && let Some(ctx) = sim::Ctx::try_current() {
            ctx.fail(v.to_failure());
        }
        self.lock().violations.push(v);
    }
}

/// The future of a guarded reconcile.
pub struct Guarded<Fut> {
    inner: Pin<Box<Fut>>,
    guard: Guard,
    key: Option<ObjectRef>,
}

impl<Fut> Drop for Guarded<Fut> {
    fn drop(&mut self) {
        // Cancelled (the controller dropped it): it is no longer in flight.
        if let Some(key) = self.key.take() {
            self.guard.end(&key, "cancelled");
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic payload)".to_string())
}

impl<Fut, A, E> Future for Guarded<Fut>
where
    Fut: Future<Output = Result<A, E>>,
    E: From<ReconcilePanic>,
{
    type Output = Result<A, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let polled = catch_unwind(AssertUnwindSafe(|| this.inner.as_mut().poll(cx)));
        let key = this.key.take().expect("polled after completion");
        match polled {
            Ok(Poll::Pending) => {
                this.key = Some(key);
                Poll::Pending
            }
            Ok(Poll::Ready(result)) => {
                this.guard.end(&key, if result.is_ok() { "ok" } else { "error" });
                Poll::Ready(result)
            }
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                let at = sim::Ctx::try_current().map(|c| c.elapsed()).unwrap_or_default();
                let v = Violation::new(&RECONCILE_PANIC, at, format!("reconcile of {key} panicked: {message}"));
                this.guard.violate(v, !this.guard.allow_panics);
                this.guard.end(&key, "panicked");
                Poll::Ready(Err(E::from(ReconcilePanic { object: key.to_string(), message })))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    #[derive(Debug, PartialEq)]
    enum Err {
        Panic(String),
    }

    impl From<ReconcilePanic> for Err {
        fn from(p: ReconcilePanic) -> Err {
            Err::Panic(p.message)
        }
    }

    fn cm(name: &str) -> Arc<ConfigMap> {
        let meta = ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..ObjectMeta::default() };
        Arc::new(ConfigMap { metadata: meta, ..ConfigMap::default() })
    }

    #[tokio::test]
    async fn overlap_of_one_key_is_found_and_other_keys_are_not() {
        let guard = Guard::new();
        let (tx, rx) = tokio::sync::watch::channel(false);
        let rx = Arc::new(rx);
        let reconcile = guard.wrap(|_obj: Arc<ConfigMap>, rx: Arc<tokio::sync::watch::Receiver<bool>>| async move {
            let mut rx = (*rx).clone();
            let _ = rx.wait_for(|go| *go).await;
            Ok::<(), Err>(())
        });
        let a = reconcile(cm("a"), rx.clone());
        let b = reconcile(cm("b"), rx.clone());
        assert!(guard.violations().is_empty());
        let a2 = reconcile(cm("a"), rx.clone());
        tx.send(true).unwrap();
        let (ra, rb, ra2) = tokio::join!(a, b, a2);
        assert_eq!((ra, rb, ra2), (Ok(()), Ok(()), Ok(())));
        let v = guard.violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("configmaps/default/a"), "{}", v[0].message);
        // Sequential reconciles of one key are fine.
        let again = reconcile(cm("a"), rx.clone()).await;
        assert_eq!(again, Ok(()));
        assert_eq!(guard.violations().len(), 1);
    }

    #[tokio::test]
    async fn a_panic_is_an_error_and_a_violation() {
        let guard = Guard::new().allow_panics();
        let reconcile = guard.wrap(|obj: Arc<ConfigMap>, _: Arc<()>| async move {
            if obj.metadata.name.as_deref() == Some("bad") {
                panic!("boom");
            }
            Ok::<u8, Err>(1)
        });
        assert_eq!(reconcile(cm("good"), Arc::new(())).await, Ok(1));
        assert_eq!(reconcile(cm("bad"), Arc::new(())).await, Err(Err::Panic("boom".into())));
        let v = guard.violations();
        assert_eq!(v[0].oracle, RECONCILE_PANIC);
        // The key is no longer in flight after the panic.
        assert_eq!(reconcile(cm("good"), Arc::new(())).await, Ok(1));
        assert_eq!(guard.violations().len(), 1);
    }
}
